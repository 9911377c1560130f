"""``benchmarks/link_rerank_forms.py``: the relation statistics, and that its reference form is the shipped
re-ranker's ranking (the same ranks as :meth:`textkg.evaluation.link_rerank.Lists.ranks`)."""

from __future__ import annotations

import math

import torch
from bench_module import load_benchmark


def _module():
    return load_benchmark("link_rerank_forms.py", "link_rerank_forms_bench")


def test_relation_statistics_order_relations_by_their_answers():
    bench = _module()
    # relation 0: every head points at one tail ("gender"); relation 1: each head at its own tail
    train = torch.tensor([[h, 0, 9] for h in range(4)] + [[h, 1, 4 + h] for h in range(4)])
    z = bench.relation_statistics(train, 2)
    assert z.shape == (2, 2, 3)
    assert z[0, 1, 0] < z[1, 1, 0]  # tails (direction 1): one distinct answer against four
    assert z[0, 0, 1] > z[1, 0, 1]  # heads of relation 0: four statements per query entity (log 4 against 0)
    raw = torch.tensor([math.log1p(1), math.log(4 / 4), math.log1p(4)])  # relation 0, tails
    assert torch.isfinite(z).all() and raw[0] < math.log1p(4)


def test_the_reference_form_ranks_as_the_shipped_reranker():
    from textkg.evaluation.link_rerank import Lists

    bench = _module()
    g = torch.Generator().manual_seed(0)
    x = torch.randn(6, 5, 3, generator=g)
    mask = torch.ones(6, 5, dtype=torch.bool)
    mask[0, 4] = False
    lists = Lists(
        x, mask, torch.tensor([0, 1, 2, -1, 4, 3]), torch.arange(1.0, 7.0, dtype=torch.float64), torch.arange(6)
    )
    stats = torch.zeros(2, 2, 3)
    same = bench.design(
        lists, stats, torch.zeros(6, dtype=torch.long), torch.zeros(6, dtype=torch.long), (), False, None
    )
    assert torch.equal(same, x)  # the reference form is the shipped feature matrix
    w = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64)
    for weight in (0.0, 1.0, 4.0):
        assert torch.equal(bench.ranks(same, lists, w, weight), lists.ranks(w, weight))
    wide = bench.design(lists, torch.ones(2, 2, 3), torch.zeros(6, dtype=torch.long), torch.ones(6, dtype=torch.long),
                        (0, 2), True, torch.tensor([0.0, 0.5, 2.0]))  # fmt: skip
    assert wide.shape == (6, 5, 3 * 3 + 3 * 8)  # shared, x2 statistics, 8 groups
