"""RDP → (ε, δ) conversion (CKS 2020, Prop. 12): values, guards, warning."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from dp_accounting.rdp import rdp_privacy_accountant as dpa
from opacus.accountants.analysis import rdp as opacus_rdp

from textkg.privacy.conversion import PrivacyWarning, rdp_to_epsilon
from textkg.privacy.rdp import DEFAULT_ORDERS, compute_rdp

pytestmark = pytest.mark.portability  # rerun by .ci/run under another thread count and ISA


@pytest.mark.parametrize(
    "q,sigma,steps,delta",
    [(0.04, 1.5, 2250, 1e-5), (0.01, 1.0, 10_000, 1e-6), (0.1, 3.0, 500, 1e-5), (0.001, 0.8, 100, 1e-7)],
)
def test_matches_opacus_and_dp_accounting(q, sigma, steps, delta):
    orders = list(DEFAULT_ORDERS)
    rdp = compute_rdp(sample_rate=q, noise_multiplier=sigma, steps=steps, orders=orders)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours, alpha = rdp_to_epsilon(orders=orders, rdp=rdp, delta=delta)
        theirs, their_alpha = opacus_rdp.get_privacy_spent(orders=orders, rdp=rdp, delta=delta)
    google, _ = dpa.compute_epsilon(orders, rdp, delta)
    assert ours == pytest.approx(max(0.0, theirs), rel=1e-12) and alpha == their_alpha
    assert ours == pytest.approx(google, rel=1e-12)


def test_formula_at_one_order():
    alpha, rho, delta = 4.0, 0.7, 1e-5
    expected = rho + math.log((alpha - 1) / alpha) - (math.log(delta) + math.log(alpha)) / (alpha - 1)
    eps, best = rdp_to_epsilon(orders=[alpha], rdp=[rho], delta=delta)
    assert eps == pytest.approx(expected, rel=1e-14) and best == alpha


def test_delta_zero_is_infinite():
    assert rdp_to_epsilon(orders=[2, 3], rdp=[0.1, 0.2], delta=0.0)[0] == math.inf
    assert rdp_to_epsilon(orders=[2, 3], rdp=[0.0, 0.0], delta=0.0)[0] == 0.0


def test_zero_rdp_is_zero_epsilon():
    eps, alpha = rdp_to_epsilon(orders=DEFAULT_ORDERS, rdp=np.zeros(len(DEFAULT_ORDERS)), delta=1e-5)
    assert eps == 0.0 and math.isnan(alpha)


@pytest.mark.filterwarnings("ignore::textkg.privacy.conversion.PrivacyWarning")
def test_negative_epsilon_clipped_and_negative_rdp_raised_to_zero():
    # a huge δ-friendly order makes the formula negative: ε clipped at 0
    eps, _ = rdp_to_epsilon(orders=[2.0, 1e6], rdp=[1e-9, 1e-9], delta=0.5)
    assert eps == 0.0
    # a negative RDP value is round-off: treated as 0, never as a privacy gain
    eps_neg, _ = rdp_to_epsilon(orders=[3.0, 4.0, 5.0], rdp=[0.5, -10.0, 0.5], delta=1e-5)
    eps_zero, _ = rdp_to_epsilon(orders=[3.0, 4.0, 5.0], rdp=[0.5, 0.0, 0.5], delta=1e-5)
    assert eps_neg == eps_zero > 0


def test_nan_and_inf_rdp_are_no_claim_at_that_order():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        eps, alpha = rdp_to_epsilon(orders=[2.0, 3.0, 4.0], rdp=[math.nan, 0.3, math.inf], delta=1e-5)
    assert alpha == 3.0 and math.isfinite(eps)
    eps, alpha = rdp_to_epsilon(orders=[2.0, 3.0], rdp=[math.nan, math.inf], delta=1e-5)
    assert eps == math.inf and math.isnan(alpha)


@pytest.mark.parametrize("orders", [[1.0, 2.0], [0.5, 2.0], [2.0, math.inf]])
def test_orders_must_exceed_one(orders):
    with pytest.raises(ValueError):
        rdp_to_epsilon(orders=orders, rdp=[0.1, 0.1], delta=1e-5)


@pytest.mark.parametrize("delta", [-1e-5, 1.0, math.nan])
def test_delta_range(delta):
    with pytest.raises(ValueError):
        rdp_to_epsilon(orders=[2.0], rdp=[0.1], delta=delta)


def test_length_mismatch():
    with pytest.raises(ValueError):
        rdp_to_epsilon(orders=[2.0, 3.0], rdp=[0.1], delta=1e-5)


def test_edge_of_grid_warns():
    # σ small, many steps: the best order is the smallest of a grid starting at 32
    orders = list(range(32, 40))
    rdp = compute_rdp(sample_rate=0.1, noise_multiplier=0.8, steps=1000, orders=orders)
    with pytest.warns(PrivacyWarning, match="smallest"):
        _, alpha = rdp_to_epsilon(orders=orders, rdp=rdp, delta=1e-5)
    assert alpha == 32
    # large σ, few steps: the best order is the largest of the grid 2..8
    orders = list(range(2, 9))
    rdp = compute_rdp(sample_rate=0.01, noise_multiplier=10.0, steps=10, orders=orders)
    with pytest.warns(PrivacyWarning, match="largest"):
        _, alpha = rdp_to_epsilon(orders=orders, rdp=rdp, delta=1e-5)
    assert alpha == 8


def test_interior_optimum_does_not_warn():
    rdp = compute_rdp(sample_rate=0.04, noise_multiplier=1.5, steps=2250)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyWarning)
        rdp_to_epsilon(orders=DEFAULT_ORDERS, rdp=rdp, delta=1e-5)
