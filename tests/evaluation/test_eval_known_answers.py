"""Known answers, error cases and the shape of the metrics dictionary."""

from __future__ import annotations

import math

import pytest
import torch
from eval_oracle import TableScorer

from textkg.errors import ConfigError, DataError
from textkg.evaluation import FilterIndex, RankingMetrics, compute_ranks, evaluate, rank_metrics, realistic_ranks

E, R = 6, 2
TRIPLES = torch.tensor([[0, 0, 1], [0, 0, 2], [3, 1, 4], [5, 0, 0], [2, 1, 2]])


def truth_table(triples: torch.Tensor = TRIPLES) -> torch.Tensor:
    table = torch.zeros(E, R, E)
    table[triples[:, 0], triples[:, 1], triples[:, 2]] = 1.0
    return table


def index(triples: torch.Tensor = TRIPLES) -> FilterIndex:
    return FilterIndex.from_triples(triples, E, R)


class ConstantScorer:
    def score_tails(self, heads, relations, candidates):
        return torch.zeros(len(heads), len(candidates))

    def score_heads(self, relations, tails, candidates):
        return torch.zeros(len(tails), len(candidates))


class TailOnlyScorer(TableScorer):
    """Perfect at tail prediction, constant at head prediction."""

    def score_heads(self, relations, tails, candidates):
        return torch.zeros(len(tails), len(candidates))


def test_perfect_scorer_has_mrr_one():
    m = evaluate(TableScorer(truth_table()), TRIPLES, filter_index=index(), num_entities=E).to_dict()
    for d in (m, m["head"], m["tail"]):
        assert d["mrr"] == d["mr"] == d["hits@1"] == d["hits@3"] == d["hits@10"] == 1.0
        assert d["num_triples"] == len(TRIPLES)


def test_constant_scorer_gets_middle_rank_after_filtering():
    result = compute_ranks(ConstantScorer(), TRIPLES, filter_index=index(), num_entities=E)
    # (0,0,?) has true tails {1, 2}: ranking tail 1 filters tail 2, so 5 candidates remain.
    known = {tuple(x) for x in TRIPLES.tolist()}
    for i, (h, r, t) in enumerate(TRIPLES.tolist()):
        c_tail = E - sum((h, r, e) in known for e in range(E) if e != t)
        c_head = E - sum((e, r, t) in known for e in range(E) if e != h)
        assert result.tail_ranks[i] == (c_tail + 1) / 2
        assert result.head_ranks[i] == (c_head + 1) / 2
    assert result.tail_ranks[0] == 3.0  # (5 + 1) / 2


def test_constant_scorer_with_candidate_subset():
    triples = torch.tensor([[0, 0, 1]])
    cands = torch.tensor([4, 1, 0, 3])
    result = compute_ranks(ConstantScorer(), triples, filter_index=index(triples), candidates=cands, num_entities=E)
    assert result.num_candidates == 4
    assert result.tail_ranks.tolist() == [2.5] and result.head_ranks.tolist() == [2.5]


def test_head_and_tail_reported_separately_and_both_concatenates():
    scorer = TailOnlyScorer(truth_table())
    result = compute_ranks(scorer, TRIPLES, filter_index=index(), num_entities=E)
    m = evaluate(scorer, TRIPLES, filter_index=index(), num_entities=E)
    assert m.tail["mrr"] == 1.0
    assert m.head == rank_metrics(result.head_ranks)
    assert m.head["mrr"] < 1.0
    both = rank_metrics(torch.cat([result.head_ranks, result.tail_ranks]))
    assert m.both == {**both, "num_triples": len(TRIPLES)}
    assert m.both["mrr"] == pytest.approx((m.head["mrr"] + m.tail["mrr"]) / 2)


def test_to_dict_layout_and_subsets():
    masks = {"first_two": torch.tensor([True, True, False, False, False])}
    d = evaluate(
        TableScorer(truth_table()), TRIPLES, filter_index=index(), num_entities=E, subset_masks=masks
    ).to_dict()
    keys = {"mrr", "mr", "hits@1", "hits@3", "hits@10", "num_triples"}
    assert set(d) == keys | {"head", "tail", "subsets"}
    assert set(d["head"]) == set(d["tail"]) == keys
    assert set(d["subsets"]) == {"first_two"}
    assert d["subsets"]["first_two"]["num_triples"] == 2
    assert "subsets" not in evaluate(ConstantScorer(), TRIPLES, filter_index=index(), num_entities=E).to_dict()


def test_one_direction_only():
    result = compute_ranks(ConstantScorer(), TRIPLES, filter_index=index(), num_entities=E, directions=("tail",))
    assert result.head_ranks is None and result.tail_ranks.shape == (len(TRIPLES),)
    head, tail = result
    assert head is None and tail is result.tail_ranks
    assert torch.equal(result.all_ranks(), result.tail_ranks)


def test_target_at_minus_inf_does_not_tie_with_filtered_entries():
    table = torch.full((E, R, E), -math.inf)
    table[0, 0, 3] = 0.0  # one better, unfiltered candidate
    triples = torch.tensor([[0, 0, 1]])
    filt = torch.tensor([[0, 0, 1], [0, 0, 2], [0, 0, 4]])
    result = compute_ranks(TableScorer(table), triples, filter_index=index(filt), num_entities=E, directions=("tail",))
    # remaining: 0, 1 (target), 3, 5 -> greater = {3}, equal others = {0, 5}
    assert result.tail_ranks.tolist() == [1 + 1 + 2 / 2]


