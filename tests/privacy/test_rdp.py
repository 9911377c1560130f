"""RDP of the Sampled Gaussian Mechanism: references, two libraries, an mpmath oracle."""

from __future__ import annotations

import logging
import math

import mpmath as mp
import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.rdp import rdp_privacy_accountant as dpa
from opacus.accountants import RDPAccountant as OpacusRDPAccountant
from opacus.accountants.analysis import rdp as opacus_rdp

from textkg.errors import ConfigError
from textkg.privacy.accountant import RDPAccountant
from textkg.privacy.events import SampledGaussianEvent
from textkg.privacy.rdp import DEFAULT_ORDERS, compute_rdp, log_a, parse_orders, rdp_sampled_gaussian_order

pytestmark = pytest.mark.portability  # rerun by .ci/run under another thread count and ISA

GRID = [(q, s) for q in (1e-4, 0.004, 0.04, 0.3, 0.7) for s in (0.6, 1.0, 1.5, 4.0)]
INT_ORDERS = [2, 3, 5, 8, 16, 32, 63, 128, 256]
FRAC_ORDERS = [1.1, 1.5, 2.5, 4.7, 10.9]


def _dp_accounting_rdp(q: float, sigma: float, orders) -> np.ndarray:
    acc = dpa.RdpAccountant(orders=list(orders))
    acc.compose(dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(sigma)))
    return np.asarray(acc._rdp)  # the accountant's per-order RDP (no public getter)


def test_opacus_reference_epsilon():
    """Opacus's pinned value: σ=1.5, q=0.04, 2250 steps, δ=1e-5 → ε = 7.32911117143."""
    opacus = OpacusRDPAccountant()
    opacus.history = [(1.5, 0.04, 2250)]
    ref, _ = opacus.get_privacy_spent(delta=1e-5)
    assert ref == pytest.approx(7.32911117143, rel=1e-10)
    ours = RDPAccountant(orders=OpacusRDPAccountant.DEFAULT_ALPHAS)
    ours.step(SampledGaussianEvent(sample_rate=0.04, noise_multiplier=1.5, steps=2250))
    eps, alpha = ours.get_privacy_spent(delta=1e-5)
    assert eps == pytest.approx(7.32911117143, rel=1e-6)
    assert alpha == 3.9


@pytest.mark.parametrize("q,sigma", GRID)
def test_integer_orders_match_opacus_and_dp_accounting(q, sigma):
    ours = compute_rdp(sample_rate=q, noise_multiplier=sigma, steps=7, orders=INT_ORDERS)
    opacus = np.asarray(opacus_rdp.compute_rdp(q=q, noise_multiplier=sigma, steps=7, orders=INT_ORDERS))
    dpacc = 7 * _dp_accounting_rdp(q, sigma, INT_ORDERS)
    # their plain log-sum-exp of A≈1 loses relative precision when log A < ~1e-6 (ours is
    # exact to 1e-14 vs mpmath, see below), hence a tiny absolute slack
    np.testing.assert_allclose(ours, opacus, rtol=1e-9, atol=1e-13)
    np.testing.assert_allclose(ours, dpacc, rtol=1e-9, atol=1e-13)


@pytest.mark.parametrize("q,sigma", GRID)
def test_fractional_orders_match_opacus_and_bound_by_dp_accounting(q, sigma, caplog):
    """Opacus sums the fractional series with its signs (exact), as we do;
    dp-accounting 0.6 adds |terms|, an upper bound (or ``inf`` if its 1000-term
    loop does not converge). Ours must agree with the first and never exceed
    the second by more than round-off."""
    caplog.set_level(logging.ERROR)
    ours = compute_rdp(sample_rate=q, noise_multiplier=sigma, orders=FRAC_ORDERS)
    dpacc = _dp_accounting_rdp(q, sigma, FRAC_ORDERS)
    assert np.all(ours <= dpacc * (1 + 1e-9) + 1e-15)
    # the |terms| slack shrinks as α grows (the sign-alternating tail matters less)
    large = np.isfinite(dpacc) & (np.asarray(FRAC_ORDERS) > 4)
    np.testing.assert_allclose(ours[large], dpacc[large], rtol=1e-2)
    try:
        opacus = np.asarray(opacus_rdp.compute_rdp(q=q, noise_multiplier=sigma, steps=1, orders=FRAC_ORDERS))
    except ValueError:  # Opacus's log-sub can fail on extreme inputs
        return
    np.testing.assert_allclose(ours, opacus, rtol=1e-6, atol=1e-12)


def _oracle_log_a_sum(q, sigma, alpha: int) -> mp.mpf:
    q, sigma = mp.mpf(q), mp.mpf(sigma)
    return mp.log(
        mp.fsum(
            mp.binomial(alpha, k) * (1 - q) ** (alpha - k) * q**k * mp.exp((k * k - k) / (2 * sigma**2))
            for k in range(alpha + 1)
        )
    )


