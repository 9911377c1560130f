"""Contract template run for every registered frozen encoder (Flair-style).

Adding an encoder to the registry without adding its constructor arguments to
``CONTRACT_PARAMS`` fails :func:`test_every_registered_encoder_has_contract_params`.
"""

from __future__ import annotations

import warnings

import pytest
import torch

from textkg.encoders import cached_encode, get_encoder, list_encoders
from textkg.encoders.glove import OOVWarning
from textkg.errors import DataError

# name -> function(request) -> constructor kwargs
CONTRACT_PARAMS = {
    "bert": lambda request: {"max_tokens": 32},
    "sentence-transformers": lambda request: {},
    "glove-bow": lambda request: {},
    "char-ngrams": lambda request: {"dim": 64},
    "concat": lambda request: {"parts": [{"name": "glove-bow"}, {"name": "bert", "max_tokens": 32}]},
    "flair": lambda request: dict(
        zip(("forward_model", "backward_model"), map(str, request.getfixturevalue("char_lms")), strict=True)
    ),
}

TEXTS = [
    "Abnormal enlargement of the kidney.",
    "Seizures.",
    "A head circumference that is more than two standard deviations below the mean for age and sex.",
    "naïve café ☃ 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 \u200b",
    "日本語のテキスト 中文",
    "😀🧬 emoji only? 🙂",
    "x",
]

pytestmark = pytest.mark.filterwarnings("ignore::textkg.encoders.glove.OOVWarning")


def test_every_registered_encoder_has_contract_params():
    assert set(list_encoders()) == set(CONTRACT_PARAMS), "add new encoders to CONTRACT_PARAMS"


@pytest.fixture(params=list_encoders())
def encoder(request, built_encoders):
    name = request.param
    if name not in CONTRACT_PARAMS:
        pytest.fail(f"registered encoder '{name}' has no contract params")
    if name not in built_encoders:
        built_encoders[name] = get_encoder(name, **CONTRACT_PARAMS[name](request))
    return built_encoders[name]


class TestEncoderContract:
    def test_shape_dtype_device(self, encoder):
        x = encoder.encode(TEXTS)
        assert x.shape == (len(TEXTS), encoder.dim)
        assert x.dtype == torch.float32
        assert x.device.type == "cpu"
        assert torch.isfinite(x).all()
        assert isinstance(encoder.identity, str) and encoder.name in encoder.identity

    def test_deterministic(self, encoder):
        assert torch.equal(encoder.encode(TEXTS), encoder.encode(TEXTS))

    def test_batch_order_invariance(self, encoder):
        forward = encoder.encode(TEXTS, batch_size=3)
        backward = encoder.encode(TEXTS[::-1], batch_size=2)
        torch.testing.assert_close(backward.flip(0), forward, atol=1e-5, rtol=1e-4)

    def test_single_equals_batched(self, encoder):
        one = torch.cat([encoder.encode([t]) for t in TEXTS[:3]])
        torch.testing.assert_close(one, encoder.encode(TEXTS[:3]), atol=1e-5, rtol=1e-4)

    def test_odd_unicode(self, encoder):
        x = encoder.encode(["naïve café ☃ 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 \u200b", "漢字かなカナ", "🧬🦠", "\u00e9\u0301 Ω≈ç√"])
        assert x.shape == (4, encoder.dim) and torch.isfinite(x).all()

    @pytest.mark.parametrize("blank", ["", "   ", "\t\n", "\u200b", " \u200b\ufeff "])
    def test_empty_description_raises(self, encoder, blank):
        with pytest.raises(DataError, match="description 1 is empty") as info:
            encoder.encode(["fine text", blank])
        assert info.value.field == "text"

    def test_no_input_mutation_and_empty_list(self, encoder):
        texts = list(TEXTS)
        encoder.encode(texts)
        assert texts == TEXTS
        assert encoder.encode([]).shape == (0, encoder.dim)

    def test_rebuild_round_trip(self, encoder):
        again = get_encoder(encoder.name, **encoder.config)
        assert again.identity == encoder.identity
        torch.testing.assert_close(again.encode(TEXTS), encoder.encode(TEXTS), atol=0, rtol=0)

    def test_cached_reload_equals_fresh(self, encoder, tmp_path):
        fresh = encoder.encode(TEXTS)
        first = cached_encode(encoder, TEXTS, cache_dir=tmp_path)
        again = cached_encode(encoder, TEXTS[::-1], cache_dir=tmp_path)
        torch.testing.assert_close(first, fresh, atol=1e-6, rtol=0)
        torch.testing.assert_close(again.flip(0), fresh, atol=1e-6, rtol=0)

    def test_encode_tokens(self, encoder):
        if not encoder.is_token_level:
            pytest.skip(f"{encoder.name} is sentence-level")
        tokens, mask = encoder.encode_tokens(TEXTS, batch_size=3)
        assert tokens.shape[:2] == mask.shape and tokens.shape[0] == len(TEXTS)
        assert tokens.shape[2] == encoder.token_dim and mask.dtype == torch.bool
        assert (tokens[~mask] == 0).all()
        rev_tokens, rev_mask = encoder.encode_tokens(TEXTS[::-1], batch_size=2)
        assert torch.equal(rev_mask.flip(0), mask)
        torch.testing.assert_close(rev_tokens.flip(0), tokens, atol=1e-5, rtol=1e-4)


def test_oov_warning_is_not_silent(built_encoders):
    enc = built_encoders.get("glove-bow") or get_encoder("glove-bow")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        x = enc.encode(["🧬🦠", "kidney"])
    assert any(issubclass(w.category, OOVWarning) and "1 of 2 description" in str(w.message) for w in caught)
    assert torch.equal(x[0], torch.zeros(50))
    assert enc.oov_report(["🧬🦠", "kidney"])["indices"] == [0]
