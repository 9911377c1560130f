"""The link-prediction re-ranker in the post-run report (``test.link_rerank`` of ``metrics.json``).

Fits :mod:`textkg.evaluation.link_rerank` on the run's validation statements over the first stage
the run chose (the model + the description neighbour vote at the weights ``test.neighbour_vote``
chose on validation), chooses its weight there by cross-fitting, and ranks the test split with and
without it on the same lists. ``textkg predict`` reads the choice back (:func:`saved_reranker`).
"""

from __future__ import annotations

import time
from pathlib import Path

import torch

from textkg.data import candidate_entities
from textkg.evaluation.link_rerank import (
    FEATURE_SETS,
    FEATURES,
    LinkFeatures,
    LinkRerankConfig,
    LinkReranker,
    Lists,
    candidate_key,
    choose_rerank_sets,
    collect_lists,
    fit_candidate,
)
from textkg.evaluation.metrics import RankingMetrics
from textkg.pipeline.prepared import Prepared
from textkg.training.config import RunConfig

#: Validation statements the re-ranker is fitted on (a seeded subset when there are more).
MAX_FIT_TRIPLES = 10_000


def public_statements(prep: Prepared) -> torch.Tensor:
    """The training statements the re-ranker may read: every one, or the public ones under privacy."""
    return prep.split.train if prep.private_mask is None else prep.split.train[~prep.private_mask]


def link_features(prep: Prepared, vote) -> LinkFeatures:
    """The run's :class:`LinkFeatures` (public statements and texts only)."""
    kg = prep.kg
    return LinkFeatures(
        public_statements(prep),
        seen=prep.split.train_entities,
        texts=list(kg.entity_descriptions),
        relation_texts=list(kg.relation_texts),
        vote=vote,
    )


def _block(lists_ranks: torch.Tensor) -> dict:
    head, tail = lists_ranks.chunk(2)
    d = RankingMetrics.from_ranks(head, tail).to_dict()
    return {k: d[k] for k in ("mrr", "mr", "hits@1", "hits@3", "hits@10", "num_triples")}


def link_rerank_report(
    prep: Prepared,
    cfg: RunConfig,
    vote_block: dict | None,
    *,
    vote=None,
    valid: torch.Tensor | None = None,
    config: LinkRerankConfig | None = None,
) -> dict | None:
    """``test.link_rerank``: the re-ranker's choice on validation and the test split with and without it.

    Args:
        prep, cfg: The run.
        vote_block: ``test.neighbour_vote`` (its chosen weights make the first stage).
        vote: The run's :class:`~textkg.evaluation.neighbour_vote.NeighbourVote` (public statements).
        valid: The validation statements to fit on (:data:`MAX_FIT_TRIPLES` at most, a seeded subset).
        config: How to fit and choose.

    Returns:
        ``None`` where the neighbour vote was not reported (the same runs: inductive, with validation
        statements and a text model); skipped, with the reason, where the vote was (``--privacy full``:
        no public training statement for the priors to read).
    """
    if vote_block is None:
        return None
    if "skipped" in vote_block:
        return {"skipped": vote_block["skipped"]}
    if vote is None or valid is None:
        raise ValueError("the re-ranker needs the run's vote and validation statements")
    config = config or LinkRerankConfig(seed=cfg.train.seed)
    clock = time.process_time()
    features = link_features(prep, vote)
    weights = (float(vote_block.get("weight") or 0.0), float(vote_block.get("spread_weight") or 0.0))
    prep.model.eval()

    def lists(which: str, triples: torch.Tensor):
        return collect_lists(
            prep.model,
            vote,
            weights,
            features,
            triples,
            filter_index=prep.filter_index,
            candidates=candidate_entities(prep.kg, prep.split, which, cfg.train.candidates),
            top_k=config.top_k,
            batch_size=max(1, min(cfg.train.eval_batch_size, 256)),
            exclude_query=cfg.train.exclude_query,
        )

    fitted = lists("valid", valid)
    reranker, by_set = choose_rerank_sets(fitted, config)
    valid_mrr = by_set[reranker.key]
    fit_seconds = time.process_time() - clock
    test = lists("test", prep.split.test)
    clock = time.process_time()
    scores = reranker.score(test.x)
    reranked = test.ranks_by(scores, reranker.weight)
    rank_seconds = time.process_time() - clock
    # the best weight above 0 on validation: what the re-ranker would give had it been chosen (a diagnostic)
    forced = max((w for w in valid_mrr if w > 0), key=lambda w: (valid_mrr[w], -w), default=0.0)
    clock = time.process_time()
    each_set = {
        candidate_key(form, name): _feature_set_row(fitted, test, config, form, name, by_set, reranker)
        for form, name in config.candidates()
    }
    diagnostic_seconds = time.process_time() - clock
    per_1000 = 1000.0 / max(len(test.base), 1)
    first = "model" if not any(weights) else f"model + neighbour vote (weight {weights[0]:g}, spread {weights[1]:g})"
    return {
        "method": "a listwise (ListNet) re-ranker over the first stage's top_k answers of each query: "
        "first stage + weight x g(features), g linear (features . weights) or a one-hidden-layer tanh network "
        f"beside a linear skip on standardised features (form mlp), features {', '.join(FEATURES)} (the chosen "
        "feature set's; 0 for the others); fitted on validation statements, its form, feature set and weight "
        "chosen together by cross-fitting over validation query entities",
        "first_stage": first,
        **reranker.to_dict(),
        "used": reranker.weight > 0,
        "chosen_on": f"out-of-fold MRR of {config.folds}-fold cross-fitting on {len(fitted.base) // 2} validation "
        "statements (0, the first stage alone, wins a tie; then the fewer features, the linear form, the smaller "
        "weight)",
        "valid_mrr_by_weight": {f"{w:g}": v for w, v in valid_mrr.items()},
        "without": _block(test.base),
        "with": _block(reranked),
        "best_weight_above_0": {"weight": forced, "test": _block(test.ranks_by(scores, forced))},
        "by_feature_set": each_set,
        "first_stage_recall": {"valid": fitted.recall(), "test": test.recall()},
        "cpu_seconds": {
            "fit": fit_seconds,
            "by_feature_set_diagnostic": diagnostic_seconds,
            "test_first_stage_per_1000_queries": test.cpu_seconds["first_stage"] * per_1000,
            "test_rerank_per_1000_queries": (test.cpu_seconds["features"] + rank_seconds) * per_1000,
        },
    }


