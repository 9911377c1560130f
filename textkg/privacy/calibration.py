"""Noise calibration: the smallest σ whose ε stays within a target."""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

from textkg.errors import PrivacyError
from textkg.privacy.accountant import RDPAccountant
from textkg.privacy.conversion import PrivacyWarning
from textkg.privacy.events import SampledGaussianEvent
from textkg.privacy.schedule import GeometricNoiseSchedule

_SIGMA_MAX = 1e4


def _epsilon(
    sigma: float,
    *,
    sample_rate: float,
    steps: int,
    delta: float,
    orders: Sequence[float] | str | None,
    schedule: GeometricNoiseSchedule | None = None,
) -> float:
    acc = RDPAccountant(orders=orders)
    if schedule is None:
        acc.step(SampledGaussianEvent(sample_rate=sample_rate, noise_multiplier=sigma, steps=steps))
    else:  # the composition of each stage's event (Mironov 2017, arXiv:1702.07476v3, Prop. 1)
        for event in schedule.events(sigma0=sigma, sample_rate=sample_rate, steps=steps):
            acc.step(event)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        return acc.get_epsilon(delta=delta)


def calibrate_noise_multiplier(
    *,
    target_epsilon: float,
    delta: float,
    sample_rate: float,
    steps: int,
    orders: Sequence[float] | str | None = None,
    tol: float = 1e-4,
    schedule: GeometricNoiseSchedule | None = None,
) -> float:
    """Smallest noise multiplier (up to ``tol``) with ε(σ) <= ``target_epsilon``.

    Bisection on σ: ε is non-increasing in σ (every RDP order is), the bracket
    ``[lo, hi]`` keeps ε(lo) > target >= ε(hi), and the UPPER end is returned,
    so the result never overshoots the target. On return ``hi − lo <= tol·hi``,
    hence σ·(1 − tol) overshoots (the result is tight).

    Args:
        target_epsilon: ε budget, > 0.
        delta: δ in (0, 1).
        sample_rate: Poisson rate q in (0, 1].
        steps: planned number of steps, >= 1.
        orders: RDP orders (default grid if ``None``).
        tol: relative tolerance on σ, in (0, 1).
        schedule: ``None`` for a constant σ; else the result is the schedule's σ_0, and ε is that
            of the schedule's ledger (every σ_t = σ_0 · factor(t) grows with σ_0, so ε is still
            non-increasing in σ_0 and the bisection holds).

    Raises:
        PrivacyError: the target is unreachable even with σ = 1e4 (with δ fixed,
            ε → min_α [log(1 − 1/α) − (log δ + log α)/(α − 1)] > 0 as σ → ∞).
        ValueError: an argument out of range.
    """
    if not target_epsilon > 0 or math.isinf(target_epsilon):
        raise ValueError(f"target_epsilon must be finite and > 0, got {target_epsilon}")
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta}")
    if not 0 < sample_rate <= 1:
        raise ValueError(f"sample_rate must be in (0, 1], got {sample_rate}")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be an int >= 1, got {steps}")
    if not 0 < tol < 1:
        raise ValueError(f"tol must be in (0, 1), got {tol}")

    def eps(sigma: float) -> float:
        return _epsilon(sigma, sample_rate=sample_rate, steps=steps, delta=delta, orders=orders, schedule=schedule)

    lo, hi = 0.0, 1.0  # ε(0) = inf > target
    while eps(hi) > target_epsilon:
        lo, hi = hi, 2.0 * hi
        if hi > _SIGMA_MAX:
            raise PrivacyError(
                f"target_epsilon={target_epsilon:g} is unreachable at delta={delta:g} with "
                f"{steps} steps at sample_rate={sample_rate:g} and these RDP orders, even with "
                f"noise_multiplier={_SIGMA_MAX:g}; raise the target, raise delta or widen the orders",
                field="target_epsilon",
            )
    while hi - lo > tol * hi:
        mid = 0.5 * (lo + hi)
        if eps(mid) > target_epsilon:
            lo = mid
        else:
            hi = mid
    return hi
