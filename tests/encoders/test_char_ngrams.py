"""``char-ngrams``: hashed character n-grams of an entity's name (word forms, no weights)."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from textkg.encoders import cached_encode, get_encoder
from textkg.encoders.char_ngrams import CharNgramEncoder
from textkg.errors import ConfigError


def test_name_is_the_text_before_the_first_separator():
    enc = CharNgramEncoder()
    assert enc.name_of("Barack Obama -- the 44th president") == "Barack Obama"
    assert enc.name_of("dog, domestic dog: a member of the genus Canis") == "dog, domestic dog"
    assert enc.name_of("no separator here") == "no separator here"
    assert enc.name_of(": starts with a colon: then text") == ": starts with a colon: then text"
    assert CharNgramEncoder(field="all").name_of("run: move fast") == "run: move fast"


def test_grams_are_fasttext_subwords_of_padded_words():
    enc = CharNgramEncoder(ns=[3])
    assert enc.grams("Run: to move fast") == ["<ru", "run", "un>"]
    assert CharNgramEncoder(ns=[2, 3]).grams("ab") == ["<a", "ab", "b>", "<ab", "ab>"]


def test_oracle_counts_with_signs():
    """The row is the normalised sum of ±1 at each gram's bucket, computed here by hand."""
    enc = CharNgramEncoder(dim=16, ns=[3])
    from textkg.encoders.char_ngrams import _bucket

    expected = torch.zeros(16)
    grams = enc.grams("abab")
    assert grams == ["<ab", "aba", "bab", "ab>"]
    for gram in grams:
        index, sign = _bucket(gram, 16)
        expected[index] += sign
    expected = expected / expected.norm()
    assert torch.allclose(enc.encode(["abab"])[0], expected)


def test_shared_word_forms_have_a_high_cosine():
    enc = CharNgramEncoder(dim=4096)
    x = enc.encode(["run: move fast", "runner: one who runs", "photosynthesis: light to sugar"])
    assert float(x[0] @ x[1]) > 0.3
    assert abs(float(x[0] @ x[2])) < 0.2
    assert torch.allclose(x.norm(dim=1), torch.ones(3))


def test_buckets_do_not_depend_on_the_process():
    """BLAKE2b, not Python's salted hash(): another interpreter gives the same row."""
    code = (
        "from textkg.encoders.char_ngrams import CharNgramEncoder;"
        "print(CharNgramEncoder(dim=32).encode(['Canis familiaris'])[0].tolist())"
    )
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    here = CharNgramEncoder(dim=32).encode(["Canis familiaris"])[0].tolist()
    assert eval(other) == here


def test_a_name_without_word_characters_is_the_zero_row():
    assert torch.equal(CharNgramEncoder(dim=8).encode(["?? -- !!"])[0], torch.zeros(8))


def test_cached_and_as_a_concat_part(tmp_path):
    texts = ["run: move fast", "runner: one who runs"]
    enc = get_encoder("char-ngrams", dim=64)
    first = cached_encode(enc, texts, cache_dir=tmp_path)
    again = cached_encode(get_encoder("char-ngrams", dim=64), texts, cache_dir=tmp_path)
    assert torch.equal(first, again)
    cat = get_encoder("concat", parts=[{"name": "char-ngrams", "dim": 64}, {"name": "char-ngrams", "dim": 32}])
    assert cat.encode(texts).shape == (2, 96)
    assert enc.identity != get_encoder("char-ngrams", dim=64, ns=[3]).identity


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"dim": 1}, "encoder_kwargs.dim"),
        ({"dim": "512"}, "encoder_kwargs.dim"),
        ({"ns": []}, "encoder_kwargs.ns"),
        ({"ns": [0, 3]}, "encoder_kwargs.ns"),
        ({"ns": "345"}, "encoder_kwargs.ns"),
        ({"field": "title"}, "encoder_kwargs.field"),
        ({"separators": ":"}, "encoder_kwargs.separators"),
        ({"separators": [""]}, "encoder_kwargs.separators"),
    ],
)
def test_bad_settings_name_the_field(kwargs, field):
    with pytest.raises(ConfigError) as info:
        get_encoder("char-ngrams", **kwargs)
    assert info.value.field == field
