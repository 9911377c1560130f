"""Per-example gradients, clipping, noise and the DP-SGD step on tensors."""

from __future__ import annotations

import math

import pytest
import torch
from privacy_tiny_model import V_ENT, V_REL, make_tiny, oracle_grads, plan, triple_loss
from scipy import stats

from textkg.privacy.accountant import RDPAccountant
from textkg.privacy.clipping import aggregate_clipped, clip_coefficients, coalesce_rows, per_example_norms
from textkg.privacy.dp_sgd import DPSGDStep, as_row_grads, per_example_grads
from textkg.privacy.events import SampledGaussianEvent
from textkg.privacy.noise import add_noise

pytestmark = pytest.mark.portability  # rerun by .ci/run under another thread count and ISA

SIZES = {"entity": V_ENT, "relation": V_REL}


@pytest.fixture
def tiny():
    return make_tiny()


def _vmap_grads(tables, dense, examples):
    idx = plan(examples)
    gathered = {k: tables[k][v] for k, v in idx.items()}
    dense_g, (row_g,) = per_example_grads(triple_loss, dense, (gathered, examples))
    return dense_g, as_row_grads(idx, row_g)


def _table_grad_of(row_grads, example, name, size):
    idx, g = row_grads[name]
    coef = torch.zeros(idx.shape[0])
    coef[example] = 1.0
    return aggregate_clipped({}, {name: (idx, g)}, coef, {name: size})[name]


def test_per_example_grads_equal_one_at_a_time_oracle(tiny):
    tables, dense, examples = tiny
    dense_g, row_g = _vmap_grads(tables, dense, examples)
    assert dense_g["linear.weight"].shape == (len(examples), 5, 5)
    for b, example in enumerate(examples):
        ref = oracle_grads(tables, dense, example)
        for name in dense:
            torch.testing.assert_close(dense_g[name][b], ref[name], rtol=1e-5, atol=1e-6)
        for name, size in SIZES.items():
            torch.testing.assert_close(_table_grad_of(row_g, b, name, size), ref[name], rtol=1e-5, atol=1e-6)


def test_norms_with_duplicate_rows_equal_full_gradient_norm(tiny):
    tables, dense, examples = tiny
    dense_g, row_g = _vmap_grads(tables, dense, examples)
    norms = per_example_norms(dense_g, row_g)
    expected = torch.stack(
        [torch.sqrt(sum(g.pow(2).sum() for g in oracle_grads(tables, dense, ex).values())) for ex in examples]
    )
    torch.testing.assert_close(norms, expected, rtol=1e-5, atol=1e-6)
    # summing squared norms of the UNcoalesced reads would be wrong exactly for the duplicate examples
    naive = torch.sqrt(
        sum(g.reshape(len(examples), -1).pow(2).sum(1) for g in dense_g.values())
        + sum(g.pow(2).sum((1, 2)) for _, g in row_g.values())
    )
    assert not torch.allclose(naive[1:4], expected[1:4], rtol=1e-3)


def test_coalesce_rows():
    idx = torch.tensor([[2, 2, 0], [1, 3, 1]])
    g = torch.arange(18, dtype=torch.float32).reshape(2, 3, 3)
    example, row, summed = coalesce_rows(idx, g)
    assert example.tolist() == [0, 0, 1, 1] and row.tolist() == [0, 2, 1, 3]
    torch.testing.assert_close(summed, torch.stack([g[0, 2], g[0, 0] + g[0, 1], g[1, 0] + g[1, 2], g[1, 1]]))


