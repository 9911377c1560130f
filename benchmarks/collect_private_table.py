"""The privacy–utility table of inductive FB15k-237 from finished run directories.

Usage::

    python benchmarks/collect_private_table.py RUNS_ROOT [--commands benchmarks/results/fb15k237_private_table.json]
        [--out benchmarks/results/fb15k237_privacy_utility.json]

Every sub-directory of ``RUNS_ROOT`` with a ``metrics.json`` becomes a row that
carries the run's own ``privacy`` block and ``test`` metrics as ``metrics.json``
has them (per-direction and subset blocks dropped, ``answer_seen`` /
``answer_unseen`` kept), its training steps and minutes, and the command that
made it (looked up by run directory in ``--commands``, the rows that
``benchmarks/reproduce_fb15k237.py`` appended). It prints the markdown table of
docs/results/privacy_utility.md.

Every private row that starts from a public model (``privacy.initialised_from``) gets its ``control``
(issue 39): the ``public-only`` row continued from the same model (the same ``best_model.pt`` hash)
for the same epochs, and the difference in test MRR; without one the row says ``no control: claim
withdrawn``, since its gain over the public model may come from the extra public steps.
``--from-json FILE`` renders the table again from a written JSON (the run folders are not kept).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/: the shared harness
import _harness


def row(run_dir: Path, commands: dict[str, dict]) -> dict:
    m = json.loads((run_dir / "metrics.json").read_text())
    test = m["test"]
    src = commands.get(run_dir.name, {})
    return {
        "run": run_dir.name,
        "tag": src.get("tag"),
        "command": src.get("command"),
        "privacy": m["privacy"],
        "train": {k: m["train"][k] for k in ("epochs", "steps", "seconds", "stopped")},
        "test": {k: v for k, v in test.items() if k not in ("subsets", "head", "tail")},
        "test_answer_seen": {k: v for k, v in test["subsets"]["answer_seen"].items() if k not in ("head", "tail")},
        "test_answer_unseen": {k: v for k, v in test["subsets"]["answer_unseen"].items() if k not in ("head", "tail")},
        "valid_mrr": (m.get("valid") or {}).get("mrr"),
    }


#: what a private row that starts from a public model says when no control of its own was run
NO_CONTROL = "no control: claim withdrawn"


def _source(r: dict) -> str | None:
    """The ``best_model.pt`` hash a row started from (``None``: it started from scratch)."""
    init = (r.get("privacy") or {}).get("initialised_from") or {}
    return init.get("best_model_sha256")


def controls(rows: list[dict]) -> dict[str, dict]:
    """``{run: {"control": run or None, "mrr_minus_control": float or None}}`` for every private row that
    starts from a public model: its control is a ``public-only`` row started from the same model that
    trained the same epochs (the public steps continued without a private statement)."""
    public = [r for r in rows if (r.get("privacy") or {}).get("mode") == "public-only" and _source(r)]
    out = {}
    for r in rows:
        if (r.get("privacy") or {}).get("mode") in (None, "public-only") or not _source(r):
            continue
        match = [c for c in public if _source(c) == _source(r) and c["train"]["epochs"] == r["train"]["epochs"]]
        c = match[0] if match else None
        out[r["run"]] = {
            "control": None if c is None else c["run"],
            "mrr_minus_control": None if c is None else r["test"]["mrr"] - c["test"]["mrr"],
        }
    return out


def _control_cell(entry: dict | None) -> str:
    if entry is None:
        return "—"
    if entry["control"] is None:
        return NO_CONTROL
    return f"`{entry['control']}` ({entry['mrr_minus_control']:+.4f})"


def markdown(rows: list[dict]) -> str:
    head = (
        "| run | mode | ε (RDP; PLD) | σ | q | steps | train min | test MRR | H@1 | H@3 | H@10 "
        "| answer seen | answer unseen | control (MRR difference) |"
        "\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    )
    control = controls(rows)
    lines = [head]
    for r in rows:
        p = r["privacy"] or {}
        mode = p.get("mode", "none")
        eps = "—" if not p or p.get("epsilon_rdp") is None else f"{p['epsilon_rdp']:.2f}; {p['epsilon_pld']:.2f}"
        sigma = "—" if p.get("noise_multiplier") is None else f"{p['noise_multiplier']:.3f}"
        q = "—" if p.get("sample_rate") is None else f"{p['sample_rate']:.4f}"
        t = r["test"]
        lines.append(
            f"| `{r['run']}` | {mode} | {eps} | {sigma} | {q} | {r['train']['steps']} | "
            f"{r['train']['seconds'] / 60:.1f} | {t['mrr']:.3f} | {t['hits@1']:.3f} | {t['hits@3']:.3f} | "
            f"{t['hits@10']:.3f} | {r['test_answer_seen']['mrr']:.3f} | {r['test_answer_unseen']['mrr']:.3f} | "
            f"{_control_cell(control.get(r['run']))} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("root", nargs="?", help="the run folders (omit with --from-json)")
    p.add_argument("--commands", default="benchmarks/results/fb15k237_private_table.json")
    p.add_argument("--out", default="benchmarks/results/fb15k237_privacy_utility.json")
    p.add_argument("--from-json", type=Path, help="print the table of this written JSON (no run folders read)")
    args = p.parse_args(argv)
    if args.from_json is not None:
        print(markdown(json.loads(args.from_json.read_text())["rows"]))
        return
    if args.root is None:
        p.error("give RUNS_ROOT or --from-json")
    commands = {}
    if Path(args.commands).is_file():
        for entry in json.loads(Path(args.commands).read_text()):
            commands[Path(entry["run_dir"]).name] = entry
    runs = sorted(d for d in Path(args.root).iterdir() if (d / "metrics.json").is_file())
    rows = [row(d, commands) for d in runs]
    record = _harness.result(
        "collect_private_table",
        description="privacy-utility on inductive FB15k-237 (ind_rebuilt_seed0, BLP protocol), one CPU thread per run",
        source=str(args.root),
        rows=rows,
        controls=controls(rows),
    )
    _harness.write_results(args.out, record)
    print(markdown(rows))


if __name__ == "__main__":
    main()
