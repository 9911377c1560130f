"""A decaying σ schedule: its ledger is the composition of each step's σ, and calibration never overshoots."""

from __future__ import annotations

import warnings
from functools import lru_cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from textkg.privacy.accountant import RDPAccountant
from textkg.privacy.calibration import calibrate_noise_multiplier
from textkg.privacy.conversion import rdp_to_epsilon
from textkg.privacy.events import SampledGaussianEvent
from textkg.privacy.rdp import DEFAULT_ORDERS, compute_rdp
from textkg.privacy.schedule import GeometricNoiseSchedule


def _ledger_epsilon(schedule, sigma0, q, steps, delta):
    acc = RDPAccountant()
    for event in schedule.events(sigma0=sigma0, sample_rate=q, steps=steps):
        acc.step(event)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return acc.get_epsilon(delta=delta)


@lru_cache(maxsize=256)
def _one_step_rdp(q, sigma):
    return compute_rdp(sample_rate=q, noise_multiplier=sigma, steps=1, orders=DEFAULT_ORDERS)


def _oracle_epsilon(decay, stage, sigma0, q, steps, delta):
    """One step at a time, σ_t = σ_0 γ^⌊t/S⌋ written out, RDP summed (Mironov 2017, Prop. 1)."""
    rdp = np.zeros(len(DEFAULT_ORDERS))
    for t in range(steps):
        rdp += _one_step_rdp(q, sigma0 * decay ** (t // stage))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return rdp_to_epsilon(orders=DEFAULT_ORDERS, rdp=rdp.tolist(), delta=delta)[0]


def test_one_event_per_stage_at_that_stages_sigma():
    events = GeometricNoiseSchedule(decay=0.5, stage_steps=3).events(sigma0=2.0, sample_rate=0.1, steps=8)
    assert events == [
        SampledGaussianEvent(sample_rate=0.1, noise_multiplier=2.0, steps=3),
        SampledGaussianEvent(sample_rate=0.1, noise_multiplier=1.0, steps=3),
        SampledGaussianEvent(sample_rate=0.1, noise_multiplier=0.5, steps=2),
    ]


@pytest.mark.parametrize("decay, stage, steps", [(0.5, 3, 8), (0.8, 7, 50), (1.0, 4, 12)])
def test_the_ledger_equals_the_step_by_step_composition(decay, stage, steps):
    schedule = GeometricNoiseSchedule(decay=decay, stage_steps=stage)
    ledger = _ledger_epsilon(schedule, 1.7, 0.05, steps, 1e-5)
    assert ledger == pytest.approx(_oracle_epsilon(decay, stage, 1.7, 0.05, steps, 1e-5), rel=1e-10)


@settings(max_examples=10, deadline=None)
@given(
    target=st.floats(0.5, 10.0),
    q=st.floats(1e-3, 0.3),
    stages=st.integers(1, 6),
    stage=st.integers(1, 100),
    decay=st.floats(0.3, 1.0),
)
def test_a_calibrated_sigma0_never_overshoots_and_is_tight(target, q, stages, stage, decay):
    tol, delta = 1e-3, 1e-5
    schedule = GeometricNoiseSchedule(decay=decay, stage_steps=stage)
    steps = stages * stage
    sigma0 = calibrate_noise_multiplier(
        target_epsilon=target, delta=delta, sample_rate=q, steps=steps, tol=tol, schedule=schedule
    )
    assert _oracle_epsilon(decay, stage, sigma0, q, steps, delta) <= target * (1 + 1e-9)
    assert _oracle_epsilon(decay, stage, sigma0 * (1 - tol), q, steps, delta) > target


def test_a_decaying_schedule_starts_above_the_constant_sigma_and_ends_below_it():
    kwargs = dict(target_epsilon=4.0, delta=1e-5, sample_rate=0.02, steps=300)
    constant = calibrate_noise_multiplier(**kwargs)
    schedule = GeometricNoiseSchedule(decay=0.5, stage_steps=100)
    sigma0 = calibrate_noise_multiplier(**kwargs, schedule=schedule)
    assert sigma0 > constant > schedule.noise_multiplier(sigma0, 299)
    assert calibrate_noise_multiplier(**kwargs, schedule=GeometricNoiseSchedule(decay=1.0, stage_steps=7)) == constant


@pytest.mark.parametrize("decay, stage", [(0.0, 1), (1.5, 1), (0.5, 0), (True, 1)])
def test_bad_schedules_are_refused(decay, stage):
    with pytest.raises(ValueError):
        GeometricNoiseSchedule(decay=decay, stage_steps=stage)
