"""The seed paper's "DP simulation": batch-level clipping plus noise.

NOT DIFFERENTIALLY PRIVATE. Anything produced with it must be labelled
``simulation``, never ``dp``, and no ε may be claimed for it.

The seed paper clips the gradient of the whole (mean) batch loss to norm C
and adds Gaussian noise of std σC/B. That does not bound any one example's
influence the way the accounting assumes:

- the accountant's Sampled Gaussian analysis needs each example's
  contribution to the SUM to have L2 norm <= C and noise N(0, σ²C²) on the
  sum (σC/B on the mean); under batch clipping one example can move the
  clipped mean gradient by up to 2C (replace a batch whose gradient points
  one way with one pointing the other), i.e. 2B times the sensitivity the
  noise was scaled for;
- batches are drawn uniformly with a fixed size, not by Poisson sampling.

It is kept to reproduce the seed paper's numbers, side by side with real
DP-SGD (:mod:`textkg.privacy.dp_sgd`).
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

from textkg.privacy.noise import draw_device

GUARANTEE = "simulation"
"""The label any result of this module must carry."""


def clip_and_noise_batch_gradient(
    params: Iterable[torch.Tensor],
    *,
    noise_multiplier: float,
    max_grad_norm: float,
    batch_size: int,
    generator: torch.Generator | None,
) -> float:
    """Clip the batch gradient's total norm to C, then add N(0, (σC/B)²) to every entry.

    Acts in place on ``p.grad`` of every parameter that has one (as
    ``torch.nn.utils.clip_grad_norm_`` does). NOT DP (see the module docstring).

    Args:
        params: parameters whose ``.grad`` holds the gradient of the MEAN batch loss.
        noise_multiplier: σ >= 0.
        max_grad_norm: C > 0.
        batch_size: B > 0.
        generator: randomness for the noise.

    Returns:
        The total gradient norm before clipping.
    """
    if not max_grad_norm > 0 or not noise_multiplier >= 0 or not batch_size > 0:
        raise ValueError("need max_grad_norm > 0, noise_multiplier >= 0, batch_size > 0")
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return 0.0
    with torch.no_grad():
        total = float(torch.sqrt(torch.stack([g.detach().pow(2).sum() for g in grads]).sum()))
        scale = min(1.0, max_grad_norm / (total + 1e-6))
        std = noise_multiplier * max_grad_norm / batch_size
        for g in grads:
            g.mul_(scale)
            if std > 0:
                where = draw_device(generator, g.device)
                noise = torch.randn(g.shape, generator=generator, dtype=g.dtype, device=where)
                g.add_(noise.to(g.device), alpha=std)
    return total
