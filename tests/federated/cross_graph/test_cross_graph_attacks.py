"""The attacks: above chance without DP, bounded by the ledger's ε with it; the PSI hides non-members."""

from __future__ import annotations

import math

import torch

from textkg.audit.stats import empirical_epsilon_lower_bound, roc_auc
from textkg.federated.cross_graph.attacks import psi_membership_scores, reconstruction_cosine, row_membership_scores
from textkg.privacy.accountant import epsilon_of


def test_row_membership_auc_is_one_without_noise_and_matches_theory_with_it():
    rows = torch.randn(4000, 8, generator=torch.Generator().manual_seed(0))
    g = torch.Generator().manual_seed(1)
    members, non = row_membership_scores(rows, clip=1.0, noise_multiplier=0.0, generator=g)
    assert roc_auc(members.numpy(), non.numpy()) == 1.0
    sigma = 2.0
    members, non = row_membership_scores(rows, clip=1.0, noise_multiplier=sigma, generator=g)
    theory = 0.5 * (1 + math.erf(1.0 / (math.sqrt(2) * sigma) / math.sqrt(2)))  # Φ(C / (√2 σC)), rows at norm C
    assert abs(roc_auc(members.numpy(), non.numpy()) - theory) < 0.03
    eps = epsilon_of(sample_rate=1.0, noise_multiplier=sigma, steps=1, delta=1e-5)
    bound = empirical_epsilon_lower_bound(members.numpy(), non.numpy(), delta=1e-5)
    assert bound.epsilon <= eps
    assert reconstruction_cosine(rows, clip=1.0, noise_multiplier=0.0, generator=g) > 0.999
    assert reconstruction_cosine(rows, clip=1.0, noise_multiplier=sigma, generator=g) < 0.3


def test_psi_hides_the_senders_other_entities_and_a_salted_hash_does_not():
    receiver = [f"HP:{i}" for i in range(40)]
    sender = [f"HP:{i}" for i in range(20, 60)] + [f"ORPHA:{i}" for i in range(20)]
    absent = [f"OMIM:{i}" for i in range(30)]
    scores = psi_membership_scores(receiver, sender, absent)
    assert roc_auc(*scores["dh-psi"]) == 0.5
    assert roc_auc(*scores["shared-salt hash"]) == 1.0
