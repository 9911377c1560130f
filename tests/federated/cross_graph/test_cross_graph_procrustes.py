"""The exchange's mechanism and map: an oracle (a known rotation is recovered), clipping, noise level."""

from __future__ import annotations

import math

import pytest
import torch

from textkg.federated.cross_graph.procrustes import clip_rows, procrustes, release_rows


def _orthogonal(d: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    q, r = torch.linalg.qr(torch.randn(d, d, generator=g, dtype=torch.float64))
    return q * torch.sign(torch.diagonal(r))


def test_procrustes_recovers_a_known_rotation_scale_and_shift_without_noise():
    g = torch.Generator().manual_seed(0)
    source = torch.randn(60, 8, generator=g, dtype=torch.float64)
    q = _orthogonal(8, 1)
    target = 2.5 * source @ q + torch.arange(8, dtype=torch.float64)
    fit = procrustes(source, target)
    assert torch.allclose(fit.rotation, q, atol=1e-10)
    assert fit.scale == pytest.approx(2.5, rel=1e-10)
    assert torch.allclose(fit(source), target, atol=1e-10)


def test_procrustes_without_scale_and_between_spaces_of_different_dimensions():
    g = torch.Generator().manual_seed(2)
    source = torch.randn(40, 4, generator=g, dtype=torch.float64)
    embed = _orthogonal(6, 3)[:4]  # (4, 6), orthonormal rows: the sender's space inside the receiver's
    target = source @ embed
    fit = procrustes(source, target, scale=False)
    assert fit.rotation.shape == (4, 6) and fit.scale == 1.0
    assert torch.allclose(fit.rotation, embed, atol=1e-10)
    assert torch.allclose(fit(source), target, atol=1e-10)


def test_noise_shrinks_the_fitted_scale():
    g = torch.Generator().manual_seed(4)
    source = torch.randn(200, 8, generator=g, dtype=torch.float64)
    noisy = source + 3.0 * torch.randn(200, 8, generator=g, dtype=torch.float64)
    assert procrustes(noisy, source).scale < 0.5 * procrustes(source, source).scale


def test_release_clips_every_row_and_adds_sigma_c_noise_on_every_entry():
    g = torch.Generator().manual_seed(5)
    rows = torch.randn(500, 16, generator=g) * 3
    rows[0] = 0.1  # a row inside the ball is untouched
    clean = release_rows(rows, clip=1.5, noise_multiplier=0.0, noise=torch.zeros_like(rows))
    assert bool((clean.norm(dim=1) <= 1.5 + 1e-9).all())
    assert torch.allclose(clean[0], rows[0].double())
    z = torch.randn(500, 16, generator=g, dtype=torch.float64)
    noisy = release_rows(rows, clip=1.5, noise_multiplier=2.0, noise=z)
    residual = noisy - clip_rows(rows.double(), 1.5)
    assert torch.allclose(residual, 3.0 * z)
    assert residual.std().item() == pytest.approx(3.0, rel=0.05)
    assert not math.isnan(float(noisy.sum()))
    with pytest.raises(ValueError):
        release_rows(rows, clip=1.0, noise_multiplier=1.0, noise=z[:10])
