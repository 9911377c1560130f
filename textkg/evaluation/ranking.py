"""Filtered rank of each test triple's true head and tail, with realistic ties.

A batch of queries is scored against the candidates in chunks of at most
``candidate_chunk`` entities (by default as many as keep a batch's float32
scores under :data:`EVAL_SCORE_BYTES`: every candidate at once unless the graph
is large); the ranks come from counting, per row and chunk, the candidates
that score above and equal to the target, minus those among them that the
filter removes, summed over the chunks. No loop runs per triple.

Chunking does not change a rank. Each chunk's call also scores the batch's
targets that lie outside the chunk (at most ``b`` extra columns), and a row's
candidates are compared with its target's score *from the same call*: a
score that the scorer computes with a different kernel for a different number
of columns (``torch.cdist`` switches algorithm above 25 rows or columns; a
matrix product may take another path for one column) is never compared with a
score of another call. The target's own column is removed from the counts by
position, like a filtered one. For a scorer whose score of a (query,
candidate) pair does not depend on the other candidates in the call, the
chunked ranks are therefore exactly the unchunked ones, realistic ties
included; for matrix-product scorers, candidates with identical vectors (the
shared unseen row of a structural model) still tie exactly with the target.
A scorer whose scores depend on the whole candidate set (standardised per row,
as :class:`textkg.evaluation.neighbour_vote.VoteScorer`) says so with a true
``whole_row_scores`` attribute and is never chunked.

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

import functools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

import torch

from textkg.errors import ConfigError
from textkg.evaluation.filtering import FilterIndex, check_triples

#: The two prediction directions: ``"head"`` ranks ``h`` in ``(?, r, t)``,
#: ``"tail"`` ranks ``t`` in ``(h, r, ?)``.
DIRECTIONS = ("head", "tail")
#: Memory bound of one evaluation step's score matrix (``batch × candidate chunk`` float32 scores):
#: :func:`default_candidate_chunk` derives the chunk from it.
EVAL_SCORE_BYTES = 256 * 2**20


def default_candidate_chunk(batch_size: int, *, budget_bytes: int = EVAL_SCORE_BYTES) -> int:
    """Candidates per chunk so that ``batch_size × chunk`` float32 scores fit in ``budget_bytes`` (at least 1).

    With the default 256 MiB and 512 queries per batch that is 131,072 candidates: FB15k-237
    (14,541 entities) is ranked in one chunk, a graph of millions of entities in many.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ConfigError(f"batch_size must be a positive integer, got {batch_size!r}", field="batch_size")
    return max(1, int(budget_bytes) // (4 * batch_size))


class Scorer(Protocol):
    """What evaluation needs from a model: scores of many candidates per query.

    Higher scores mean more plausible triples. Both methods must return a
    fresh or read-only-safe tensor; evaluation never writes into it.

    Evaluation may score a query's candidates over several calls (candidate
    chunks). A scorer whose score of one candidate depends on the others in the
    call (e.g. standardised per row) sets a class attribute
    ``whole_row_scores = True`` and is always given every candidate at once.
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


@dataclass(frozen=True)
class QueryShard:
    """This process's share of an evaluation split across processes (:mod:`textkg.distributed`).

    Process ``rank`` ranks triples ``rank, rank + world, ...``; ``gather`` collects
    every process's ``(n_r,)`` ranks, in rank order, on every process. A query's rank
    depends only on its own scores and filter, so the gathered ranks are the ranks
    one process would compute.

    Args:
        rank: this process's rank.
        world: the number of processes.
        gather: ``(n_rank,) tensor -> [tensor of rank 0, ..., tensor of rank world - 1]``.
    """

    rank: int
    world: int
    gather: Callable[[torch.Tensor], list[torch.Tensor]]


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
    candidate_chunk: int | None = None,
    directions: Sequence[str] = DIRECTIONS,
    exclude_query: bool = False,
    progress: bool = False,
    shard: QueryShard | None = None,
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
        batch_size: Queries scored at once; memory is about ``batch_size *
            min(c, candidate_chunk + batch_size)`` floats.
        candidate_chunk: Candidates scored per scorer call; ``None`` derives it
            from :data:`EVAL_SCORE_BYTES` (:func:`default_candidate_chunk`).
            The ranks do not depend on it (module docstring). Ignored (one
            chunk) for a scorer with a true ``whole_row_scores`` attribute.
        directions: Which of ``"head"``, ``"tail"`` to rank.
        exclude_query: Also remove the query's own entity from its ranking
            (``h`` when predicting tails of ``(h, r, ?)``, ``t`` for heads),
            unless it is the target. Off by default, as in the standard
            filtered protocol (Bordes et al. 2013) and BLP. For irreflexive
            relations such as ``is_a`` the query entity is never an answer, and
            ``textkg predict`` never proposes it (a new entity is not a candidate).
        progress: Show a tqdm progress bar.
        shard: rank only this process's share of ``triples`` and gather the others'
            (:class:`QueryShard`); the result is the same on every process.

    Returns:
        A :class:`RankResult` with ``(n,)`` float64 ranks per computed direction.

    Raises:
        ConfigError: Bad ``candidates``/``directions``/``batch_size``/``candidate_chunk``, a
            ``num_entities`` that disagrees with ``filter_index``, or a target
            entity that is not among the candidates (the message names the triple).
        DataError: ``triples`` is not ``(n, 3)`` integer ids in range.
        ValueError: The scorer returned NaN or a wrongly shaped score matrix.
    """
    directions = _check_directions(directions)
    if shard is not None and shard.world > 1:
        return _sharded_ranks(
            scorer,
            triples,
            shard,
            filter_index=filter_index,
            candidates=candidates,
            num_entities=num_entities,
            batch_size=batch_size,
            candidate_chunk=candidate_chunk,
            directions=directions,
            exclude_query=exclude_query,
            progress=progress,
        )
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ConfigError(f"batch_size must be a positive integer, got {batch_size!r}", field="batch_size")
    if candidate_chunk is None:
        candidate_chunk = default_candidate_chunk(batch_size)
    elif isinstance(candidate_chunk, bool) or not isinstance(candidate_chunk, int) or candidate_chunk < 1:
        raise ConfigError(
            f"candidate_chunk must be a positive integer or None, got {candidate_chunk!r}", field="candidate_chunk"
        )
    if getattr(scorer, "whole_row_scores", False):
        candidate_chunk = num_entities  # its scores of a row depend on every candidate: one chunk
    if num_entities != filter_index.num_entities:
        raise ConfigError(
            f"num_entities={num_entities} but the filter index was built for {filter_index.num_entities} entities",
            field="num_entities",
        )
    triples = check_triples(triples, num_entities, filter_index.num_relations)
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
                candidate_chunk,
                bar,
                exclude_query=exclude_query,
            )
    return RankResult(head_ranks=ranks.get("head"), tail_ranks=ranks.get("tail"), num_candidates=len(candidates))


