"""The Gaussian mechanism's noise."""

from __future__ import annotations

import torch


def add_noise(summed_grad: torch.Tensor, *, noise_multiplier: float, max_grad_norm: float,
              generator: torch.Generator | None) -> torch.Tensor:
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
    noise = torch.randn(summed_grad.shape, generator=generator, dtype=summed_grad.dtype,
                        device=summed_grad.device)
    return noise.mul_(std).add_(summed_grad)  # one fresh tensor, no temporaries
