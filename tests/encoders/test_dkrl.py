import pytest
import torch

from textkg.encoders import get_trainable_encoder
from textkg.encoders.dkrl import DKRLEncoder


@pytest.fixture
def module():
    torch.manual_seed(0)
    return DKRLEncoder(token_dim=6, out_dim=5)


@pytest.mark.parametrize("length", [1, 2, 3, 4, 5, 7, 8, 9, 17])
def test_shape_and_padding_invariance(module, length):
    tokens = torch.randn(3, length, 6)
    mask = torch.ones(3, length, dtype=torch.bool)
    out = module(tokens, mask)
    assert out.shape == (3, 5) and torch.isfinite(out).all()
    padded = torch.cat([tokens, torch.randn(3, 6, 6)], 1)  # garbage in the padding
    padded_mask = torch.cat([mask, torch.zeros(3, 6, dtype=torch.bool)], 1)
    torch.testing.assert_close(module(padded, padded_mask), out, atol=1e-6, rtol=0)


def test_ragged_batch_equals_single_rows(module):
    tokens = torch.randn(3, 9, 6)
    mask = torch.arange(9) < torch.tensor([[2], [9], [5]])
    batch = module(tokens, mask)
    for i, n in enumerate([2, 9, 5]):
        torch.testing.assert_close(batch[i], module(tokens[i : i + 1, :n], mask[i : i + 1, :n])[0], atol=1e-6, rtol=0)


def test_gradients_flow(module):
    tokens = torch.randn(2, 5, 6, requires_grad=True)
    module(tokens, torch.ones(2, 5, dtype=torch.bool)).sum().backward()
    assert tokens.grad is not None and tokens.grad.abs().sum() > 0
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in module.parameters())


def test_state_dict_round_trip(module, tmp_path):
    torch.save(module.state_dict(), tmp_path / "dkrl.pt")
    other = get_trainable_encoder("dkrl", token_dim=6, out_dim=5)
    other.load_state_dict(torch.load(tmp_path / "dkrl.pt", weights_only=True))
    x, m = torch.randn(2, 4, 6), torch.ones(2, 4, dtype=torch.bool)
    assert torch.equal(other(x, m), module(x, m))


def test_length_buckets_match_one_pass():
    """Sorting rows into length buckets (each cut to its longest row) changes no output or gradient."""
    torch.manual_seed(1)
    bucketed = DKRLEncoder(token_dim=6, out_dim=5, bucket_size=4)
    single = DKRLEncoder(token_dim=6, out_dim=5, bucket_size=1000)
    single.load_state_dict(bucketed.state_dict())
    lengths = torch.tensor([1, 30, 3, 0, 7, 2, 19, 4, 5, 30, 1, 11, 8])
    tokens = torch.randn(len(lengths), 33, 6)
    mask = torch.arange(33) < lengths[:, None]
    out_b, out_s = bucketed(tokens, mask), single(tokens, mask)
    torch.testing.assert_close(out_b, out_s, atol=1e-6, rtol=0)
    out_b.square().sum().backward()
    out_s.square().sum().backward()
    for pb, ps in zip(bucketed.parameters(), single.parameters(), strict=True):
        torch.testing.assert_close(pb.grad, ps.grad, atol=1e-5, rtol=1e-5)


def test_encode_rows_equals_gather_then_forward():
    torch.manual_seed(2)
    module = DKRLEncoder(token_dim=6, out_dim=5, bucket_size=3)
    lengths = torch.tensor([4, 1, 25, 0, 9, 2, 13, 6])
    tokens = torch.randn(len(lengths), 25, 6)
    mask = torch.arange(25) < lengths[:, None]
    rows = torch.tensor([2, 0, 0, 7, 5, 3, 6, 1, 4, 2])
    torch.testing.assert_close(
        module.encode_rows(tokens, mask, rows), module(tokens[rows], mask[rows]), atol=1e-6, rtol=0
    )
