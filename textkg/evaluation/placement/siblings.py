"""How much a new term looks like a candidate parent's existing children (its would-be siblings).

A new ontology term is usually more like its siblings than like its parent: ``"Renal cyst,
bilateral"`` reads like the other children of ``"Renal cyst"`` more than like ``"Renal cyst"``
itself. The neighbour vote (:mod:`.combination`) reads this only through the ``k`` nearest
existing terms. These scorers read every child of every candidate:

* :func:`children_scorer` with ``reduce="max"``: the cosine of the new term's description
  features to the candidate's most similar child;
* ``reduce="mean"``: the cosine to the mean of the candidate's children's (L2-normalised) features,
  the children's centroid.

A candidate without children scores 0. A child that is among the scored terms is left out of
every candidate's children: a training term that plays a new term while the re-ranker is fitted
(:func:`.rerank.fit_reranker`) must not find itself among its true parents' children, as a real
new term cannot (it is no training term). Only the description features (public inputs) and the
``(child, parent)`` statements the caller passes are read.
"""

from __future__ import annotations

import torch

from textkg.errors import ConfigError
from textkg.evaluation.placement.methods import PlacementScorer

#: How the children's similarities are reduced, by name.
REDUCTIONS = ("max", "mean")


def children_scorer(features: torch.Tensor, parent_edges: torch.Tensor, *, reduce: str = "max") -> PlacementScorer:
    """``score(terms (b,), candidates (c,)) -> (b, c)``: the new terms' likeness to each candidate's children.

    Args:
        features: ``(num_entities, D)`` description features.
        parent_edges: ``(m, 2)`` long ``(child, parent)`` statements (the hierarchy the caller may read).
        reduce: ``"max"`` (the most similar child) or ``"mean"`` (the children's centroid).

    Raises:
        ConfigError: ``reduce`` is not one of :data:`REDUCTIONS`.
    """
    if reduce not in REDUCTIONS:
        raise ConfigError(f"reduce must be one of {list(REDUCTIONS)}, got {reduce!r}", field="reduce")
    x = torch.nn.functional.normalize(features.detach().float(), dim=1)
    n = x.shape[0]
    edges = parent_edges.long().reshape(-1, 2)
    child, parent = (torch.unique(edges, dim=0) if len(edges) else edges).T
    sums = torch.zeros_like(x).index_add_(0, parent, x[child])  # (n, D) sum of each term's children
    counts = torch.bincount(parent, minlength=n).float()

    def score(terms: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        mine = torch.isin(child, terms)  # children that are scored terms themselves: left out
        if reduce == "mean":
            s = sums[candidates].clone()
            k = counts[candidates].clone()
            if bool(mine.any()):
                at = torch.full((n,), -1, dtype=torch.long)
                at[candidates] = torch.arange(len(candidates))
                rows = at[parent[mine]]
                ok = rows >= 0
                s.index_add_(0, rows[ok], -x[child[mine][ok]])
                k.index_add_(0, rows[ok], -torch.ones(int(ok.sum())))
            centroid = s / k.clamp_min(1)[:, None]
            return x[terms] @ centroid.T  # (b, c): 0 where no child is left
        keep = ~mine & torch.isin(parent, candidates)
        sim = x[terms] @ x[child[keep]].T  # (b, m')
        best = torch.full((len(terms), n), -2.0).scatter_reduce(
            1, parent[keep].expand(len(terms), -1), sim, reduce="amax"
        )[:, candidates]
        return torch.where(best > -2, best, torch.zeros_like(best))

    return score


__all__ = ["REDUCTIONS", "children_scorer"]
