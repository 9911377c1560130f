"""The placement re-ranker's optional features on one finished run: each feature set, validation and test.

Usage::

    python benchmarks/rerank_features.py RUN --sets "sibling_mean" "sibling_mean,maxsim" ...
        [--out benchmarks/results/rerank_features.json] [--threads 1]

One feature pass, many feature sets (the run's post-run report fits one set per run):

* the re-ranker is fitted once with every feature of :data:`~textkg.evaluation.placement.rerank.OPTIONAL_FEATURES`
  on the run's training terms (as :func:`~textkg.evaluation.placement.evaluate.evaluate_placement` fits it);
  each set is then refitted on the same lists of hard negatives with the other optional columns left out
  (:func:`~textkg.evaluation.listwise.fit_listnet`: the same fit the run makes for that set, as each column is
  standardised alone);
* the combination the run chose without the re-ranker (``metrics.json``'s weights and vote) plus each set's
  re-ranker at each weight of :data:`~textkg.evaluation.placement.combination.ADDED_WEIGHT_VALUES` is ranked on the
  validation and the test terms in one pass (:func:`~textkg.evaluation.placement.grid.weighting_ranks`); the
  weight is the one with the best validation MRR (0 wins a tie, as in the run), and the test MRR and top 10 are
  reported at that weight. Test numbers choose nothing.

CPU seconds (``time.process_time``) of the fit with every feature and of the two ranking passes are recorded.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/: the shared harness
import _harness


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path, help="a finished inductive run of a graph with is_a (the README run)")
    parser.add_argument("--sets", nargs="+", required=True, help="comma-separated optional features, one set each")
    parser.add_argument("--label", default=None, help="a name for this record")
    _harness.add_common_flags(parser, out="benchmarks/results/rerank_features.json", threads=1)
    args = parser.parse_args(argv)
    _harness.set_threads(args.threads)
    before = _harness.load_average()
    rows = measure(args.run_dir, [tuple(x for x in s.split(",") if x) for s in args.sets])
    after = _harness.load_average()
    record = _harness.result(
        "rerank_features", label=args.label, load_average_before=before, load_average_after=after, **rows
    )
    _harness.write_results(args.out, record)
    print(_harness.dumps(record), end="")
    return 0


def placement_run(run_dir: Path) -> SimpleNamespace:
    """A finished run's model, graph and placement inputs, as its post-run report builds them: ``cfg``, ``prep``,
    ``kg``, ``split``, ``features`` (description features), ``test`` / ``valid`` (placement queries), ``edges``
    (training ``is_a``), ``texts``, ``names``, ``fit_on`` (training terms), ``description`` and ``vote``
    (the re-ranker's first-stage scorers)."""
    from textkg.evaluation.placement.combination import neighbour_vote_scorer
    from textkg.evaluation.placement.evaluate import RERANK_VOTE
    from textkg.evaluation.placement.methods import cosine_scorer, placement_queries
    from textkg.pipeline.prepared import prepare
    from textkg.pipeline.report import description_features
    from textkg.pipeline.run_dir import open_run
    from textkg.training import checkpoint as ckpt

    cfg = open_run(run_dir).config
    prep = prepare(cfg, run_dir, device=torch.device("cpu"))
    prep.model.load_state_dict(ckpt.load_weights(run_dir))
    prep.model.eval()
    kg, split = prep.kg, prep.split
    features = description_features(prep)
    test = placement_queries(kg, split)
    valid = placement_queries(kg, split, which="valid")
    if test is None or valid is None:
        raise SystemExit(f"{run_dir}: no placement queries")
    edges = split.train[split.train[:, 1] == test.relation][:, [0, 2]]
    return SimpleNamespace(
        cfg=cfg,
        prep=prep,
        kg=kg,
        split=split,
        features=features,
        test=test,
        valid=valid,
        edges=edges,
        texts=list(kg.entity_descriptions),
        names=kg.entity_names,
        fit_on=split.train_entities,
        description=cosine_scorer(features),
        vote=neighbour_vote_scorer(features, edges, vote=RERANK_VOTE),
    )


def feature_scorers(run: SimpleNamespace, extra: tuple[str, ...]) -> dict:
    """The ``{name: scorer}`` the re-ranker's :class:`~textkg.evaluation.placement.rerank.PairFeatures` reads,
    for ``extra`` optional features, as :func:`~textkg.evaluation.placement.rerank.fitted_reranker` builds them."""
    import textkg.evaluation.placement.rerank as rr
    from textkg.evaluation.placement.evaluate import sibling_scorers
    from textkg.evaluation.placement.late import minilm_word_encoder
    from textkg.evaluation.placement.text import containment_scorer, tfidf_scorer

    texts, names, fit_on, edges = run.texts, run.names, run.fit_on, run.edges
    return {
        "description": run.description,
        "vote": run.vote,
        **sibling_scorers(run.features, edges),
        "tfidf": tfidf_scorer(texts, fit_on),
        "containment": containment_scorer(texts, names, fit_on),
        **rr.text_feature_scorers(
            extra, texts=texts, names=names, parent_edges=edges, fit_on=fit_on, word_encoder=minilm_word_encoder()
        ),
    }


def measure(run_dir: Path, sets: list[tuple[str, ...]]) -> dict:
    import textkg.evaluation.placement.rerank as rr
    from textkg.evaluation.listwise import fit_listnet
    from textkg.evaluation.placement.combination import (
        ADDED_WEIGHT_VALUES,
        VoteConfig,
        combined_scorer,
        neighbour_vote_scorer,
    )
    from textkg.evaluation.placement.evaluate import RERANK_FIRST_STAGE
    from textkg.evaluation.placement.grid import weighting_ranks
    from textkg.evaluation.placement.methods import STANDARDISE, model_scorer
    from textkg.evaluation.scoring import standardise

    run = placement_run(run_dir)
    cfg, prep, kg, features, edges = run.cfg, run.prep, run.kg, run.features, run.edges
    test, valid = run.test, run.valid
    every = rr.OPTIONAL_FEATURES
    description, vote = run.description, run.vote
    lists: dict[str, torch.Tensor] = {}

    def keep_lists(x: torch.Tensor, y: torch.Tensor, **kwargs):  # the fit's (n, K, F) lists, kept to refit subsets
        lists["x"], lists["y"] = x, y
        return fit_listnet(x, y, **kwargs)

    rr.fit_listnet = keep_lists  # type: ignore[assignment]
    config = rr.RerankConfig(seed=cfg.train.seed, extra=every)
    with torch.no_grad():
        start = time.process_time()
        pair = rr.PairFeatures(
            feature_scorers(run, every), rr.hierarchy_priors(edges, kg.num_entities), every, parent_edges=edges
        )
        build_cpu = time.process_time() - start
        first = combined_scorer({"description": description, "vote": vote}, RERANK_FIRST_STAGE)
        rr.fit_reranker(pair, first, edges, max(test.groups, key=len), config=config)
        fit_cpu = time.process_time() - start - build_cpu
    fits = {}
    for extra in sets:
        cols = [i for i, name in enumerate(pair.names) if name not in every or name in extra]
        w, _ = fit_listnet(lists["x"][..., cols], lists["y"], steps=config.steps, l2=config.l2)
        full = torch.zeros(len(pair.names))
        full[cols] = torch.tensor(w, dtype=torch.float32)
        fits[extra] = full
    memo: dict[tuple, torch.Tensor] = {}

    def once(terms: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:  # every set reads one feature pass
        key = (tuple(terms.tolist()), candidates.data_ptr(), len(candidates))
        if key not in memo:
            memo.clear()
            memo[key] = pair(terms, candidates)
        return memo[key]

    chosen = json.loads((run_dir / "metrics.json").read_text())["test"]["placement_selection"]["combined"]
    base = {k: float(v) for k, v in chosen["weights"].items() if k != "rerank"}
    components = {
        "model": model_scorer(prep.model, test.relation),
        "description": description,
        "vote": neighbour_vote_scorer(features, edges, vote=VoteConfig(**chosen["vote"])),
    }

    def standardised(score):
        return lambda t, c: standardise(score(t, c), **STANDARDISE).float()

    def reranked(w):
        return lambda t, c: once(t, c) @ w

    columns = [standardised(s) for s in components.values()] + [standardised(reranked(fits[e])) for e in sets]
    weightings, labels = [], []
    for i, extra in enumerate(sets):
        for value in (*ADDED_WEIGHT_VALUES, "alone"):
            w = [0.0] * len(columns) if value == "alone" else [base.get(k, 0.0) for k in components] + [0.0] * len(sets)
            w[len(components) + i] = 1.0 if value == "alone" else float(value)
            if any(x > 0 for x in w):
                weightings.append(w)
                labels.append((extra, value))
    results, rank_cpu = {}, {}
    for name, queries in (("valid", valid), ("test", test)):
        start = time.process_time()
        with torch.no_grad():
            ranks = weighting_ranks(columns, weightings, queries, num_entities=kg.num_entities)
        rank_cpu[name] = round(time.process_time() - start, 1)
        results[name] = [(float((1 / r).mean()), float((r <= 10).double().mean())) for r in ranks]
    rows = []
    for extra in sets:
        mine = [g for g, (e, _) in enumerate(labels) if e == extra]
        tuned = [g for g in mine if labels[g][1] != "alone"]
        best = max(tuned, key=lambda g: (results["valid"][g][0], -tuned.index(g)))
        alone = next(g for g in mine if labels[g][1] == "alone")
        rows.append(
            {
                "extra": list(extra),
                "rerank_weight": labels[best][1],
                "valid_mrr": round(results["valid"][best][0], 4),
                "test_mrr": round(results["test"][best][0], 4),
                "test_top10": round(results["test"][best][1], 4),
                "valid_mrr_rerank_alone": round(results["valid"][alone][0], 4),
                "test_mrr_rerank_alone": round(results["test"][alone][0], 4),
                "feature_weights": {
                    n: round(float(v), 4) for n, v in zip(pair.names, fits[extra], strict=True) if v != 0
                },
            }
        )
    return {
        "run_dir": str(run_dir),
        "combination_without_rerank": {"weights": base, "vote": chosen["vote"]},
        "cpu_s": {"build_features": round(build_cpu, 1), "fit_every_feature": round(fit_cpu, 1), "rank": rank_cpu},
        "rows": rows,
    }


if __name__ == "__main__":
    raise SystemExit(main())
