import os

import pytest
import torch

from textkg.encoders import get_encoder
from textkg.errors import ConfigError


@pytest.fixture(scope="module")
def bert():
    return get_encoder("bert")


def test_offline_default_minilm(bert):
    assert os.environ["HF_HUB_OFFLINE"] == "1"
    assert bert.encode(["Abnormal enlargement of the kidney."]).shape == (1, 384)
    assert not any(p.requires_grad for p in bert.module.parameters())


def test_uncached_hub_name_offline_is_config_error():
    with pytest.raises(ConfigError, match="offline") as info:
        get_encoder("bert", model_name_or_path="dmis-lab/biobert-base-cased-v1.2")
    assert info.value.field == "model_name_or_path"


@pytest.mark.parametrize("kwargs,field", [({"pooling": "max"}, "pooling"), ({"max_tokens": 1}, "max_tokens")])
def test_bad_options(kwargs, field):
    with pytest.raises(ConfigError) as info:
        get_encoder("bert", **kwargs)
    assert info.value.field == field


def test_truncation_and_tokenize(bert):
    batch = bert.tokenize(["word " * 100, "short"])
    assert batch["input_ids"].shape == (2, 32)
    tokens, mask = bert.encode_tokens(["word " * 100, "short"])
    assert tokens.shape == (2, 32, 384) and mask.sum(1).tolist() == [32, 3]


def test_mean_pooling_matches_tokens():
    enc = get_encoder("bert", pooling="mean", max_tokens=16)
    texts = ["Abnormal enlargement of the kidney.", "Seizures."]
    tokens, mask = enc.encode_tokens(texts)
    expected = (tokens * mask.unsqueeze(-1)).sum(1) / mask.sum(1, keepdim=True)
    torch.testing.assert_close(enc.encode(texts), expected, atol=1e-5, rtol=1e-4)
    assert "pooling=mean" in enc.identity and "max_tokens=16" in enc.identity


def test_trainable_module_restores_mode_and_gets_grads():
    enc = get_encoder("bert", trainable=True, max_tokens=8)
    enc.module.train()
    enc.encode(["kidney"])
    assert enc.module.training  # encode restored the caller's mode
    out = enc.module(**enc.tokenize(["kidney", "liver"])).last_hidden_state[:, 0]
    out.sum().backward()
    assert enc.module.embeddings.word_embeddings.weight.grad is not None


def test_batches_by_length_rows_in_callers_order(bert, monkeypatch):
    """Issue 38: ``encode`` batches descriptions by word-piece count (less padding) and returns each
    row where the caller put its text, equal to encoding it alone."""
    texts = ["word " * (1 + (7 * i) % 40) + f"term {i}" for i in range(12)]
    lengths = [len(ids) for ids in bert.tokenizer(texts, truncation=True, max_length=bert.max_tokens)["input_ids"]]
    seen: list[list[str]] = []
    inner = bert._encode_batch

    def spy(batch):
        seen.append(list(batch))
        return inner(batch)

    monkeypatch.setattr(bert, "_encode_batch", spy)
    out = bert.encode(texts, batch_size=4)
    batch_lengths = [[lengths[texts.index(t)] for t in batch] for batch in seen]
    assert [length for batch in batch_lengths for length in batch] == sorted(lengths)
    alone = torch.cat([inner([t]) for t in texts])
    torch.testing.assert_close(out, alone, atol=1e-5, rtol=1e-4)
