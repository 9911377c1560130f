"""textkg.evaluation.scoring: the one standardise and the one weighted combination (properties)."""

from __future__ import annotations

import pytest
import torch

from textkg.evaluation.placement.methods import STANDARDISE
from textkg.evaluation.scoring import combine, standardise, weighted_sum

pytestmark = pytest.mark.portability  # rerun by .ci/run under another thread count and ISA

LOWEST = torch.finfo(torch.float32).min


@pytest.mark.parametrize("options", [{}, STANDARDISE], ids=["votes", "placement"])
def test_standardise_keeps_rankings_and_ties_and_a_constant_row_is_zeros(options):
    s = torch.tensor([[3.0, 1.0, 1.0, -2.0], [5.0, 5.0, 5.0, 5.0], [0.1, 0.1, 0.1, 0.1]])
    z = standardise(s, **options)
    assert z.dtype == options.get("dtype", torch.float32)
    ddof = 0 if options.get("population") else 1
    assert z[0].mean().abs() < 1e-6 and (z[0].pow(2).sum() / (4 - ddof) - 1).abs() < 1e-6
    assert z[0, 0] > z[0, 1] == z[0, 2] > z[0, 3]
    assert z[1].tolist() == [0.0] * 4  # a constant row carries no information
    assert len(set(z[2].tolist())) == 1  # ties stay ties, whatever the rounding of the row's mean


@pytest.mark.parametrize("options", [{}, STANDARDISE], ids=["votes", "placement"])
def test_a_ruled_out_candidate_stays_lowest_and_is_left_out_of_the_row(options):
    s = torch.tensor([[3.0, LOWEST, 1.0, -2.0, 0.5]])
    z = standardise(s, **options)
    kept = torch.tensor([[3.0, 1.0, -2.0, 0.5]])
    torch.testing.assert_close(z[:, [0, 2, 3, 4]], standardise(kept, **options))
    assert z[0, 1] == torch.finfo(z.dtype).min


def test_population_and_sample_differ_by_the_bessel_factor():
    s = torch.randn(3, 10, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    ratio = standardise(s, dtype=torch.float64, population=True) / standardise(s, dtype=torch.float64)
    torch.testing.assert_close(ratio, torch.full_like(ratio, (10 / 9) ** 0.5))


def test_weighted_sum_adds_in_order_and_never_computes_a_zero_weight_part():
    a, b = torch.tensor([[1.0, 2.0]]), torch.tensor([[0.5, -1.0]])

    def never() -> torch.Tensor:
        raise AssertionError("a part of weight 0 was computed")

    assert torch.equal(weighted_sum([(1.0, a), (0.0, never), (2.0, lambda: b)]), a + 2.0 * b)
    assert torch.equal(weighted_sum([(0.3, a), (0.7, b)]), 0.3 * a + 0.7 * b)
    with pytest.raises(ValueError, match="every weight is 0"):
        weighted_sum([(0.0, a)])


def test_combine_is_the_standardised_scores_plus_each_weighted_vote():
    s = torch.randn(2, 6, generator=torch.Generator().manual_seed(1))
    v = torch.rand(2, 6, generator=torch.Generator().manual_seed(2))
    assert torch.equal(combine(s, [(0.0, v)]), standardise(s))
    assert torch.equal(combine(s, [(4.0, v), (1.5, v)]), standardise(s) + 4.0 * v + 1.5 * v)
