"""Vectorised filtered ranks and metrics agree with a brute-force oracle on random small graphs."""

from __future__ import annotations

import math

import pytest
import torch
from eval_oracle import TableScorer, oracle_metrics, oracle_rank
from hypothesis import given, settings
from hypothesis import strategies as st

from textkg.evaluation import FilterIndex, compute_ranks, evaluate

pytestmark = pytest.mark.portability  # rerun by .ci/run under another thread count and ISA


@st.composite
def problems(draw):
    """A random graph, integer-valued (tie-heavy) score table, filter set and candidate subset."""
    num_entities = draw(st.integers(1, 9))
    num_relations = draw(st.integers(1, 3))
    n = draw(st.integers(1, 12))
    seed = draw(st.integers(0, 2**31 - 1))
    g = torch.Generator().manual_seed(seed)
    levels = draw(st.sampled_from([1, 2, 3, 10]))
    table = torch.randint(0, levels, (num_entities, num_relations, num_entities), generator=g).float()
    if draw(st.booleans()):  # infinities: -inf targets must not tie with filtered entries
        special = torch.tensor([-math.inf, math.inf])[torch.randint(0, 2, table.shape, generator=g)]
        table = torch.where(torch.rand(table.shape, generator=g) < 0.2, special, table)
    triples = torch.stack(
        [
            torch.randint(0, num_entities, (n,), generator=g),
            torch.randint(0, num_relations, (n,), generator=g),
            torch.randint(0, num_entities, (n,), generator=g),
        ],
        1,
    )
    extra = torch.stack(
        [
            torch.randint(0, num_entities, (3 * n,), generator=g),
            torch.randint(0, num_relations, (3 * n,), generator=g),
            torch.randint(0, num_entities, (3 * n,), generator=g),
        ],
        1,
    )
    filter_triples = torch.cat([triples, extra[: draw(st.integers(0, 3 * n))]])
    if draw(st.booleans()):
        candidates = None
    else:  # every target plus a random subset of the rest, in random order
        must = torch.unique(torch.cat([triples[:, 0], triples[:, 2]]))
        pick = torch.rand(num_entities, generator=g) < 0.5
        pick[must] = True
        ids = pick.nonzero().squeeze(1)
        candidates = ids[torch.randperm(len(ids), generator=g)]
    batch_size = draw(st.integers(1, 5))
    return table, triples, filter_triples, candidates, batch_size


@settings(max_examples=300, deadline=None)
@given(problems(), st.booleans())
def test_ranks_match_oracle(problem, exclude_query):
    """``exclude_query``: the query's own entity also leaves the ranking, unless it is the target."""
    table, triples, filter_triples, candidates, batch_size = problem
    num_entities, num_relations = table.shape[0], table.shape[1]
    index = FilterIndex.from_triples(filter_triples, num_entities, num_relations)
    result = compute_ranks(
        TableScorer(table),
        triples,
        filter_index=index,
        candidates=candidates,
        num_entities=num_entities,
        batch_size=batch_size,
        exclude_query=exclude_query,
    )
    known = {tuple(x) for x in filter_triples.tolist()}
    cands = list(range(num_entities)) if candidates is None else candidates.tolist()
    for direction, ranks in (("head", result.head_ranks), ("tail", result.tail_ranks)):
        expected = [
            oracle_rank(table, tuple(x), direction, cands, known, exclude_query=exclude_query) for x in triples.tolist()
        ]
        assert ranks.dtype == torch.float64
        assert ranks.tolist() == expected, direction


@settings(max_examples=150, deadline=None)
@given(problems())
def test_metrics_match_oracle(problem):
    table, triples, filter_triples, candidates, batch_size = problem
    num_entities, num_relations = table.shape[0], table.shape[1]
    index = FilterIndex.from_triples(filter_triples, num_entities, num_relations)
    mask = triples[:, 0] % 2 == 0
    metrics = evaluate(
        TableScorer(table),
        triples,
        filter_index=index,
        candidates=candidates,
        num_entities=num_entities,
        batch_size=batch_size,
        subset_masks={"even_head": mask},
    ).to_dict()
    known = {tuple(x) for x in filter_triples.tolist()}
    cands = list(range(num_entities)) if candidates is None else candidates.tolist()
    head = [oracle_rank(table, tuple(x), "head", cands, known) for x in triples.tolist()]
    tail = [oracle_rank(table, tuple(x), "tail", cands, known) for x in triples.tolist()]
    for got, ranks in ((metrics, head + tail), (metrics["head"], head), (metrics["tail"], tail)):
        for key, value in oracle_metrics(ranks).items():
            assert got[key] == pytest.approx(value, rel=1e-12), key
    assert metrics["num_triples"] == metrics["head"]["num_triples"] == len(triples)
    sub = metrics["subsets"]["even_head"]
    assert sub["num_triples"] == int(mask.sum())
    if mask.any():
        keep = mask.tolist()
        sub_ranks = [r for r, k in zip(head, keep, strict=True) if k] + [
            r for r, k in zip(tail, keep, strict=True) if k
        ]
        assert sub["mrr"] == pytest.approx(oracle_metrics(sub_ranks)["mrr"], rel=1e-12)
    else:
        assert math.isnan(sub["mrr"])


@settings(max_examples=100, deadline=None)
@given(problems(), st.integers(1, 7))
def test_batch_size_does_not_change_ranks(problem, other_batch_size):
    table, triples, filter_triples, candidates, batch_size = problem
    index = FilterIndex.from_triples(filter_triples, table.shape[0], table.shape[1])
    kwargs = dict(filter_index=index, candidates=candidates, num_entities=table.shape[0])
    a = compute_ranks(TableScorer(table), triples, batch_size=batch_size, **kwargs)
    b = compute_ranks(TableScorer(table), triples, batch_size=other_batch_size, **kwargs)
    assert torch.equal(a.all_ranks(), b.all_ranks())


def test_exclude_query_lifts_a_self_scoring_query():
    """Every entity scores itself highest: the true tail ranks 2nd, or 1st with the query excluded."""
    table = torch.zeros(4, 1, 4)
    table[:, 0, :] = torch.eye(4) * 10
    table[0, 0, 2] = 5.0
    triples = torch.tensor([[0, 0, 2], [3, 0, 3]])  # the second is a true self-loop
    index = FilterIndex.from_triples(triples, 4, 1)
    plain = compute_ranks(TableScorer(table), triples, filter_index=index, num_entities=4)
    excluded = compute_ranks(TableScorer(table), triples, filter_index=index, num_entities=4, exclude_query=True)
    assert plain.tail_ranks.tolist() == [2.0, 1.0]
    assert excluded.tail_ranks.tolist() == [1.0, 1.0]
