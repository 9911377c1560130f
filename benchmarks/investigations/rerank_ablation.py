"""The placement report on a run with and without some of the re-ranker's optional features (issue 54).

Usage::

    python benchmarks/investigations/rerank_ablation.py --run-dir RUN --drop synonym_containment [--saved] [--out FILE]

Runs the run's placement report (``textkg evaluate RUN --placement``'s computation, nothing written into the run)
twice on this code and its checkpoint: with the default optional features
(:func:`textkg.pipeline.report.rerank_features`) and with the ``--drop`` ones left out. Output: each report's test
and validation MRR / top 1 / top 10 of the combination, its names-only block and the re-ranker's fitted weights,
the command and machine (default ``--out``: ``benchmarks/results/rerank_ablation.json``). ``--saved``: the default row
is read from the run's own ``metrics.json`` instead (the same report when the run was trained on this code: on the
README run of 2026-12-07 the two agree to the last digit), which halves the time.
docs/results/placement.md, "A candidate's synonyms".
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared harness
import _harness

KEYS = ("mrr", "hits@1", "hits@10")


def brief(block: dict | None) -> dict | None:
    """MRR, top 1 and top 10 of a metrics block, four digits."""
    return None if not block else {k: round(float(block[k]), 4) for k in KEYS if k in block}


def summary(out: dict) -> dict:
    """What one placement report says about the combination, with and without names."""
    names = out.get("placement_names_only") or {}
    selection = out["placement_selection"]
    names_valid = ((names.get("placement_selection") or {}).get("valid") or {}).get("combined")
    return {
        "test_combined": brief(out.get("placement_combined")),
        "valid_combined": brief(selection["valid"].get("combined")),
        "names_only_test_combined": brief(names.get("placement_combined")),
        "names_only_valid_combined": brief(names_valid),
        "weights": selection["combined"]["weights"],
        "rerank_weights": {k: round(v, 4) for k, v in (out.get("placement_rerank") or {}).get("weights", {}).items()},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run-dir", type=Path, required=True)
    parser.add_argument("--drop", action="append", required=True, help="an optional feature to leave out (repeat)")
    parser.add_argument("--saved", action="store_true", help="the default row from the run's metrics.json")
    _harness.add_common_flags(parser, out="benchmarks/results/rerank_ablation.json", seed=0, threads=2)
    args = parser.parse_args(argv)
    _harness.set_threads(args.threads)
    from textkg.evaluation.placement.rerank import OPTIONAL_FEATURES
    from textkg.pipeline.prepared import prepare
    from textkg.pipeline.report import _placement, rerank_features
    from textkg.pipeline.run_dir import open_run
    from textkg.training import checkpoint as ckpt

    unknown = sorted(set(args.drop) - set(OPTIONAL_FEATURES))
    if unknown:
        parser.error(f"--drop {unknown}: not optional features ({', '.join(OPTIONAL_FEATURES)})")
    cfg = open_run(args.run_dir).config
    prep = prepare(cfg, args.run_dir)
    ckpt.load_run_weights(prep.model, args.run_dir)
    default = rerank_features(cfg)
    rows = {}
    without = tuple(f for f in default if f not in args.drop)
    if args.saved:
        saved = json.loads((args.run_dir / "metrics.json").read_text(encoding="utf-8"))["test"]
        rows["default"] = {"features": list(default), **summary(saved), "from": "the run's metrics.json"}
    for label, extra in (("default", default), ("without " + ", ".join(args.drop), without)):
        if label in rows:
            continue
        start = time.perf_counter()
        out = _placement(prep, cfg, None, rerank_extra=extra)
        if out is None or not out.get("placement_selection"):
            parser.error(f"{args.run_dir}: the run has no placement task to report")
        rows[label] = {"features": list(extra), **summary(out), "seconds": round(time.perf_counter() - start, 1)}
    result = _harness.result(
        "rerank_ablation",
        command=shlex.join(
            ["python", "benchmarks/investigations/rerank_ablation.py", *(sys.argv[1:] if argv is None else argv)]
        ),
        run=args.run_dir.name,
        rows=rows,
    )
    _harness.write_results(args.out, result)
    print(_harness.dumps(result), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
