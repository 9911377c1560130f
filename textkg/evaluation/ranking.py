"""Filtered rank of each test triple's true head and tail, with realistic ties.

A batch of queries is scored against every candidate at once; the ranks come
from counting, per row, the candidates that score above and equal to the
target, minus those among them that the filter removes. No loop runs per
triple.

Ties are ranked *realistically*: the mean of the optimistic rank (the target
placed before every candidate that ties with it) and the pessimistic rank
(placed after them all). With ``g`` candidates scoring strictly higher than the
target and ``e`` others scoring equal,

    rank = ((1 + g) + (1 + g + e)) / 2 = 1 + g + e / 2,

the expected rank under a uniformly random order of the tied candidates. This
is the "realistic" rank of Berrendorf et al. 2020, "Interpretable and Fair
Comparison of Link Prediction or Entity Alignment Methods with Adjusted
Metrics", EMNLP 2020, Sec. 2 (arXiv:2002.06914v4), as implemented by PyKEEN's
``RankBasedEvaluator``. A constant scorer therefore gets rank ``(c + 1) / 2``
over ``c`` remaining candidates instead of the meaningless 1 an optimistic
count would give it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

import torch

from textkg.errors import ConfigError
from textkg.evaluation.filtering import FilterIndex, _check_triples

#: The two prediction directions: ``"head"`` ranks ``h`` in ``(?, r, t)``,
#: ``"tail"`` ranks ``t`` in ``(h, r, ?)``.
DIRECTIONS = ("head", "tail")


class Scorer(Protocol):
    """What evaluation needs from a model: scores of many candidates per query.

    Higher scores mean more plausible triples. Both methods must return a
    fresh or read-only-safe tensor; evaluation never writes into it.
    """

    def score_tails(self, heads: torch.Tensor, relations: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        """Scores of ``(heads[i], relations[i], candidates[j])``.

        Args:
            heads: ``(b,)`` long entity ids.
            relations: ``(b,)`` long relation ids.
            candidates: ``(c,)`` long entity ids.

        Returns:
            ``(b, c)`` float scores.
        """
        ...

    def score_heads(self, relations: torch.Tensor, tails: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        """Scores of ``(candidates[j], relations[i], tails[i])``.

        Args:
            relations: ``(b,)`` long relation ids.
            tails: ``(b,)`` long entity ids.
            candidates: ``(c,)`` long entity ids.

        Returns:
            ``(b, c)`` float scores.
        """
        ...


@dataclass(frozen=True, eq=False)
class RankResult:
    """Filtered realistic ranks, one per evaluated triple and direction.

    Ranks are float64 (half-integers appear with ties) and lie in
    ``[1, num_candidates]``.

    Attributes:
        head_ranks: ``(n,)`` rank of each triple's true head, or ``None`` if
            the head direction was not computed.
        tail_ranks: ``(n,)`` rank of each triple's true tail, or ``None``.
        num_candidates: ``c``, the number of candidate entities ranked against.
    """

    head_ranks: torch.Tensor | None
    tail_ranks: torch.Tensor | None
    num_candidates: int

    def __iter__(self) -> Iterator[torch.Tensor | None]:
        """Unpack as ``head_ranks, tail_ranks``."""
        return iter((self.head_ranks, self.tail_ranks))

    def all_ranks(self) -> torch.Tensor:
        """``(k * n,)`` the computed directions' ranks concatenated, head first."""
        parts = [r for r in (self.head_ranks, self.tail_ranks) if r is not None]
        return torch.cat(parts) if parts else torch.empty(0, dtype=torch.float64)


