"""A new entity's structural part: the shared unseen row against its description neighbours' rows.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/unseen_structure.py RUN_DIR [RUN_DIR ...] [--test]
        [--out benchmarks/results/unseen_structure.json]

Loads each run's ``best_model.pt`` (nothing is trained) and ranks the run's
validation subset (``train.valid_max_triples``, seeded, as model selection
does) with ``model.unseen_structure: row`` and with ``neighbours`` for each
``k`` (neighbours per new entity) and softmax temperature ``τ`` of the grid
(:mod:`textkg.training.unseen_structure`; the library's default is k = 16,
τ = 0.05). ``--test`` also ranks the test split with ``row`` and the default.
Rows are merged into ``--out`` by run name.
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

GRID = [(8, 0.05), (16, 0.05), (32, 0.05), (16, 0.1)]


def measure(run_dir: Path, test: bool) -> dict:
    from textkg.pipeline.job import evaluate_split, prepare
    from textkg.training import checkpoint as ckpt
    from textkg.training.config import RunConfig
    from textkg.training.unseen_structure import TEMPERATURE, K, nearest_seen, pooled_features

    cfg = RunConfig.from_dict(json.loads((run_dir / "config.json").read_text()), source=str(run_dir))
    prep = prepare(cfg, run_dir)
    model = prep.model
    model.load_state_dict(ckpt.load(run_dir / ckpt.BEST_MODEL))
    features = pooled_features(model)
    if features is None or model.structural is None:
        raise SystemExit(f"{run_dir}: the model has no structural table or no pooled features")
    seen = prep.split.train_entities
    unseen = torch.ones(len(features), dtype=torch.bool)
    unseen[seen] = False
    unseen = unseen.nonzero().squeeze(1)

    def use(setting) -> None:
        if setting == "row":
            model.set_unseen_neighbours(unseen[:0], torch.zeros(0, 1, dtype=torch.long), torch.zeros(0, 1))
        else:
            k, tau = setting
            model.set_unseen_neighbours(unseen, *nearest_seen(features, seen, features[unseen], k=k, temperature=tau))

    def metrics(which: str, max_triples: int) -> dict:
        d = evaluate_split(prep, cfg, which, max_triples=max_triples).to_dict()
        return {k: d[k] for k in ("mrr", "hits@1", "hits@3", "hits@10", "num_triples")}

    start = time.perf_counter()
    valid = {}
    for setting in ["row", *GRID]:
        use(setting)
        valid["row" if setting == "row" else f"k={setting[0]},tau={setting[1]:g}"] = metrics(
            "valid", cfg.train.valid_max_triples
        )
    row = {"run": run_dir.name, "valid": valid}
    if test:
        row["test"] = {}
        for name, setting in (("row", "row"), (f"k={K},tau={TEMPERATURE:g}", (K, TEMPERATURE))):
            use(setting)
            row["test"][name] = metrics("test", 0)
    row["seconds"] = time.perf_counter() - start
    return row


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+")
    p.add_argument("--test", action="store_true", help="also rank the test split (row and the default)")
    p.add_argument("--out", default="benchmarks/results/unseen_structure.json")
    args = p.parse_args()
    torch.set_num_threads(1)
    out = Path(args.out)
    rows = json.loads(out.read_text()) if out.is_file() else {}
    for run in args.runs:
        row = measure(Path(run), args.test)
        rows[row["run"]] = row
        _harness.write_results(out, rows)
        print(row["run"], "valid", {k: round(v["mrr"], 4) for k, v in row["valid"].items()})
        if "test" in row:
            print(row["run"], "test", {k: round(v["mrr"], 4) for k, v in row["test"].items()})


if __name__ == "__main__":
    main()