def test_scores_are_not_modified():
    cached = torch.arange(E, dtype=torch.float32).repeat(len(TRIPLES), 1)
    before = cached.clone()

    class Cached(ConstantScorer):
        def score_tails(self, heads, relations, candidates):
            return cached[: len(heads)]

    compute_ranks(Cached(), TRIPLES, filter_index=index(), num_entities=E, directions=("tail",))
    assert torch.equal(cached, before)


def test_realistic_ranks_direct():
    scores = torch.tensor([[3.0, 1.0, 3.0, 3.0, 5.0], [0.0, 0.0, 0.0, 0.0, 0.0]])
    ranks = realistic_ranks(scores, torch.tensor([0, 4]), torch.tensor([0, 1, 1]), torch.tensor([4, 0, 1]))
    # row 0: 5.0 filtered; equal others {2, 3} -> 1 + 0 + 1; row 1: two filtered, 2 equal others -> 2
    assert ranks.tolist() == [2.0, 2.0]


def test_target_not_in_candidates_names_the_triple():
    cands = torch.tensor([0, 1, 2, 3, 4])  # entity 5 missing: head of triple 3
    with pytest.raises(ConfigError, match=r"triple 3 \(5, 0, 0\): its head entity 5") as err:
        compute_ranks(ConstantScorer(), TRIPLES, filter_index=index(), candidates=cands, num_entities=E)
    assert err.value.field == "candidates"
    # tail prediction alone does not need entity 5
    compute_ranks(
        ConstantScorer(), TRIPLES, filter_index=index(), candidates=cands, num_entities=E, directions=("tail",)
    )


def test_nan_score_raises():
    table = truth_table()
    table[3, 1, 0] = math.nan  # scored when ranking the tail of triple 2, (3, 1, 4)
    with pytest.raises(ValueError, match="NaN for triple 2 \\(tail prediction\\)"):
        compute_ranks(TableScorer(table), TRIPLES, filter_index=index(), num_entities=E, batch_size=2)


def test_both_infinities_are_not_mistaken_for_nan():
    table = truth_table()
    table[0, 0, 4], table[0, 0, 5] = math.inf, -math.inf
    result = compute_ranks(TableScorer(table), TRIPLES[:1], filter_index=index(), num_entities=E, directions=("tail",))
    assert result.tail_ranks.tolist() == [2.0]  # only +inf beats the target


def test_wrong_score_shape_raises():
    class Bad(ConstantScorer):
        def score_tails(self, heads, relations, candidates):
            return torch.zeros(len(candidates))

    with pytest.raises(ValueError, match="score_tails returned shape"):
        compute_ranks(Bad(), TRIPLES, filter_index=index(), num_entities=E, directions=("tail",))


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"candidates": torch.tensor([0, 1, 1, 2, 3, 4, 5])}, "candidates"),
        ({"candidates": torch.tensor([0, 1, 2, 3, 4, 5, 6])}, "candidates"),
        ({"candidates": torch.tensor([], dtype=torch.long)}, "candidates"),
        ({"candidates": torch.tensor([0.0, 1.0])}, "candidates"),
        ({"directions": ("tail", "middle")}, "directions"),
        ({"directions": ()}, "directions"),
        ({"directions": ("tail", "tail")}, "directions"),
        ({"batch_size": 0}, "batch_size"),
        ({"num_entities": E + 1}, "num_entities"),
    ],
)
def test_bad_options_raise_config_error(kwargs, field):
    args = {"filter_index": index(), "num_entities": E, **kwargs}
    with pytest.raises(ConfigError) as err:
        compute_ranks(ConstantScorer(), TRIPLES, **args)
    assert err.value.field == field


def test_bad_triples_raise_data_error():
    with pytest.raises(DataError, match="relation id 7"):
        compute_ranks(ConstantScorer(), torch.tensor([[0, 7, 1]]), filter_index=index(), num_entities=E)


def test_bad_subset_mask_raises_before_ranking():
    class Exploding(ConstantScorer):
        def score_tails(self, *args):
            raise AssertionError("ranked before validating")

    with pytest.raises(ConfigError, match="subset mask 'x'"):
        evaluate(Exploding(), TRIPLES, filter_index=index(), num_entities=E, subset_masks={"x": torch.ones(2).bool()})


def test_rank_metrics_values_and_validation():
    m = rank_metrics(torch.tensor([1.0, 2.0, 4.0, 10.5]))
    assert m == pytest.approx(
        {
            "mrr": (1 + 0.5 + 0.25 + 1 / 10.5) / 4,
            "mr": 17.5 / 4,
            "hits@1": 0.25,
            "hits@3": 0.5,
            "hits@10": 0.75,
            "num_triples": 4,
        }
    )
    assert rank_metrics(torch.tensor([1.5]), ks=(1, 2)) == {
        "mrr": 1 / 1.5,
        "mr": 1.5,
        "hits@1": 0.0,
        "hits@2": 1.0,
        "num_triples": 1,
    }
    empty = rank_metrics(torch.empty(0))
    assert empty["num_triples"] == 0 and math.isnan(empty["mrr"])
    with pytest.raises(ValueError):
        rank_metrics(torch.tensor([0.5]))
    with pytest.raises(ValueError):
        rank_metrics(torch.tensor([math.nan]))
    with pytest.raises(ValueError):
        rank_metrics(torch.tensor([1.0]), ks=(0,))


def test_ranking_metrics_from_ranks_checks_shapes():
    with pytest.raises(ValueError):
        RankingMetrics.from_ranks(torch.ones(2), torch.ones(3))


def test_progress_bar_runs(capsys):
    result = compute_ranks(ConstantScorer(), TRIPLES, filter_index=index(), num_entities=E, progress=True)
    assert result.all_ranks().shape == (2 * len(TRIPLES),)
