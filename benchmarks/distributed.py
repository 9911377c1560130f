"""Throughput of data-parallel training: 1 process against N processes (gloo, CPU).

Usage::

    python benchmarks/distributed.py --dataset hpo-small --model cpu-best --epochs 2 \
        [--nproc 1,2] [--threads 1] [--out benchmarks/results/distributed.json] [-- EXTRA TRAIN FLAGS]

Each setting runs ``textkg train --nproc N`` (N = 1 runs plain ``textkg train``)
with ``OMP_NUM_THREADS=--threads`` per process, and reads the training time
(``metrics.json`` → ``train.seconds``: training steps and per-epoch validation,
not the final test evaluation) and the test MRR. The row also holds the
training statements per second and the speed-up over the first setting.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/: the shared harness
import _harness


def run_one(nproc: int, args, extra: list[str], workdir: Path) -> dict:
    out = workdir / f"nproc{nproc}"
    cmd = [sys.executable, "-m", "textkg", "train", "--dataset", args.dataset, "--model", args.model]
    cmd += ["--epochs", str(args.epochs), "--seed", str(args.seed), "--no-progress", "--out", str(out), *extra]
    if args.split:
        cmd += ["--split", args.split]
    if nproc > 1:
        cmd += ["--nproc", str(nproc)]
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), MKL_NUM_THREADS=str(args.threads))
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    if done.returncode:
        sys.exit(f"failed ({done.returncode}): {' '.join(cmd)}\n{done.stderr[-3000:]}")
    from textkg.pipeline.run_dir import read_run_json

    metrics = read_run_json(out / "metrics.json")
    train = metrics["train"]
    return {
        "nproc": nproc,
        "threads_per_process": args.threads,
        "train_seconds": train["seconds"],
        "steps": train["steps"],
        "wall_seconds_with_setup_and_test": wall,
        "test_mrr": metrics["test"]["mrr"],
        "command": " ".join(cmd[1:]).replace(str(out.parent), "$TMPDIR/textkg-dist-bench"),  # no machine path
    }


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    command = _harness.command_line(argv, "distributed.py")  # the extra train flags after -- included
    extra: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1 :]
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dataset", default="hpo-small")
    p.add_argument("--split", default=None)
    p.add_argument("--model", default="cpu-best")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--nproc", default="1,2", help="comma-separated process counts")
    _harness.add_common_flags(p, out="benchmarks/results/distributed.json", seed=0, threads=1)
    args = p.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="textkg-dist-bench-") as tmp:
        for n in [int(x) for x in args.nproc.split(",") if x.strip()]:
            rows.append(run_one(n, args, extra, Path(tmp)))
            print(json.dumps(rows[-1]), file=sys.stderr)
    base = rows[0]["train_seconds"]
    for r in rows:
        r["speedup_over_first"] = base / r["train_seconds"] if r["train_seconds"] else None
    record = _harness.result(
        "distributed",
        command=command,
        machine_extra={"cpus": os.cpu_count()},  # the key this file had before the harness
        description="data-parallel training throughput (textkg train --nproc N, gloo on the CPU)",
        rows=rows,
    )
    _harness.write_results(args.out, record)
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
