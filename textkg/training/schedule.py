"""Which statements each optimisation step sees.

* ``none``: shuffled mini-batches over all training triples (not DP).
* ``full``: every step is a DP step on a Poisson sample of all training
  triples at rate q = B/N.
* ``confidential`` (DPKGE, Han et al. 2022, Algorithm 1): public
  (unrestricted) batches and DP batches of confidential statements alternate
  so that the running ratio m_U/m_C tracks |U|/|C|; only confidential batches
  are DP steps, with q = B/|C|.

A schedule yields ``("public", indices)`` or ``("private", None)`` items; the
private indices are drawn by the DP step itself (Poisson sampling belongs to
the mechanism).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

import torch

StepKind = Literal["public", "private"]


@dataclass(frozen=True)
class EpochPlan:
    """Counts of steps in one epoch.

    Attributes:
        public_steps: shuffled mini-batches of public statements.
        private_steps: DP steps (expected passes over the private set: 1/q).
    """

    public_steps: int
    private_steps: int


def plan_epoch(*, num_public: int, num_private: int, batch_size: int) -> EpochPlan:
    """Steps per epoch: ``ceil(|U|/B)`` public, ``round(|C|/B)`` (≥1) private."""
    public = math.ceil(num_public / batch_size) if num_public else 0
    private = max(1, round(num_private / batch_size)) if num_private else 0
    return EpochPlan(public_steps=public, private_steps=private)


#: ``min_steps`` raises ``epochs`` at most to this (a tiny graph would otherwise train for thousands of epochs).
MAX_SCALED_EPOCHS = 200


def epochs_for_min_steps(*, epochs: int, min_steps: int, steps_per_epoch: int) -> int:
    """``epochs``, raised to ``ceil(min_steps / steps_per_epoch)`` when that is larger, capped at
    :data:`MAX_SCALED_EPOCHS` (never lowered; ``min_steps = 0`` leaves it as it is)."""
    if min_steps <= 0 or steps_per_epoch <= 0 or epochs * steps_per_epoch >= min_steps:
        return epochs
    return max(epochs, min(MAX_SCALED_EPOCHS, math.ceil(min_steps / steps_per_epoch)))


def interleave(plan: EpochPlan) -> list[StepKind]:
    """Order the steps so that done-public / done-private tracks their ratio.

    The k-th private step is placed at fraction (k + 1/2)/m_C of the epoch
    and the j-th public step at (j + 1/2)/m_U (a deterministic, evenly mixed
    merge of the two sequences).
    """
    marks: list[tuple[float, int, StepKind]] = [
        ((j + 0.5) / plan.public_steps, 0, "public") for j in range(plan.public_steps)
    ]
    marks += [((k + 0.5) / plan.private_steps, 1, "private") for k in range(plan.private_steps)]
    return [kind for _, _, kind in sorted(marks)]


def public_batches(num_public: int, *, batch_size: int, generator: torch.Generator) -> Iterator[torch.Tensor]:
    """Shuffled, disjoint mini-batches of indices into the public set."""
    order = torch.randperm(num_public, generator=generator)
    for start in range(0, num_public, batch_size):
        yield order[start : start + batch_size]
