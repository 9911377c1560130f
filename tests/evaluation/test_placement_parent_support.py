"""Parent support (:mod:`textkg.evaluation.placement.parent_support`): a candidate's best parent's score added.

Oracles: ``P`` equals a plain loop over each candidate's parents among the candidates (``ROOT`` without one);
``w = 0`` is the first stage exactly; the one-pass tuner's MRRs equal ``rank_placement`` of each weighted
scorer; a first stage that puts a true parent's own parent just above it (the "too general" error) is fixed by
the weight validation chooses, and the combination without it is reported beside; an exact first stage keeps
weight 0 (0 wins a tie), so the stage can never make validation worse.
"""

from __future__ import annotations

import pytest
import torch
from test_placement_grid import planted

from textkg.evaluation.placement.combination import evaluate_combined
from textkg.evaluation.placement.methods import STANDARDISE, placement_queries, placement_ranks, rank_placement
from textkg.evaluation.placement.parent_support import (
    ROOT,
    WEIGHTS,
    parent_support_parts,
    parent_support_scorer,
    tune_parent_support,
)
from textkg.evaluation.scoring import standardise


def noise(seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    table = torch.randn(400, 400, generator=g, dtype=torch.float64)
    return lambda terms, candidates: table[terms][:, candidates]


def edges_of(split):
    return split.train[split.train[:, 1] == 0][:, [0, 2]]


def test_the_support_is_each_candidates_best_parent_among_the_candidates():
    kg, split = planted()
    edges = edges_of(split)
    terms = torch.arange(300, 310)
    candidates = torch.arange(0, 300, 2)  # half the terms: some candidates' parents are not candidates
    a, p = parent_support_parts(noise(), edges)
    got_a, got_p = a(terms, candidates), p(terms, candidates)
    z = standardise(noise()(terms, candidates), **STANDARDISE)
    assert torch.equal(got_a, z)
    column = {int(c): i for i, c in enumerate(candidates)}
    for j, c in enumerate(candidates.tolist()):
        parents = [column[int(q)] for ch, q in edges.tolist() if ch == c and int(q) in column]
        expect = z[:, parents].max(1).values if parents else torch.full((len(terms),), ROOT, dtype=z.dtype)
        assert torch.equal(got_p[:, j], expect), c
    assert (got_p == ROOT).any() and (got_p != ROOT).any()


def test_weight_zero_is_the_first_stage():
    kg, split = planted()
    queries = placement_queries(kg, split)
    first = noise()
    base = placement_ranks(first, queries, num_entities=kg.num_entities)[0]
    zero = placement_ranks(parent_support_scorer(first, edges_of(split), 0.0), queries, num_entities=kg.num_entities)
    assert torch.equal(base, zero[0])


def test_the_one_pass_tuner_equals_ranking_each_weight():
    kg, split = planted(seed=3)
    queries = placement_queries(kg, split)
    first, edges = noise(seed=4), edges_of(split)
    weight, tried = tune_parent_support(first, edges, queries, num_entities=kg.num_entities, batch_size=7)
    for w in WEIGHTS:
        expect = rank_placement(parent_support_scorer(first, edges, w), queries, num_entities=kg.num_entities).mrr
        assert tried[f"w={w:g}"] == pytest.approx(expect, abs=1e-12)
    assert tried[f"w={weight:g}"] == max(tried.values())


def too_general(split, valid):
    """A first stage that scores each new term's true parents 2, their own parents 2.1 (one level too general:
    first), and everything else noise below 1."""
    parents_of: dict[int, set[int]] = {}
    for c, p in edges_of(split).tolist():
        parents_of.setdefault(c, set()).add(p)
    table = noise()(torch.arange(400), torch.arange(400)).clamp(-3, 3) / 4
    for t, ps in valid.true_parents.items():
        for p in ps:
            for q in parents_of.get(p, ()):
                table[t, q] = 2.1
        for p in ps:
            table[t, p] = 2.0
    return lambda terms, candidates: table[terms][:, candidates]


def test_validation_fixes_a_first_stage_that_is_one_level_too_general_and_reports_it_beside():
    kg, split = planted()
    valid = placement_queries(kg, split, which="valid")
    test = placement_queries(kg, split)
    first = too_general(split, valid)
    out = evaluate_combined(
        {"description": first}, valid, test, num_entities=kg.num_entities, baselines={}, parent_edges=edges_of(split)
    )
    support = out["placement_selection"]["combined"]["parent_support"]
    assert support["weight"] > 0 and support["root"] == ROOT
    without = out["placement_combined_without_parent_support"]
    assert without["hits@1"] < 0.8 < out["placement_combined"]["hits@1"]
    assert out["placement_selection"]["combined"]["valid_mrr"] == max(support["tried_valid_mrr"].values())


def test_an_exact_first_stage_keeps_weight_zero():
    kg, split = planted()
    valid = placement_queries(kg, split, which="valid")
    parents = valid.true_parents

    def exact(terms, candidates):
        return torch.tensor([[5.0 if int(c) in parents.get(int(t), ()) else 0.0 for c in candidates] for t in terms])

    out = evaluate_combined(
        {"description": exact}, valid, valid, num_entities=kg.num_entities, baselines={}, parent_edges=edges_of(split)
    )
    assert out["placement_selection"]["combined"]["parent_support"]["weight"] == 0.0
    assert out["placement_combined"] == out["placement_combined_without_parent_support"]


def test_no_hierarchy_no_stage():
    kg, split = planted()
    valid = placement_queries(kg, split, which="valid")
    out = evaluate_combined({"description": noise()}, valid, valid, num_entities=kg.num_entities, baselines={})
    assert "parent_support" not in out["placement_selection"]["combined"]
    assert "placement_combined_without_parent_support" not in out
