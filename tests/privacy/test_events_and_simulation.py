"""Events are frozen, validated data; the simulation is labelled and behaves as documented."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from textkg.privacy import simulation
from textkg.privacy.events import SampledGaussianEvent


def test_event_is_frozen_and_normalised():
    e = SampledGaussianEvent(sample_rate=1, noise_multiplier=2)
    assert e == SampledGaussianEvent(sample_rate=1.0, noise_multiplier=2.0, steps=1)
    assert isinstance(e.sample_rate, float) and hash(e) == hash(SampledGaussianEvent(1.0, 2.0))
    with pytest.raises(dataclasses.FrozenInstanceError):
        e.steps = 3  # type: ignore[misc]


@pytest.mark.parametrize(
    "args",
    [
        (-0.1, 1.0, 1),
        (1.1, 1.0, 1),
        (0.1, -1.0, 1),
        (0.1, float("nan"), 1),
        (0.1, 1.0, 0),
        (0.1, 1.0, 1.5),
        (0.1, 1.0, True),
        ("0.1", 1.0, 1),
    ],
)
def test_event_validation(args):
    with pytest.raises(ValueError):
        SampledGaussianEvent(*args)


def test_simulation_is_labelled_and_clips_the_batch_gradient():
    assert simulation.GUARANTEE == "simulation"
    assert "NOT DIFFERENTIALLY PRIVATE" in simulation.__doc__
    a, b = torch.nn.Parameter(torch.zeros(3)), torch.nn.Parameter(torch.zeros(4))
    a.grad, b.grad = torch.full((3,), 3.0), torch.full((4,), 4.0)
    total = simulation.clip_and_noise_batch_gradient(
        [a, b], noise_multiplier=0.0, max_grad_norm=1.0, batch_size=8, generator=None
    )
    assert total == pytest.approx((27 + 64) ** 0.5)
    assert torch.sqrt(a.grad.pow(2).sum() + b.grad.pow(2).sum()).item() == pytest.approx(1.0, rel=1e-5)
    big = torch.nn.Parameter(torch.zeros(20000))
    big.grad = torch.zeros(20000)
    simulation.clip_and_noise_batch_gradient(
        [big], noise_multiplier=2.0, max_grad_norm=1.0, batch_size=8, generator=torch.Generator().manual_seed(0)
    )
    assert big.grad.std().item() == pytest.approx(2.0 / 8, rel=0.03)
