"""Placement metrics of a run: the model, the text baselines, the combination and the re-ranker.

:func:`evaluate_placement` is what ``metrics.json``'s ``test.placement*`` blocks come from
(:mod:`textkg.pipeline.report`): it ranks each held-out term's true parents with the trained model,
the baselines (:mod:`.methods`, :mod:`.text`), tunes the combined scorer on validation
terms (:mod:`.combination`) and, given the texts, fits the learned re-ranker
(:mod:`.rerank`) whose weight in the combination validation chooses.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from textkg.errors import ConfigError
from textkg.evaluation.placement.combination import (
    VoteConfig,
    combined_scorer,
    evaluate_combined,
    neighbour_vote_scorer,
)
from textkg.evaluation.placement.late import WordEncoder, minilm_word_encoder
from textkg.evaluation.placement.methods import (
    DEFAULT_NEIGHBOURS,
    cosine_scorer,
    model_scorer,
    parent_of_nearest_scorer,
    placement_queries,
    rank_placement,
)
from textkg.evaluation.placement.rerank import RerankConfig, Reranker, fitted_reranker
from textkg.evaluation.placement.shortlist import Shortlist
from textkg.evaluation.placement.siblings import REDUCTIONS, children_scorer
from textkg.evaluation.placement.text import kept_scorer, last_call_memo, tfidf_scorer

#: The vote the re-ranker reads (the best on ``hpo``'s validation terms, docs/results/placement.md), and the
#: first stage whose top candidates are its hard negatives: description + 0.1 x vote, standardised.
RERANK_VOTE = VoteConfig(k=20, temperature=0.1)
RERANK_FIRST_STAGE = {"description": 1.0, "vote": 0.1}


def evaluate_placement(
    model,
    kg,
    split,
    *,
    text_features: torch.Tensor | None = None,
    relation: str | None = None,
    k: int = DEFAULT_NEIGHBOURS,
    batch_size: int = 256,
    hierarchy: torch.Tensor | None = None,
    combine: bool = True,
    texts: Sequence[str] | None = None,
    rerank: RerankConfig | Reranker | None = None,
    word_encoder: WordEncoder | None = None,
    shortlist: Shortlist | None = None,
) -> dict | None:
    """Placement metrics of a model, of the text baselines and of the combined scorer.

    Args:
        model: Scorer with ``score_tails(heads (b,), relations (b,), candidates (c,)) -> (b, c)``;
            put in eval mode by the caller.
        kg, split: The graph and its inductive split.
        text_features: ``(num_entities, D)`` description features for the
            baselines and the combination; ``None`` leaves them out.
        relation: The parent relation (default ``"is_a"``; see :func:`placement_queries`).
        k: Neighbours of ``parent-of-nearest``.
        batch_size: New terms scored at once.
        hierarchy: ``(m, 3)`` training statements that ``close@1``,
            ``parent-of-nearest`` and the combination's vote may read (``None``:
            all of ``split.train``). ``parent-of-nearest`` and the vote are left
            out when none of them is a parent statement (a private run whose
            every ``is_a`` statement is private).
        combine: Tune the combined scorer on the validation placement queries
            (:mod:`textkg.evaluation.placement.combination`) when there are any and
            ``text_features`` is given.
        texts: The text each entity id is read from (a new term's: what it arrives
            with, e.g. its name alone); adds the ``tfidf-nn`` baseline (reported, not
            chosen) and makes the re-ranker possible. ``None``: neither.
        rerank: With ``texts``, a hierarchy and validation terms: a
            :class:`~textkg.evaluation.placement.rerank.RerankConfig` fits the re-ranker on
            training terms, a fitted :class:`~textkg.evaluation.placement.rerank.Reranker` is
            used as is; its weight in the combination is chosen on validation
            (``placement_selection.combined.weights.rerank``; 0 = not used).
        word_encoder: ``words -> (n, D)`` word vectors for the re-ranker's ``maxsim`` feature
            (:mod:`.late`; read only when ``rerank`` has it); ``None``: the packaged MiniLM's
            (:func:`.late.minilm_word_encoder`).
        shortlist: A cross-encoder over the combination's top candidates (:mod:`.shortlist`), its weight
            chosen on validation (``placement_selection.combined.cross_encoder``; 0 = not used).

    Returns:
        ``{"placement": {...}, "placement_baselines": {"description-nn": {...},
        "parent-of-nearest": {...}, "tfidf-nn": {...}}}`` (:meth:`PlacementMetrics.to_dict` each,
        on test; baselines ``{}`` without ``text_features``), plus, when the
        combination was tuned, ``"placement_combined"`` (its test metrics) and
        ``"placement_selection"`` (the method chosen on validation, every
        method's validation metrics and the combination's settings; see
        :func:`~textkg.evaluation.placement.combination.evaluate_combined`); with the
        re-ranker, ``"placement_rerank"`` (its fitted weights) and
        ``"placement_combined_without_rerank"``.
        ``None`` when there are no test placement queries.
    """
    queries = placement_queries(kg, split, relation=relation, hierarchy=hierarchy)
    if queries is None:
        return None
    n = kg.num_entities
    model_score = model_scorer(model, queries.relation)
    out = {
        "placement": rank_placement(model_score, queries, num_entities=n, batch_size=batch_size).to_dict(),
        "placement_baselines": {},
    }
    if text_features is None:
        return out
    if tuple(text_features.shape[:1]) != (n,) or text_features.ndim != 2:
        raise ConfigError(f"text_features must be ({n}, D), got {tuple(text_features.shape)}", field="text_features")
    statements = split.train if hierarchy is None else hierarchy
    edges = statements[statements[:, 1] == queries.relation][:, [0, 2]]
    # the cosines, computed once per batch for the description, the votes and the re-ranker's features
    description = last_call_memo(cosine_scorer(text_features))
    baselines = {"description-nn": description}
    if len(edges):
        baselines["parent-of-nearest"] = parent_of_nearest_scorer(text_features, edges, k=k)
    reported = {}
    if texts is not None:
        reported["tfidf-nn"] = tfidf_scorer(texts, split.train_entities)
    out["placement_baselines"] = {
        name: rank_placement(s, queries, num_entities=n, batch_size=batch_size).to_dict()
        for name, s in {**baselines, **reported}.items()
    }
    valid = placement_queries(kg, split, relation=relation, hierarchy=hierarchy, which="valid") if combine else None
    if valid is None:
        return out
    added = None
    if texts is not None and rerank is not None and len(edges):
        vote = last_call_memo(neighbour_vote_scorer(text_features, edges, vote=RERANK_VOTE, similarity=description))
        first_stage = combined_scorer({"description": baselines["description-nn"], "vote": vote}, RERANK_FIRST_STAGE)
        reranker, scorer = fitted_reranker(
            rerank,
            texts=texts,
            names=kg.entity_names,
            scorers={"description": baselines["description-nn"], "vote": vote, **sibling_scorers(text_features, edges)},
            first_stage=first_stage,
            parent_edges=edges,
            candidates=max(queries.groups, key=len),
            fit_on=split.train_entities,
            word_encoder=minilm_word_encoder() if word_encoder is None else word_encoder,
            synonyms=kg.entity_synonyms,
        )
        added = ("rerank", kept_scorer(scorer))  # ranked in several passes over the same batches
        out["placement_rerank"] = reranker.to_dict()
    out.update(
        evaluate_combined(
            {"model": model_score, "description": baselines["description-nn"]},
            valid,
            queries,
            num_entities=n,
            baselines=baselines,
            features=text_features,
            parent_edges=edges,
            batch_size=batch_size,
            added=added,
            reported=reported,
            similarity=description,
            shortlist=shortlist,
        )
    )
    return out


def sibling_scorers(features: torch.Tensor, parent_edges: torch.Tensor) -> dict:
    """The optional re-ranker features of :mod:`.siblings`, by their names in :data:`.rerank.OPTIONAL_FEATURES`."""
    return {f"sibling_{r}": children_scorer(features, parent_edges, reduce=r) for r in REDUCTIONS}


def saved_reranker(
    saved: dict,
    *,
    features: torch.Tensor,
    parent_edges: torch.Tensor,
    texts: Sequence[str],
    names: Sequence[str],
    fit_on: torch.Tensor,
    file: str | None = None,
    word_encoder: WordEncoder | None = None,
    synonyms: Sequence[Sequence[str]] | None = None,
):
    """The scorer of a re-ranker saved in a run's ``metrics.json`` (``test.placement_rerank``, checked by
    :meth:`Reranker.from_dict`), over the same pair features :func:`evaluate_placement` fitted it on
    (``textkg place``: existing + new terms); ``word_encoder`` as in :func:`evaluate_placement`; ``synonyms``:
    the existing terms' (``KnowledgeGraph.entity_synonyms``; a new term is read on its name)."""
    description = last_call_memo(cosine_scorer(features))  # computed once per batch for both features
    vote = neighbour_vote_scorer(features, parent_edges, vote=RERANK_VOTE, similarity=description)
    return fitted_reranker(
        Reranker.from_dict(saved, file=file),
        texts=texts,
        names=names,
        scorers={"description": description, "vote": vote, **sibling_scorers(features, parent_edges)},
        parent_edges=parent_edges,
        fit_on=fit_on,
        word_encoder=minilm_word_encoder() if word_encoder is None else word_encoder,
        synonyms=synonyms,
    )[1]


__all__ = ["RERANK_FIRST_STAGE", "RERANK_VOTE", "evaluate_placement", "saved_reranker"]
