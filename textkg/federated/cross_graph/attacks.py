"""What a receiving party can learn about the sender from what it received: two attacks.

1. **Row membership (the unit's own game).** For each aligned entity a fair coin decides whether
   the sender's release holds the entity's clipped row c or zeros (the zero-out neighbour of
   :mod:`textkg.federated.cross_graph.procrustes`). The adversary knows c (the strongest,
   informed adversary: it is handed the candidate value) and scores ``⟨release, c⟩``, the
   Neyman-Pearson test between N(c, σ²C²I) and N(0, σ²C²I). Its ROC AUC is Φ(‖c‖ / (√2 σC)); an
   (ε, δ)-DP release bounds every threshold test by TPR ≤ e^ε FPR + δ (Kairouz, Oh & Viswanath
   2015, ICML, Thm. 2.1), so :func:`textkg.audit.stats.empirical_epsilon_lower_bound` on the
   scores must stay below the ledger's ε. Without noise the AUC is 1.
2. **Membership of an entity the PSI did not reveal.** The receiver guesses identifiers (members:
   the sender's entities outside the intersection; non-members: entities the sender lacks) and
   scores a guess 1 if anything it received matches it: the guess's hash, or the guess blinded
   with its own PSI key against the sender's blinded set. Under the DH-PSI nothing ever matches
   (AUC 0.5); with the refused alternative, a shared-salt hash of every id, every member matches
   (AUC 1).
"""

from __future__ import annotations

import torch

from textkg.federated.cross_graph.procrustes import clip_rows, release_rows
from textkg.federated.cross_graph.psi import PSIParty, hash_to_point, private_intersection


def row_membership_scores(
    rows: torch.Tensor, *, clip: float, noise_multiplier: float, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(members, non_members)`` scores of the informed adversary, one per aligned row each.

    Args:
        rows: ``(n, d)`` the sender's aligned rows.
        clip, noise_multiplier: C and σ of the release.
        generator: The game's randomness (the noise of both worlds).
    """
    clipped = clip_rows(rows.double(), clip)
    z_in = torch.randn(rows.shape, generator=generator, dtype=torch.float64)
    z_out = torch.randn(rows.shape, generator=generator, dtype=torch.float64)
    with_row = release_rows(rows, clip=clip, noise_multiplier=noise_multiplier, noise=z_in)
    without = float(noise_multiplier) * float(clip) * z_out  # the zero-out neighbour's release
    return (with_row * clipped).sum(1), (without * clipped).sum(1)


def reconstruction_cosine(rows: torch.Tensor, *, clip: float, noise_multiplier: float, generator) -> float:
    """Mean cosine between each released row and the sender's clipped row (1: reconstructed)."""
    clipped = clip_rows(rows.double(), clip)
    z = torch.randn(rows.shape, generator=generator, dtype=torch.float64)
    released = release_rows(rows, clip=clip, noise_multiplier=noise_multiplier, noise=z)
    return float(torch.nn.functional.cosine_similarity(released, clipped, dim=1).mean())


def psi_membership_scores(
    receiver_items: list[str], sender_items: list[str], guesses_absent: list[str], *, session: str = "attack"
) -> dict[str, tuple[list[float], list[float]]]:
    """Scores of the receiver's guesses about sender entities outside the intersection.

    Returns ``{"dh-psi": (members, non_members), "shared-salt hash": (members, non_members)}``:
    members are the sender's items the receiver lacks, non-members ``guesses_absent``.
    """
    receiver, sender = PSIParty(receiver_items, session=session), PSIParty(sender_items, session=session)
    transcript = private_intersection(receiver, sender)
    seen = set(transcript.reply) | set(transcript.offer)
    mine = set(receiver_items)
    members = [x for x in sender.items if x not in mine]

    def dh_score(z: str) -> float:
        h = hash_to_point(z, session=session)
        return float(h in seen or receiver.reblind([h])[0] in seen)

    salted = {hash_to_point(x, session="shared-salt") for x in sender.items}  # what a salted-hash list reveals

    def salt_score(z: str) -> float:
        return float(hash_to_point(z, session="shared-salt") in salted)

    return {
        "dh-psi": ([dh_score(z) for z in members], [dh_score(z) for z in guesses_absent]),
        "shared-salt hash": ([salt_score(z) for z in members], [salt_score(z) for z in guesses_absent]),
    }
