import pytest
import torch

from textkg.encoders import get_encoder
from textkg.encoders.lstm_ae import LSTMAutoencoder, pretrain_autoencoder
from textkg.errors import DataError


@pytest.fixture
def toy():
    texts = [
        "Abnormal enlargement of the kidney.",
        "Recurrent seizures in infancy.",
        "Short stature.",
        "Increased muscle tone with stiffness of the limbs.",
        "kidney cysts",
        "small head",
    ]
    return get_encoder("glove-bow").encode_tokens(texts)


def test_code_shape_and_padding_invariance():
    torch.manual_seed(0)
    ae = LSTMAutoencoder(token_dim=4, code_dim=3)
    tokens = torch.randn(2, 5, 4)
    mask = torch.arange(5) < torch.tensor([[2], [5]])
    codes = ae.encode(tokens, mask)
    assert codes.shape == (2, 3)
    padded = torch.cat([tokens, torch.randn(2, 4, 4)], 1)
    padded_mask = torch.cat([mask, torch.zeros(2, 4, dtype=torch.bool)], 1)
    torch.testing.assert_close(ae.encode(padded, padded_mask), codes, atol=1e-6, rtol=0)
    torch.testing.assert_close(ae.encode(tokens[:1, :2], mask[:1, :2])[0], codes[0], atol=1e-6, rtol=0)


def test_gradients_flow():
    ae = LSTMAutoencoder(token_dim=4, code_dim=3)
    tokens = torch.randn(2, 3, 4)
    ae.reconstruction_loss(tokens, torch.ones(2, 3, dtype=torch.bool)).backward()
    assert all(p.grad is not None for p in ae.parameters())


def test_empty_row_raises():
    with pytest.raises(DataError, match="no tokens"):
        LSTMAutoencoder(4, 3)(torch.zeros(2, 3, 4), torch.tensor([[True, False, False], [False] * 3]))


def test_pretraining_decreases_loss_and_is_seeded(toy):
    tokens, mask = toy
    ae, history = pretrain_autoencoder(tokens, mask, code_dim=16, epochs=25, lr=1e-2, seed=0, batch_size=3)
    assert history[-1] < 0.7 * history[0]
    _, again = pretrain_autoencoder(tokens, mask, code_dim=16, epochs=25, lr=1e-2, seed=0, batch_size=3)
    assert again == history
    assert ae.encode(tokens, mask).shape == (6, 16)


def test_save_load_round_trip(toy, tmp_path):
    tokens, mask = toy
    ae, _ = pretrain_autoencoder(tokens, mask, code_dim=8, epochs=2, seed=1)
    ae.save(tmp_path / "aec.pt")
    loaded = LSTMAutoencoder.load(tmp_path / "aec.pt")
    assert torch.equal(loaded.encode(tokens, mask), ae.encode(tokens, mask))
    assert all(torch.equal(a, b) for a, b in zip(loaded.state_dict().values(), ae.state_dict().values(), strict=True))
