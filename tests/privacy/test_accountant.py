"""The RDP accountant: ledger, claims, persistence, registry, properties."""

from __future__ import annotations

import json
import logging
import math
import warnings

import pytest
from dp_accounting import dp_event
from dp_accounting.rdp import rdp_privacy_accountant as dpa
from hypothesis import given, settings
from hypothesis import strategies as st

from textkg.errors import ConfigError, PrivacyError
from textkg.privacy.accountant import RDPAccountant
from textkg.privacy.events import SampledGaussianEvent

pytestmark = pytest.mark.portability  # rerun by .ci/run under another thread count and ISA

DELTA = 1e-5
SMALL_GRID = [1.5, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 128, 256]


def _eps(q, sigma, steps, orders=SMALL_GRID):
    acc = RDPAccountant(orders=orders)
    acc.step(SampledGaussianEvent(sample_rate=q, noise_multiplier=sigma, steps=steps))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return acc.get_epsilon(delta=DELTA)


@pytest.fixture(autouse=True)
def _quiet_absl(caplog):
    caplog.set_level(logging.ERROR)


def test_merges_identical_consecutive_events():
    acc = RDPAccountant()
    e = SampledGaussianEvent(sample_rate=0.01, noise_multiplier=1.2)
    for _ in range(5):
        acc.step(e)
    acc.step(SampledGaussianEvent(sample_rate=0.01, noise_multiplier=2.0, steps=3))
    acc.step(e)
    assert acc.history == [(0.01, 1.2, 5), (0.01, 2.0, 3), (0.01, 1.2, 1)]
    assert acc.steps == 9


def test_merged_ledger_equals_one_event():
    one_by_one = RDPAccountant()
    for _ in range(100):
        one_by_one.step(SampledGaussianEvent(sample_rate=0.02, noise_multiplier=1.1))
    batched = RDPAccountant()
    batched.step(SampledGaussianEvent(sample_rate=0.02, noise_multiplier=1.1, steps=100))
    assert one_by_one.get_privacy_spent(delta=DELTA) == batched.get_privacy_spent(delta=DELTA)


def test_heterogeneous_ledger_matches_dp_accounting():
    events = [(0.01, 1.0, 300), (0.05, 2.0, 200), (0.01, 1.0, 50)]
    ours = RDPAccountant()
    theirs = dpa.RdpAccountant()
    for q, s, n in events:
        ours.step(SampledGaussianEvent(sample_rate=q, noise_multiplier=s, steps=n))
        theirs.compose(dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(s)), n)
    eps = ours.get_epsilon(delta=DELTA)
    ref = theirs.get_epsilon(DELTA)
    # dp-accounting over-estimates fractional orders (|terms|), never under: ours <= theirs, close
    assert eps <= ref * (1 + 1e-9)
    assert eps == pytest.approx(ref, rel=1e-3)


def test_empty_ledger_is_zero():
    acc = RDPAccountant()
    assert acc.steps == 0 and acc.get_epsilon(delta=DELTA) == 0.0


def test_state_dict_round_trip_and_resume():
    events = [SampledGaussianEvent(sample_rate=0.013, noise_multiplier=1.37)] * 40 + [
        SampledGaussianEvent(sample_rate=0.2, noise_multiplier=3.1)
    ] * 7
    full = RDPAccountant(orders="2-64")
    for e in events:
        full.step(e)
    first = RDPAccountant(orders="2-64")
    for e in events[:25]:
        first.step(e)
    saved = json.loads(json.dumps(first.state_dict()))
    resumed = RDPAccountant()  # default orders: load must restore the saved grid
    resumed.load_state_dict(saved)
    assert resumed.state_dict() == first.state_dict()
    for e in events[25:]:
        resumed.step(e)
    assert resumed.history == full.history
    assert resumed.get_privacy_spent(delta=DELTA) == full.get_privacy_spent(delta=DELTA)


@pytest.mark.parametrize(
    "state",
    [
        {},
        {"orders": [2, 3]},
        {"orders": [2, 3], "history": [[0.1, 1.0]]},
        {"orders": [0.5], "history": []},
        {"orders": [2], "history": [[1.5, 1.0, 3]]},
        {"orders": [2], "history": [[0.1, 1.0, 0]]},
        {"accountant": "prv", "orders": [2], "history": []},
    ],
)
def test_load_state_dict_rejects_malformed(state):
    acc = RDPAccountant()
    acc.step(SampledGaussianEvent(sample_rate=0.1, noise_multiplier=1.0))
    before = acc.state_dict()
    with pytest.raises(PrivacyError):
        acc.load_state_dict(state)
    assert acc.state_dict() == before  # validated before anything is replaced


