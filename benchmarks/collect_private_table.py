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


def markdown(rows: list[dict]) -> str:
    head = (
        "| run | mode | ε (RDP; PLD) | σ | q | steps | train min | test MRR | H@1 | H@3 | H@10 "
        "| answer seen | answer unseen |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    )
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
            f"{t['hits@10']:.3f} | {r['test_answer_seen']['mrr']:.3f} | {r['test_answer_unseen']['mrr']:.3f} |"
        )
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("root")
    p.add_argument("--commands", default="benchmarks/results/fb15k237_private_table.json")
    p.add_argument("--out", default="benchmarks/results/fb15k237_privacy_utility.json")
    args = p.parse_args()
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
    )
    _harness.write_results(args.out, record)
    print(markdown(rows))


if __name__ == "__main__":
    main()
