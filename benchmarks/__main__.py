"""``python -m benchmarks``: list the experiments, print or run one, collect a sweep (issue 55).

Usage::

    python -m benchmarks list
    python -m benchmarks run NAME [--dry-run]
    python -m benchmarks collect-sweep SWEEP_DIR [SWEEP_DIR ...] --out benchmarks/results/privacy_sweep_NAME.json

``run`` executes the experiment's commands (:mod:`runners`) in order from the repository root and stops at
the first that fails; ``--dry-run`` prints them and runs nothing. A config that cannot run is reported as
``error: FILE, field 'KEY': ...`` with exit status 2, before any command starts.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/: runners and the shared harness
import _harness
import runners

from textkg.errors import TextKGError

#: the runs a sweep folder holds, in the order its rows are written
SWEEP_RUNS = ("none", "public-only", "full-eps1", "full-eps4", "confidential-eps1", "confidential-eps4")


def execute(step: runners.Step) -> int:
    """Run one step from the repository root with this interpreter; its exit status."""
    head = {"python": [sys.executable], "textkg": [sys.executable, "-m", "textkg"]}[step.argv[0]]
    env = dict(os.environ)
    for key, value in step.env:
        env[key] = tempfile.mkdtemp(prefix="textkg-cache-") if value == runners.EMPTY_DIR else value
    print(f"$ {step}", flush=True)
    return subprocess.run([*head, *step.argv[1:]], cwd=runners.ROOT, env=env).returncode


def collect_sweep(folders: list[Path], out: Path) -> int:
    """One row per run of the sweep folders, in :data:`SWEEP_RUNS` order (metrics, test subsets, audit); a run
    that two folders hold is read from the first."""
    from textkg.pipeline.run_dir import read_run_json

    rows = []
    for name in SWEEP_RUNS:
        run = next((folder / name for folder in folders if (folder / name / "metrics.json").is_file()), None)
        if run is None:
            continue
        metrics = read_run_json(run / "metrics.json")
        audit = None
        if (run / "audit.json").is_file():
            audit = read_run_json(run / "audit.json")
            audit.pop("roc", None)
        test = metrics["test"]
        rows.append(
            {
                "run": name,
                "privacy": metrics["privacy"],
                "train": {k: metrics["train"][k] for k in ("epochs", "steps", "seconds")},
                "test": {k: v for k, v in test.items() if k not in ("subsets", "head", "tail")},
                "test_subsets_mrr": {k: v["mrr"] for k, v in test["subsets"].items()},
                "audit": audit,
            }
        )
    command = shlex.join(["python", "-m", "benchmarks", "collect-sweep", *map(str, folders), "--out", str(out)])
    source = ", ".join(str(f) for f in folders)
    _harness.write_results(out, _harness.result("collect_sweep", command=command, source=source, rows=rows))
    print(out, len(rows))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="every experiment: name, runner, question").set_defaults(func=list_experiments)
    run = sub.add_parser("run", help="run an experiment's commands")
    run.set_defaults(func=run_experiment)
    run.add_argument("name", help="a file name under benchmarks/experiments/, without .yaml")
    run.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    collect = sub.add_parser("collect-sweep", help="one JSON of the runs of textkg sweep folders")
    collect.add_argument("folders", nargs="+", type=Path)
    collect.add_argument("--out", type=Path, required=True)
    collect.set_defaults(func=lambda a: collect_sweep(a.folders, a.out))
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except TextKGError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


def list_experiments(args: argparse.Namespace) -> int:
    for name in runners.names():
        experiment = runners.load(name)
        print(f"{name}\t{experiment.runner}\t{experiment.question}")
    return 0


def run_experiment(args: argparse.Namespace) -> int:
    steps = runners.load(args.name).steps()  # every step built (and checked) before the first runs
    if args.dry_run:
        print("\n".join(str(step) for step in steps))
        return 0
    for step in steps:
        code = execute(step)
        if code != 0:
            print(f"error: exit status {code}: {shlex.join(step.argv)}", file=sys.stderr)
            return code
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
