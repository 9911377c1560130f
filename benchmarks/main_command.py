"""The README's main job, timed stage by stage (issue 38).

Usage::

    python benchmarks/main_command.py --run-dir runs/quickstart [--out benchmarks/results/main_command.json]
        [--label NAME] [-- TRAIN ARGS]

Runs ``textkg train --dataset hpo --split inductive --model fused-transe --epochs 3 --out RUN_DIR``
(or ``textkg train TRAIN ARGS --out RUN_DIR``) as a child process and records its wall time, its CPU
time (user + system, from ``getrusage`` of the child: on a loaded machine the wall time measures the
other jobs too), its peak RSS, the seconds between its stage lines (``[textkg +mm:ss] ...``: graph
and encoding, each epoch, each evaluation step) and the placement MRRs of its ``metrics.json``.
Rows are merged into ``--out`` by ``--label``. ``TEXTKG_CACHE_DIR`` pointing at an empty folder
gives a cold run (every description encoded).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/: the shared harness
import _harness

README_ARGS = ["--dataset", "hpo", "--split", "inductive", "--model", "fused-transe", "--epochs", "3"]


def stages(stderr: str, cpu_at: dict[int, float] | None = None, cpu_end: float | None = None) -> list[dict]:
    """``[{"at_s", "seconds", "stage"[, "cpu_s"]}]``: each stage line and the seconds until the next one (or
    the end); ``cpu_s``, the child's CPU seconds (user + system) over the same span, where ``cpu_at`` (the
    child's CPU seconds when each line of ``stderr``, by line number, was read) gives it."""
    lines = stderr.splitlines()
    found = [
        (k, int(m.group(1)) * 60 + int(m.group(2)), m.group(3))
        for k, m in enumerate(map(_harness.STAGE.match, lines))
        if m
    ]
    out = []
    for i, (k, at, text) in enumerate(found):
        end = found[i + 1][1] if i + 1 < len(found) else None
        row: dict = {"at_s": at, "seconds": None if end is None else end - at, "stage": text}
        if cpu_at is not None and k in cpu_at:
            stop = cpu_at.get(found[i + 1][0]) if i + 1 < len(found) else cpu_end
            row["cpu_s"] = None if stop is None else round(stop - cpu_at[k], 1)
        out.append(row)
    return out


def placement(metrics: dict) -> dict:
    """The placement MRRs the README's table shows (test)."""
    test = metrics.get("test") or {}
    out = {"chosen": (test.get("placement_selection") or {}).get("chosen")}
    for name, block in (test.get("placement_baselines") or {}).items():
        out[name] = block.get("mrr") if isinstance(block, dict) else None
    out["model"] = (test.get("placement") or {}).get("mrr")
    out["combined"] = (test.get("placement_combined") or {}).get("mrr")
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    train_args = argv[argv.index("--") + 1 :] if "--" in argv else README_ARGS
    own = argv[: argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run-dir", type=Path, required=True)
    parser.add_argument("--label", default="readme")
    _harness.add_common_flags(parser, out="benchmarks/results/main_command.json")
    args = parser.parse_args(own)
    command = [sys.executable, "-m", "textkg", "train", *train_args, "--out", str(args.run_dir)]
    child = _harness.watch_child(command)
    usage = child["usage"]
    sys.stderr.write(child["stderr"])
    if child["returncode"] != 0:
        return child["returncode"]
    from textkg.pipeline.run_dir import read_run_json

    metrics = read_run_json(args.run_dir / "metrics.json")
    row = {
        "label": args.label,
        "train_command": " ".join(command),
        "cache_dir": os.environ.get("TEXTKG_CACHE_DIR", "~/.cache/textkg"),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "wall_s": round(child["wall_s"], 1),
        "cpu_user_s": round(usage.ru_utime, 1),
        "cpu_system_s": round(usage.ru_stime, 1),
        "peak_rss_gib": round(usage.ru_maxrss / 2**20, 2),  # Linux: KiB
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "stages": stages(child["stderr"], child["cpu_at"], child["cpu_end"]),
        "placement_mrr": placement(metrics),
        "test_mrr": (metrics.get("test") or {}).get("mrr"),
    }
    _harness.merge_row(args.out, "main_command", row)
    print(_harness.dumps(row), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