def test_would_exceed():
    acc = RDPAccountant()
    event = SampledGaussianEvent(sample_rate=0.04, noise_multiplier=1.5)
    acc.step(SampledGaussianEvent(sample_rate=0.04, noise_multiplier=1.5, steps=2249))
    target = 7.32911117143  # ε after 2250 steps on Opacus's grid ~ the same on ours
    after = RDPAccountant(orders=acc.orders)
    after.step(SampledGaussianEvent(sample_rate=0.04, noise_multiplier=1.5, steps=2250))
    eps_after = after.get_epsilon(delta=DELTA)
    assert not acc.would_exceed(event, target_epsilon=eps_after, delta=DELTA)
    assert acc.would_exceed(event, target_epsilon=eps_after * (1 - 1e-9), delta=DELTA)
    assert acc.steps == 2249  # hypothetical: the ledger is untouched
    assert target > 0


def test_step_rejects_other_events():
    with pytest.raises(TypeError):
        RDPAccountant().step((0.1, 1.0))


def test_one_registry_is_named_accountant():
    """Issue 40: the ledger is not a registry; the accountants that claim ε are the one registry, and every
    claim builds the ledger it reads."""
    import textkg.privacy.accountant as ledger_module
    from textkg.privacy.claims import _CLAIMS, get_claim

    assert not hasattr(ledger_module, "_REGISTRY") and not hasattr(ledger_module, "get_accountant")
    assert _CLAIMS.family == "accountant"
    ledger = get_claim("rdp", orders=(2.0, 3.0)).ledger()
    assert isinstance(ledger, RDPAccountant) and ledger.orders == (2.0, 3.0) and ledger.steps == 0
    with pytest.raises(ConfigError, match="choose one of: pld, rdp") as info:
        get_claim("moments")
    assert info.value.field == "privacy.accountant"


@settings(max_examples=25, deadline=None)
@given(q=st.floats(1e-4, 0.5), sigma=st.floats(0.5, 5.0), steps=st.integers(1, 5000), more=st.integers(1, 5000))
def test_epsilon_increases_with_steps(q, sigma, steps, more):
    assert _eps(q, sigma, steps) <= _eps(q, sigma, steps + more)


@settings(max_examples=25, deadline=None)
@given(q=st.floats(1e-4, 0.5), factor=st.floats(1.01, 2.0), sigma=st.floats(0.5, 5.0), steps=st.integers(1, 2000))
def test_epsilon_increases_with_sample_rate(q, factor, sigma, steps):
    assert _eps(q, sigma, steps) <= _eps(min(1.0, q * factor), sigma, steps) * (1 + 1e-12)


@settings(max_examples=25, deadline=None)
@given(q=st.floats(1e-4, 0.5), sigma=st.floats(0.5, 5.0), factor=st.floats(1.01, 2.0), steps=st.integers(1, 2000))
def test_epsilon_decreases_with_noise(q, sigma, factor, steps):
    assert _eps(q, sigma * factor, steps) <= _eps(q, sigma, steps) * (1 + 1e-12)


def test_edge_of_grid_warning_through_accountant():
    from textkg.privacy.conversion import PrivacyWarning

    acc = RDPAccountant(orders="2-8")
    acc.step(SampledGaussianEvent(sample_rate=0.01, noise_multiplier=10.0, steps=10))
    with pytest.warns(PrivacyWarning):
        eps, alpha = acc.get_privacy_spent(delta=DELTA)
    assert alpha == 8 and math.isfinite(eps)


