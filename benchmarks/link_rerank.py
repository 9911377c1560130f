"""The link-prediction re-ranker on a finished inductive run, without retraining.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/link_rerank.py RUN_DIR [RUN_DIR ...]
        [--out benchmarks/results/link_rerank.json] [--top-k 50] [--save] [--threads 1]
        [--reuse-first-stage RESULTS.json] [--label NAME] [--from-report]

Loads each run's best model (nothing is trained) and computes what ``textkg train`` now reports as
``test.link_rerank`` (:mod:`textkg.evaluation.link_rerank`): the re-ranker is fitted on validation
statements over the first stage the run chose (``test.neighbour_vote``: model + vote + spread), its
weight chosen by cross-fitting there, and the test split is ranked with and without it on the same
lists. Each row carries the simplest alternatives from the same run's ``metrics.json`` (the model
alone, the description-neighbour vote alone) and the CPU seconds per 1,000 queries. ``--save`` writes
the choice into the run's ``metrics.json`` so that ``textkg predict`` uses it. Rows are merged into
``--out`` by row name (``--label``, else the run's name). ``--reuse-first-stage F``: for a run without a
finished post-run report, take the model alone, the vote alone and the vote's chosen weights from the row
an earlier measurement of the same run (same name) left in ``F`` (they depend on the run and the vote only,
not on the re-ranker) instead of computing them again (most of the CPU time: FB15k-237 ≈ 500 of 830 CPU s).
``--from-report``: a run whose ``textkg train`` finished its post-run report already holds ``test.link_rerank``
(the same :func:`textkg.pipeline.report.link_rerank_of`); the row is read from its ``metrics.json``, nothing
is loaded or recomputed (the row's ``read_from_report`` says so; its CPU seconds are the report's own,
``link_rerank.cpu_seconds``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/: the shared harness
import _harness


def reused_test_block(previous: dict | None) -> dict | None:
    """A ``test`` block from an earlier row of the same run: the model's metrics and the vote's choice."""
    choice = (previous or {}).get("first_stage_choice") or {}
    if choice.get("weight") is None or previous is None:
        return None
    vote = {**choice, "vote_only": previous.get("vote_only")}
    return {**(previous.get("model") or {}), "neighbour_vote": vote}


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


def measure(run_dir: Path, *, top_k: int, save: bool, previous: dict | None = None) -> dict:
    from textkg.evaluation.link_rerank import LinkRerankConfig
    from textkg.pipeline.link_rerank import save_link_rerank
    from textkg.pipeline.prepared import prepare
    from textkg.pipeline.report import link_rerank_of
    from textkg.pipeline.run_dir import open_run

    opened = open_run(run_dir)
    cfg, metrics = opened.config, opened.metrics() or {}
    test = metrics.get("test") or {}
    prep = prepare(cfg, run_dir)
    prep.model.load_state_dict(opened.weights())
    start, cpu = time.perf_counter(), time.process_time()
    reused = reused_test_block(previous) if "mrr" not in test else None
    if reused is not None:
        test = reused
    elif "mrr" not in test:  # a run whose post-run report has not finished: the model alone, and the vote's choice
        from textkg.pipeline.report import evaluate_split, neighbour_vote_block

        test = {**evaluate_split(prep, cfg, "test").to_dict(), "neighbour_vote": neighbour_vote_block(prep, cfg)}
    config = LinkRerankConfig(top_k=top_k, seed=cfg.train.seed)
    block = link_rerank_of(prep, cfg, test.get("neighbour_vote"), config=config)
    row = {
        "run": run_dir.name,
        "first_stage_reused_from_an_earlier_row": reused is not None,
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
    p.add_argument("--top-k", type=int, default=50)
    p.add_argument("--save", action="store_true", help="write the choice into each run's metrics.json")
    p.add_argument(
        "--reuse-first-stage",
        type=Path,
        metavar="RESULTS",
        help="take the model alone and the vote's choice from the row an earlier measurement left in RESULTS",
    )
    p.add_argument("--label", help="the row's name (default: the run's); one run only")
    p.add_argument(
        "--from-report",
        action="store_true",
        help="read test.link_rerank from each run's metrics.json (a finished post-run report): nothing recomputed",
    )
    _harness.add_common_flags(p, out="benchmarks/results/link_rerank.json", threads=1)
    args = p.parse_args()
    _harness.set_threads(args.threads)
    import json

    previous = json.loads(args.out.read_text()) if args.out.is_file() else {}
    rows = {r.get("label", r["run"]): r for r in previous.get("rows", [])}
    if args.label and len(args.runs) != 1:
        p.error("--label names one run's row")
    for run in args.runs:
        earlier = None
        if args.reuse_first_stage:
            earlier_rows = json.loads(args.reuse_first_stage.read_text()).get("rows", [])
            same = [r for r in earlier_rows if r.get("run") == run.name and r.get("first_stage_choice")]
            if not same:
                p.error(f"{args.reuse_first_stage} has no row of {run.name} with the vote's choice")
            earlier = same[0]
        if args.from_report:
            row = from_report(run)
        else:
            row = measure(run, top_k=args.top_k, save=args.save, previous=earlier)
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
        if "with" in lr:
            print(
                f"{row['run']}: model {row['model']['mrr']}; first stage {lr['without']['mrr']:.4f}; "
                f"re-ranked (weight {lr['weight']:g}) {lr['with']['mrr']:.4f}; "
                f"best weight above 0 ({lr['best_weight_above_0']['weight']:g}) "
                f"{lr['best_weight_above_0']['test']['mrr']:.4f}"
            )
        else:
            print(f"{row['run']}: {lr or 'not applicable'}")


if __name__ == "__main__":
    main()
