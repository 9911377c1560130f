"""The fast paths of the mechanism equal their plain definitions.

- per-example row gradients from one batched backward == ``vmap(grad)`` == the oracle;
- per-example norms coalesce only repeated reads, yet equal full coalescing;
- DPSGDStep draws the noise of the average directly and adds clipped rows in chunks:
  without noise it is ``aggregate_clipped / qN``; its noise has std ``σC / qN`` everywhere.
"""

from __future__ import annotations

import pytest
import torch
from privacy_tiny_model import make_tiny, oracle_grads, plan, triple_loss
from scipy import stats

import textkg.privacy.dp_sgd as dp_sgd
from textkg.privacy.clipping import aggregate_clipped, clip_coefficients, coalesce_rows, per_example_norms
from textkg.privacy.dp_sgd import DPSGDStep, as_row_grads, per_example_grads, per_example_input_grads

pytestmark = pytest.mark.portability  # rerun by .ci/run under another thread count and ISA

SIZES = {"entity": 12, "relation": 3}


def _reference_norms(dense, rows):
    b = next(iter(rows.values()))[0].shape[0]
    sq = torch.zeros(b, dtype=torch.float64)
    for g in dense.values():
        sq += g.reshape(b, -1).double().pow(2).sum(1)
    for idx, g in rows.values():
        example, _, summed = coalesce_rows(idx, g)
        sq.index_add_(0, example, summed.double().pow(2).sum(1))
    return sq.sqrt()


def test_batched_input_grads_equal_vmap_and_oracle():
    tables, dense, examples = make_tiny()
    idx = plan(examples)
    gathered = {k: tables[k][v] for k, v in idx.items()}

    def batch_loss(rows):  # dense parameters held fixed: only the rows get per-example grads
        return torch.stack(
            [triple_loss(dense, {k: v[b] for k, v in rows.items()}, examples[b]) for b in range(len(examples))]
        )

    batched = per_example_input_grads(batch_loss, gathered)
    _, (vmapped,) = per_example_grads(triple_loss, dense, (gathered, examples))
    for name in gathered:
        torch.testing.assert_close(batched[name], vmapped[name], rtol=1e-5, atol=1e-6)
    rows = as_row_grads(idx, batched)
    for b, example in enumerate(examples):
        ref = oracle_grads(tables, dense, example)
        for name, size in SIZES.items():
            i, g = rows[name]
            full = torch.zeros(size, g.shape[-1]).index_add_(0, i[b], g[b])
            torch.testing.assert_close(full, ref[name], rtol=1e-5, atol=1e-6)


def test_batched_input_grads_shape_contract():
    x = {"a": torch.randn(4, 3), "unused": torch.randn(4, 2)}
    grads = per_example_input_grads(lambda r: (r["a"] ** 2).sum(1), x)
    torch.testing.assert_close(grads["a"], 2 * x["a"])
    assert torch.equal(grads["unused"], torch.zeros(4, 2))
    assert per_example_input_grads(lambda r: (r["a"] ** 2).sum(), x) is None  # not one loss per example
    assert not x["a"].requires_grad  # inputs untouched


@pytest.mark.parametrize("b,m,v", [(50, 7, 5), (40, 35, 1000), (3, 1, 4), (5, 0, 4), (0, 3, 4), (8, 6, 2)])
def test_norms_equal_full_coalescing(b, m, v):
    g = torch.Generator().manual_seed(b * 100 + m)
    rows = {
        "t": (torch.randint(v, (b, m), generator=g), torch.randn(b, m, 4, generator=g)),
        "u": (torch.randint(3, (b, 2), generator=g), torch.randn(b, 2, 4, generator=g)),
    }
    dense = {"w": torch.randn(b, 2, 3, generator=g), "s": torch.randn(b, generator=g)}
    got = per_example_norms(dense, rows)
    assert got.shape == (b,)
    if b:
        torch.testing.assert_close(got.double(), _reference_norms(dense, rows), rtol=1e-5, atol=1e-6)


def test_chunked_noiseless_step_equals_aggregate(monkeypatch):
    monkeypatch.setattr(dp_sgd, "_CHUNK_ENTRIES", 16)  # several chunks even for a small batch
    g = torch.Generator().manual_seed(0)
    b, m, d, v = 37, 5, 3, 11
    rows = {"t": (torch.randint(v, (b, m), generator=g), torch.randn(b, m, d, generator=g))}
    dense = {"w": torch.randn(b, 2, 2, generator=g)}
    step = DPSGDStep(
        noise_multiplier=0.0, max_grad_norm=0.8, expected_batch_size=20.0, accountant=None, sample_rate=0.5, generator=g
    )
    out = step(dense, rows, {"t": v})
    coef = clip_coefficients(per_example_norms(dense, rows), max_grad_norm=0.8)
    expected = aggregate_clipped(dense, rows, coef, {"t": v})
    for k in expected:
        torch.testing.assert_close(out[k], expected[k] / 20.0, rtol=1e-5, atol=1e-6)


def test_step_noise_has_std_sigma_c_over_expected_batch_on_every_entry():
    sigma, c, expected_b = 1.7, 0.6, 4.0
    step = DPSGDStep(
        noise_multiplier=sigma,
        max_grad_norm=c,
        expected_batch_size=expected_b,
        accountant=None,
        sample_rate=0.1,
        generator=torch.Generator().manual_seed(3),
    )
    out = step(
        {"w": torch.zeros(2, 300, 7)}, {"t": (torch.zeros(2, 1, dtype=torch.long), torch.zeros(2, 1, 5))}, {"t": 500}
    )
    for x in (out["w"], out["t"]):
        assert torch.all(x != 0)
        flat = x.double().reshape(-1)
        statistic = float((flat**2).sum() / (sigma * c / expected_b) ** 2)
        assert stats.chi2.ppf(0.0005, flat.numel()) < statistic < stats.chi2.ppf(0.9995, flat.numel())


def test_step_rejects_mismatched_tables():
    step = DPSGDStep(
        noise_multiplier=1.0,
        max_grad_norm=1.0,
        expected_batch_size=1.0,
        accountant=None,
        sample_rate=0.1,
        generator=None,
    )
    with pytest.raises(ValueError):
        step({}, {"t": (torch.zeros(1, 1, dtype=torch.long), torch.zeros(1, 1, 2))}, {"u": 3})
