"""Noise schedules: σ that changes from step to step, fixed in advance.

A schedule maps a step index to a factor of the base noise multiplier σ_0.
It must be a function of public inputs only (the step index and the
configuration): an RDP accountant composes mechanisms whose parameters are
fixed before the run (Mironov 2017, arXiv:1702.07476v3, Prop. 1), and the
ledger records each step's actual σ, so the composed ε is that of the steps
that ran. A σ chosen from the data (say, from a validation loss) would need a
privacy filter (Feldman & Zrnic 2021, arXiv:2008.11193), which is not built.

DP-Flames (Hu et al. 2023, arXiv:2304.02932) lowers the noise as
training converges; :class:`GeometricNoiseSchedule` is the public-input
version of that idea (its adaptive budget allocation reads the validation
loss): σ_t = σ_0 · γ^⌊t / S⌋, one stage of S steps per federated round.
"""

from __future__ import annotations

from dataclasses import dataclass

from textkg.privacy.events import SampledGaussianEvent


@dataclass(frozen=True)
class GeometricNoiseSchedule:
    """σ_t = σ_0 · γ^⌊t / S⌋: the noise multiplier shrinks by ``decay`` every ``stage_steps`` steps.

    Args:
        decay: γ in (0, 1]; 1 is the constant schedule.
        stage_steps: S >= 1, the steps of one stage (a federated round).

    Raises:
        ValueError: a value out of range (checked at construction).
    """

    decay: float
    stage_steps: int

    def __post_init__(self) -> None:
        if isinstance(self.decay, bool) or not isinstance(self.decay, (int, float)) or not 0.0 < self.decay <= 1.0:
            raise ValueError(f"decay must be a number in (0, 1], got {self.decay!r}")
        if isinstance(self.stage_steps, bool) or not isinstance(self.stage_steps, int) or self.stage_steps < 1:
            raise ValueError(f"stage_steps must be an int >= 1, got {self.stage_steps!r}")
        object.__setattr__(self, "decay", float(self.decay))

    def factor(self, step: int) -> float:
        """σ_t / σ_0 at step ``t`` (0-based)."""
        if step < 0:
            raise ValueError(f"step must be >= 0, got {step}")
        return self.decay ** (step // self.stage_steps)

    def noise_multiplier(self, sigma0: float, step: int) -> float:
        """σ_t of step ``t`` for base multiplier σ_0."""
        return sigma0 * self.factor(step)

    def events(self, *, sigma0: float, sample_rate: float, steps: int) -> list[SampledGaussianEvent]:
        """The ledger of the first ``steps`` steps: one event per stage, at that stage's σ."""
        out = []
        for start in range(0, steps, self.stage_steps):
            n = min(self.stage_steps, steps - start)
            sigma = self.noise_multiplier(sigma0, start)
            out.append(SampledGaussianEvent(sample_rate=sample_rate, noise_multiplier=sigma, steps=n))
        return out

    def describe(self) -> dict[str, float | int | str]:
        """What a privacy block records of the schedule."""
        return {"kind": "geometric", "decay": self.decay, "stage_steps": self.stage_steps}
