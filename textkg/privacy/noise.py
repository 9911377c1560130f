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
        generator: the randomness. The noise is drawn on the generator's device and moved
            to ``summed_grad``'s (:func:`draw_device`): a CPU generator gives the same noise
            whatever device the gradient is on.
    """
    if not noise_multiplier >= 0:
        raise ValueError(f"noise_multiplier must be >= 0, got {noise_multiplier}")
    if not max_grad_norm > 0:
        raise ValueError(f"max_grad_norm must be > 0, got {max_grad_norm}")
    std = float(noise_multiplier) * float(max_grad_norm)
    if std == 0.0:
        return summed_grad.clone()
    where = draw_device(generator, summed_grad.device)
    noise = torch.randn(summed_grad.shape, generator=generator, dtype=summed_grad.dtype, device=where)
    return noise.to(summed_grad.device).mul_(std).add_(summed_grad)  # one fresh tensor, no temporaries


def gaussian_noise(
    shape: tuple[int, ...] | torch.Size,
    *,
    std: float,
    generator: torch.Generator | None,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """A fresh tensor of i.i.d. ``N(0, std²)`` entries, drawn in place (``normal_``), no temporaries.

    The building block of :class:`textkg.privacy.dp_sgd.DPSGDStep`, which draws the
    noise of the AVERAGED gradient directly (``std = σC / (qN)``) and adds the
    clipped per-example gradients into it, instead of noising the sum and
    dividing: the same distribution, a single pass over every table.

    Args:
        shape: the parameter's shape (every entry is noised).
        std: ``>= 0``; ``0`` gives zeros (no randomness consumed).
        generator: the randomness; drawn on its device, then moved to ``device`` (:func:`draw_device`).
        dtype, device: of the result.
    """
    if not std >= 0:
        raise ValueError(f"std must be >= 0, got {std}")
    if std == 0.0:
        return torch.zeros(shape, dtype=dtype, device=device)
    out = torch.empty(shape, dtype=dtype, device=draw_device(generator, device))
    return out.normal_(0.0, float(std), generator=generator).to(device)


def draw_device(generator: torch.Generator | None, device: torch.device | str | None) -> torch.device | str | None:
    """Where a draw from ``generator`` happens: the generator's own device (a torch generator draws
    only there), else ``device`` (the default generator of that device).

    A seeded CPU generator therefore gives the same numbers whether the tensors they
    perturb live on the CPU, a CUDA GPU or MPS; the draw is then moved to the tensors'
    device. On the CPU nothing moves and the numbers are the ones drawn before devices existed.
    """
    return generator.device if generator is not None else device
