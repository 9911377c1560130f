"""Filtered rank-based link-prediction evaluation.

Filtered ranking with realistic ties (:mod:`.ranking`), configurable
candidate entities, a vectorised index of known triples (:mod:`.filtering`)
and MRR / MR / Hits@k per direction and both (:mod:`.metrics`); for ontologies,
where new terms' true parents rank among existing terms (:mod:`.placement`).

Typical use::

    index = FilterIndex.from_triples(split.filter_triples, kg.num_entities, kg.num_relations)
    metrics = evaluate(model, split.test, filter_index=index, candidates=cands,
                       num_entities=kg.num_entities)
    metrics.to_dict()  # {"mrr": ..., "hits@10": ..., "head": {...}, "tail": {...}}
"""

from textkg.evaluation.filtering import FilterIndex
from textkg.evaluation.metrics import DEFAULT_KS, RankingMetrics, evaluate, rank_metrics
from textkg.evaluation.placement.evaluate import evaluate_placement
from textkg.evaluation.placement.methods import PlacementMetrics
from textkg.evaluation.ranking import DIRECTIONS, RankResult, Scorer, compute_ranks, realistic_ranks

__all__ = [
    "DEFAULT_KS",
    "DIRECTIONS",
    "FilterIndex",
    "PlacementMetrics",
    "RankResult",
    "RankingMetrics",
    "Scorer",
    "compute_ranks",
    "evaluate",
    "evaluate_placement",
    "rank_metrics",
    "realistic_ranks",
]
