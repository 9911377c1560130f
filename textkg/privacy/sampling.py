"""Poisson sampling: every example joins a batch independently with probability q.

This is the sampling the Sampled Gaussian Mechanism's RDP bound assumes
(Mironov et al. 2019, arXiv 1908.10530v1, Def. 3); batches have a random size
~ Binomial(N, q) and may be empty.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch


def _check(num_examples: int, sample_rate: float) -> None:
    if isinstance(num_examples, bool) or not isinstance(num_examples, int) or num_examples < 0:
        raise ValueError(f"num_examples must be an int >= 0, got {num_examples!r}")
    if not 0.0 <= sample_rate <= 1.0:
        raise ValueError(f"sample_rate must be in [0, 1], got {sample_rate!r}")


def poisson_sample(
    num_examples: int,
    *,
    sample_rate: float,
    generator: torch.Generator | None = None,
    uniform: torch.Tensor | None = None,
) -> torch.Tensor:
    """Indices of one Poisson sample: example i is kept iff ``u_i < q``.

    Args:
        num_examples: N.
        sample_rate: q in [0, 1].
        generator: the randomness (CPU generator), used when ``uniform`` is ``None``.
        uniform: ``(N,)`` uniforms on [0, 1) drawn by the caller from a secret source
            (:meth:`textkg.privacy.randomness.SecretRandomness.uniform`); DP needs the sample
            to be secret, which torch's generator is not.

    Returns:
        ``(b,)`` LongTensor of sorted indices in [0, N); b ~ Binomial(N, q), possibly 0.
    """
    _check(num_examples, sample_rate)
    if uniform is None:
        uniform = torch.rand(num_examples, generator=generator)
    elif uniform.shape != (num_examples,):
        raise ValueError(f"uniform must have shape ({num_examples},), got {tuple(uniform.shape)}")
    keep = uniform < sample_rate
    return keep.nonzero(as_tuple=False).reshape(-1)


class PoissonBatches:
    """``steps`` independent Poisson samples of ``range(num_examples)``.

    Args:
        num_examples: N.
        sample_rate: q in [0, 1].
        steps: number of batches to yield.
        generator: the randomness.

    Yields:
        ``(b,)`` LongTensors of indices, as :func:`poisson_sample`.
    """

    def __init__(self, num_examples: int, *, sample_rate: float, steps: int, generator: torch.Generator | None) -> None:
        _check(num_examples, sample_rate)
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
            raise ValueError(f"steps must be an int >= 0, got {steps!r}")
        self.num_examples, self.sample_rate, self.steps = num_examples, sample_rate, steps
        self.generator = generator

    def __len__(self) -> int:
        return self.steps

    def __iter__(self) -> Iterator[torch.Tensor]:
        for _ in range(self.steps):
            yield poisson_sample(self.num_examples, sample_rate=self.sample_rate, generator=self.generator)