def test_clipped_norms_at_most_c(tiny):
    tables, dense, examples = tiny
    dense_g, row_g = _vmap_grads(tables, dense, examples)
    dense_g = {k: 100 * v for k, v in dense_g.items()}
    row_g = {k: (i, 100 * g) for k, (i, g) in row_g.items()}
    for c in (0.01, 0.5, 3.0, 1e6):
        coef = clip_coefficients(per_example_norms(dense_g, row_g), max_grad_norm=c)
        assert torch.all(coef <= 1.0)
        clipped_d = {k: v * coef.view(-1, 1, *([1] * (v.dim() - 2))) for k, v in dense_g.items()}
        clipped_r = {k: (i, g * coef[:, None, None]) for k, (i, g) in row_g.items()}
        assert torch.all(per_example_norms(clipped_d, clipped_r) <= c + 1e-5)


def test_clip_coefficient_formula():
    coef = clip_coefficients(torch.tensor([0.0, 0.5, 1.0, 4.0]), max_grad_norm=1.0)
    torch.testing.assert_close(coef, torch.tensor([1.0, 1.0, 1.0 / (1.0 + 1e-6), 1.0 / (4.0 + 1e-6)]))
    with pytest.raises(ValueError):
        clip_coefficients(torch.ones(2), max_grad_norm=0.0)


def test_dp_sgd_step_without_noise_is_mean_of_clipped_oracle(tiny):
    tables, dense, examples = tiny
    dense_g, row_g = _vmap_grads(tables, dense, examples)
    acc = RDPAccountant()
    c, expected_b = 0.7, 4.0
    step = DPSGDStep(
        noise_multiplier=0.0,
        max_grad_norm=c,
        expected_batch_size=expected_b,
        accountant=acc,
        sample_rate=0.25,
        generator=torch.Generator().manual_seed(1),
    )
    out = step(dense_g, row_g, SIZES)
    expected = {k: torch.zeros_like(v) for k, v in {**tables, **dense}.items()}
    for ex in examples:
        ref = oracle_grads(tables, dense, ex)
        norm = torch.sqrt(sum(g.pow(2).sum() for g in ref.values()))
        scale = min(1.0, c / (norm.item() + 1e-6))
        for k in expected:
            expected[k] += scale * ref[k] / expected_b
    assert set(out) == set(expected)
    for k in expected:
        torch.testing.assert_close(out[k], expected[k], rtol=1e-5, atol=1e-6)
    assert acc.history == [(0.25, 0.0, 1)]


