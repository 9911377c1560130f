"""What the neighbours of a new entity say: a description-kNN vote, alone and combined with the model.

For a query ``(q, r, ?)`` whose entity ``q`` was not in the training graph,
the ``k`` training entities whose descriptions are closest to ``q``'s (cosine
of frozen description features) vote for their own ``r``-tails in the
training graph, each with its softmax weight ``w_s ∝ exp(cos(q, s) / τ)``:

    vote(c) = Σ_s w_s · [(s, r, c) is a training statement]      (and heads alike)

It is the simplest thing a user would try for a new entity that has only a
description ("do what its nearest known neighbours do"), k-nearest-neighbour
link prediction in the spirit of the neighbourhood aggregation of inductive
KG completion (e.g. Wang et al. 2019, "Logic Attention Based Neighborhood
Aggregation for Inductive Knowledge Graph Embedding", AAAI). Two uses:

* **a baseline** (``vote only``): ranks by the vote alone; queries whose entity
  was in training get no vote (every candidate ties);
* **a combination** (:class:`VoteScorer`): the model's scores standardised per
  query (``(s − mean) / std`` over the candidates, which keeps the model's own
  ranking) plus ``λ · vote``, the vote only for queries whose entity is new.
  ``λ`` is chosen on validation statements (:func:`choose_weight`), never on
  test. (The vote can only lift entities seen in training; an offset for new
  candidates was measured on FB15k-237 and validation chose 0, so it was
  dropped.)

**The spread** (``spread``): the vote can only name entities seen in training,
and about half of FB15k-237's inductive test answers are new entities. The
spread passes each candidate the votes of the ``spread_k`` training entities
whose descriptions are nearest to its own (softmax weights over cosines, the
candidate itself left out):

    spread(c) = Σ_s K(c, s) · base(s),   base = vote for a new query entity;
                                          its own r-answers in training for a seen one

("candidates described like the answers the query's neighbours have"), a second
kNN step in the same space, as label propagation over a kNN graph (Zhou et al.
2004, "Learning with Local and Global Consistency", NIPS). The combination is
``z + λ · vote + μ · spread``, with ``(λ, μ)`` chosen together on validation.

The vote reads only the statements it is given (the caller passes the public
ones under privacy) and the public descriptions.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence

import torch

from textkg.evaluation.scoring import Part, combine, standardise, weighted_sum
from textkg.training.unseen_structure import nearest

#: λ values tried on validation; 0 is the model alone.
DEFAULT_WEIGHTS = (0.0, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0)
#: μ values (the spread) tried on validation with every λ; 0 is no spread.
DEFAULT_SPREAD_WEIGHTS = (0.0, 0.5, 1.0, 2.0, 4.0, 8.0)


class NeighbourVote:
    """Votes of each new entity's ``k`` nearest training entities (by description) over candidates.

    Args:
        features: ``(n, D)`` description features of every entity.
        graph: ``(m, 3)`` statements the vote may read (training, or its public part).
        seen: ``(n_seen,)`` ids of the training entities (the only voters).
        num_relations: ``R``.
        k: Neighbours per query.
        temperature: ``τ`` of the softmax over cosines.
        spread_k: Training entities whose votes each candidate receives in :meth:`spread`.
    """

    def __init__(
        self,
        features: torch.Tensor,
        graph: torch.Tensor,
        seen: torch.Tensor,
        *,
        num_relations: int,
        k: int = 32,
        temperature: float = 0.05,
        spread_k: int = 16,
    ) -> None:
        if k < 1 or spread_k < 1 or not temperature > 0:
            raise ValueError(f"need k >= 1, spread_k >= 1 and temperature > 0, got {k}, {spread_k}, {temperature}")
        self.features = torch.nn.functional.normalize(features.float(), dim=1)
        n = self.features.shape[0]
        self.num_entities, self.num_relations = n, num_relations
        self.seen = torch.as_tensor(seen, dtype=torch.long).sort().values
        self.is_seen = torch.zeros(n, dtype=torch.bool)
        self.is_seen[self.seen] = True
        self.k = min(int(k), max(len(self.seen), 1))
        self.spread_k = min(int(spread_k), max(len(self.seen) - 1, 1))
        self._kernel: torch.Tensor | None = None
        self.temperature = float(temperature)
        self._voters = self.features[self.seen]
        graph = torch.as_tensor(graph, dtype=torch.long).reshape(-1, 3)
        h, r, t = graph[:, 0], graph[:, 1], graph[:, 2]
        self._adj = {"tail": adjacency(h * num_relations + r, t, n * num_relations, n)}
        self._adj["head"] = adjacency(t * num_relations + r, h, n * num_relations, n)

    def neighbours(self, queries: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(ids (b, k), weights (b, k))``: each query's nearest training entities (itself excluded)."""
        return self._nearest(self.features[queries], exclude=queries)

    def _nearest(
        self, x: torch.Tensor, exclude: torch.Tensor | None = None, k: int | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The ``k`` (default ``self.k``) nearest voters of unit rows ``x`` ``(b, D)``, and their softmax weights
        (a seen query does not vote for itself: ``exclude``)."""
        return nearest(x, self._voters, self.seen, self.k if k is None else k, self.temperature, exclude)

    def votes(self, queries: torch.Tensor, relations: torch.Tensor, direction: str) -> torch.Tensor:
        """``(b, n)`` votes for every entity as the ``direction`` ("tail" or "head") answer."""
        return self._votes(*self.neighbours(queries), relations, direction)

    def votes_for_new(self, features: torch.Tensor, relations: torch.Tensor, direction: str) -> torch.Tensor:
        """``(b, n)`` votes for entities outside the graph (``textkg predict``), from their ``(b, D)``
        description features in the space of ``features`` (the same encoder)."""
        x = torch.nn.functional.normalize(features.float(), dim=1)
        return self._votes(*self._nearest(x), relations, direction)

    def spread(
        self, queries: torch.Tensor, relations: torch.Tensor, direction: str, votes: torch.Tensor | None = None
    ) -> torch.Tensor:
        """``(b, n)``: each entity's share of the votes its ``spread_k`` nearest training entities get
        (the vote for a new query entity; a seen one's own ``r``-answers in training). ``votes``:
        :meth:`votes` of the same queries, if the caller has them already."""
        gate = self.gate(queries)[:, None]
        own = self._votes(queries[:, None], torch.ones(len(queries), 1), relations, direction)
        if votes is None:
            votes = self.votes(queries, relations, direction)
        return self._spread(votes * gate + own * (1.0 - gate))

    def spread_for_new(self, features: torch.Tensor, relations: torch.Tensor, direction: str) -> torch.Tensor:
        """:meth:`spread` for entities outside the graph, from their ``(b, D)`` description features."""
        return self._spread(self.votes_for_new(features, relations, direction))

    def _spread(self, base: torch.Tensor) -> torch.Tensor:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            return torch.sparse.mm(self.kernel(), base.T).T

    def kernel(self, chunk: int = 2048) -> torch.Tensor:
        """Sparse ``(n, n)``: row ``c`` holds the softmax weights (``τ``) of ``c``'s ``spread_k``
        nearest training entities by description, ``c`` itself left out. Built once, in chunks of rows."""
        if self._kernel is None:
            n, ids, weights = self.num_entities, [], []
            for lo in range(0, n, chunk):
                rows = torch.arange(lo, min(lo + chunk, n))
                ids_c, w_c = self._nearest(self.features[rows], exclude=rows, k=self.spread_k)
                ids.append(ids_c)
                weights.append(w_c)
            cols = torch.cat(ids)
            index = torch.stack([torch.arange(n).repeat_interleave(cols.shape[1]), cols.flatten()])
            self._kernel = torch.sparse_coo_tensor(
                index, torch.cat(weights).flatten().nan_to_num(0.0), (n, n), check_invariants=False
            ).coalesce()
        return self._kernel

    def _votes(self, ids: torch.Tensor, w: torch.Tensor, relations: torch.Tensor, direction: str) -> torch.Tensor:
        b, k = ids.shape
        rows = (ids * self.num_relations + relations[:, None]).flatten()
        pick = torch.sparse_coo_tensor(
            torch.stack([torch.arange(b).repeat_interleave(k), rows]),
            w.flatten(),
            (b, self.num_entities * self.num_relations),
            check_invariants=False,
        )
        with warnings.catch_warnings():  # torch's "sparse support is in beta" notice
            warnings.simplefilter("ignore", UserWarning)
            return torch.sparse.mm(pick, self._adj[direction]).to_dense()

    def gate(self, queries: torch.Tensor) -> torch.Tensor:
        """``(b,)`` 1.0 for queries whose entity is new (they get a vote), 0.0 otherwise."""
        return (~self.is_seen[queries]).float()


def adjacency(rows: torch.Tensor, cols: torch.Tensor, num_rows: int, num_cols: int) -> torch.Tensor:
    """0/1 sparse ``(num_rows, num_cols)``; a statement listed twice still counts once."""
    idx = torch.stack([rows, cols])
    a = torch.sparse_coo_tensor(idx, torch.ones(len(rows)), (num_rows, num_cols), check_invariants=False).coalesce()
    return torch.sparse_coo_tensor(a.indices(), a.values().clamp(max=1.0), a.shape, check_invariants=False).coalesce()


class VoteScorer:
    """A :class:`textkg.evaluation.ranking.Scorer`: standardised model scores + ``weight · vote``
    (the vote for new query entities only) + ``spread_weight · spread``.

    ``model=None`` ranks by the vote alone (the baseline).
    """

    #: The model's scores are standardised over the row's candidates, so evaluation
    #: must not split the candidates into chunks (:func:`textkg.evaluation.compute_ranks`).
    whole_row_scores = True

    def __init__(self, model, vote: NeighbourVote, weight: float, spread_weight: float = 0.0) -> None:
        self.model, self.vote, self.weight, self.spread_weight = model, vote, float(weight), float(spread_weight)

    def _combine(self, model_scores: Callable[[], torch.Tensor], queries, relations, candidates, direction):
        gate = self.vote.gate(queries)[:, None]
        if self.model is None:
            return self.vote.votes(queries, relations, direction)[:, candidates] * gate
        if not (self.weight or self.spread_weight):
            return standardise(model_scores())
        votes = self.vote.votes(queries, relations, direction)  # on the CPU; the model's scores may be elsewhere

        def spread() -> torch.Tensor:
            return self.vote.spread(queries, relations, direction, votes=votes)[:, candidates]

        # the gate is 0/1, so weight x (vote x gate) is exactly what (weight x vote) x gate was
        return combine(model_scores(), [(self.weight, votes[:, candidates] * gate), (self.spread_weight, spread)])

    def score_tails(self, heads: torch.Tensor, relations: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        return self._combine(
            lambda: self.model.score_tails(heads, relations, candidates), heads, relations, candidates, "tail"
        )

    def score_heads(self, relations: torch.Tensor, tails: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        return self._combine(
            lambda: self.model.score_heads(relations, tails, candidates), tails, relations, candidates, "head"
        )


def choose_weight(valid_mrr: Mapping[float, float]) -> float:
    """The weight with the best validation MRR; ties go to the smaller weight, so the model alone wins a tie."""
    return float(max(valid_mrr, key=lambda w: (valid_mrr[w], -w)))


def choose_weights(valid_mrr: Mapping[tuple[float, float], float]) -> tuple[float, float]:
    """The ``(vote weight, spread weight)`` with the best validation MRR; ties go to the smaller
    spread weight, then the smaller vote weight (the model alone wins a tie)."""
    best = max(valid_mrr, key=lambda ws: (valid_mrr[ws], -ws[1], -ws[0]))
    return float(best[0]), float(best[1])


def weights_key(weight: float, spread_weight: float = 0.0) -> str:
    """The key of a combination in :func:`rank_weights` and ``metrics.json``: ``"λ"``, or ``"λ,μ"`` with a spread."""
    return f"{weight:g}" if not spread_weight else f"{weight:g},{spread_weight:g}"


def rank_weights(
    model,
    vote: NeighbourVote,
    triples: torch.Tensor,
    *,
    filter_index,
    candidates: torch.Tensor,
    weights: Sequence[float],
    spread_weights: Sequence[float] = (0.0,),
    batch_size: int = 256,
    exclude_query: bool = False,
) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """Filtered realistic ``(head_ranks, tail_ranks)`` of every weight pair's combination and of the vote alone.

    The same ranks :func:`textkg.evaluation.compute_ranks` gives :class:`VoteScorer` (a test checks
    it), in one pass: the model, the vote and the spread are scored once per batch and every pair
    ``(λ, μ)`` of ``weights × spread_weights`` is ranked from them. Keys: :func:`weights_key` per pair
    and ``"vote_only"``.
    """
    from textkg.evaluation.ranking import filtered_targets, realistic_ranks

    n = len(triples)
    column = torch.full((vote.num_entities,), -1, dtype=torch.long)
    column[candidates] = torch.arange(len(candidates))
    pairs = [(w, m) for m in spread_weights for w in weights]
    keys = [weights_key(w, m) for w, m in pairs] + ["vote_only"]
    out = {k: (torch.empty(n, dtype=torch.float64), torch.empty(n, dtype=torch.float64)) for k in keys}
    with torch.no_grad():
        for d, direction in enumerate(("head", "tail")):
            for start in range(0, n, batch_size):
                h, r, t = triples[start : start + batch_size].unbind(1)
                rows, cols, query, targets = filtered_targets(
                    torch.stack([h, r, t], 1), direction, filter_index, column, exclude_query=exclude_query
                )
                s = model.score_tails(h, r, candidates) if direction == "tail" else model.score_heads(r, t, candidates)
                z = standardise(s)
                votes = vote.votes(query, r, direction)
                v = (votes[:, candidates] * vote.gate(query)[:, None]).to(z.device)
                spread = (
                    vote.spread(query, r, direction, votes=votes)[:, candidates].to(z.device)
                    if any(spread_weights)
                    else None
                )
                sl = slice(start, start + len(h))
                for (w, m), key in zip(pairs, keys, strict=False):
                    parts: list[Part] = [(1.0, z), (w, v)]
                    if spread is not None:
                        parts.append((m, spread))
                    combined = weighted_sum(parts)
                    out[key][d][sl] = realistic_ranks(combined, targets, rows, cols)
                out["vote_only"][d][sl] = realistic_ranks(v, targets, rows, cols)
    return out
