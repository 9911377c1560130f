"""One home for mixing scores: each row standardised, then ``standardised score + weight × vote``.

Every scorer that adds a vote to a model (the description-neighbour vote of
:mod:`.neighbour_vote`, the link-profile vote of :mod:`.link_vote`, the placement combination of
:mod:`.placement.combination` and its re-ranker, the known links' vote of :mod:`.placement.known_links`,
``textkg predict`` and ``textkg place``) does it in two steps:

1. :func:`standardise` puts each query's scores over its candidates on one scale (mean 0,
   standard deviation 1), so that a weight means the same for every query and every model
   (the zero-mean unit-variance normalisation of score fusion: Montague & Aslam 2001,
   "Relevance score normalization for metasearch", CIKM);
2. :func:`weighted_sum` adds the weighted parts in the order given (a part with weight 0 is
   never computed), and :func:`combine` is the usual case: the standardised model scores
   plus ``weight × vote`` for each vote.

The options of :func:`standardise` are the ways the callers truly differ (see its docstring);
everything else (what a zero-variance row becomes, a ruled-out candidate) is one rule for all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch

#: A part of a weighted sum: its weight and its ``(b, c)`` scores, or a function computing them
#: (called only when the weight is not 0).
Part = tuple[float, "torch.Tensor | Callable[[], torch.Tensor]"]

#: Smallest standard deviation divided by (a row whose scores differ by less is all ties anyway).
_MIN_STD = 1e-12


def standardise(scores: torch.Tensor, *, dtype: torch.dtype = torch.float32, population: bool = False) -> torch.Tensor:
    """``(s − mean) / std`` of each row of ``(b, c)`` scores; the map is increasing per row, so each
    row's ranking and ties are kept.

    A score at its dtype's lowest value is a candidate the model rules out (the query itself under
    ``model.irreflexive``): it is left out of its row's mean and std and stays the lowest. A row
    whose std is 0 becomes all zeros.

    Args:
        scores: ``(b, c)`` scores of ``b`` queries over ``c`` candidates.
        dtype: Where the arithmetic is done and what is returned. ``torch.float64`` for the
            placement components, whose scores can be lexicographic keys (``parent-of-nearest``:
            ``key × 4 + cosine``, :func:`textkg.evaluation.placement.parent_of_nearest_scorer`)
            that float32 would merge into ties; float32 elsewhere.
        population: Divide by ``c`` (the population std, used by the placement combination)
            rather than ``c − 1`` (Bessel's correction, used by the votes at rank time). The
            choice scales a row by ``sqrt(c / (c − 1))``: it leaves a sum of standardised parts
            ranking as before, but moves the balance against an unstandardised vote, whose
            weights runs tuned on validation and saved in ``metrics.json`` under each choice.

    Returns:
        ``(b, c)`` standardised scores of ``dtype``.
    """
    ruled_out = scores <= torch.finfo(scores.dtype).min if scores.is_floating_point() else None
    s = scores.to(dtype)
    if ruled_out is None or not bool(ruled_out.any()):
        centred = s - s.mean(1, keepdim=True)
        std = centred.pow(2).mean(1, keepdim=True).sqrt() if population else s.std(1, keepdim=True)
        return _scaled(centred, std)
    kept = (~ruled_out).to(dtype)
    n = kept.sum(1, keepdim=True)
    values = s.masked_fill(ruled_out, 0.0)
    mean = values.sum(1, keepdim=True) / n.clamp_min(1.0)
    var = ((values - mean) ** 2 * kept).sum(1, keepdim=True) / (n - (0 if population else 1)).clamp_min(1.0)
    z = _scaled(values - mean, var.sqrt())
    return z.masked_fill(ruled_out, torch.finfo(dtype).min)


def _scaled(centred: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
    """``centred / std`` per row, a row whose std is not positive all zeros; ``centred`` (a fresh tensor) is
    divided in place: no ``(b, c)`` quotient, zeros and selection beside it (the placement report standardises
    hundreds of ``(256, c)`` float64 blocks)."""
    return centred.div_(std.clamp_min(_MIN_STD)).masked_fill_(~(std > 0), 0.0)


def weighted_sum(parts: Iterable[Part]) -> torch.Tensor:
    """``Σ weight × scores`` over ``parts``, added in order, skipping (and never computing) a part of
    weight 0; each part is moved to the first one's device (a vote lives on the CPU, a model may not).

    Raises:
        ValueError: Every weight is 0 (there is nothing to sum).
    """
    total: torch.Tensor | None = None
    for weight, scores in parts:
        if not weight:
            continue
        value = scores() if callable(scores) else scores
        term = value if weight == 1 else weight * value
        total = term if total is None else total + term.to(total.device)
    if total is None:
        raise ValueError("every weight is 0")
    return total


def combine(
    scores: torch.Tensor, votes: Iterable[Part] = (), *, dtype: torch.dtype = torch.float32, population: bool = False
) -> torch.Tensor:
    """``standardise(scores) + Σ weight × vote``: the model's scores standardised per query plus each
    weighted vote (``(b, c)`` each, or a function computing it, called only for a weight that is
    not 0), in the order given. ``dtype`` and ``population``: as :func:`standardise`."""
    return weighted_sum([(1.0, standardise(scores, dtype=dtype, population=population)), *votes])


__all__ = ["Part", "combine", "standardise", "weighted_sum"]
