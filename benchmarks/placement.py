"""Placement of new ontology terms: the trained model, the baselines, neighbour-vote variants and combinations.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/placement.py RUN_DIR [--out benchmarks/results/placement_hpo.json]
        [--key hpo] [--quick]

``RUN_DIR`` is a finished ``textkg train`` run on an inductive split of an
ontology (``--dataset hpo --split inductive``). Its ``best_model.pt`` is
loaded; nothing is trained. Every method is ranked on the validation
placement queries (new validation terms under training terms) and on the test
ones, with the metrics of :mod:`textkg.evaluation.placement.methods` (MRR, Hits@1/3/10,
close@1). The methods:

* ``model``: the trained model alone (``test.placement`` of the run);
* ``description-nn`` and ``parent-of-nearest``: the two baselines;
* ``parent-of-nearest[...]``: neighbour-vote variants (:class:`VoteConfig`: more
  or fewer neighbours ``k``, a softmax temperature ``T`` on the similarities,
  a share for grandparents, a vote split over a neighbour's parents), ties
  broken by description cosine; ``--quick`` tries fewer;
* ``combined[...]``: weighted sums of standardised component scores, the
  weights (and the vote setting) chosen on validation only: all three
  components, and each pair, once with the library's default vote settings
  (what ``textkg train`` reports) and once with the vote chosen from the
  whole variant grid.

``chosen_on_validation`` names the method with the best validation MRR, and
gives its test numbers. ``textkg_train_reports`` is what ``textkg train``
computes for this run after training (the ``test.placement*`` keys of
``metrics.json``, the library's default grid) and the sentence it prints.
Results are merged into ``--out`` under ``--key``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path

import torch

from textkg.evaluation.placement.combination import (
    DEFAULT_VOTES,
    VoteConfig,
    combined_scorer,
    neighbour_vote_scorer,
    tune_combination,
    vote_scorer,
)
from textkg.evaluation.placement.methods import (
    cosine_scorer,
    model_scorer,
    parent_of_nearest_scorer,
    placement_queries,
    placement_reading,
    rank_placement,
)
from textkg.pipeline.prepared import prepare
from textkg.pipeline.report import _placement, description_features
from textkg.training import checkpoint as ckpt
from textkg.training.config import RunConfig

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))  # the shared harness
import _harness  # noqa: E402

DEFAULT_OUT = ROOT / "benchmarks" / "results" / "placement_hpo.json"


def vote_grid(quick: bool) -> list[VoteConfig]:
    """Neighbour-vote settings to try (the first is ``parent-of-nearest`` itself)."""
    ks, temps, decays, splits = (
        ((10, 20, 40), (None, 0.05, 0.1, 0.2), (0.0, 0.25), (False, True))
        if quick
        else ((5, 10, 20, 40, 80), (None, 0.05, 0.1, 0.2), (0.0, 0.25), (False, True))
    )
    grid = [
        VoteConfig(k=k, temperature=t, ancestor_decay=d, per_parent=p)
        for k, t, d, p in itertools.product(ks, temps, decays, splits)
    ]
    return [VoteConfig()] + [v for v in grid if v != VoteConfig()]


def load_run(run_dir: Path):
    cfg = RunConfig.from_dict(json.loads((run_dir / "config.json").read_text()), source=str(run_dir))
    prep = prepare(cfg, run_dir)
    prep.model.load_state_dict(ckpt.load(run_dir / ckpt.BEST_MODEL))
    prep.model.eval()
    return cfg, prep


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--key", default=None, help="key in --out (default: the run's dataset)")
    ap.add_argument("--quick", action="store_true", help="a smaller vote grid")
    ap.add_argument("--batch-size", type=int, default=256)
    args = ap.parse_args(argv)
    torch.set_grad_enabled(False)
    t0 = time.time()
    cfg, prep = load_run(args.run_dir)
    kg, split, n, bs = prep.kg, prep.split, prep.kg.num_entities, args.batch_size
    queries = {side: placement_queries(kg, split, which=side) for side in ("valid", "test")}
    if any(q is None for q in queries.values()):
        sys.exit("no placement queries on the validation or test side")
    features = description_features(prep)
    edges = split.train[split.train[:, 1] == queries["test"].relation][:, [0, 2]]
    print(
        f"loaded in {time.time() - t0:.0f}s: {queries['valid'].num_queries} valid / "
        f"{queries['test'].num_queries} test queries",
        file=sys.stderr,
    )

    methods: list[dict] = []

    def measure(name: str, family: str, scorer, settings: dict | None = None, on=("valid", "test")) -> dict:
        t = time.time()
        row = {"name": name, "family": family, "settings": settings or {}}
        for side in on:
            row[side] = rank_placement(scorer, queries[side], num_entities=n, batch_size=bs).to_dict()
        row["seconds"] = round(time.time() - t, 1)
        methods.append(row)
        print(
            f"{name:70s} valid {row['valid']['mrr']:.3f}  test {row.get('test', {}).get('mrr', float('nan')):.3f}"
            f"  ({row['seconds']}s)",
            file=sys.stderr,
        )
        return row

    model = model_scorer(prep.model, queries["test"].relation)
    description = cosine_scorer(features)
    measure("model", "model", model)
    measure("description-nn", "baseline", description)
    baseline = measure(
        "parent-of-nearest", "baseline", parent_of_nearest_scorer(features, edges), VoteConfig().to_dict()
    )
    votes = vote_grid(args.quick)  # votes[0] is VoteConfig(): parent-of-nearest, measured above
    vote_rows = [baseline] + [
        measure(v.name, "vote", vote_scorer(features, edges, vote=v), v.to_dict()) for v in votes[1:]
    ]
    best_vote = votes[max(range(len(votes)), key=lambda i: (vote_rows[i]["valid"]["mrr"], -i))]

    components = {"model": model, "description": description}
    for label, vote_set in (("default votes", DEFAULT_VOTES), ("vote grid", (best_vote,))):
        for names in (
            ("model", "description", "vote"),
            ("model", "description"),
            ("model", "vote"),
            ("description", "vote"),
        ):
            if names == ("model", "description") and label != "default votes":
                continue
            use_vote = "vote" in names
            t = time.time()
            combo = tune_combination(
                {k: components[k] for k in names if k != "vote"},
                queries["valid"],
                num_entities=n,
                features=features if use_vote else None,
                parent_edges=edges if use_vote else None,
                votes=vote_set,
                batch_size=bs,
            )
            scorers = {k: components[k] for k in names if k != "vote"}
            if use_vote:
                scorers["vote"] = neighbour_vote_scorer(features, edges, vote=combo.vote)
            row = {
                "name": f"combined[{'+'.join(names)}; {label}]",
                "family": "combined",
                "settings": {
                    "weights": combo.weights,
                    "vote": None if combo.vote is None else combo.vote.to_dict(),
                    "vote_name": None if combo.vote is None else combo.vote.name,
                },
                "valid": combo.valid.to_dict(),
                "test": rank_placement(
                    combined_scorer(scorers, combo.weights), queries["test"], num_entities=n, batch_size=bs
                ).to_dict(),
                "seconds": round(time.time() - t, 1),
            }
            methods.append(row)
            print(
                f"{row['name']:70s} valid {row['valid']['mrr']:.3f}  test {row['test']['mrr']:.3f}  "
                f"{combo.weights} {row['settings']['vote_name']} ({row['seconds']}s)",
                file=sys.stderr,
            )

    chosen = max(methods, key=lambda r: r["valid"]["mrr"])  # first on a tie: the simpler method
    t = time.time()
    library = _placement(prep, cfg)  # exactly what `textkg train` computes and prints after training
    library_seconds = round(time.time() - t, 1)
    result = _harness.result(  # "machine" was one line of text; it is the harness's record
        "placement",
        command="OMP_NUM_THREADS=1 " + _harness.command_line(argv, "placement.py"),
        run=str(args.run_dir),
        dataset=cfg.data.dataset,
        split=cfg.data.split,
        split_seed=cfg.data.split_seed,
        model=cfg.model_name,
        epochs_trained=json.loads((args.run_dir / "metrics.json").read_text())["train"]["epochs"]
        if (args.run_dir / "metrics.json").is_file()
        else None,
        num_queries={side: q.num_queries for side, q in queries.items()},
        num_candidates=[len(g) for g in queries["test"].groups],
        chosen_on_validation={"name": chosen["name"], "valid": chosen["valid"], "test": chosen["test"]},
        textkg_train_reports={"reading": placement_reading(library), "seconds": library_seconds, **library},
        methods=methods,
        seconds=round(time.time() - t0, 1),
    )
    store = json.loads(args.out.read_text()) if args.out.is_file() else {}
    store[args.key or Path(cfg.data.dataset).name] = result
    _harness.write_results(args.out, store)
    print(
        f"chosen on validation: {chosen['name']} (valid MRR {chosen['valid']['mrr']:.3f}, "
        f"test MRR {chosen['test']['mrr']:.3f}); wrote {args.out}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
