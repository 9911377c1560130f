"""σ calibration never overshoots the target and is tight."""

from __future__ import annotations

import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from textkg.errors import PrivacyError
from textkg.privacy.accountant import RDPAccountant
from textkg.privacy.calibration import calibrate_noise_multiplier
from textkg.privacy.events import SampledGaussianEvent

pytestmark = pytest.mark.portability  # rerun by .ci/run under another thread count and ISA

GRID = [1.5, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64, 128, 256]


def _eps(sigma, q, steps, delta, orders):
    acc = RDPAccountant(orders=orders)
    acc.step(SampledGaussianEvent(sample_rate=q, noise_multiplier=sigma, steps=steps))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return acc.get_epsilon(delta=delta)


def test_known_value_and_tightness():
    tol = 1e-4
    sigma = calibrate_noise_multiplier(target_epsilon=1.0, delta=1e-5, sample_rate=0.01, steps=1000, tol=tol)
    assert _eps(sigma, 0.01, 1000, 1e-5, None) <= 1.0
    assert _eps(sigma * (1 - tol), 0.01, 1000, 1e-5, None) > 1.0
    assert sigma == pytest.approx(1.513, abs=2e-3)


@settings(max_examples=20, deadline=None)
@given(target=st.floats(0.3, 20.0), q=st.floats(1e-3, 0.3), steps=st.integers(1, 3000), log_delta=st.floats(-9, -4))
def test_never_overshoots_and_is_tight(target, q, steps, log_delta):
    delta, tol = 10**log_delta, 1e-3
    try:
        sigma = calibrate_noise_multiplier(
            target_epsilon=target, delta=delta, sample_rate=q, steps=steps, orders=GRID, tol=tol
        )
    except PrivacyError:
        # unreachable: even huge noise cannot go below the target on this grid
        assert _eps(1e4, q, steps, delta, GRID) > target
        return
    assert _eps(sigma, q, steps, delta, GRID) <= target
    assert _eps(sigma * (1 - tol), q, steps, delta, GRID) > target


def test_unreachable_target_raises():
    with pytest.raises(PrivacyError) as info:
        calibrate_noise_multiplier(target_epsilon=1e-3, delta=1e-5, sample_rate=0.01, steps=100)
    assert info.value.field == "target_epsilon"


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(target_epsilon=0.0),
        dict(delta=0.0),
        dict(delta=1.0),
        dict(sample_rate=0.0),
        dict(sample_rate=1.5),
        dict(steps=0),
        dict(tol=0.0),
    ],
)
def test_rejects_bad_arguments(kwargs):
    args = dict(target_epsilon=1.0, delta=1e-5, sample_rate=0.01, steps=10)
    args.update(kwargs)
    with pytest.raises(ValueError):
        calibrate_noise_multiplier(**args)


def test_seed_integer_grid():
    sigma = calibrate_noise_multiplier(target_epsilon=2.0, delta=1e-5, sample_rate=0.02, steps=500, orders="2-64")
    assert _eps(sigma, 0.02, 500, 1e-5, "2-64") <= 2.0
