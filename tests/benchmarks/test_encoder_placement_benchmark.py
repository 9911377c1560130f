"""``benchmarks/encoder_placement.py``'s reduced protocol: which queries it keeps and which candidates it ranks."""

from __future__ import annotations

import torch
from bench_module import load_benchmark

from textkg.evaluation.placement.methods import PlacementQueries


def _module():
    return load_benchmark("encoder_placement.py", "encoder_placement_bench")


def _queries() -> tuple[PlacementQueries, torch.Tensor]:
    """New terms 100..119 each under one training parent among 0..9; training terms 0..59, one group."""
    terms = torch.arange(100, 120)
    parents = terms % 10
    edges = torch.tensor([[c, c % 10] for c in range(10, 60)])  # (child, parent): each parent has 5 children
    queries = PlacementQueries(
        terms=terms,
        parents=parents,
        relation=0,
        groups=(torch.arange(60),),
        group_of=torch.zeros(20, dtype=torch.long),
        true_parents={t: frozenset({t % 10}) for t in range(100, 120)},
        close={t: frozenset() for t in range(100, 120)},
    )
    return queries, edges


def test_the_pool_holds_every_true_parent_and_its_children_and_the_drawn_distractors():
    bench = _module()
    queries, edges = _queries()
    reduced = bench.reduced_queries(queries, edges, num_terms=5, distractors=4, seed=0)
    assert len(torch.unique(reduced.terms)) == 5 and set(reduced.true_parents) == set(reduced.terms.tolist())
    pool = set(reduced.groups[0].tolist())
    parents = set(reduced.parents.tolist())
    siblings = {c for c, p in edges.tolist() if p in parents}
    assert parents <= pool and siblings <= pool
    assert len(pool - parents - siblings) == 4  # exactly the distractors asked for, drawn from the group
    assert pool <= set(queries.groups[0].tolist())


def test_the_draw_depends_on_the_seed_alone():
    bench = _module()
    queries, edges = _queries()
    a = bench.reduced_queries(queries, edges, num_terms=5, distractors=4, seed=3)
    b = bench.reduced_queries(queries, edges, num_terms=5, distractors=4, seed=3)
    c = bench.reduced_queries(queries, edges, num_terms=5, distractors=4, seed=4)
    assert torch.equal(a.terms, b.terms) and torch.equal(a.groups[0], b.groups[0])
    assert not (torch.equal(a.terms, c.terms) and torch.equal(a.groups[0], c.groups[0]))
