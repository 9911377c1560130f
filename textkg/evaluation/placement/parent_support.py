"""Parent support: a candidate's own parents vouch for it (issue 54).

A new term is a kind of its parent, and so of its parent's parents: they resemble it too. A candidate that
only looks like the new term (a term elsewhere with the same words) has no such support above it, and a
candidate one level too general has a parent more general still. On the README split's held-out terms the
combination's first suggestion was an ancestor of a true parent (too general) for 14 % of the terms and a
term elsewhere for 20 % (docs/results/placement.md, "Parent support"). So the last cheap stage adds, to each
candidate's standardised score, its best parent's::

    score(t, c) = A(t, c) + w · P(t, c)
    A = standardise(first stage)                       over every candidate
    P(t, c) = max over c's parents p among the candidates of A(t, p);   ROOT for a candidate with none

``w`` is chosen on validation terms from :data:`WEIGHTS` (:func:`tune_parent_support`, every value ranked in
one pass by :func:`.grid.tune_second_weight`; on a tie the smaller, so ``0``, the first stage exactly, wins a
tie). The parents are the caller's ``(child, parent)`` training statements (under privacy, the public ones),
the same ones the vote reads. Dong et al. (2024, ESWC, "A language model based framework for new concept
placement in ontologies") score a candidate *edge* (parent, child) rather than a single term; this stage reads
one cheap piece of that idea, a candidate together with its best parent.
"""

from __future__ import annotations

import torch

from textkg.evaluation.placement.grid import tune_second_weight
from textkg.evaluation.placement.methods import STANDARDISE, PlacementQueries, PlacementScorer
from textkg.evaluation.placement.text import last_call_memo
from textkg.evaluation.scoring import standardise

#: Weights of the best parent's standardised score tried on validation (the candidate's own weight is 1).
WEIGHTS = (0.0, 0.05, 0.1, 0.15, 0.2, 0.3)
#: ``P`` of a candidate none of whose parents is a candidate (a root, or a term whose parents are held out): about
#: two standard deviations below a row's mean, where an unrelated parent's score lies (chosen on the README
#: split's validation terms from -5, -2 and 0; docs/results/placement.md).
ROOT = -2.0


def parent_support_parts(
    first: PlacementScorer, parent_edges: torch.Tensor, *, root: float = ROOT
) -> tuple[PlacementScorer, PlacementScorer]:
    """``(A, P)`` of the module docstring, from one call of ``first`` per batch of terms.

    Args:
        first: The first stage.
        parent_edges: ``(m, 2)`` ``(child, parent)`` statements.
        root: ``P`` of a candidate with no parent among the candidates.
    """
    edges = parent_edges.long().reshape(-1, 2)

    def parts(terms: torch.Tensor, candidates: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        a = standardise(first(terms, candidates), **STANDARDISE)
        size = int(max(int(candidates.max()), int(edges.max()) if len(edges) else 0)) + 1
        column = torch.full((size,), -1, dtype=torch.long)
        column[candidates.long()] = torch.arange(len(candidates))
        child, parent = column[edges[:, 0]], column[edges[:, 1]]
        keep = (child >= 0) & (parent >= 0)
        child, parent = child[keep], parent[keep]
        p = torch.full_like(a, root)
        if len(child):
            best = torch.full_like(a, -torch.inf).scatter_reduce(
                1, child.expand(len(a), -1), a[:, parent], reduce="amax", include_self=True
            )
            p = torch.where(torch.isinf(best), p, best)
        return a, p

    both = last_call_memo(parts)  # type: ignore[arg-type]  # returns a pair; A and P are read per batch in turn
    return (lambda t, c: both(t, c)[0]), (lambda t, c: both(t, c)[1])  # type: ignore[index]


def parent_support_scorer(
    first: PlacementScorer, parent_edges: torch.Tensor, weight: float, *, root: float = ROOT
) -> PlacementScorer:
    """``A + weight · P`` (module docstring); ``weight == 0``: ``A``."""
    if weight == 0:
        return lambda terms, candidates: standardise(first(terms, candidates), **STANDARDISE)
    a, p = parent_support_parts(first, parent_edges, root=root)
    return lambda terms, candidates: a(terms, candidates) + weight * p(terms, candidates)


def tune_parent_support(
    first: PlacementScorer,
    parent_edges: torch.Tensor,
    valid: PlacementQueries,
    *,
    num_entities: int,
    batch_size: int = 256,
) -> tuple[float, dict[str, float]]:
    """The weight with the best validation MRR (the smallest on a tie), and every weight's MRR
    (``{"w=0.1": mrr, ...}``), from one pass over the validation terms."""
    a, p = parent_support_parts(first, parent_edges)
    return tune_second_weight(a, p, WEIGHTS, valid, num_entities=num_entities, batch_size=batch_size)


__all__ = ["ROOT", "WEIGHTS", "parent_support_parts", "parent_support_scorer", "tune_parent_support"]
