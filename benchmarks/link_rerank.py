"""The link-prediction re-ranker on a finished inductive run, without retraining.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/link_rerank.py RUN_DIR [RUN_DIR ...]
        [--out benchmarks/results/link_rerank.json] [--save] [--threads 1] [--label NAME] [--from-report]

Loads each run's best model (nothing is trained) and computes what ``textkg train`` reports as
``test.link_rerank`` (:func:`textkg.pipeline.report.link_rerank_of`, as ``textkg evaluate RUN --link-rerank``
does): the re-ranker fitted on validation over the first stage the run chose (``test.neighbour_vote``), test
ranked with and without it. Each row carries the simplest alternatives (the model alone, the vote alone:
computed here for a run stopped before its post-run report) and the CPU seconds. ``--save`` writes the
choice into the run's ``metrics.json`` so that ``textkg predict`` uses it. ``--from-report``: the run's report
already holds ``test.link_rerank``; the row is read from its ``metrics.json``, nothing recomputed
(``read_from_report``; its CPU seconds are the report's own). Rows are merged into ``--out`` by row name
(``--label``, else the run's name).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/: the shared harness
import _harness


def _recorded(arg: str, runs: list[Path]) -> str:
    """``arg`` as the results file records it: a run folder as ``runs/NAME``, another absolute path by its name."""
    if Path(arg) in runs:
        return f"runs/{Path(arg).name}"
    return Path(arg).name if Path(arg).is_absolute() else arg


def from_report(run_dir: Path) -> dict:
    """The row of a run whose post-run report computed ``test.link_rerank`` (``--from-report``)."""
    from textkg.pipeline.run_dir import open_run

    opened = open_run(run_dir)
    test = (opened.metrics() or {}).get("test") or {}
    block = test.get("link_rerank")
    if not isinstance(block, dict) or "with" not in block:
        raise SystemExit(f"{run_dir}: metrics.json has no test.link_rerank with a 'with' block (drop --from-report)")
    return {"run": run_dir.name, "read_from_report": True, **_blocks(str(opened.config.data.dataset), test, block)}


def _blocks(dataset: str, test: dict, block: dict | None) -> dict:
    """A row's reading of a run: its dataset, the model alone, the first stage's choice, the vote alone
    (the simplest alternative) and the re-ranker's block."""
    vote = test.get("neighbour_vote") or {}
    return {
        "dataset": _recorded(dataset, []),
        "model": {k: test.get(k) for k in ("mrr", "hits@1", "hits@10")},
        "first_stage_choice": {k: vote.get(k) for k in ("weight", "spread_weight")},
        "vote_only": vote.get("vote_only"),
        "link_rerank": block,
    }


def measure(run_dir: Path, *, save: bool) -> dict:
    """The re-ranker fitted now on the run's best model (``textkg evaluate RUN --link-rerank``'s computation)."""
    from textkg.pipeline.link_rerank import save_link_rerank
    from textkg.pipeline.prepared import prepare
    from textkg.pipeline.report import evaluate_split, link_rerank_of, neighbour_vote_block
    from textkg.pipeline.run_dir import open_run

    opened = open_run(run_dir)
    cfg, test = opened.config, (opened.metrics() or {}).get("test") or {}
    prep = prepare(cfg, run_dir)
    prep.model.load_state_dict(opened.weights())
    start, cpu = time.perf_counter(), time.process_time()
    if "mrr" not in test:  # a run stopped before its post-run report: the model alone, and the vote's choice
        test = {**evaluate_split(prep, cfg, "test").to_dict(), "neighbour_vote": neighbour_vote_block(prep, cfg)}
    block = link_rerank_of(prep, cfg, test.get("neighbour_vote"))
    row = {
        "run": run_dir.name,
        **_blocks(str(cfg.data.dataset), test, block),
        "seconds": time.perf_counter() - start,
        "cpu_seconds": time.process_time() - cpu,
    }
    if save and block is not None:
        row["saved"] = save_link_rerank(run_dir, block)
    return row


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+", type=Path)
    p.add_argument("--save", action="store_true", help="write the choice into each run's metrics.json")
    p.add_argument(
        "--from-report",
        action="store_true",
        help="read test.link_rerank from each run's metrics.json (a finished post-run report): nothing recomputed",
    )
    p.add_argument("--label", help="the row's name (default: the run's); one run only")
    _harness.add_common_flags(p, out="benchmarks/results/link_rerank.json", threads=1)
    args = p.parse_args()
    _harness.set_threads(args.threads)
    if args.label and len(args.runs) != 1:
        p.error("--label names one run's row")
    previous = json.loads(args.out.read_text()) if args.out.is_file() else {}
    rows = {r.get("label", r["run"]): r for r in previous.get("rows", [])}
    for run in args.runs:
        row = from_report(run) if args.from_report else measure(run, save=args.save)
        if args.label:
            row["label"] = args.label
        # each row its own command (run folders as runs/NAME: a results file holds no machine paths) and machine;
        # the file's header (the earlier rows' commands, notes) is kept as it was
        argv = [_recorded(a, args.runs) for a in sys.argv[1:]]
        row.update(command=_harness.command_line(argv, script="link_rerank.py"), machine=_harness.machine())
        rows[args.label or row["run"]] = row
        header = {k: v for k, v in previous.items() if k != "rows"}
        listed = list(rows.values())
        record = {**header, "rows": listed} if header else _harness.result("link_rerank", rows=listed)
        _harness.write_results(args.out, record)
        lr = row["link_rerank"] or {}
        print(f"{row['run']}: model {row['model']['mrr']}; first stage {lr.get('without')}; re-ranked {lr.get('with')}")


if __name__ == "__main__":
    main()
