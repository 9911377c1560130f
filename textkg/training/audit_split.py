"""Member / non-member split for membership-inference audits.

Drawn before training, from one candidate pool, uniformly at random: members
and non-members are exchangeable, so any difference the attack sees between
them is caused by training (Jagielski et al. 2020; Hu et al., DP-Flames).
"""

from __future__ import annotations

import torch

from textkg.errors import ConfigError


def draw_audit_split(
    train: torch.Tensor, candidate_mask: torch.Tensor, *, num_candidates: int, seed: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Pick ``num_candidates`` statements and split them half/half.

    Args:
        train: ``(N, 3)`` training statements.
        candidate_mask: ``(N,)`` statements eligible as audit candidates.
        num_candidates: how many to draw (even; half become non-members).
        seed: the split's seed (recorded).

    Returns:
        ``(keep_mask (N,), members (m, 3), non_members (m, 3))`` — ``keep_mask``
        removes the non-members from training.
    """
    eligible = torch.nonzero(candidate_mask).flatten()
    m = num_candidates // 2
    if m < 1:
        raise ConfigError("must be >= 2", field="train.audit_candidates")
    if 2 * m > len(eligible):
        raise ConfigError(f"only {len(eligible)} candidate statements are available", field="train.audit_candidates")
    g = torch.Generator().manual_seed(seed + 104729)
    chosen = eligible[torch.randperm(len(eligible), generator=g)[: 2 * m]]
    members, non_members = chosen[:m], chosen[m:]
    keep = torch.ones(len(train), dtype=torch.bool)
    keep[non_members] = False
    return keep, train[members], train[non_members]
