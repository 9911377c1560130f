"""The Gaussian mechanism's noise."""

from __future__ import annotations

import torch


def add_noise(
    summed_grad: torch.Tensor, *, noise_multiplier: float, max_grad_norm: float, generator: torch.Generator | None
) -> torch.Tensor:
    """``summed_grad + N(0, σ²C²)`` on EVERY entry (a new tensor; the input is untouched).

    For an embedding table this means every row, not only the rows the batch
    touched: which rows were touched depends on the private examples, so
    noising only those would reveal them (and the Sampled Gaussian Mechanism's
    analysis assumes the whole released vector is noised).

    Args:
        summed_grad: any shape, the sum of clipped per-example gradients.
        noise_multiplier: σ >= 0.
        max_grad_norm: C > 0, the clipping bound (L2 sensitivity of the sum).
        generator: the randomness (on ``summed_grad``'s device).
    """
    if not noise_multiplier >= 0:
        raise ValueError(f"noise_multiplier must be >= 0, got {noise_multiplier}")
    if not max_grad_norm > 0:
        raise ValueError(f"max_grad_norm must be > 0, got {max_grad_norm}")
    std = float(noise_multiplier) * float(max_grad_norm)
    if std == 0.0:
        return summed_grad.clone()
    noise = torch.randn(summed_grad.shape, generator=generator, dtype=summed_grad.dtype, device=summed_grad.device)
    return noise.mul_(std).add_(summed_grad)  # one fresh tensor, no temporaries


def gaussian_noise(
    shape: tuple[int, ...] | torch.Size,
    *,
    std: float,
    generator: torch.Generator | None,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """A fresh tensor of i.i.d. ``N(0, std²)`` entries, drawn in place (``normal_``), no temporaries.

    The building block of :class:`privacy.dp_sgd.DPSGDStep`, which draws the
    noise of the AVERAGED gradient directly (``std = σC / (qN)``) and adds the
    clipped per-example gradients into it, instead of noising the sum and
    dividing: the same distribution, a single pass over every table.

    Args:
        shape: the parameter's shape (every entry is noised).
        std: ``>= 0``; ``0`` gives zeros (no randomness consumed).
        generator: the randomness (on ``device``).
        dtype, device: of the result.
    """
    if not std >= 0:
        raise ValueError(f"std must be >= 0, got {std}")
    out = torch.empty(shape, dtype=dtype, device=device)
    if std == 0.0:
        return out.zero_()
    return out.normal_(0.0, float(std), generator=generator)