def _sharded_ranks(scorer: Scorer, triples: torch.Tensor, shard: QueryShard, **kwargs) -> RankResult:
    """:func:`compute_ranks` of ``shard``'s share of ``triples``, gathered into the whole split's ranks.

    Every check runs on the whole split first, so that a bad triple stops every
    process (one process raising inside a collective would leave the others waiting).
    """
    filter_index = kwargs["filter_index"]
    triples = check_triples(triples, kwargs["num_entities"], filter_index.num_relations)
    candidates = _check_candidates(kwargs["candidates"], kwargs["num_entities"])
    column = torch.full((kwargs["num_entities"],), -1, dtype=torch.long)
    column[candidates] = torch.arange(len(candidates))
    for direction in kwargs["directions"]:
        _target_columns(triples, column, direction)  # raises for a target outside the candidates
    mine = compute_ranks(scorer, triples[shard.rank :: shard.world], **kwargs)
    gathered: dict[str, torch.Tensor] = {}
    for direction, part in (("head", mine.head_ranks), ("tail", mine.tail_ranks)):
        if part is None:
            continue
        full = torch.empty(len(triples), dtype=part.dtype)
        for r, piece in enumerate(shard.gather(part)):
            full[r :: shard.world] = piece
        gathered[direction] = full
    return RankResult(head_ranks=gathered.get("head"), tail_ranks=gathered.get("tail"), num_candidates=len(candidates))


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
    # counted on the scores' device, summed on the CPU (float64, which MPS lacks)
    return 1 + greater.cpu() + equal.cpu().double() / 2