def compute_ranks(
    scorer: Scorer,
    triples: torch.Tensor,
    *,
    filter_index: FilterIndex,
    candidates: torch.Tensor | None = None,
    num_entities: int,
    batch_size: int = 512,
    directions: Sequence[str] = DIRECTIONS,
    exclude_query: bool = False,
    progress: bool = False,
) -> RankResult:
    """Rank each triple's true head and/or tail among the candidates, filtered.

    Args:
        scorer: Model with ``score_tails`` / ``score_heads`` (see :class:`Scorer`).
        triples: ``(n, 3)`` long ``(head, relation, tail)`` triples to rank.
        filter_index: Every known true triple; other true answers of a query
            are removed from its ranking (the target itself never is).
        candidates: ``(c,)`` distinct entity ids to rank against; ``None``
            means all ``num_entities`` entities.
        num_entities: Number of entity ids in the graph.
        batch_size: Queries scored at once; memory is about ``batch_size * c``
            floats.
        directions: Which of ``"head"``, ``"tail"`` to rank.
        exclude_query: Also remove the query's own entity from its ranking
            (``h`` when predicting tails of ``(h, r, ?)``, ``t`` for heads),
            unless it is the target. Off by default, as in the standard
            filtered protocol (Bordes et al. 2013) and BLP. For irreflexive
            relations such as ``is_a`` the query entity is never an answer, and
            ``textkg predict`` never proposes it (a new entity is not a candidate).
        progress: Show a tqdm progress bar.

    Returns:
        A :class:`RankResult` with ``(n,)`` float64 ranks per computed direction.

    Raises:
        ConfigError: Bad ``candidates``/``directions``/``batch_size``, a
            ``num_entities`` that disagrees with ``filter_index``, or a target
            entity that is not among the candidates (the message names the triple).
        DataError: ``triples`` is not ``(n, 3)`` integer ids in range.
        ValueError: The scorer returned NaN or a wrongly shaped score matrix.
    """
    directions = _check_directions(directions)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ConfigError(f"batch_size must be a positive integer, got {batch_size!r}", field="batch_size")
    if num_entities != filter_index.num_entities:
        raise ConfigError(
            f"num_entities={num_entities} but the filter index was built for {filter_index.num_entities} entities",
            field="num_entities",
        )
    triples = _check_triples(triples, num_entities, filter_index.num_relations)
    candidates = _check_candidates(candidates, num_entities)
    column = torch.full((num_entities,), -1, dtype=torch.long)
    column[candidates] = torch.arange(len(candidates))
    target_columns = {d: _target_columns(triples, column, d) for d in directions}

    ranks: dict[str, torch.Tensor] = {}
    with torch.no_grad(), _progress_bar(len(triples) * len(directions), progress) as bar:
        for direction in directions:
            ranks[direction] = _rank_direction(
                scorer,
                triples,
                direction,
                candidates,
                column,
                target_columns[direction],
                filter_index,
                batch_size,
                bar,
                exclude_query=exclude_query,
            )
    return RankResult(head_ranks=ranks.get("head"), tail_ranks=ranks.get("tail"), num_candidates=len(candidates))


def realistic_ranks(
    scores: torch.Tensor, target_columns: torch.Tensor, filtered_rows: torch.Tensor, filtered_columns: torch.Tensor
) -> torch.Tensor:
    """Realistic rank of each row's target among its unfiltered columns.

    Counts candidates scoring above / equal to the target over the whole
    row, then subtracts the filtered entries' share of those counts. This is
    equal to masking the filtered entries out first, but never writes into
    ``scores``, costs time proportional to the number of filtered entries,
    and stays correct when the target scores ``-inf`` (setting filtered
    entries to ``-inf`` would make them tie with such a target).

    Args:
        scores: ``(b, c)`` scores, higher = more plausible; no NaN.
        target_columns: ``(b,)`` long column of each row's target.
        filtered_rows, filtered_columns: ``(m,)`` long positions to ignore;
            distinct pairs, none of them a target.

    Returns:
        ``(b,)`` float64 ranks ``1 + greater + equal_others / 2``, in ``[1, c - filtered]``.
    """
    b = scores.shape[0]
    device = scores.device
    target = scores.gather(1, target_columns.to(device)[:, None])  # (b, 1)
    # int32 sums run ~5x faster than the default int64 ones on CPU; c < 2**31.
    greater = (scores > target).sum(1, dtype=torch.int32).long()
    equal = (scores == target).sum(1, dtype=torch.int32).long() - 1  # minus the target itself
    if len(filtered_rows):
        rows, cols = filtered_rows.to(device), filtered_columns.to(device)
        removed = scores[rows, cols]
        row_target = target[rows, 0]
        greater -= torch.bincount(rows[removed > row_target], minlength=b)
        equal -= torch.bincount(rows[removed == row_target], minlength=b)
    return (1 + greater + equal.double() / 2).cpu().double()


