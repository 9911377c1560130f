"""ε of a ledger by privacy-loss-distribution (PLD) accounting, through Google's dp-accounting.

PLD accounting composes the exact privacy-loss distribution of the Poisson-sampled
Gaussian mechanism numerically (Koskela, Jälkö & Honkela 2020, arXiv:1906.03049;
the pessimistic "connect the dots" discretisation of Doroshenko et al. 2022,
arXiv:2207.04380v1), so its ε is an upper bound and is tighter than the RDP →
(ε, δ) conversion. We report it beside the RDP ε; the claimed ε is the RDP one
(``privacy.accountant.RDPAccountant``), whose ledger it reads.
"""

from __future__ import annotations

from typing import Iterable

#: dp-accounting's discretisation of the privacy loss (its default); smaller is tighter and slower
VALUE_DISCRETIZATION_INTERVAL = 1e-4


def pld_epsilon(ledger: Iterable[tuple[float, float, int]], *, delta: float) -> float:
    """ε at ``delta`` of the composition of ``(sample_rate q, noise_multiplier σ, steps)`` entries.

    Args:
        ledger: entries as in ``RDPAccountant.history``.
        delta: δ in (0, 1).

    Returns:
        ε (0.0 for an empty ledger).
    """
    import dp_accounting
    from dp_accounting.pld import pld_privacy_accountant

    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta}")
    events = [dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(float(q), dp_accounting.GaussianDpEvent(float(sigma))), int(steps))
        for q, sigma, steps in ledger if steps]
    if not events:
        return 0.0
    accountant = pld_privacy_accountant.PLDAccountant(
        value_discretization_interval=VALUE_DISCRETIZATION_INTERVAL)
    accountant.compose(dp_accounting.ComposedDpEvent(events))
    return float(accountant.get_epsilon(delta))