def _oracle_log_a_integral(q, sigma, alpha) -> mp.mpf:
    """log E_{z~μ0}[(μ(z)/μ0(z))^α], μ = (1−q)N(0,σ²) + qN(1,σ²), by quadrature."""
    q, sigma, alpha = mp.mpf(q), mp.mpf(sigma), mp.mpf(alpha)

    def integrand(z):
        ratio = (1 - q) + q * mp.exp((2 * z - 1) / (2 * sigma**2))
        return mp.npdf(z, 0, sigma) * ratio**alpha

    z0 = sigma**2 * mp.log(1 / q - 1) + mp.mpf(1) / 2
    cuts = sorted({-mp.inf, -12 * sigma, mp.mpf(0), z0, alpha, alpha + 12 * sigma, mp.inf})
    return mp.log(mp.quad(integrand, cuts))


ORACLE_CASES = [(0.04, 1.5), (0.01, 0.7), (0.3, 5.0), (1e-3, 0.8), (0.5, 1.0)]


@pytest.mark.parametrize("q,sigma", ORACLE_CASES)
@pytest.mark.parametrize("alpha", [2, 3, 8, 20])
def test_log_a_integer_against_mpmath(q, sigma, alpha):
    with mp.workdps(50):
        exact = _oracle_log_a_sum(q, sigma, alpha)
        integral = _oracle_log_a_integral(q, sigma, alpha)
    assert float(integral) == pytest.approx(float(exact), rel=1e-12)  # the two oracles agree
    assert log_a(q, sigma, alpha) == pytest.approx(float(exact), rel=1e-12)


@pytest.mark.parametrize("q,sigma", ORACLE_CASES)
@pytest.mark.parametrize("alpha", [1.1, 1.5, 2.5, 5.3, 10.9])
def test_log_a_fractional_against_mpmath(q, sigma, alpha):
    with mp.workdps(40):
        exact = float(_oracle_log_a_integral(q, sigma, alpha))
    ours = log_a(q, sigma, alpha)
    assert ours == pytest.approx(exact, rel=1e-6, abs=1e-12)
    assert ours >= exact * (1 - 1e-13)  # the truncated series is closed with an upper bound


@pytest.mark.parametrize("alpha", [1.5, 2, 7.3, 32, 1024])
@pytest.mark.parametrize("sigma", [0.5, 1.0, 3.0])
def test_q_one_is_gaussian_mechanism(alpha, sigma):
    # the seed paper's exponent (k²−k)/σ² would give α/σ²; the right value is α/(2σ²)
    assert rdp_sampled_gaussian_order(sample_rate=1.0, noise_multiplier=sigma, order=alpha) == pytest.approx(
        alpha / (2 * sigma**2), rel=1e-12
    )


def test_integer_formula_tends_to_gaussian_as_q_to_one():
    alpha, sigma = 6, 1.3
    near = rdp_sampled_gaussian_order(sample_rate=1 - 1e-12, noise_multiplier=sigma, order=alpha)
    assert near == pytest.approx(alpha / (2 * sigma**2), rel=1e-6)


def test_edge_cases():
    assert rdp_sampled_gaussian_order(sample_rate=0.0, noise_multiplier=1.0, order=3) == 0.0
    assert rdp_sampled_gaussian_order(sample_rate=0.0, noise_multiplier=0.0, order=3) == 0.0
    assert rdp_sampled_gaussian_order(sample_rate=0.1, noise_multiplier=0.0, order=3) == math.inf
    assert np.all(compute_rdp(sample_rate=0.1, noise_multiplier=1.0, steps=0) == 0)
    with pytest.raises(ValueError):
        rdp_sampled_gaussian_order(sample_rate=0.1, noise_multiplier=1.0, order=1.0)
    with pytest.raises(ValueError):
        rdp_sampled_gaussian_order(sample_rate=1.5, noise_multiplier=1.0, order=2)


def test_composition_is_linear_in_steps():
    one = compute_rdp(sample_rate=0.02, noise_multiplier=1.1, steps=1)
    np.testing.assert_allclose(compute_rdp(sample_rate=0.02, noise_multiplier=1.1, steps=300), 300 * one)


def test_default_orders_grid():
    assert DEFAULT_ORDERS[:3] == (1.1, 1.2, 1.3) and DEFAULT_ORDERS[98] == pytest.approx(10.9)
    assert DEFAULT_ORDERS[99:152] == tuple(range(11, 64))
    assert DEFAULT_ORDERS[-4:] == (128, 256, 512, 1024)
    assert tuple(DEFAULT_ORDERS) == tuple(dpa.DEFAULT_RDP_ORDERS)


def test_parse_orders():
    assert parse_orders("2-64") == tuple(float(a) for a in range(2, 65))
    assert parse_orders("1.5, 2,4-6,  128") == (1.5, 2.0, 4.0, 5.0, 6.0, 128.0)
    assert parse_orders([3, 2, 2]) == (2.0, 3.0)
    for bad in ("", "1-4", "0.5", "abc", "9-3", "2,,3"):
        with pytest.raises(ConfigError) as info:
            parse_orders(bad)
        assert info.value.field == "orders"
