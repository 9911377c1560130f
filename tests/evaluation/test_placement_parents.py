"""The neighbours' votes for their parents over the neighbours' statements only (textkg.evaluation.placement.parents)
equal the dense sums they replace, bit for bit: ``parent_of_nearest_scorer``, ``neighbour_vote_scorer`` and
``word_vote_scorer`` as they were at 885c64e (copied below as the oracles) against the current ones."""

from __future__ import annotations

import pytest
import torch

from textkg.evaluation.placement.combination import VoteConfig, neighbour_vote_scorer
from textkg.evaluation.placement.context import word_vote_scorer
from textkg.evaluation.placement.methods import AGGREGATE_RESOLUTION, cosine_scorer, parent_of_nearest_scorer
from textkg.evaluation.placement.parents import ChildParents


def _dense_votes(edges, n, neighbours, weights, candidates, share=None):
    """The dense form (module docstring of textkg.evaluation.placement.parents)."""
    e = edges.long().reshape(-1, 2)
    child, parent = (torch.unique(e, dim=0) if len(e) else e).T
    w = torch.zeros(len(neighbours), n, dtype=weights.dtype).scatter_(1, neighbours, weights)
    src = w[:, child] if share is None else w[:, child] * share
    return torch.zeros_like(w).index_add_(1, parent, src)[:, candidates]


def _old_parent_of_nearest(features, parent_edges, *, k=10):
    """``parent_of_nearest_scorer`` at 885c64e."""
    cosine = cosine_scorer(features)
    n = features.shape[0]
    edges = parent_edges.long().reshape(-1, 2)
    child, parent = (torch.unique(edges, dim=0) if len(edges) else edges).T

    def score(terms, candidates):
        sim = cosine(terms, candidates)
        top, cols = sim.topk(min(k, sim.shape[1]), dim=1)
        weights = torch.zeros(len(terms), n)
        weights.scatter_(1, candidates[cols], top)
        aggregate = torch.zeros(len(terms), n).index_add_(1, parent, weights[:, child])[:, candidates]
        key = torch.round(aggregate.double() / AGGREGATE_RESOLUTION)
        return key * 4 + (sim.double() + 1)

    return score


def _old_neighbour_vote(features, parent_edges, *, vote):
    """``neighbour_vote_scorer`` at 885c64e."""
    x = torch.nn.functional.normalize(features.detach().float(), dim=1)
    n = x.shape[0]
    edges = parent_edges.long().reshape(-1, 2)
    child, parent = (torch.unique(edges, dim=0) if len(edges) else edges).T
    share = torch.ones(len(child), dtype=torch.float64)
    if vote.per_parent:
        share = 1.0 / torch.bincount(child, minlength=n).double()[child]

    def up(w):
        return torch.zeros_like(w).index_add_(1, parent, w[:, child] * share)

    def score(terms, candidates):
        sim = x[terms] @ x[candidates].T
        top, cols = sim.topk(min(vote.k, sim.shape[1]), dim=1)
        top = top.double() if vote.temperature is None else torch.softmax(top.double() / vote.temperature, 1)
        weights = torch.zeros(len(terms), n, dtype=torch.float64).scatter_(1, candidates[cols], top)
        votes = up(weights)
        if vote.ancestor_decay:
            votes = votes + vote.ancestor_decay * up(votes)
        return votes[:, candidates]

    return score


def _old_word_vote(similarity, n, parent_edges, *, k=20, temperature=0.1):
    """``word_vote_scorer`` at 885c64e, given its similarity scorer."""
    edges = parent_edges.long().reshape(-1, 2)
    child, parent = (torch.unique(edges, dim=0) if len(edges) else edges).T

    def score(terms, candidates):
        top, cols = similarity(terms, candidates).topk(min(k, len(candidates)), dim=1)
        weights = torch.zeros(len(terms), n).scatter_(1, candidates[cols], torch.softmax(top / temperature, 1))
        return torch.zeros_like(weights).index_add_(1, parent, weights[:, child])[:, candidates]

    return score


def _random_graph(seed: int):
    g = torch.Generator().manual_seed(seed)
    n = int(torch.randint(3, 120, (1,), generator=g))
    m = int(torch.randint(0, 300, (1,), generator=g))
    edges = torch.randint(0, n, (m, 2), generator=g)  # repeated statements and several parents per child
    features = torch.randn(n, 8, generator=g)
    features[: n // 4] = features[0]  # planted ties among the neighbours' similarities
    perm = torch.randperm(n, generator=g)
    terms = perm[: max(1, n // 5)]
    candidates = torch.sort(perm[len(terms) :]).values
    return g, n, edges, features, terms, candidates


@pytest.mark.parametrize("seed", range(40))
def test_votes_equal_the_dense_sums(seed):
    g, n, edges, _, _, candidates = _random_graph(seed)
    parents = ChildParents(edges, n)
    b = int(torch.randint(1, 6, (1,), generator=g))
    k = min(len(candidates), int(torch.randint(1, 15, (1,), generator=g)))
    neighbours = torch.stack([candidates[torch.randperm(len(candidates), generator=g)[:k]] for _ in range(b)])
    for dtype in (torch.float32, torch.float64):
        weights = torch.randn(b, k, generator=g, dtype=dtype)
        assert torch.equal(
            parents.votes(neighbours, weights, candidates), _dense_votes(edges, n, neighbours, weights, candidates)
        )
    share = torch.rand(len(parents.child), generator=g, dtype=torch.float64)
    weights = torch.randn(b, k, generator=g, dtype=torch.float64)
    expected = _dense_votes(edges, n, neighbours, weights, candidates, share)
    assert torch.equal(parents.votes(neighbours, weights, candidates, share), expected)
    repeated = torch.cat([candidates, candidates[:3]])  # a repeated candidate repeats its column
    assert torch.equal(
        parents.votes(neighbours, weights, repeated), _dense_votes(edges, n, neighbours, weights, repeated)
    )


@pytest.mark.parametrize("seed", range(25))
def test_scorers_equal_their_dense_forms(seed):
    _, n, edges, features, terms, candidates = _random_graph(seed)
    for k in (1, 3, 10):
        new = parent_of_nearest_scorer(features, edges, k=k)(terms, candidates)
        assert torch.equal(new, _old_parent_of_nearest(features, edges, k=k)(terms, candidates))
    for vote in (
        VoteConfig(),
        VoteConfig(temperature=0.1),
        VoteConfig(k=20, temperature=0.05),
        VoteConfig(per_parent=True),
        VoteConfig(k=5, ancestor_decay=0.5, per_parent=True),
    ):
        new = neighbour_vote_scorer(features, edges, vote=vote)(terms, candidates)
        assert torch.equal(new, _old_neighbour_vote(features, edges, vote=vote)(terms, candidates)), vote
    similarity = cosine_scorer(features)
    texts = [f"term {i}" for i in range(n)]
    new = word_vote_scorer(texts, edges, torch.arange(n), k=7, similarity=similarity)(terms, candidates)
    assert torch.equal(new, _old_word_vote(similarity, n, edges, k=7)(terms, candidates))


def test_no_statements_give_zero_votes():
    parents = ChildParents(torch.zeros(0, 2, dtype=torch.long), 5)
    out = parents.votes(torch.tensor([[1, 2]]), torch.tensor([[0.5, 0.25]]), torch.tensor([1, 2, 3]))
    assert torch.equal(out, torch.zeros(1, 3))
