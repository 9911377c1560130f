"""The description-kNN neighbour vote on a finished inductive run: alone, and combined with the model.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/neighbour_vote.py RUN_DIR [RUN_DIR ...]
        [--out benchmarks/results/neighbour_vote_fb15k237.json]

Loads each run's ``best_model.pt`` (nothing is trained) and computes what
``textkg train`` now reports as ``test.neighbour_vote``
(:mod:`textkg.evaluation.neighbour_vote`): the weight λ is chosen on the run's
validation subset, then the test split is ranked once by the model alone, the
vote alone and the combination. Rows are merged into ``--out`` by run name.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/: the shared harness
import _harness


def measure(run_dir: Path) -> dict:
    from textkg.pipeline.prepared import prepare
    from textkg.pipeline.report import _neighbour_vote, evaluate_split
    from textkg.training import checkpoint as ckpt
    from textkg.training.config import RunConfig

    cfg = RunConfig.from_dict(json.loads((run_dir / "config.json").read_text()), source=str(run_dir))
    prep = prepare(cfg, run_dir)
    prep.model.load_state_dict(ckpt.load(run_dir / ckpt.BEST_MODEL))
    start = time.perf_counter()
    model = evaluate_split(prep, cfg, "test").to_dict()
    block = _neighbour_vote(prep, cfg)
    return {
        "run": run_dir.name,
        "privacy_mode": cfg.privacy.mode,
        "model": {k: model[k] for k in ("mrr", "hits@1", "hits@3", "hits@10")}
        | {n: {"mrr": model["subsets"][n]["mrr"]} for n in ("answer_seen", "answer_unseen") if n in model["subsets"]},
        "neighbour_vote": block,
        "seconds": time.perf_counter() - start,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+")
    p.add_argument("--out", default="benchmarks/results/neighbour_vote_fb15k237.json")
    args = p.parse_args()
    torch.set_num_threads(1)
    out = Path(args.out)
    rows = json.loads(out.read_text()) if out.is_file() else {}
    for run in args.runs:
        row = measure(Path(run))
        rows[row["run"]] = row
        _harness.write_results(out, rows)
        nv = row["neighbour_vote"]
        print(
            f"{row['run']}: model {row['model']['mrr']:.4f}; vote only {nv['vote_only']['mrr']:.4f}; "
            f"combined (weight {nv['weight']:g}) {nv['combined']['mrr']:.4f}"
            if "skipped" not in nv
            else f"{row['run']}: skipped ({nv['skipped']})"
        )


if __name__ == "__main__":
    main()
