"""ε of a ledger by privacy-loss-distribution (PLD) accounting, through Google's dp-accounting.

PLD accounting composes the exact privacy-loss distribution of the Poisson-sampled
Gaussian mechanism numerically (Koskela, Jälkö & Honkela 2020, arXiv:1906.03049;
the pessimistic "connect the dots" discretisation of Doroshenko et al. 2022,
arXiv:2207.04380v1), so its ε is an upper bound and is tighter than the RDP →
(ε, δ) conversion. We report it beside the RDP ε; the claimed ε is the RDP one
(``privacy.accountant.RDPAccountant``), whose ledger it reads.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

from textkg.errors import PrivacyError

#: dp-accounting's discretisation of the privacy loss (its default); smaller is tighter and slower
VALUE_DISCRETIZATION_INTERVAL = 1e-4
#: the smallest σ the PLD accountant discretises: below it the privacy loss spans billions of buckets (σ = 1e-3: a
#: 38 GiB array; σ = 0.1 at q = 0.01 over 1e4 steps: more than 8 GB and 90 s), where ε is in the hundreds anyway
#: (issue 51: ``train --noise-multiplier 1e-3`` died writing its report's ``epsilon_pld``)
MIN_SIGMA = 0.3


def pld_epsilon(ledger: Iterable[tuple[float, float, int]], *, delta: float) -> float:
    """ε at ``delta`` of the composition of ``(sample_rate q, noise_multiplier σ, steps)`` entries.

    Args:
        ledger: entries as in ``RDPAccountant.history``.
        delta: δ in (0, 1).

    Returns:
        ε (0.0 for an empty ledger).
    """
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta}")
    return _composed_epsilon(tuple((float(q), float(sigma), int(steps)) for q, sigma, steps in ledger if steps), delta)


@lru_cache(maxsize=1024)
def _composed_epsilon(entries: tuple[tuple[float, float, int], ...], delta: float) -> float:
    """:func:`pld_epsilon` of a ledger as a hashable tuple, remembered: a pure function of its
    arguments, and a run asks the same ledger many times (each checkpoint, release block and report
    of a cross-graph party), at about half a second of CPU each."""
    import dp_accounting
    from dp_accounting.pld import pld_privacy_accountant

    if not entries:
        return 0.0
    events = [
        dp_accounting.SelfComposedDpEvent(
            dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), steps
        )
        for q, sigma, steps in entries
    ]
    accountant = pld_privacy_accountant.PLDAccountant(value_discretization_interval=VALUE_DISCRETIZATION_INTERVAL)
    try:
        if min(sigma for _, sigma, _ in entries) < MIN_SIGMA:  # refused before dp-accounting allocates for it
            raise ValueError(f"sigma below {MIN_SIGMA}")
        accountant.compose(dp_accounting.ComposedDpEvent(events))
    except (ValueError, MemoryError) as exc:  # "Maximum allowed size exceeded": a loss too wide to discretise
        sigmas = ", ".join(f"{sigma:g}" for _, sigma, _ in entries)
        raise PrivacyError(
            f"the PLD accountant (dp-accounting) cannot discretise the privacy loss at noise multiplier "
            f"{sigmas} ({exc}): such a sigma gives no meaningful guarantee; use --accountant rdp",
            field="privacy.accountant",
        ) from None
    return float(accountant.get_epsilon(delta))


def _epsilon_or_inf(entries: list[tuple[float, float, int]], delta: float) -> float:
    """ε of ``entries``, or ∞ where the loss is too wide to discretise (a σ far below any budget)."""
    try:
        return pld_epsilon(entries, delta=delta)
    except PrivacyError:
        return float("inf")


def pld_calibrate_noise_multiplier(
    *, target_epsilon: float, delta: float, sample_rate: float, steps: int, tol: float = 1e-3, sigma_max: float = 1e3
) -> float:
    """Smallest σ (up to ``tol``, relative) whose PLD ε over ``steps`` steps is ≤ ``target_epsilon``.

    Bisection with the bracket ε(lo) > target ≥ ε(hi); returns ``hi``, so the result never
    overshoots (as :func:`textkg.privacy.calibration.calibrate_noise_multiplier` does for RDP).

    Raises:
        ValueError: the target is unreachable with σ ≤ ``sigma_max``.
    """

    def eps(sigma: float) -> float:
        return _epsilon_or_inf([(sample_rate, sigma, steps)], delta)

    lo, hi = 0.0, 1.0
    while eps(hi) > target_epsilon:
        lo, hi = hi, 2.0 * hi
        if hi > sigma_max:
            raise ValueError(f"target_epsilon={target_epsilon:g} is unreachable with sigma <= {sigma_max:g}")
    while hi - lo > tol * hi:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if eps(mid) > target_epsilon else (lo, mid)
    return hi


def pld_max_steps(
    *, target_epsilon: float, delta: float, sample_rate: float, noise_multiplier: float, limit: int
) -> int:
    """The most steps ``k ≤ limit`` at (q, σ) whose PLD ε is ≤ ``target_epsilon`` (ε grows with k)."""

    def ok(k: int) -> bool:
        return k == 0 or _epsilon_or_inf([(sample_rate, noise_multiplier, k)], delta) <= target_epsilon

    if ok(limit):
        return limit
    lo, hi = 0, limit  # ok(lo), not ok(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return lo