def _feature_set_row(
    fitted: Lists,
    test: Lists,
    config: LinkRerankConfig,
    form: str,
    name: str,
    by_set: dict[str, dict[float, float]],
    chosen: LinkReranker,
) -> dict:
    """A diagnostic: ``(form, name)``'s best weight on validation (out of fold), and the test split at that weight
    with it fitted on every validation list (what the run would report had only it been tried)."""
    valid_mrr = by_set[candidate_key(form, name)]
    weight = max(valid_mrr, key=lambda w: (valid_mrr[w], -w))
    same = chosen.form == form and chosen.feature_set == name
    reranker = chosen if same else fit_candidate(fitted, config, form, name)  # the chosen one is not refitted
    return {
        "form": form,
        "features": list(FEATURE_SETS[name]),
        "weight": weight,
        "valid_mrr": valid_mrr[weight],
        "test": _block(test.ranks_by(reranker.score(test.x), weight)),
    }


def saved_reranker(test: dict, *, file: str | None = None) -> LinkReranker | None:
    """The re-ranker a run's ``metrics.json`` ``test`` block chose, or ``None`` (none, skipped, or weight 0)."""
    block = test.get("link_rerank")
    if not isinstance(block, dict) or "skipped" in block or not block.get("weight"):
        return None
    return LinkReranker.from_dict(block, file=file)


def save_link_rerank(run_dir: Path, block: dict) -> str | None:
    """Write ``block`` as ``test.link_rerank`` into the run's ``metrics.json`` (atomically, strict JSON), so that
    ``textkg predict`` uses the choice; ``None`` (nothing written) for a run without ``metrics.json`` or a
    release bundle (its files are listed with their hashes in ``RELEASE.json``)."""
    from textkg.pipeline.run_dir import METRICS, is_bundle, open_run
    from textkg.training import checkpoint as ckpt

    metrics = open_run(run_dir).metrics()
    if metrics is None or is_bundle(run_dir):
        return None
    metrics["test"] = {**(metrics.get("test") or {}), "link_rerank": block}
    path = Path(run_dir) / METRICS
    ckpt.atomic_write_json(path, metrics)
    return str(path)


__all__ = [
    "MAX_FIT_TRIPLES",
    "link_features",
    "link_rerank_report",
    "public_statements",
    "save_link_rerank",
    "saved_reranker",
]
