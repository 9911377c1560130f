"""The re-ranker's results kept between the report's passes (:func:`textkg.evaluation.placement.text.kept_scorer`)."""

from __future__ import annotations

import torch

from textkg.evaluation.placement.text import kept_scorer


def counting_scorer():
    calls: list[tuple[int, ...]] = []

    def score(terms: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        calls.append(tuple(terms.tolist()))
        return terms.float()[:, None] * 100 + candidates.float()[None, :]

    return score, calls


def test_a_batch_asked_again_is_not_scored_again_and_gives_the_same_numbers():
    inner, calls = counting_scorer()
    score = kept_scorer(inner)
    a, b, cands = torch.tensor([1, 2]), torch.tensor([3]), torch.arange(5)
    first = [score(a, cands), score(b, cands)]
    again = [score(a, cands), score(b, cands), score(a, cands)]
    assert calls == [(1, 2), (3,)]
    assert torch.equal(again[0], first[0]) and torch.equal(again[1], first[1]) and torch.equal(again[2], first[0])
    assert torch.equal(first[0], inner(a, cands))


def test_other_candidates_are_another_batch():
    inner, calls = counting_scorer()
    score = kept_scorer(inner)
    terms = torch.tensor([1, 2])
    score(terms, torch.arange(5))
    score(terms, torch.arange(1, 6))  # the same shape, other ids
    score(terms, torch.arange(4))
    assert len(calls) == 3


def test_a_caller_may_write_into_what_it_gets():
    inner, _ = counting_scorer()
    score = kept_scorer(inner)
    terms, cands = torch.tensor([1]), torch.arange(3)
    score(terms, cands)[0, 0] = -1.0
    score(terms, cands)[0, 1] = -1.0
    assert torch.equal(score(terms, cands), inner(terms, cands))


def test_the_budget_bounds_what_is_kept_oldest_first():
    inner, calls = counting_scorer()
    cands = torch.arange(10)  # one term: 40 bytes of float32
    score = kept_scorer(inner, budget=100)  # room for two
    for t in (1, 2, 3):
        score(torch.tensor([t]), cands)
    score(torch.tensor([3]), cands)
    score(torch.tensor([2]), cands)
    assert calls == [(1,), (2,), (3,)]
    score(torch.tensor([1]), cands)  # dropped when 3 came
    assert calls[-1] == (1,)
    big = kept_scorer(inner, budget=10)  # a result larger than the budget is never kept
    big(torch.tensor([4]), cands)
    big(torch.tensor([4]), cands)
    assert calls[-2:] == [(4,), (4,)]


def test_the_report_computes_a_batchs_pair_features_once_after_the_fit(monkeypatch):
    """The report ranks the same validation and test batches in several passes (the re-ranker's weight, parent
    support's tuning, the rows with and without each): the pair features of a batch are computed once (on the
    code before, four to eight times on the README split); the fit's own batches are each computed once too."""
    import hashlib
    from collections import Counter

    from test_placement_rerank import RandomModel, _features, _planted

    from textkg.evaluation.placement import rerank
    from textkg.evaluation.placement.evaluate import evaluate_placement
    from textkg.evaluation.placement.rerank import RerankConfig

    seen: Counter = Counter()
    original = rerank.PairFeatures.__call__

    def counted(self, terms, candidates):
        seen[hashlib.sha256(terms.numpy().tobytes() + candidates.numpy().tobytes()).hexdigest()] += 1
        return original(self, terms, candidates)

    monkeypatch.setattr(rerank.PairFeatures, "__call__", counted)
    kg, split = _planted()
    n = kg.num_entities
    out = evaluate_placement(
        RandomModel(n), kg, split, text_features=_features(n), texts=list(kg.entity_descriptions), rerank=RerankConfig()
    )
    assert out["placement_selection"]["combined"]["weights"]["rerank"] > 0  # the re-ranker was ranked
    assert seen and max(seen.values()) == 1
