"""RDP → (ε, δ)-DP conversion."""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import numpy as np


class PrivacyWarning(UserWarning):
    """A privacy claim that is valid but probably looser than it need be."""


def rdp_to_epsilon(*, orders: Sequence[float], rdp: Sequence[float], delta: float) -> tuple[float, float]:
    """Smallest ε over the orders such that the mechanism is (ε, δ)-DP.

    Canonne, Kamath & Steinke 2020, "The Discrete Gaussian for Differential
    Privacy", arXiv 2004.00010v3, Proposition 12: an (α, ρ)-RDP mechanism is
    (ε, δ)-DP for

        ε = ρ + log((α − 1)/α) − (log δ + log α)/(α − 1).

    Guards: orders must be > 1 (the bound divides by α − 1); δ = 0 gives
    ``inf`` unless every RDP value is 0; NaN RDP values count as ``inf`` (no
    claim at that order); negative RDP values (round-off) are raised to 0 and
    a negative ε is clipped to 0. If every RDP value is 0
    (nothing private was touched) the answer is ``(0.0, nan)``.

    Warns:
        PrivacyWarning: the best order is the smallest or largest of the grid,
            so a wider grid would probably give a smaller ε.

    Returns:
        ``(epsilon, best_alpha)``; ``(inf, nan)`` when no order gives a finite ε.

    Raises:
        ValueError: malformed input (lengths differ, an order <= 1, δ outside [0, 1)).
    """
    alphas = np.asarray(orders, dtype=np.float64).ravel()
    rho = np.asarray(rdp, dtype=np.float64).ravel()
    if alphas.shape != rho.shape or alphas.size == 0:
        raise ValueError(f"orders and rdp must be non-empty and of equal length, got {alphas.size} and {rho.size}")
    if not np.all(alphas > 1) or not np.all(np.isfinite(alphas)):
        raise ValueError("every RDP order must be finite and > 1")
    if not 0.0 <= delta < 1.0 or math.isnan(delta):
        raise ValueError(f"delta must be in [0, 1), got {delta}")
    # RDP is >= 0; a negative value is round-off, clipped up (conservative).
    rho = np.where(np.isnan(rho), np.inf, np.maximum(rho, 0.0))
    if np.all(rho == 0):
        return 0.0, math.nan
    if delta == 0.0:
        return math.inf, math.nan
    with np.errstate(invalid="ignore", over="ignore"):
        # arXiv 2004.00010, Proposition 12 (CKS 2020): the RDP→DP conversion.
        eps = rho + np.log1p(-1.0 / alphas) - (math.log(delta) + np.log(alphas)) / (alphas - 1.0)
    eps = np.where(np.isnan(eps), np.inf, eps)
    best = int(np.argmin(eps))
    if not math.isfinite(eps[best]):
        return math.inf, math.nan
    epsilon = max(0.0, float(eps[best]))
    if alphas.size > 1 and epsilon > 0.0 and alphas[best] in (alphas.min(), alphas.max()):
        edge = "smallest" if alphas[best] == alphas.min() else "largest"
        warnings.warn(
            f"the best RDP order {alphas[best]:g} is the {edge} of the grid "
            f"[{alphas.min():g}, {alphas.max():g}]; widen the grid for a tighter ε",
            PrivacyWarning,
            stacklevel=2,
        )
    return epsilon, float(alphas[best])
