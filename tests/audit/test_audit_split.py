"""The member/non-member split is exchangeable, deterministic and recorded."""

import numpy as np
import pytest
import torch
from scipy import stats as sst

from textkg.errors import ConfigError
from textkg.training.audit_split import draw_audit_split


def _train(n=60, seed=0):
    g = torch.Generator().manual_seed(seed)
    # distinct rows: the row index is encoded in the head column
    return torch.stack(
        [torch.arange(n), torch.randint(4, (n,), generator=g), torch.randint(100, (n,), generator=g)], dim=1
    )


def _rows(sub, train):
    return set(sub[:, 0].tolist())  # head column == row index in _train


def test_disjoint_equal_sizes_and_keep_mask():
    train = _train()
    mask = torch.ones(len(train), dtype=torch.bool)
    keep, members, non_members = draw_audit_split(train, mask, num_candidates=20, seed=3)
    assert len(members) == len(non_members) == 10
    m, n = _rows(members, train), _rows(non_members, train)
    assert not m & n
    assert set(torch.nonzero(~keep).flatten().tolist()) == n  # only non-members leave training
    assert keep.sum() == len(train) - 10


def test_odd_candidate_count_rounds_down():
    keep, members, non_members = draw_audit_split(_train(), torch.ones(60, dtype=torch.bool), num_candidates=21, seed=0)
    assert len(members) == len(non_members) == 10


def test_deterministic_per_seed():
    train, mask = _train(), torch.ones(60, dtype=torch.bool)
    a = draw_audit_split(train, mask, num_candidates=20, seed=5)
    b = draw_audit_split(train, mask, num_candidates=20, seed=5)
    c = draw_audit_split(train, mask, num_candidates=20, seed=6)
    for x, y in zip(a, b, strict=True):
        assert torch.equal(x, y)
    assert not torch.equal(a[1], c[1])


def test_only_candidates_drawn():
    train = _train()
    mask = torch.zeros(60, dtype=torch.bool)
    mask[::3] = True
    for seed in range(20):
        _, members, non_members = draw_audit_split(train, mask, num_candidates=10, seed=seed)
        eligible = set(torch.nonzero(mask).flatten().tolist())
        assert _rows(members, train) <= eligible and _rows(non_members, train) <= eligible


def test_too_few_candidates_is_a_config_error():
    mask = torch.zeros(60, dtype=torch.bool)
    mask[:5] = True
    with pytest.raises(ConfigError, match="audit_candidates"):
        draw_audit_split(_train(), mask, num_candidates=10, seed=0)
    with pytest.raises(ConfigError):
        draw_audit_split(_train(), mask, num_candidates=1, seed=0)


def test_membership_is_uniform_over_candidates():
    """Over many seeds every candidate is a member (and a non-member) equally often.

    With 12 candidates of which 4 members and 4 non-members per draw, each
    candidate is a member with probability 1/3: chi-square goodness of fit.
    """
    train = _train(30)
    mask = torch.zeros(30, dtype=torch.bool)
    mask[torch.arange(0, 24, 2)] = True  # 12 candidates
    seeds = 3000
    member_counts = np.zeros(30)
    non_member_counts = np.zeros(30)
    for seed in range(seeds):
        _, members, non_members = draw_audit_split(train, mask, num_candidates=8, seed=seed)
        member_counts[members[:, 0].numpy()] += 1
        non_member_counts[non_members[:, 0].numpy()] += 1
    cand = mask.numpy()
    assert member_counts[~cand].sum() == 0 and non_member_counts[~cand].sum() == 0
    for counts in (member_counts[cand], non_member_counts[cand]):
        assert counts.sum() == 4 * seeds
        assert sst.chisquare(counts).pvalue > 1e-3
    # exchangeability: P(member) == P(non-member) for each candidate
    assert sst.chisquare(np.r_[member_counts[cand], non_member_counts[cand]]).pvalue > 1e-3