def filtered_positions(
    h: torch.Tensor,
    r: torch.Tensor,
    t: torch.Tensor,
    direction: str,
    filter_index: FilterIndex,
    column: torch.Tensor,
    *,
    exclude_query: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(rows, cols, query_entities)`` of one batch of ``direction`` queries: the (row, candidate column)
    pairs the filter removes (other true answers among the candidates, never the target; with
    ``exclude_query`` also the query's own entity), for :func:`realistic_ranks`.

    ``column (num_entities,)`` maps an entity to its candidate column (``-1``: not a candidate).
    """
    if direction == "tail":
        rows, entities = filter_index.true_tails(h, r)
        target_entity, query_entity = t, h
    else:
        rows, entities = filter_index.true_heads(r, t)
        target_entity, query_entity = h, t
    if exclude_query:
        rows, entities = _with_query_entities(rows, entities, query_entity, column.numel())
    cols = column[entities]
    keep = (cols >= 0) & (entities != target_entity[rows])
    return rows[keep], cols[keep], query_entity


def filtered_targets(
    batch: torch.Tensor, direction: str, filter_index: FilterIndex, column: torch.Tensor, *, exclude_query: bool
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(rows, cols, query_entities, targets)`` of a ``(b, 3)`` batch: :func:`filtered_positions` plus each
    row's target column.

    Raises:
        ValueError: A target entity is not among the candidates.
    """
    h, r, t = batch.unbind(1)
    rows, cols, query = filtered_positions(h, r, t, direction, filter_index, column, exclude_query=exclude_query)
    targets = column[t if direction == "tail" else h]
    if bool((targets < 0).any()):
        raise ValueError("a target entity is not among the candidates")
    return rows, cols, query, targets


def _rank_direction(
    scorer: Scorer,
    triples: torch.Tensor,
    direction: str,
    candidates: torch.Tensor,
    column: torch.Tensor,
    target_columns: torch.Tensor,
    filter_index: FilterIndex,
    batch_size: int,
    candidate_chunk: int,
    bar,
    *,
    exclude_query: bool = False,
) -> torch.Tensor:
    """``(n,)`` ranks of one direction, ``batch_size`` queries by ``candidate_chunk`` candidates at a time.

    A query's scores depend only on its entity and relation (``(h, r, ?)`` or ``(?, r, t)``: the
    :class:`Scorer` protocol), and a split repeats them (a disease with many phenotypes, a term with
    many parents: ``hpo``'s 49,576 test statements ask far fewer distinct queries). So the triples
    are taken in the order of their query, each batch's distinct queries are scored once, and every
    triple reads its query's row: the same scores and ranks as scoring each triple's query, for a
    fraction of the scoring (the expensive part)."""
    out = torch.empty(len(triples), dtype=torch.float64)
    query_entity = triples[:, 0] if direction == "tail" else triples[:, 2]
    key = query_entity * filter_index.num_relations + triples[:, 1]
    order = torch.argsort(key, stable=True)  # a query's triples side by side
    for start in range(0, len(triples), batch_size):
        ids = order[start : start + batch_size]
        h, r, t = triples[ids].unbind(1)
        rows, cols, _ = filtered_positions(h, r, t, direction, filter_index, column, exclude_query=exclude_query)
        targets = target_columns[ids]
        _, inverse, counts = torch.unique_consecutive(key[ids], return_inverse=True, return_counts=True)
        first = torch.cumsum(counts, 0) - counts  # each distinct query's first triple in the batch
        distinct = functools.partial(_batch_scores, scorer, direction, h[first], r[first], t[first], ids[first])

        score = functools.partial(_each_triples_row, distinct, inverse)
        if candidate_chunk >= len(candidates):
            out[ids] = realistic_ranks(score(candidates), targets, rows, cols)
        else:
            out[ids] = _chunked_ranks(score, candidates, targets, rows, cols, candidate_chunk)
        bar.update(len(h))
    return out


def _each_triples_row(distinct: Callable[[torch.Tensor], torch.Tensor], inverse: torch.Tensor, candidates):
    """``(b, len(candidates))``: the scores of the batch's distinct queries, one row per triple (``inverse``)."""
    rows = distinct(candidates)
    return rows if rows.shape[0] == inverse.numel() else rows[inverse]


def _batch_scores(
    scorer: Scorer,
    direction: str,
    h: torch.Tensor,
    r: torch.Tensor,
    t: torch.Tensor,
    ids: torch.Tensor,
    candidates: torch.Tensor,
) -> torch.Tensor:
    """``(b, len(candidates))`` checked scores of one batch's queries (of triples ``ids``, for messages)."""
    scores = scorer.score_tails(h, r, candidates) if direction == "tail" else scorer.score_heads(r, t, candidates)
    _check_scores(scores, len(h), len(candidates), ids, direction)
    return scores


def _chunked_ranks(
    score: Callable[[torch.Tensor], torch.Tensor],
    candidates: torch.Tensor,
    target_columns: torch.Tensor,
    filtered_rows: torch.Tensor,
    filtered_columns: torch.Tensor,
    chunk: int,
) -> torch.Tensor:
    """:func:`realistic_ranks` of one batch, the candidates scored ``chunk`` at a time.

    Each call scores ``candidates[lo:hi]`` followed by the batch's distinct
    targets outside ``[lo, hi)``; every row's target score is read from that
    same call (its own column when the target lies in the chunk, else its
    appended column). The counts of candidates above and equal to it, less the
    filtered ones and the target's own column, are summed over the chunks.
    """
    b = len(target_columns)
    order = torch.argsort(filtered_columns)  # each chunk's filtered pairs become one slice
    f_rows, f_cols = filtered_rows[order], filtered_columns[order]
    distinct, which = torch.unique(target_columns, return_inverse=True)
    greater = torch.zeros(b, dtype=torch.long)
    equal = torch.zeros(b, dtype=torch.long)
    for lo in range(0, len(candidates), chunk):
        hi = min(lo + chunk, len(candidates))
        a, z = (int(i) for i in torch.searchsorted(f_cols, torch.tensor([lo, hi])))
        own = ((target_columns >= lo) & (target_columns < hi)).nonzero().squeeze(1)
        removed_rows = torch.cat([f_rows[a:z], own])
        removed_cols = torch.cat([f_cols[a:z] - lo, target_columns[own] - lo])
        g, e = _chunk_counts(score, candidates, lo, hi, distinct, which, removed_rows, removed_cols)
        greater += g
        equal += e
    return (1 + greater + equal.double() / 2).double()


def _chunk_counts(
    score: Callable[[torch.Tensor], torch.Tensor],
    candidates: torch.Tensor,
    lo: int,
    hi: int,
    distinct: torch.Tensor,
    which: torch.Tensor,
    removed_rows: torch.Tensor,
    removed_cols: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(b,)`` CPU counts of chunk ``[lo, hi)``'s candidates above and equal to each row's target,
    less the ``(removed_rows, removed_cols)`` entries (chunk-local columns). A function of its own so
    that the chunk's scores are freed before the next chunk is scored."""
    b = len(which)
    inside = (distinct >= lo) & (distinct < hi)
    outside = distinct[~inside]
    position = torch.empty_like(distinct)  # column of each distinct target in this call
    position[inside] = distinct[inside] - lo
    position[~inside] = (hi - lo) + torch.arange(len(outside))
    scores = score(torch.cat([candidates[lo:hi], candidates[outside]]))
    device = scores.device
    target = scores.gather(1, position[which].to(device)[:, None])  # (b, 1), from this call
    body = scores[:, : hi - lo]  # a view: the chunk's own candidates
    greater = (body > target).sum(1, dtype=torch.int32).long()
    equal = (body == target).sum(1, dtype=torch.int32).long()
    if len(removed_rows):
        rows, cols = removed_rows.to(device), removed_cols.to(device)
        removed = body[rows, cols]
        row_target = target[rows, 0]
        greater -= torch.bincount(rows[removed > row_target], minlength=b)
        equal -= torch.bincount(rows[removed == row_target], minlength=b)
    return greater.cpu(), equal.cpu()


def topk_in_chunks(
    score: Callable[[int, int], torch.Tensor], num_candidates: int, k: int, *, chunk: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``k`` best candidates per row, scoring ``chunk`` candidates at a time.

    Args:
        score: ``score(lo, hi) -> (b, hi - lo)`` scores of candidates ``lo .. hi - 1``.
        num_candidates: ``c``.
        k: How many to keep (at most ``c`` are returned).
        chunk: Candidates per call.

    Returns:
        ``(values, indices)``, each ``(b, min(k, c))``, best first: the values of
        ``torch.topk`` over the whole row; among tied values the indices may differ.
    """
    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
        raise ConfigError(f"chunk must be a positive integer, got {chunk!r}", field="candidate_chunk")
    best_values: torch.Tensor | None = None
    best_indices: torch.Tensor | None = None
    for lo in range(0, num_candidates, chunk):
        hi = min(lo + chunk, num_candidates)
        s = score(lo, hi)
        top = s.topk(min(k, hi - lo), dim=1)
        values, indices = top.values, top.indices + lo
        if best_values is not None and best_indices is not None:
            values = torch.cat([best_values, values], 1)
            indices = torch.cat([best_indices, indices.to(best_indices.device)], 1)
            merged = values.topk(min(k, values.shape[1]), dim=1)
            values, indices = merged.values, indices.gather(1, merged.indices)
        best_values, best_indices = values, indices
    if best_values is None or best_indices is None:
        raise ConfigError("there are no candidates to rank", field="candidates")
    return best_values, best_indices


def _with_query_entities(
    rows: torch.Tensor, entities: torch.Tensor, query: torch.Tensor, num_entities: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Filtered ``(row, entity)`` pairs plus each row's query entity, without duplicates."""
    rows = torch.cat([rows, torch.arange(len(query))])
    entities = torch.cat([entities, query])
    pairs = torch.unique(rows * num_entities + entities)
    return pairs // num_entities, pairs % num_entities


def _check_scores(scores: torch.Tensor, b: int, c: int, ids: torch.Tensor, direction: str) -> None:
    if not isinstance(scores, torch.Tensor) or tuple(scores.shape) != (b, c):
        shape = tuple(scores.shape) if isinstance(scores, torch.Tensor) else type(scores).__name__
        raise ValueError(f"score_{direction}s returned shape {shape}, expected ({b}, {c})")
    # A row sum is NaN if the row holds a NaN (or both infinities): a cheap
    # screen before the exact per-entry check.
    if torch.isnan(scores.sum()) and torch.isnan(scores).any():
        row = int(torch.isnan(scores).any(1).nonzero()[0])
        raise ValueError(
            f"score_{direction}s returned NaN for triple {int(ids[row])} "
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


def _progress_bar(total: int, enabled: bool):
    from textkg.progress import bar

    # a log (no terminal) gets the pipeline's stage lines instead
    return bar(total, progress=enabled, unit="query", desc="ranking", leave=False)


__all__ = [
    "DIRECTIONS",
    "EVAL_SCORE_BYTES",
    "RankResult",
    "Scorer",
    "compute_ranks",
    "default_candidate_chunk",
    "realistic_ranks",
    "topk_in_chunks",
]
