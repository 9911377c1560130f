"""Frozen descriptions of privacy mechanisms, composed by an accountant.

Like dp-accounting's ``PoissonSampledDpEvent(q, GaussianDpEvent(σ))``: an
event says *what* ran, never how much privacy it cost; that is the
accountant's job (:mod:`textkg.privacy.accountant`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class SampledGaussianEvent:
    """``steps`` runs of the Poisson-sampled Gaussian mechanism.

    Each run includes every example independently with probability
    ``sample_rate`` (q), sums the examples' contributions clipped to L2 norm C
    and adds N(0, σ²C²) to every coordinate, σ = ``noise_multiplier``
    (Abadi et al. 2016, arXiv 1607.00133, Alg. 1; Mironov, Talwar & Zhang
    2019, arXiv 1908.10530v1, Def. 3).

    Args:
        sample_rate: q in [0, 1].
        noise_multiplier: σ >= 0 (noise std divided by the L2 sensitivity C).
        steps: how many identical runs, >= 1.

    Raises:
        ValueError: a value out of range (checked at construction).
    """

    sample_rate: float
    noise_multiplier: float
    steps: int = 1

    def __post_init__(self) -> None:
        q, sigma, steps = self.sample_rate, self.noise_multiplier, self.steps
        if isinstance(q, bool) or not isinstance(q, (int, float)) or not 0.0 <= q <= 1.0:
            raise ValueError(f"sample_rate must be a number in [0, 1], got {q!r}")
        if isinstance(sigma, bool) or not isinstance(sigma, (int, float)) or math.isnan(sigma) or sigma < 0.0:
            raise ValueError(f"noise_multiplier must be a number >= 0, got {sigma!r}")
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            raise ValueError(f"steps must be an int >= 1, got {steps!r}")
        # normalise to float so that equal events compare equal and serialise alike
        object.__setattr__(self, "sample_rate", float(q))
        object.__setattr__(self, "noise_multiplier", float(sigma))
