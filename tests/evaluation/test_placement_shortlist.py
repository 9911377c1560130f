"""The cross-encoder over the shortlist (:mod:`textkg.evaluation.placement.shortlist`).

Oracles: ``w = 0`` is the first stage exactly; the one-pass tuner's MRRs equal ``rank_placement`` of each
weighted scorer; a cross-encoder that knows the true parents lifts every true parent inside the shortlist
to the top while ranks below the shortlist do not move; a useless one gets weight 0 on validation and
changes nothing (it cannot make the method worse than the combination without it).
"""

from __future__ import annotations

import pytest
import torch
from test_placement_grid import planted

from textkg.errors import ConfigError
from textkg.evaluation.placement.combination import evaluate_combined
from textkg.evaluation.placement.methods import placement_queries, placement_ranks, rank_placement
from textkg.evaluation.placement.shortlist import (
    PairScores,
    Shortlist,
    shortlist_scorer,
    tune_shortlist_weight,
)


def first_stage(seed: int = 1):
    """A noisy first stage: a fixed random score per (term, candidate)."""
    g = torch.Generator().manual_seed(seed)
    table = torch.randn(400, 400, generator=g, dtype=torch.float64)
    return lambda terms, candidates: table[terms][:, candidates]


def oracle_pairs(queries, kg):
    """A cross-encoder that reads ``term i`` / ``term j`` and knows every true parent (validation and test)."""
    parents = queries.true_parents

    def score(pairs):
        out = []
        for a, b in pairs:
            t, c = int(a.split()[1]), int(b.split()[1])
            out.append(5.0 if c in parents.get(t, ()) else 0.0)
        return torch.tensor(out)

    return score


def test_weight_zero_is_the_first_stage_and_calls_no_cross_encoder():
    kg, split = planted()
    queries = placement_queries(kg, split)

    def never(pairs):
        raise AssertionError("the cross-encoder was called at weight 0")

    first = first_stage()
    base = placement_ranks(first, queries, num_entities=kg.num_entities)[0]
    with_zero = placement_ranks(
        shortlist_scorer(first, Shortlist(PairScores(never, kg.entity_descriptions)), 0.0),
        queries,
        num_entities=kg.num_entities,
    )[0]
    assert torch.equal(base, with_zero)


def test_an_oracle_lifts_every_parent_in_the_shortlist_and_leaves_the_rest():
    kg, split = planted()
    queries = placement_queries(kg, split)
    first = first_stage()
    base = placement_ranks(first, queries, num_entities=kg.num_entities)[0]
    shortlist = Shortlist(PairScores(oracle_pairs(queries, kg), kg.entity_descriptions), top_k=10)
    after = placement_ranks(shortlist_scorer(first, shortlist, 16.0), queries, num_entities=kg.num_entities)[0]
    inside = base <= 10
    assert inside.any() and (~inside).any()
    assert torch.all(after[inside] == 1)  # the other true parents are filtered: each target is first
    assert torch.equal(after[~inside], base[~inside])  # below the shortlist nothing moves
    assert shortlist.pair_scores.pairs_scored <= 10 * len(queries.terms.unique())


def test_the_one_pass_tuner_equals_ranking_each_weight():
    kg, split = planted(seed=3)
    queries = placement_queries(kg, split)
    first = first_stage(seed=4)
    g = torch.Generator().manual_seed(5)
    noise = torch.randn(400, 400, generator=g)

    def noisy(pairs):  # some signal, some noise: the weights rank differently
        oracle = oracle_pairs(queries, kg)(pairs)
        return oracle + torch.tensor([float(noise[int(a.split()[1]), int(b.split()[1])]) * 4 for a, b in pairs])

    shortlist = Shortlist(PairScores(noisy, kg.entity_descriptions), top_k=8)
    weight, tried = tune_shortlist_weight(first, shortlist, queries, num_entities=kg.num_entities, batch_size=7)
    for w in shortlist.weights:
        expect = rank_placement(shortlist_scorer(first, shortlist, w), queries, num_entities=kg.num_entities).mrr
        assert tried[f"w={w:g}"] == pytest.approx(expect, abs=1e-12)
    assert tried[f"w={weight:g}"] == max(tried.values())


def test_validation_leaves_a_useless_cross_encoder_out():
    kg, split = planted()
    valid = placement_queries(kg, split, which="valid")
    test = placement_queries(kg, split)
    first = first_stage()

    def anti(pairs):  # prefers every candidate but the true parents: never helps
        return -oracle_pairs(valid, kg)(pairs)

    shortlist = Shortlist(PairScores(anti, kg.entity_descriptions), top_k=10)
    out = evaluate_combined(
        {"description": first}, valid, test, num_entities=kg.num_entities, baselines={}, shortlist=shortlist
    )
    cross = out["placement_selection"]["combined"]["cross_encoder"]
    assert cross["weight"] == 0.0
    assert out["placement_combined"] == out["placement_combined_without_cross_encoder"]


def test_validation_takes_a_helpful_cross_encoder_and_reports_the_combination_without_it():
    kg, split = planted()
    valid = placement_queries(kg, split, which="valid")
    test = placement_queries(kg, split)
    shortlist = Shortlist(PairScores(oracle_pairs(valid, kg), kg.entity_descriptions), top_k=10)
    out = evaluate_combined(
        {"description": first_stage()}, valid, test, num_entities=kg.num_entities, baselines={}, shortlist=shortlist
    )
    cross = out["placement_selection"]["combined"]["cross_encoder"]
    assert cross["weight"] > 0 and cross["top_k"] == 10 and cross["pairs_scored"] > 0
    assert out["placement_combined"]["mrr"] > out["placement_combined_without_cross_encoder"]["mrr"]
    assert out["placement_selection"]["combined"]["valid_mrr"] == max(cross["tried_valid_mrr"].values())


def test_a_cross_encoder_that_returns_the_wrong_shape_or_nan_is_an_error():
    kg, split = planted()
    queries = placement_queries(kg, split)
    for bad in (lambda pairs: torch.zeros(len(pairs) + 1), lambda pairs: torch.full((len(pairs),), float("nan"))):
        scorer = shortlist_scorer(first_stage(), Shortlist(PairScores(bad, kg.entity_descriptions)), 1.0)
        with pytest.raises(ValueError, match="cross-encoder"):
            placement_ranks(scorer, queries, num_entities=kg.num_entities)


@pytest.mark.parametrize("bad", [{"top_k": 1}, {"top_k": True}, {"weights": ()}, {"weights": (0.0, -1.0)}])
def test_bad_settings_are_config_errors(bad):
    with pytest.raises(ConfigError):
        Shortlist(PairScores(lambda pairs: torch.zeros(len(pairs)), ()), **bad)
