"""Ranks of many weightings of the same placement components, from one pass over the score matrices.

A tuner (:func:`textkg.evaluation.placement.combination.tune_combination`, the weight of the
links' vote in :mod:`.known_links`) ranks every validation query once per weighting
``Σ_k w_k · Z_k`` of the same ``K`` component score matrices ``Z_k`` (``(b, c)`` each). Ranking
each weighting with :func:`~textkg.evaluation.placement.methods.placement_ranks` repeats, per
weighting, the weighted sum over every candidate, the comparison with the target and the filter.
:func:`weighting_ranks` reads each component once per batch of terms, and compares, for every
weighting at once, only the candidates that can reach the target's score:

* Weightings are taken in groups that weigh the same components (their support ``S``). A
  candidate ``c`` that is at most the target ``t`` in every component of ``S`` and below it by more
  than ``margin`` in one, ``a`` (``Z_a[c] < Z_a[t] − margin``), scores below the target under every
  weighting of the group: exactly, ``Σ_k w_k (Z_k[c] − Z_k[t]) ≤ −margin · w_a``, and the float
  rounding of the two sums is smaller (checked per batch and group: when ``margin · min w`` is not
  above ``4 (|S| + 1) u max_g Σ_k w_gk · max|Z_k|``, ``u`` the unit roundoff, no candidate is
  skipped). Such a candidate is neither above nor tied with the target, so it leaves the realistic
  rank unchanged. A sparse vote ties most candidates with the target; they are still skipped
  wherever another component weighs in.
* The others are scored as :func:`textkg.evaluation.scoring.weighted_sum` scores them: in the
  component order, ``w · z`` in the components' dtype, a weight of 0 adding nothing. Each
  weighting's ranks are therefore **equal** to :func:`placement_ranks` of its weighted sum
  (``tests/evaluation/test_placement_grid.py`` checks it on planted ties), at a cost of one pass over
  the ``(b, c)`` matrices per batch plus ``G × (candidates kept)``.

The tuner's grid of 61 weightings thus reads each component once per batch instead of 61 times
(docs/results/main_command.md has the measured CPU seconds on ``hpo``).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from textkg.errors import ConfigError
from textkg.evaluation.placement.methods import (
    PlacementMetrics,
    PlacementQueries,
    PlacementScorer,
    check_scores,
    filtered_pairs,
)

#: How far below the target's score, in every used component, a candidate must be to be skipped
#: (component scores here are standardised: a few units across a row).
DEFAULT_MARGIN = 0.1
#: Weighted scores computed at once (``G`` weightings × candidate entries; 4 bytes each in float32).
WEIGHTED_ENTRIES = 1 << 23


def weighting_ranks(
    components: Sequence[PlacementScorer],
    weightings: Sequence[Sequence[float]],
    queries: PlacementQueries,
    *,
    num_entities: int,
    batch_size: int = 256,
    margin: float = DEFAULT_MARGIN,
) -> torch.Tensor:
    """``(G, q)`` float64 realistic ranks of each query's true parent under each weighting.

    Row ``g`` equals ``placement_ranks(scorer_g, queries)[0]`` with ``scorer_g(t, c) =
    weighted_sum([(weightings[g][k], components[k](t, c)) for k])`` (module docstring).

    Args:
        components: ``K`` scorers ``(terms (b,), candidates (c,)) -> (b, c)``, all of one float dtype;
            each is called once per batch of terms (a component no weighting uses, never).
        weightings: ``G`` non-negative weight vectors of length ``K``, each with a positive weight.
        queries: From :func:`~textkg.evaluation.placement.methods.placement_queries`.
        num_entities: Number of entity ids in the graph.
        batch_size: New terms scored at once.
        margin: See the module docstring (``0`` or less: no candidate is skipped).

    Raises:
        ConfigError: No weighting, a weighting of the wrong length, a negative weight or one with no
            positive weight, or ``batch_size`` not a positive integer.
        ValueError: A component returned a wrongly shaped or NaN score matrix.
    """
    w = _checked(components, weightings)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ConfigError(f"batch_size must be a positive integer, got {batch_size!r}", field="batch_size")
    used = (w > 0).any(0).nonzero().squeeze(1).tolist()
    w = w[:, used]  # (G, K') in float64, cast to the scores' dtype below
    ranks = torch.empty(len(w), queries.num_queries, dtype=torch.float64)
    for g, cands in enumerate(queries.groups):
        column = torch.full((num_entities,), -1, dtype=torch.long)
        column[cands] = torch.arange(len(cands))
        idx = (queries.group_of == g).nonzero().squeeze(1)
        uniq, local = torch.unique(queries.terms[idx], return_inverse=True)
        for start in range(0, len(uniq), batch_size):
            chunk = uniq[start : start + batch_size]
            with torch.no_grad():
                scores = [components[k](chunk, cands) for k in used]
            for s in scores:
                check_scores(s, len(chunk), len(cands))
            sel = ((local >= start) & (local < start + len(chunk))).nonzero().squeeze(1)
            q = idx[sel]
            rows = torch.stack([s[local[sel] - start] for s in scores])  # (K', q_b, c)
            del scores  # the batch's scores, held once (as rows) while they are ranked
            r, c = filtered_pairs(queries, q, column)
            ranks[:, q] = _batch_ranks(rows, column[queries.parents[q]], r, c, w, margin)
            del rows  # not held while the next batch is scored (textkg.pipeline.memory counts one batch)
    return ranks


def _batch_ranks(
    rows: torch.Tensor, target: torch.Tensor, fr: torch.Tensor, fc: torch.Tensor, w64: torch.Tensor, margin: float
) -> torch.Tensor:
    """``(G, q_b)`` ranks ``1 + greater + equal / 2`` over each row's unfiltered candidates but the target.

    Weightings are taken in groups of one support (the components they weigh): a candidate is skipped
    for a group when it is at most the target's score in every component of the support and below it by
    more than ``margin`` in one of them (module docstring), e.g. a candidate the sparse vote ties with the
    target is still skipped wherever the model or the description weighs in.
    """
    _, b, _ = rows.shape
    w = w64.to(rows.dtype)
    z_t = rows[:, torch.arange(b), target]  # (K', q_b)
    counted = torch.ones(rows.shape[1:], dtype=torch.bool)
    counted[fr, fc] = False
    counted[torch.arange(b), target] = False
    below = rows <= z_t[:, :, None]  # (K', q_b, c)
    far = rows < z_t[:, :, None] - margin
    ranks = torch.empty(len(w), b, dtype=torch.float64)
    size = _largest_magnitudes(rows)  # (K',) float64, read per support (no (K', q_b, c) copy of rows)
    for support in torch.unique(w > 0, dim=0):
        group = ((w > 0) == support).all(1).nonzero().squeeze(1)
        keep = counted
        if margin > 0 and _margin_is_safe(size[support], rows.dtype, w64[group][:, support], margin):
            keep = counted & ~(below[support].all(0) & far[support].any(0))
        ranks[group] = _counted_ranks(rows, z_t, keep, w[group])
    return ranks


def _counted_ranks(rows: torch.Tensor, z_t: torch.Tensor, keep: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``(G, q_b)`` ``1 + greater + equal / 2`` of each row's target among its ``keep`` candidates."""
    i, j = keep.nonzero().unbind(1)
    s_t = _weighted(w, z_t)  # (G, q_b)
    greater = torch.zeros(len(w), keep.shape[0])
    equal = torch.zeros(len(w), keep.shape[0])  # float32 counts: exact below 2 ** 24 candidates
    step = max(1, WEIGHTED_ENTRIES // len(w))
    for start in range(0, len(i), step):
        ii, jj = i[start : start + step], j[start : start + step]
        s_c = _weighted(w, rows[:, ii, jj])  # (G, n)
        s_ti = s_t[:, ii]
        greater.index_add_(1, ii, (s_c > s_ti).float())
        equal.index_add_(1, ii, (s_c == s_ti).float())
    return 1 + greater.double() + equal.double() / 2


def _weighted(w: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """``(G, n)`` ``Σ_k w[:, k] · z[k]`` added in order, as :func:`~textkg.evaluation.scoring.weighted_sum` does
    (a weight of 1 multiplies exactly, a weight of 0 adds an exact 0)."""
    total = torch.zeros(len(w), z.shape[1], dtype=z.dtype)
    for k in range(len(z)):
        total = total + torch.where(w[:, k, None] > 0, w[:, k, None] * z[k], 0)
    return total


def _largest_magnitudes(rows: torch.Tensor) -> torch.Tensor:
    """``(K',)`` float64 ``max |Z_k|`` of each component's ``(q_b, c)`` scores, as ``max(|max Z_k|, |min Z_k|)``:
    equal to ``rows.abs().amax`` without an absolute-value copy of ``rows`` (NaN for a non-float dtype)."""
    if not rows.is_floating_point() or not rows.numel():
        return torch.full((len(rows),), float("nan"), dtype=torch.float64)
    flat = rows.flatten(1)
    return torch.maximum(flat.amax(1).abs(), flat.amin(1).abs()).double()


def _margin_is_safe(size: torch.Tensor, dtype: torch.dtype, w: torch.Tensor, margin: float) -> bool:
    """Whether a candidate at most the target in every component of a support and ``margin`` below it in one is
    below it in float arithmetic too, for every weighting ``w`` (all positive; module docstring): the exact gap
    is at least ``margin · min w``, and each weighted sum of ``K'`` terms is rounded by at most
    ``(K' + 1) u Σ_k w_k max|Z_k|`` (twice: two sums). ``size``: ``(K',)`` the support's ``max|Z_k|``
    (:func:`_largest_magnitudes`); ``dtype``: the scores'."""
    if not dtype.is_floating_point:
        return False
    u = torch.finfo(dtype).eps / 2
    if not bool(torch.isfinite(size).all()):
        return False
    rounding = 4 * (len(size) + 1) * u * float((w * size).sum(1).max())
    return margin * float(w.min()) > rounding


def _checked(components: Sequence[PlacementScorer], weightings: Sequence[Sequence[float]]) -> torch.Tensor:
    if not len(weightings):
        raise ConfigError("no weighting to rank", field="weightings")
    if any(len(ws) != len(components) for ws in weightings):
        raise ConfigError(f"each weighting needs {len(components)} weights", field="weightings")
    w = torch.tensor([[float(x) for x in ws] for ws in weightings], dtype=torch.float64)
    if bool((w < 0).any()) or not bool((w > 0).any(1).all()) or not bool(torch.isfinite(w).all()):
        raise ConfigError("weights must be finite, non-negative, and not all 0 in a weighting", field="weightings")
    return w


def tune_second_weight(
    first: PlacementScorer,
    second: PlacementScorer,
    weights: Sequence[float],
    valid: PlacementQueries,
    *,
    num_entities: int,
    batch_size: int = 256,
) -> tuple[float, dict[str, float]]:
    """The ``w`` of ``weights`` whose ``first + w · second`` has the best validation MRR (the smallest on a tie, so
    0 wins a tie when listed), and every weight's MRR (``{"w=0.5": mrr, ...}``), from one pass
    (:func:`weighting_ranks`): the tuner of the cross-encoder's and of parent support's weight."""
    ranks = weighting_ranks(
        [first, second], [[1.0, w] for w in weights], valid, num_entities=num_entities, batch_size=batch_size
    )
    nan = torch.full((valid.num_queries,), float("nan"), dtype=torch.float64)
    mrrs = [PlacementMetrics.from_ranks(r, nan).mrr for r in ranks]
    tried = {f"w={w:g}": mrr for w, mrr in zip(weights, mrrs, strict=True)}
    best = max(range(len(mrrs)), key=lambda i: (mrrs[i], -weights[i]))
    return float(weights[best]), tried


__all__ = ["DEFAULT_MARGIN", "WEIGHTED_ENTRIES", "tune_second_weight", "weighting_ranks"]
