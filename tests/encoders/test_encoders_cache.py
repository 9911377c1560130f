import hashlib
import time

import numpy as np
import pytest
import torch

from textkg.encoders import cached_encode, cached_encode_tokens, get_encoder
from textkg.encoders.base import TextEncoder
from textkg.errors import DataError


class HashEncoder(TextEncoder):
    """Cheap deterministic encoder that counts the texts it encodes."""

    name = "hash"

    def __init__(self, dim: int = 8) -> None:
        self._dim, self.seen, self.device = dim, [], torch.device("cpu")

    dim = property(lambda self: self._dim)
    identity = property(lambda self: f"hash(dim={self._dim})")
    config = property(lambda self: {"dim": self._dim})

    def _encode_batch(self, texts):
        self.seen.extend(texts)
        rows = [np.frombuffer(hashlib.sha256(t.encode()).digest(), dtype=np.uint8)[: self._dim] for t in texts]
        return torch.tensor(np.stack(rows), dtype=torch.float32)


def test_changed_description_recomputes_only_its_row(tmp_path):
    enc = HashEncoder()
    texts = ["a", "b", "c", "b"]
    first = cached_encode(enc, texts, cache_dir=tmp_path)
    assert enc.seen == ["a", "b", "c"]  # duplicates computed once
    torch.testing.assert_close(first, enc.encode(texts))
    enc.seen.clear()
    second = cached_encode(enc, ["a", "B!", "c", "b"], cache_dir=tmp_path)
    assert enc.seen == ["B!"]
    torch.testing.assert_close(second[1], enc.encode(["B!"])[0])
    assert not list(tmp_path.rglob("*.tmp"))  # atomic writes leave no temporaries


def test_second_call_computes_nothing(tmp_path):
    texts = [f"text {i}" for i in range(3000)]  # ~12 digests end in a NUL byte
    assert any(hashlib.sha256(t.encode()).digest().endswith(b"\0") for t in texts)
    enc = HashEncoder()
    first = cached_encode(enc, texts, cache_dir=tmp_path)
    enc.seen.clear()
    assert torch.equal(cached_encode(enc, texts, cache_dir=tmp_path), first) and enc.seen == []


def test_identity_separates_encoders(tmp_path):
    cached_encode(HashEncoder(8), ["a"], cache_dir=tmp_path)
    assert cached_encode(HashEncoder(4), ["a"], cache_dir=tmp_path).shape == (1, 4)
    assert len(list((tmp_path / "features").iterdir())) == 2


def test_shards_merge(tmp_path):
    enc = HashEncoder()
    for i in range(20):
        cached_encode(enc, [f"t{i}"], cache_dir=tmp_path)
    folder = next((tmp_path / "features").iterdir())
    assert len(list(folder.glob("*.keys.npy"))) <= 16
    enc.seen.clear()
    out = cached_encode(enc, [f"t{i}" for i in range(20)], cache_dir=tmp_path)
    assert enc.seen == [] and torch.equal(out, enc.encode([f"t{i}" for i in range(20)]))


def test_reload_20k_rows_fast(tmp_path):
    enc = HashEncoder(384 // 12)
    texts = [f"description number {i}" for i in range(20_000)]
    cached_encode(enc, texts, cache_dir=tmp_path, batch_size=4096)
    start = time.process_time()  # CPU seconds: a loaded machine (or the other test worker) does not count
    out = cached_encode(HashEncoder(384 // 12), texts, cache_dir=tmp_path)
    assert time.process_time() - start < 5.0
    assert out.shape == (20_000, 32)


def test_validates_before_touching_cache(tmp_path):
    with pytest.raises(DataError, match="description 0"):
        cached_encode(HashEncoder(), [" "], cache_dir=tmp_path)
    assert not (tmp_path / "features").exists()


def test_cached_tokens_round_trip(tmp_path):
    enc = get_encoder("glove-bow")
    texts = ["Abnormal enlargement of the kidney.", "short stature", "kidney"]
    tokens, mask = enc.encode_tokens(texts)
    for _ in range(2):
        ct, cm = cached_encode_tokens(enc, texts, cache_dir=tmp_path)
        assert torch.equal(cm, mask)
        torch.testing.assert_close(ct, tokens, atol=1e-2, rtol=1e-3)  # float16 storage
