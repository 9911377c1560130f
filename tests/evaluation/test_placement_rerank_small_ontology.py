"""Issue 51, item 9: the placement re-ranker fits on a small ontology.

On 1a0007a an honest OBO file of about a hundred terms (``textkg train --dataset small.obo --split
inductive --model fused-transe``) crashed in ``fit_reranker`` (``torch.stack``: "expects each tensor to
be equal size, but got [33, 9] ... and [50, 9]"): each batch of training terms leaves another number of
candidates, and where that is under ``top_k`` the hard-negative lists of two batches differ in length.
"""

from __future__ import annotations

import torch

from textkg.evaluation.placement.rerank import PairFeatures, RerankConfig, fit_reranker, hierarchy_priors


def _small_flat_ontology(n: int = 100, parents: int = 9) -> torch.Tensor:
    """``(m, 2)`` ``(child, parent)``: a root, ``parents`` terms under it, every other term under one of them."""
    g = torch.Generator().manual_seed(0)
    edges = [(i, 0) for i in range(1, parents + 1)]
    edges += [(i, int(torch.randint(1, parents + 1, (1,), generator=g))) for i in range(parents + 1, n)]
    return torch.tensor(edges)


def test_fit_reranker_on_a_small_ontology_whose_batches_leave_fewer_than_top_k_candidates():
    n = 100
    edges = _small_flat_ontology(n)
    vectors = torch.nn.functional.normalize(torch.randn(n, 8, generator=torch.Generator().manual_seed(1)), dim=1)

    def cosine(t, c):
        return vectors[t] @ vectors[c].T

    features = PairFeatures(
        {"description": cosine, "vote": cosine, "tfidf": cosine, "containment": cosine}, hierarchy_priors(edges, n)
    )
    config = RerankConfig(seed=0, top_k=50, batch_size=64)  # the defaults: batches of 64 and 35 terms
    fitted = fit_reranker(features, cosine, edges, torch.arange(n), config=config)
    assert fitted.num_terms > 64  # terms from both batches were fitted on
    assert all(torch.isfinite(torch.tensor(w)) for w in fitted.weights.values())