def test_shares_clipped_then_noised_once_equal_the_whole_step(tiny):
    """A data-parallel step: clipped sums of two shares, summed, noised once = the one-process step."""
    tables, dense, examples = tiny
    dense_g, row_g = _vmap_grads(tables, dense, examples)
    b = next(iter(dense_g.values())).shape[0]
    unit = {
        k: torch.randn(v.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
        for k, v in {**dense, **tables}.items()
    }
    args = dict(noise_multiplier=1.1, max_grad_norm=0.7, expected_batch_size=4.0, sample_rate=0.25, generator=None)
    one_acc, two_acc = RDPAccountant(), RDPAccountant()
    whole = DPSGDStep(accountant=one_acc, **args)(dense_g, row_g, SIZES, unit)
    step = DPSGDStep(accountant=two_acc, **args)
    total: dict[str, torch.Tensor] = {}
    for share in (torch.arange(0, b, 2), torch.arange(1, b, 2), torch.arange(0)):  # an empty share too
        sums, norms = step.clipped_sum(
            {k: g[share] for k, g in dense_g.items()}, {k: (i[share], g[share]) for k, (i, g) in row_g.items()}, SIZES
        )
        assert norms.shape == (len(share),) and all(v.dtype == torch.float64 for v in sums.values())
        for k, v in sums.items():
            total[k] = total.get(k, 0) + v
    assert two_acc.steps == 0  # clipping alone is not a release
    shared = step.noise_clipped_sum(total, norms=torch.zeros(b), noise=unit)
    assert set(shared) == set(whole)
    for k in whole:
        torch.testing.assert_close(shared[k].to(whole[k].dtype), whole[k], rtol=1e-6, atol=1e-7)
    assert one_acc.history == two_acc.history


def test_noise_std_and_every_entry():
    sigma, c = 1.3, 0.8
    g = torch.Generator().manual_seed(1234)
    zeros = torch.zeros(4000, 25)
    noised = add_noise(zeros, noise_multiplier=sigma, max_grad_norm=c, generator=g)
    assert torch.all(zeros == 0)  # input untouched
    x = noised.double().reshape(-1)
    n = x.numel()
    # Σ x²/(σC)² ~ χ²(n): two-sided 99.9% interval
    statistic = float((x**2).sum() / (sigma * c) ** 2)
    assert stats.chi2.ppf(0.0005, n) < statistic < stats.chi2.ppf(0.9995, n)
    assert abs(float(x.mean())) < 3.3 * sigma * c / math.sqrt(n)
    assert torch.all(noised != 0)


def test_noise_covers_untouched_rows_at_right_scale():
    v, d, sigma, c, expected_b = 3000, 8, 2.0, 1.0, 5.0
    idx = torch.tensor([[0, 1], [1, 1]])
    grads = torch.ones(2, 2, d)
    step = DPSGDStep(
        noise_multiplier=sigma,
        max_grad_norm=c,
        expected_batch_size=expected_b,
        accountant=None,
        sample_rate=0.1,
        generator=torch.Generator().manual_seed(7),
    )
    out = step({}, {"table": (idx, grads)}, {"table": v})["table"]
    assert out.shape == (v, d)
    untouched = out[2:].double().reshape(-1)
    assert torch.all(untouched != 0)  # every row is noised, not only the touched ones
    n = untouched.numel()
    statistic = float((untouched**2).sum() / (sigma * c / expected_b) ** 2)
    assert stats.chi2.ppf(0.0005, n) < statistic < stats.chi2.ppf(0.9995, n)


def test_empty_batch_is_still_a_noised_step():
    acc = RDPAccountant()
    step = DPSGDStep(
        noise_multiplier=1.0,
        max_grad_norm=1.0,
        expected_batch_size=10.0,
        accountant=acc,
        sample_rate=0.01,
        generator=torch.Generator().manual_seed(0),
    )
    out = step(
        {"w": torch.zeros(0, 3, 2)},
        {"table": (torch.zeros(0, 0, dtype=torch.long), torch.zeros(0, 0, 4))},
        {"table": 6},
    )
    assert out["w"].shape == (3, 2) and out["table"].shape == (6, 4)
    assert torch.all(out["table"] != 0)
    assert acc.steps == 1


def test_dp_sgd_step_validates_first():
    for kwargs in (
        dict(noise_multiplier=-1.0),
        dict(max_grad_norm=0.0),
        dict(expected_batch_size=0.0),
        dict(sample_rate=1.5),
    ):
        args = dict(
            noise_multiplier=1.0,
            max_grad_norm=1.0,
            expected_batch_size=1.0,
            accountant=None,
            sample_rate=0.1,
            generator=None,
        )
        args.update(kwargs)
        with pytest.raises(ValueError):
            DPSGDStep(**args)


def test_inconsistent_batch_sizes_rejected():
    with pytest.raises(ValueError):
        per_example_norms({"w": torch.zeros(3, 2)}, {"t": (torch.zeros(2, 1, dtype=torch.long), torch.zeros(2, 1, 4))})


def test_emits_one_event_per_call():
    acc = RDPAccountant()
    step = DPSGDStep(
        noise_multiplier=1.1,
        max_grad_norm=1.0,
        expected_batch_size=2.0,
        accountant=acc,
        sample_rate=0.02,
        generator=torch.Generator().manual_seed(0),
    )
    for _ in range(3):
        step({"w": torch.ones(2, 3)}, {}, {})
    assert acc.history == [(0.02, 1.1, 3)]
    assert step.event == SampledGaussianEvent(sample_rate=0.02, noise_multiplier=1.1)
