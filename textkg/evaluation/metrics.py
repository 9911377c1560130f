"""Rank-based link-prediction metrics: MRR, MR and Hits@k, per direction and both.

"Both" averages over head and tail prediction by concatenating the two
directions' ranks (each triple counts twice), as BLP (Daza et al. 2021) and
PyKEEN's ``"both"`` side do. Ranks are the filtered realistic ranks of
:func:`textkg.evaluation.ranking.compute_ranks`, so Hits@k counts a target
only when its realistic rank is ``<= k`` (a target tied with one other
candidate for first place, rank 1.5, is not a Hits@1).

Subsets select ranking *queries*: a ``(n,)`` bool mask keeps both queries of
the triples it selects (a triple-level subset such as "head entity unseen");
a :class:`QueryMask` keeps head and tail queries separately (a query-level
subset such as "the entity being predicted was seen in training": for a test
triple ``(new_term, is_a, seen_parent)`` only its tail query has a seen answer).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import torch

from textkg.errors import ConfigError
from textkg.evaluation.filtering import FilterIndex, check_triples
from textkg.evaluation.ranking import QueryShard, Scorer, compute_ranks

#: The Hits@k cut-offs reported by default.
DEFAULT_KS = (1, 3, 10)


def rank_metrics(ranks: torch.Tensor, ks: Sequence[int] = DEFAULT_KS) -> dict:
    """Summarise ranks.

    Args:
        ranks: ``(m,)`` ranks, each ``>= 1``.
        ks: Cut-offs for Hits@k.

    Returns:
        ``{"mrr", "mr", "hits@<k>" for k in ks, "num_triples"}``: mean
        reciprocal rank, mean rank, fraction of ranks ``<= k`` (Python floats,
        NaN when ``ranks`` is empty) and ``m``.

    Raises:
        ValueError: ``ranks`` is not 1-D, holds NaN or a value below 1, or a
            ``k`` is not a positive integer.
    """
    if ranks.ndim != 1:
        raise ValueError(f"ranks must be 1-D, got shape {tuple(ranks.shape)}")
    for k in ks:
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"Hits@k cut-offs must be positive integers, got {k!r}")
    ranks = ranks.detach().double().cpu()
    if len(ranks) and not bool((ranks >= 1).all()):  # also catches NaN
        raise ValueError("ranks must all be >= 1 (got NaN or a smaller value)")
    out = {"mrr": _mean(1.0 / ranks), "mr": _mean(ranks)}
    for k in ks:
        out[f"hits@{k}"] = _mean((ranks <= k).double())
    out["num_triples"] = len(ranks)
    return out


def _mean(x: torch.Tensor) -> float:
    return float(x.mean()) if len(x) else float("nan")


@dataclass(frozen=True)
class QueryMask:
    """Which ranking queries of ``n`` triples a subset keeps, per direction.

    Attributes:
        head: ``(n,)`` bool; ``head[i]`` keeps triple ``i``'s head query ``(?, r, t)``.
        tail: ``(n,)`` bool; ``tail[i]`` keeps triple ``i``'s tail query ``(h, r, ?)``.
    """

    head: torch.Tensor
    tail: torch.Tensor

    @classmethod
    def of_triples(cls, mask: torch.Tensor) -> QueryMask:
        """Both queries of the triples ``mask`` (``(n,)`` bool) selects."""
        return cls(head=mask, tail=mask)

    def any(self) -> bool:
        """Whether any query is kept."""
        return bool(self.head.any() or self.tail.any())


@dataclass(frozen=True)
class RankingMetrics:
    """Metrics of one evaluation: both directions together, head, tail, and subsets.

    Attributes:
        both: :func:`rank_metrics` of head and tail ranks concatenated;
            ``num_triples`` there counts triples, not ranks.
        head: Metrics of head prediction ``(?, r, t)``.
        tail: Metrics of tail prediction ``(h, r, ?)``.
        subsets: The same per named subset of the queries (e.g. ``"head_unseen"``,
            ``"answer_seen"``); see :meth:`from_query_mask` for what the counts mean.
    """

    both: dict
    head: dict
    tail: dict
    subsets: Mapping[str, RankingMetrics] = field(default_factory=dict)

    @classmethod
    def from_ranks(
        cls, head_ranks: torch.Tensor, tail_ranks: torch.Tensor, *, ks: Sequence[int] = DEFAULT_KS
    ) -> RankingMetrics:
        """Metrics of ``(n,)`` head and ``(n,)`` tail ranks of the same triples."""
        if head_ranks.shape != tail_ranks.shape:
            raise ValueError(
                f"head and tail ranks differ in shape: {tuple(head_ranks.shape)} vs {tuple(tail_ranks.shape)}"
            )
        both = rank_metrics(torch.cat([head_ranks, tail_ranks]), ks)
        both["num_triples"] = len(head_ranks)
        return cls(both=both, head=rank_metrics(head_ranks, ks), tail=rank_metrics(tail_ranks, ks))

    @classmethod
    def from_query_mask(
        cls, head_ranks: torch.Tensor, tail_ranks: torch.Tensor, mask: QueryMask, *, ks: Sequence[int] = DEFAULT_KS
    ) -> RankingMetrics:
        """Metrics of the queries ``mask`` keeps among ``(n,)`` head and ``(n,)`` tail ranks.

        ``head`` and ``tail`` summarise the kept queries of each direction
        (their ``num_triples`` counts those queries; an empty direction has
        NaN metrics); ``both`` averages over every kept query, and its
        ``num_triples`` counts the triples with at least one kept query. For a
        triple-level mask (:meth:`QueryMask.of_triples`) this equals
        :meth:`from_ranks` of the selected triples.
        """
        both = rank_metrics(torch.cat([head_ranks[mask.head], tail_ranks[mask.tail]]), ks)
        both["num_triples"] = int((mask.head | mask.tail).sum())
        return cls(
            both=both, head=rank_metrics(head_ranks[mask.head], ks), tail=rank_metrics(tail_ranks[mask.tail], ks)
        )

    def to_dict(self) -> dict:
        """``{**both, "head": {...}, "tail": {...}}``, plus ``"subsets"`` when any."""
        out = {**self.both, "head": dict(self.head), "tail": dict(self.tail)}
        if self.subsets:
            out["subsets"] = {name: m.to_dict() for name, m in self.subsets.items()}
        return out


def evaluate(
    scorer: Scorer,
    triples: torch.Tensor,
    *,
    filter_index: FilterIndex,
    candidates: torch.Tensor | None = None,
    num_entities: int,
    batch_size: int = 512,
    candidate_chunk: int | None = None,
    subset_masks: Mapping[str, torch.Tensor | QueryMask] | None = None,
    ks: Sequence[int] = DEFAULT_KS,
    exclude_query: bool = False,
    progress: bool = False,
    shard: QueryShard | None = None,
) -> RankingMetrics:
    """Filtered link-prediction metrics of ``scorer`` on ``triples``, both directions.

    Args:
        scorer: Model with ``score_tails`` / ``score_heads``.
        triples: ``(n, 3)`` long triples to evaluate.
        filter_index: Every known true triple (see :class:`FilterIndex`).
        candidates: ``(c,)`` entity ids to rank against; ``None`` = all entities.
        num_entities: Number of entity ids in the graph.
        batch_size: Queries scored at once.
        candidate_chunk: Candidates scored per call (``None``: from a 256 MiB
            bound on a batch's scores); the metrics do not depend on it (see
            :func:`textkg.evaluation.compute_ranks`).
        subset_masks: Optional ``{name: mask}``; metrics are also reported for
            each subset. A ``(n,)`` bool tensor selects triples (both their
            queries); a :class:`QueryMask` selects head and tail queries
            separately (see :meth:`RankingMetrics.from_query_mask`).
        ks: Hits@k cut-offs.
        exclude_query: Remove each query's own entity from its ranking (see
            :func:`textkg.evaluation.compute_ranks`).
        progress: Show a tqdm progress bar.
        shard: Rank this process's share of the queries and gather the rest
            (:class:`textkg.evaluation.ranking.QueryShard`).

    Returns:
        :class:`RankingMetrics`; ``to_dict()`` gives the JSON-ready form.

    Raises:
        ConfigError: A bad subset mask, or as :func:`compute_ranks`.
        DataError, ValueError: As :func:`compute_ranks`.
    """
    triples = check_triples(triples, num_entities, filter_index.num_relations)
    subset_masks = _check_subset_masks(subset_masks, len(triples))
    result = compute_ranks(
        scorer,
        triples,
        filter_index=filter_index,
        candidates=candidates,
        num_entities=num_entities,
        batch_size=batch_size,
        candidate_chunk=candidate_chunk,
        exclude_query=exclude_query,
        progress=progress,
        shard=shard,
    )
    head, tail = result.head_ranks, result.tail_ranks
    assert head is not None and tail is not None  # compute_ranks ranks both directions unless told otherwise
    metrics = RankingMetrics.from_ranks(head, tail, ks=ks)
    subsets = {name: RankingMetrics.from_query_mask(head, tail, mask, ks=ks) for name, mask in subset_masks.items()}
    return RankingMetrics(both=metrics.both, head=metrics.head, tail=metrics.tail, subsets=subsets)


def _check_subset_masks(masks: Mapping[str, torch.Tensor | QueryMask] | None, n: int) -> dict[str, QueryMask]:
    if masks is None:
        return {}
    out = {}
    for name, mask in masks.items():
        if isinstance(mask, QueryMask):
            head = _check_mask(mask.head, n, f"subset mask {name!r} (head queries)")
            tail = _check_mask(mask.tail, n, f"subset mask {name!r} (tail queries)")
            out[str(name)] = QueryMask(head=head, tail=tail)
        else:
            out[str(name)] = QueryMask.of_triples(_check_mask(mask, n, f"subset mask {name!r}"))
    return out


def _check_mask(mask, n: int, what: str) -> torch.Tensor:
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool or tuple(mask.shape) != (n,):
        shape = tuple(mask.shape) if isinstance(mask, torch.Tensor) else type(mask).__name__
        dtype = mask.dtype if isinstance(mask, torch.Tensor) else None
        raise ConfigError(f"{what} must be a bool tensor of shape ({n},), got {dtype} {shape}", field="subset_masks")
    return mask.cpu()
