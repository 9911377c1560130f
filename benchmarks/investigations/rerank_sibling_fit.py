"""The placement re-ranker fitted partly on whole sibling batches instead of random training terms (issue 54).

Usage::

    python benchmarks/investigations/rerank_sibling_fit.py --run-dir RUN --share 0.5 [--save] [--out FILE]

The re-ranker is fitted on training terms playing new terms, drawn at random (the default). Real additions often come
as a batch of siblings under a term that had no child before (UBERON: 168 of 845 added pairs), a case a random draw
of training terms almost never shows the fit: the candidate's children prior and its children's features then
teach that a true parent has children. ``--share S`` fits on lists of which the share ``S`` are whole sibling
batches (:func:`textkg.evaluation.placement.rerank.fit_batches`: the groups an ontology file's ``sibling-batches``
validation terms are drawn from, those that leave their parent with no child first), the rest at random.

Runs the run's placement report on this code and its checkpoint with that fit (``textkg evaluate RUN --placement``'s
computation); the run's own ``metrics.json`` is the default fit's row. Output: both rows' test and validation MRR /
top 1 / top 10 of the combination, the names-only block and the re-ranker's weights (default ``--out``:
``benchmarks/results/rerank_sibling_fit.json``). ``--save`` writes the report into the run's ``metrics.json`` as
``textkg evaluate --placement`` does, so that ``textkg place`` (and ``benchmarks/real_additions.py`` on that run
folder) places with it: use it on a copy of the run. docs/results/placement.md, "The re-ranker fitted on sibling
batches".
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared harness
sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness
from rerank_ablation import summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run-dir", type=Path, required=True)
    parser.add_argument("--share", type=float, required=True, help="share of the fitted terms in sibling batches")
    parser.add_argument("--save", action="store_true", help="write the report into the run's metrics.json")
    _harness.add_common_flags(parser, out="benchmarks/results/rerank_sibling_fit.json", seed=0, threads=2)
    args = parser.parse_args(argv)
    if not 0 < args.share <= 1:
        parser.error(f"--share {args.share}: a share in (0, 1]")
    _harness.set_threads(args.threads)
    from textkg.pipeline.prepared import prepare
    from textkg.pipeline.report import _placement, save_placement
    from textkg.pipeline.run_dir import open_run
    from textkg.training import checkpoint as ckpt

    cfg = open_run(args.run_dir).config
    saved = json.loads((args.run_dir / "metrics.json").read_text(encoding="utf-8"))["test"]
    if not saved.get("placement_selection"):
        parser.error(f"{args.run_dir}: the run has no placement task to report")
    prep = prepare(cfg, args.run_dir)
    ckpt.load_run_weights(prep.model, args.run_dir)
    rows = {"random terms (the default)": {**summary(saved), "from": "the run's metrics.json"}}
    start = time.perf_counter()
    out = _placement(prep, cfg, None, rerank_sibling_share=args.share)
    assert out is not None
    rows[f"{args.share:g} in sibling batches"] = {**summary(out), "seconds": round(time.perf_counter() - start, 1)}
    result = _harness.result(
        "rerank_sibling_fit",
        command=shlex.join(
            ["python", "benchmarks/investigations/rerank_sibling_fit.py", *(sys.argv[1:] if argv is None else argv)]
        ),
        run=args.run_dir.name,
        valid_holdout=prep.split.extra.get("valid_holdout"),
        rows=rows,
    )
    if args.save:
        save_placement(args.run_dir, out)
    _harness.write_results(args.out, result)
    print(_harness.dumps(result), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