def _rank_direction(
    scorer: Scorer,
    triples: torch.Tensor,
    direction: str,
    candidates: torch.Tensor,
    column: torch.Tensor,
    target_columns: torch.Tensor,
    filter_index: FilterIndex,
    batch_size: int,
    bar,
    *,
    exclude_query: bool = False,
) -> torch.Tensor:
    """``(n,)`` ranks of one direction, scored ``batch_size`` queries at a time."""
    out = torch.empty(len(triples), dtype=torch.float64)
    for start in range(0, len(triples), batch_size):
        h, r, t = triples[start : start + batch_size].unbind(1)
        if direction == "tail":
            scores = scorer.score_tails(h, r, candidates)
            rows, entities = filter_index.true_tails(h, r)
            target_entity = t
        else:
            scores = scorer.score_heads(r, t, candidates)
            rows, entities = filter_index.true_heads(r, t)
            target_entity = h
        _check_scores(scores, len(h), len(candidates), start, direction)
        if exclude_query:
            rows, entities = _with_query_entities(rows, entities, h if direction == "tail" else t, column.numel())
        cols = column[entities]
        keep = (cols >= 0) & (entities != target_entity[rows])
        out[start : start + len(h)] = realistic_ranks(
            scores, target_columns[start : start + len(h)], rows[keep], cols[keep]
        )
        bar.update(len(h))
    return out


def _with_query_entities(
    rows: torch.Tensor, entities: torch.Tensor, query: torch.Tensor, num_entities: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Filtered ``(row, entity)`` pairs plus each row's query entity, without duplicates."""
    rows = torch.cat([rows, torch.arange(len(query))])
    entities = torch.cat([entities, query])
    pairs = torch.unique(rows * num_entities + entities)
    return pairs // num_entities, pairs % num_entities


def _check_scores(scores: torch.Tensor, b: int, c: int, offset: int, direction: str) -> None:
    if not isinstance(scores, torch.Tensor) or tuple(scores.shape) != (b, c):
        shape = tuple(scores.shape) if isinstance(scores, torch.Tensor) else type(scores).__name__
        raise ValueError(f"score_{direction}s returned shape {shape}, expected ({b}, {c})")
    # A row sum is NaN if the row holds a NaN (or both infinities): a cheap
    # screen before the exact per-entry check.
    if torch.isnan(scores.sum()) and torch.isnan(scores).any():
        row = int(torch.isnan(scores).any(1).nonzero()[0])
        raise ValueError(
            f"score_{direction}s returned NaN for triple {offset + row} "
            f"({direction} prediction); cannot rank NaN scores"
        )


def _check_directions(directions: Sequence[str]) -> tuple[str, ...]:
    if isinstance(directions, str):
        directions = (directions,)
    directions = tuple(directions)
    if not directions or any(d not in DIRECTIONS for d in directions) or len(set(directions)) != len(directions):
        raise ConfigError(
            f"directions must be distinct values from {DIRECTIONS}, got {directions!r}", field="directions"
        )
    return directions


def _check_candidates(candidates: torch.Tensor | None, num_entities: int) -> torch.Tensor:
    """Return ``(c,)`` CPU long candidate ids, or raise :class:`ConfigError`."""
    if candidates is None:
        return torch.arange(num_entities)
    if not isinstance(candidates, torch.Tensor) or candidates.ndim != 1 or candidates.is_floating_point():
        raise ConfigError("candidates must be a 1-D integer tensor of entity ids", field="candidates")
    candidates = candidates.long().cpu()
    if len(candidates) == 0:
        raise ConfigError("candidates is empty", field="candidates")
    bad = (candidates < 0) | (candidates >= num_entities)
    if bad.any():
        raise ConfigError(
            f"candidate entity id {int(candidates[bad][0])} is outside [0, {num_entities})", field="candidates"
        )
    if len(torch.unique(candidates)) != len(candidates):
        raise ConfigError("candidates hold duplicate entity ids", field="candidates")
    return candidates


def _target_columns(triples: torch.Tensor, column: torch.Tensor, direction: str) -> torch.Tensor:
    """``(n,)`` candidate column of each triple's target; raise if one is missing."""
    entities = triples[:, 0 if direction == "head" else 2]
    cols = column[entities]
    missing = cols < 0
    if missing.any():
        i = int(missing.nonzero()[0])
        raise ConfigError(
            f"triple {i} {tuple(triples[i].tolist())}: its {direction} entity "
            f"{int(entities[i])} is not among the candidates ({int(missing.sum())} "
            f"triple(s) affected)",
            field="candidates",
        )
    return cols


class _NoBar:
    def update(self, n: int) -> None:
        pass

    def __enter__(self) -> _NoBar:
        return self

    def __exit__(self, *exc) -> None:
        pass


def _progress_bar(total: int, enabled: bool):
    if not enabled:
        return _NoBar()
    from tqdm.auto import tqdm

    return tqdm(total=total, unit="query", desc="ranking", leave=False)


__all__ = ["DIRECTIONS", "RankResult", "Scorer", "compute_ranks", "realistic_ranks"]
