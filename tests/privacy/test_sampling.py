"""Poisson sampling: batch sizes ~ Binomial(N, q), independent inclusion."""

from __future__ import annotations

import math

import pytest
import torch

from textkg.privacy.sampling import PoissonBatches, poisson_sample


def test_batch_sizes_are_binomial():
    n, q, steps = 1000, 0.05, 2000
    sizes = torch.tensor(
        [len(b) for b in PoissonBatches(n, sample_rate=q, steps=steps, generator=torch.Generator().manual_seed(3))],
        dtype=torch.float64,
    )
    mean, var = n * q, n * q * (1 - q)
    assert abs(sizes.mean().item() - mean) < 4 * math.sqrt(var / steps)
    # sample variance of a Binomial: SE ≈ var·sqrt(2/(steps−1)) (near-normal)
    assert abs(sizes.var().item() - var) < 4 * var * math.sqrt(2 / (steps - 1))
    assert sizes.min() < mean < sizes.max()  # variable size, not fixed


def test_inclusion_is_uniform_and_indices_valid():
    n, q, steps = 50, 0.2, 3000
    counts = torch.zeros(n)
    for idx in PoissonBatches(n, sample_rate=q, steps=steps, generator=torch.Generator().manual_seed(5)):
        assert idx.dtype == torch.long and torch.all(idx[1:] > idx[:-1]) and (len(idx) == 0 or idx.max() < n)
        counts[idx] += 1
    se = math.sqrt(steps * q * (1 - q))
    assert torch.all((counts - steps * q).abs() < 4.5 * se)


def test_empty_and_full():
    g = torch.Generator().manual_seed(0)
    assert poisson_sample(100, sample_rate=0.0, generator=g).numel() == 0
    assert poisson_sample(100, sample_rate=1.0, generator=g).tolist() == list(range(100))
    assert poisson_sample(0, sample_rate=0.5, generator=g).numel() == 0
    empties = sum(len(poisson_sample(10, sample_rate=0.05, generator=g)) == 0 for _ in range(400))
    assert 0 < empties  # P(empty) = 0.95^10 ≈ 0.6


def test_seeded_reproducibility_and_len():
    a = list(PoissonBatches(30, sample_rate=0.3, steps=5, generator=torch.Generator().manual_seed(9)))
    b = list(PoissonBatches(30, sample_rate=0.3, steps=5, generator=torch.Generator().manual_seed(9)))
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True)) and len(a) == 5
    assert len(PoissonBatches(30, sample_rate=0.3, steps=5, generator=None)) == 5


@pytest.mark.parametrize("kwargs", [dict(sample_rate=-0.1), dict(sample_rate=1.1)])
def test_rejects_bad_rate(kwargs):
    with pytest.raises(ValueError):
        poisson_sample(10, generator=None, **kwargs)
