"""The children scorers (textkg.evaluation.placement.siblings) against a loop over each candidate's children."""

from __future__ import annotations

import pytest
import torch

from textkg.errors import ConfigError
from textkg.evaluation.placement.siblings import children_scorer


def brute(features, edges, terms, candidates, reduce):
    x = torch.nn.functional.normalize(features.float(), dim=1)
    out = torch.zeros(len(terms), len(candidates))
    for i, t in enumerate(terms.tolist()):
        for j, c in enumerate(candidates.tolist()):
            kids = sorted({a for a, p in edges.tolist() if p == c and a not in terms.tolist()})
            if not kids:
                continue
            if reduce == "max":
                out[i, j] = max(float(x[t] @ x[k]) for k in kids)
            else:
                out[i, j] = float(x[t] @ x[kids].mean(0))
    return out


@pytest.mark.parametrize("reduce", ["max", "mean"])
def test_children_scores_equal_a_loop_and_leave_out_scored_terms(reduce):
    g = torch.Generator().manual_seed(0)
    features = torch.randn(40, 6, generator=g)
    edges = torch.tensor([[c, int(torch.randint(0, c, (1,), generator=g))] for c in range(1, 30)] + [[5, 0], [5, 0]])
    score = children_scorer(features, edges, reduce=reduce)
    candidates = torch.arange(0, 30)
    for terms in (torch.tensor([31, 35, 39]), torch.tensor([3, 5, 36])):  # new terms; then training terms too
        assert torch.allclose(score(terms, candidates), brute(features, edges, terms, candidates, reduce), atol=1e-6)


def test_a_term_never_finds_itself_among_its_parents_children():
    """Fitting plays a training term as a new term: its parent's children must not include it."""
    features = torch.eye(4)
    edges = torch.tensor([[1, 0], [2, 3]])  # 1 is the only child of 0
    for reduce in ("max", "mean"):
        s = children_scorer(features, edges, reduce=reduce)(torch.tensor([1]), torch.tensor([0, 3]))
        assert s.tolist() == [[0.0, 0.0]]


def test_unknown_reduction_is_refused():
    with pytest.raises(ConfigError, match="reduce"):
        children_scorer(torch.eye(3), torch.tensor([[1, 0]]), reduce="sum")


def test_optional_rerank_features_are_named_validated_and_read_back():
    from textkg.evaluation.placement.rerank import (
        OPTIONAL_FEATURES,
        PRIOR_FEATURES,
        SCORED_FEATURES,
        RerankConfig,
        Reranker,
        feature_names,
    )

    assert RerankConfig(extra=("sibling_mean", "sibling_max")).extra == ("sibling_mean", "sibling_max")
    for bad in (("siblings",), ("sibling_max", "sibling_max")):
        with pytest.raises(ConfigError, match="extra"):
            RerankConfig(extra=bad)
    assert feature_names(("sibling_mean", "sibling_max")) == (
        SCORED_FEATURES + ("sibling_max", "sibling_mean") + PRIOR_FEATURES
    )
    assert OPTIONAL_FEATURES[:2] == ("sibling_max", "sibling_mean")  # new features are appended: saved orders hold
    fixed = dict.fromkeys(SCORED_FEATURES + PRIOR_FEATURES, 1.0)
    assert list(Reranker.from_dict({"weights": fixed}).weights) == list(feature_names())  # a run saved before
    with_one = Reranker.from_dict({"weights": {**fixed, "sibling_mean": 2.0}})
    assert list(with_one.weights) == list(feature_names(("sibling_mean",)))
    for bad_weights in ({**fixed, "siblings": 1.0}, {k: v for k, v in fixed.items() if k != "depth"}):
        with pytest.raises(ConfigError, match="placement_rerank"):
            Reranker.from_dict({"weights": bad_weights}, file="metrics.json")


def test_a_reranker_with_sibling_features_is_fitted_saved_and_read_back():
    """``evaluate_placement`` fits the optional features when the config names them, and ``saved_reranker``
    (what ``textkg place`` calls) scores with the same weights from the saved dict."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from test_placement_rerank import RandomModel, _features, _planted

    from textkg.evaluation.placement.evaluate import evaluate_placement, saved_reranker
    from textkg.evaluation.placement.rerank import RerankConfig

    OPTIONAL_FEATURES = ("sibling_max", "sibling_mean")
    kg, split = _planted()
    n = kg.num_entities
    texts = list(kg.entity_descriptions)
    out = evaluate_placement(
        RandomModel(n),
        kg,
        split,
        text_features=_features(n),
        texts=texts,
        rerank=RerankConfig(extra=OPTIONAL_FEATURES),
    )
    saved = out["placement_rerank"]
    assert set(OPTIONAL_FEATURES) <= set(saved["weights"])
    edges = split.train[:, [0, 2]]
    scorer = saved_reranker(
        saved,
        features=_features(n),
        parent_edges=edges,
        texts=texts,
        names=kg.entity_names,
        fit_on=split.train_entities,
    )
    assert scorer(split.test[:, 0], split.train_entities).shape == (len(split.test), len(split.train_entities))


def test_the_default_reranker_reads_the_sibling_centroid_words_and_word_vectors():
    """Chosen on the README split's validation terms (docs/results/placement.md, 2026-11-28; the candidates'
    synonyms joined on 2026-12-07)."""
    from textkg.evaluation.placement.rerank import RerankConfig, feature_names

    assert RerankConfig().extra == ("sibling_mean", "maxsim", "tfidf_vote", "synonym_containment")
    assert "sibling_mean" in feature_names(RerankConfig().extra)
