"""Negative sampling, one example at a time.

Each positive triple draws its own corruptions uniformly from a pool of
entities, independently of every other example in the batch (unlike BLP's
in-batch negatives). Per-example DP clipping relies on this: removing one
triple from the data set must not change any other example's loss.
"""

from __future__ import annotations

import torch


def corrupt(
    positives: torch.Tensor,
    *,
    num_negatives: int,
    entity_pool: torch.Tensor,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Corrupt the head or the tail (each with probability 1/2) of each positive.

    Args:
        positives: ``(B, 3)`` long triples.
        num_negatives: ``K`` corruptions per positive.
        entity_pool: ``(P,)`` entity ids to draw replacements from (the
            training entities: an inductive model never sees others).
        generator: source of randomness.

    Returns:
        ``(B, 1 + K, 3)``: position 0 is the positive, 1..K its corruptions.
    """
    b = positives.shape[0]
    picks = torch.randint(len(entity_pool), (b, num_negatives), generator=generator)
    replacement = entity_pool[picks]
    corrupt_head = torch.rand(b, num_negatives, generator=generator) < 0.5
    negatives = positives.unsqueeze(1).repeat(1, num_negatives, 1)
    negatives[..., 0] = torch.where(corrupt_head, replacement, negatives[..., 0])
    negatives[..., 2] = torch.where(corrupt_head, negatives[..., 2], replacement)
    return torch.cat([positives.unsqueeze(1), negatives], dim=1)
