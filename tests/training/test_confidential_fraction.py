"""``--confidential-fraction``: each statement's label depends on that statement alone.

The confidential adjacency adds or removes one confidential statement and
leaves every other statement's label as it was. A positional draw
(``rand(N) < f``) breaks that: inserting one line in the training file shifts
the labels of every later statement.
"""

from __future__ import annotations

import torch

from textkg.training.config import PrivacyConfig
from textkg.training.private_training import select_confidential, statement_uniforms


def _triples(n: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.stack(
        [
            torch.randint(0, 500, (n,), generator=g),
            torch.randint(0, 7, (n,), generator=g),
            torch.randint(0, 500, (n,), generator=g),
        ],
        dim=1,
    )


def _cfg(fraction: float) -> PrivacyConfig:
    return PrivacyConfig(mode="confidential", confidential_fraction=fraction, noise_multiplier=1.0)


def test_inserting_one_statement_relabels_no_other():
    train = _triples(2000)
    extra = torch.tensor([[3, 2, 1]])
    before = select_confidential(train, tuple(f"r{i}" for i in range(7)), _cfg(0.5), seed=0)
    for at in (0, 1000, 2000):
        grown = torch.cat([train[:at], extra, train[at:]])
        after = select_confidential(grown, tuple(f"r{i}" for i in range(7)), _cfg(0.5), seed=0)
        assert torch.equal(torch.cat([after[:at], after[at + 1 :]]), before)


def test_labels_follow_the_statement_not_its_position():
    train = _triples(1000)
    perm = torch.randperm(len(train), generator=torch.Generator().manual_seed(1))
    mask = select_confidential(train, tuple(f"r{i}" for i in range(7)), _cfg(0.3), seed=5)
    assert torch.equal(
        select_confidential(train[perm], tuple(f"r{i}" for i in range(7)), _cfg(0.3), seed=5), mask[perm]
    )


def test_fraction_and_seed():
    train = _triples(20000)
    u = statement_uniforms(train, seed=0)
    assert u.dtype == torch.float64 and float(u.min()) >= 0 and float(u.max()) < 1
    unique = torch.unique(train, dim=0)
    frac = float((statement_uniforms(unique, seed=0) < 0.5).double().mean())
    assert abs(frac - 0.5) < 4 * (0.25 / len(unique)) ** 0.5  # 4 sd of a fair coin
    assert not torch.equal(statement_uniforms(train, seed=0), statement_uniforms(train, seed=1))
    assert torch.equal(statement_uniforms(train, seed=3), statement_uniforms(train.clone(), seed=3))