def test_pld_epsilon_matches_dp_accounting_and_is_below_rdp():
    """PLD (dp-accounting) reports a tighter ε than RDP for the same ledger; composing two ledger
    entries equals composing their events directly."""
    import dp_accounting
    from dp_accounting.pld import pld_privacy_accountant

    from textkg.privacy.accountant import epsilon_of
    from textkg.privacy.pld import pld_epsilon

    ledger = [(0.0138, 1.416, 300), (0.0138, 1.416, 65)]
    eps = pld_epsilon(ledger, delta=5.4e-6)
    ref = pld_privacy_accountant.PLDAccountant()
    ref.compose(
        dp_accounting.SelfComposedDpEvent(
            dp_accounting.PoissonSampledDpEvent(0.0138, dp_accounting.GaussianDpEvent(1.416)), 365
        )
    )
    assert eps == pytest.approx(ref.get_epsilon(5.4e-6), rel=1e-3)
    rdp = epsilon_of(sample_rate=0.0138, noise_multiplier=1.416, steps=365, delta=5.4e-6)
    assert 0.8 * rdp < eps < rdp
    assert pld_epsilon([], delta=1e-5) == 0.0


def test_pld_epsilon_composes_a_ledger_once_however_often_it_is_asked(monkeypatch):
    """A run asks the same ledger's ε at every checkpoint and release; dp-accounting composes it once
    (as a list, a tuple or from JSON), a ledger one step longer anew, and a bad delta still raises."""
    from dp_accounting.pld import pld_privacy_accountant

    from textkg.privacy.pld import _composed_epsilon, pld_epsilon

    _composed_epsilon.cache_clear()  # another test may have asked this ledger
    composed = []
    real = pld_privacy_accountant.PLDAccountant.compose
    monkeypatch.setattr(
        pld_privacy_accountant.PLDAccountant, "compose", lambda self, e: composed.append(e) or real(self, e)
    )
    ledger = [(0.0271, 1.3, 17), (0.0271, 1.7, 4)]
    first = pld_epsilon(ledger, delta=3e-6)
    assert [pld_epsilon(x, delta=3e-6) for x in (ledger, tuple(ledger), [list(e) for e in ledger])] == [first] * 3
    assert len(composed) == 1
    assert pld_epsilon([*ledger[:1], (0.0271, 1.7, 5)], delta=3e-6) > first and len(composed) == 2
    with pytest.raises(ValueError, match="delta"):
        pld_epsilon(ledger, delta=0.0)


def test_pld_calibration_never_overshoots_and_max_steps_is_the_last_allowed():
    from textkg.privacy.pld import pld_calibrate_noise_multiplier, pld_epsilon, pld_max_steps

    q, steps, delta, target = 0.02, 200, 1e-5, 1.5
    sigma = pld_calibrate_noise_multiplier(target_epsilon=target, delta=delta, sample_rate=q, steps=steps)
    assert pld_epsilon([(q, sigma, steps)], delta=delta) <= target
    assert pld_epsilon([(q, sigma * 0.99, steps)], delta=delta) > target  # tight
    k = pld_max_steps(target_epsilon=1.0, delta=delta, sample_rate=q, noise_multiplier=1.0, limit=2000)
    assert 0 < k < 2000
    assert pld_epsilon([(q, 1.0, k)], delta=delta) <= 1.0 < pld_epsilon([(q, 1.0, k + 1)], delta=delta)


def test_claims_are_registered_accountants_with_one_duplicate_rule():
    """Issue 30: RDP and PLD are registered accountants, chosen by name; a taken name raises."""
    import pytest as _pytest

    from textkg.errors import ConfigError
    from textkg.privacy.claims import get_claim, register_claim, registered_claims
    from textkg.training.config import PRIVACY_ACCOUNTANTS

    assert registered_claims() == ["pld", "rdp"] and set(PRIVACY_ACCOUNTANTS) == {"pld", "rdp"}
    ledger = [(0.01, 1.1, 1000)]
    assert get_claim("rdp").epsilon(ledger, delta=1e-5) == _pytest.approx(epsilon_of_ledger(ledger), rel=1e-12)
    assert get_claim("pld").epsilon(ledger, delta=1e-5) < get_claim("rdp").epsilon(ledger, delta=1e-5)
    with _pytest.raises(ConfigError, match="already registered"):
        register_claim("rdp")(type(get_claim("rdp")))
    with _pytest.raises(ConfigError, match="choose one of: pld, rdp"):
        get_claim("moments")


def epsilon_of_ledger(ledger):
    acc = RDPAccountant()
    for q, sigma, n in ledger:
        acc.step(SampledGaussianEvent(sample_rate=q, noise_multiplier=sigma, steps=n))
    return acc.get_epsilon(delta=1e-5)
