"""What training entities with the same known links say: a link-profile vote for k-shot entities.

A new entity with ``k`` known links (:mod:`textkg.evaluation.k_shot`, ``textkg predict
--known-links``) has a *link profile*: the set of ``(relation, other entity, role)`` items of its
links. Training entities whose own training statements share those items are like it (two films
with the same director and the same genre; two phenotypes annotated to the same diseases), and
what they do is a guess for the rest of its statements. The vote is item-based collaborative
filtering (Sarwar et al. 2001, "Item-based collaborative filtering recommendation algorithms",
WWW) on the graph's link profiles, with inverse-document-frequency item weights (Salton & Buckley
1988: a link that thousands of entities share, such as ``gender = male``, says little):

    sim(e, s) = cos(p_e, p_s),   p_x[item] = idf(item) · [x has item],   idf(item) = log(N_seen / df(item))
    w_s      ∝ sim(e, s) over the ``k`` most similar training entities s (normalised to sum 1)
    vote(c)  = Σ_s w_s · [(s, r, c) is a training statement]              (and heads alike)

and it is combined with the model as the description vote is
(:class:`textkg.evaluation.neighbour_vote.VoteScorer`): the model's scores standardised per query,
plus ``λ · vote`` for queries whose entity has known links; ``λ`` is chosen on validation
(``λ = 0``: the model alone wins a tie).

The vote reads only the statements it is given: the caller passes the public training statements
under privacy (none under ``--privacy full``, where there is no vote), and the known links, which
are the user's own input at inference.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import torch

from textkg.data.known_links import NEW_IS_HEAD
from textkg.evaluation.neighbour_vote import adjacency
from textkg.evaluation.scoring import combine, standardise, weighted_sum

#: λ values tried on validation; 0 is the model (with the known links' chosen method) alone
DEFAULT_LINK_VOTE_WEIGHTS = (0.0, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0)
#: training entities voting for each new entity
DEFAULT_VOTERS = 64


class LinkVote:
    """Votes of the training entities whose link profiles are nearest a new entity's known links.

    Args:
        graph: ``(m, 3)`` statements the vote may read (training, or its public part).
        seen: ``(n_seen,)`` ids of the training entities (the only voters).
        num_entities: ``N``.
        num_relations: ``R``.
        k: Voters per new entity.
    """

    def __init__(
        self, graph: torch.Tensor, seen: torch.Tensor, *, num_entities: int, num_relations: int, k: int = DEFAULT_VOTERS
    ) -> None:
        if k < 1:
            raise ValueError(f"need k >= 1, got {k}")
        n, num_r = int(num_entities), int(num_relations)
        self.num_entities, self.num_relations, self.k = n, num_r, int(k)
        seen = torch.as_tensor(seen, dtype=torch.long).reshape(-1)
        self.is_seen = torch.zeros(n, dtype=torch.bool)
        self.is_seen[seen] = True
        graph = torch.as_tensor(graph, dtype=torch.long).reshape(-1, 3)
        graph = graph[self.is_seen[graph[:, 0]] & self.is_seen[graph[:, 2]]]
        h, r, t = graph.unbind(1)
        self.num_statements = len(graph)
        # every statement gives its head the item (r, t, head) and its tail the item (r, h, tail)
        owner = torch.cat([h, t])
        items = torch.cat([self._item(r, t, torch.zeros_like(r)), self._item(r, h, torch.ones_like(r))])
        self._items, column = torch.unique(items, return_inverse=True)
        pairs = torch.unique(owner * max(len(self._items), 1) + column)  # an item counts once per entity
        owner, column = pairs // max(len(self._items), 1), pairs % max(len(self._items), 1)
        df = torch.bincount(column, minlength=len(self._items)).double()
        self._idf = torch.log(max(int(self.is_seen.sum()), 1) / df.clamp_min(1.0)).float()
        values = self._idf[column]
        norm = torch.zeros(n).index_add_(0, owner, values**2).sqrt()
        # rows scaled to unit length: a dot product with a unit query profile is the cosine
        self._profiles_t = torch.sparse_coo_tensor(
            torch.stack([column, owner]),
            values / norm[owner].clamp_min(1e-12),
            (len(self._items), n),
            check_invariants=False,
        ).coalesce()
        self._adj = {
            "tail": adjacency(h * num_r + r, t, n * num_r, n),
            "head": adjacency(t * num_r + r, h, n * num_r, n),
        }

    def _item(self, relation: torch.Tensor, other: torch.Tensor, role: torch.Tensor) -> torch.Tensor:
        return (relation * self.num_entities + other) * 2 + role

    def voters(self, links: torch.Tensor, *, chunk: int = 512) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(owners (o,), ids (o, k), weights (o, k))``: for each entity of ``links`` ``(m, 4)``
        ``(entity, relation, other, role)``, its ``k`` most similar training entities and their
        weights (cosine of the idf-weighted link profiles, normalised to sum 1; all zero when no
        training entity shares an item)."""
        links = torch.as_tensor(links, dtype=torch.long).reshape(-1, 4).cpu()
        owners, row = torch.unique(links[:, 0], return_inverse=True)
        k = min(self.k, self.num_entities)
        if not len(owners):
            return owners, torch.zeros(0, k, dtype=torch.long), torch.zeros(0, k)
        role = (links[:, 3] != NEW_IS_HEAD).long()
        items = self._item(links[:, 1], links[:, 2], role)
        pos = torch.searchsorted(self._items, items).clamp(max=max(len(self._items) - 1, 0))
        known = (self._items[pos] == items) if len(self._items) else torch.zeros(len(items), dtype=torch.bool)
        pairs = torch.unique(row[known] * max(len(self._items), 1) + pos[known])
        q_row, q_col = pairs // max(len(self._items), 1), pairs % max(len(self._items), 1)
        q_val = self._idf[q_col]
        q_norm = torch.zeros(len(owners)).index_add_(0, q_row, q_val**2).sqrt()
        ids, weights = [], []
        for lo in range(0, len(owners), chunk):
            hi = min(lo + chunk, len(owners))
            keep = (q_row >= lo) & (q_row < hi)
            query = torch.sparse_coo_tensor(
                torch.stack([q_row[keep] - lo, q_col[keep]]),
                q_val[keep] / q_norm[q_row[keep]].clamp_min(1e-12),
                (hi - lo, len(self._items)),
                check_invariants=False,
            )
            with warnings.catch_warnings():  # torch's "sparse support is in beta" notice
                warnings.simplefilter("ignore", UserWarning)
                sim = torch.sparse.mm(query, self._profiles_t).to_dense()
            top = sim.topk(k, dim=1)
            w = top.values.clamp_min(0.0)
            ids.append(top.indices)
            weights.append(w / w.sum(1, keepdim=True).clamp_min(1e-12))
        return owners, torch.cat(ids), torch.cat(weights)

    def votes(self, ids: torch.Tensor, weights: torch.Tensor, relations: torch.Tensor, direction: str) -> torch.Tensor:
        """``(b, N)`` votes for every entity as the ``direction`` ("tail" or "head") answer of
        ``relations`` ``(b,)``, from each query's voters ``ids``/``weights`` ``(b, k)``."""
        b, k = ids.shape
        rows = (ids * self.num_relations + relations[:, None].cpu()).flatten()
        pick = torch.sparse_coo_tensor(
            torch.stack([torch.arange(b).repeat_interleave(k), rows]),
            weights.flatten().float(),
            (b, self.num_entities * self.num_relations),
            check_invariants=False,
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            return torch.sparse.mm(pick, self._adj[direction]).to_dense()


class LinkVoteScorer:
    """A :class:`textkg.evaluation.ranking.Scorer`: ``base``'s scores standardised per query plus
    ``weight · vote`` for query entities with known links (``links`` ``(m, 4)``, as
    :func:`textkg.models.known_links.with_known_links` takes them)."""

    #: standardised over the row's candidates: evaluation must not split them into chunks
    whole_row_scores = True

    def __init__(self, base, vote: LinkVote, links: torch.Tensor, weight: float) -> None:
        self.base, self.vote, self.weight = base, vote, float(weight)
        owners, self._ids, self._w = vote.voters(links)
        self._row = torch.full((vote.num_entities,), -1, dtype=torch.long)
        self._row[owners] = torch.arange(len(owners))

    def query_votes(self, queries: torch.Tensor, relations: torch.Tensor, direction: str) -> torch.Tensor:
        """``(b, N)`` the vote for each query (zero for an entity without known links)."""
        row = self._row[queries.cpu()]
        has = (row >= 0).float()[:, None]
        ids = self._ids[row.clamp_min(0)] if len(self._ids) else torch.zeros(len(row), 1, dtype=torch.long)
        w = self._w[row.clamp_min(0)] * has if len(self._w) else torch.zeros(len(row), 1)
        return self.vote.votes(ids, w, relations, direction)

    def _combine(self, scores: torch.Tensor, queries, relations, candidates, direction) -> torch.Tensor:
        def votes() -> torch.Tensor:
            return self.query_votes(queries, relations, direction)[:, candidates.cpu()]

        return combine(scores, [(self.weight, votes)])

    def score_tails(self, heads: torch.Tensor, relations: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        return self._combine(self.base.score_tails(heads, relations, candidates), heads, relations, candidates, "tail")

    def score_heads(self, relations: torch.Tensor, tails: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        return self._combine(self.base.score_heads(relations, tails, candidates), tails, relations, candidates, "head")


def rank_link_vote(
    scorer: LinkVoteScorer,
    queries: torch.Tensor,
    head: torch.Tensor,
    tail: torch.Tensor,
    *,
    filter_index,
    candidates: torch.Tensor,
    weights: Sequence[float] = DEFAULT_LINK_VOTE_WEIGHTS,
    batch_size: int = 256,
    exclude_query: bool = False,
) -> dict[str, torch.Tensor]:
    """``{f"{λ:g}": ranks, "vote_only": ranks}``: filtered realistic ranks of the counted queries
    (``head``/``tail`` masks of ``queries``, heads first as :func:`textkg.evaluation.k_shot.k_shot_ranks`
    orders them) for each weight, in one pass (the base scores and the vote computed once per batch).
    The same ranks :func:`textkg.evaluation.compute_ranks` gives ``scorer`` at each weight (a test checks it)."""
    from textkg.evaluation.ranking import filtered_targets, realistic_ranks

    column = torch.full((scorer.vote.num_entities,), -1, dtype=torch.long)
    column[candidates.cpu()] = torch.arange(len(candidates))
    keys = [f"{w:g}" for w in weights]
    parts: dict[str, list[torch.Tensor]] = {key: [] for key in [*keys, "vote_only"]}
    with torch.no_grad():
        for direction, mask in (("head", head), ("tail", tail)):
            chosen = queries[mask]
            for start in range(0, len(chosen), batch_size):
                h, r, t = chosen[start : start + batch_size].unbind(1)
                rows, cols, query, targets = filtered_targets(
                    torch.stack([h, r, t], 1), direction, filter_index, column, exclude_query=exclude_query
                )
                base = scorer.base
                s = base.score_tails(h, r, candidates) if direction == "tail" else base.score_heads(r, t, candidates)
                z = standardise(s)
                v = scorer.query_votes(query, r, direction)[:, candidates.cpu()].to(z.device)
                for w, key in zip(weights, keys, strict=True):
                    parts[key].append(realistic_ranks(weighted_sum([(1.0, z), (w, v)]), targets, rows, cols))
                parts["vote_only"].append(realistic_ranks(v, targets, rows, cols))
    return {key: torch.cat(value) if value else torch.empty(0, dtype=torch.float64) for key, value in parts.items()}
