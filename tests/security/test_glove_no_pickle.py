"""GloVe is read as data, never through a pickle (STYLE.md 13; docs/security.md).

Until this change the GloVe vectors were converted into a gensim ``KeyedVectors`` file in the cache
and loaded back with ``KeyedVectors.load``, which unpickles: whoever could write a file into the cache
folder (a shared ``$TEXTKG_CACHE_DIR``, an unpacked archive of someone's cache) ran code in every
later ``glove-bow`` or ``flair`` run. The adversary here plants pickles exactly where the old code
looked, and where the Python API takes a word-vector path; no marker may appear.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
import torch
from security_helpers import Bomb

from textkg.encoders.flair_stack import FlairStackEncoder
from textkg.encoders.glove import GloveBowEncoder, glove_vectors, glove_word_embeddings
from textkg.errors import ConfigError


def _plant(path: Path, marker: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps(Bomb(marker)))


def test_a_pickle_planted_in_the_glove_cache_is_never_loaded(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    marker = tmp_path / "PWNED"
    _plant(cache / "glove" / "glove-6B-50d" / "glove-6B-50d.kv", marker)  # where 7add106 loaded it from
    monkeypatch.setenv("TEXTKG_CACHE_DIR", str(cache))
    out = GloveBowEncoder(cache_dir=str(cache)).encode(["Abnormal enlargement of the kidney."])
    assert out.shape == (1, 50) and out.abs().sum() > 0
    glove_word_embeddings()
    assert not marker.exists(), "the planted pickle ran"


def test_the_python_api_refuses_a_gensim_kv_path_before_reading_it(tmp_path):
    marker = tmp_path / "PWNED"
    evil = tmp_path / "words.kv"
    _plant(evil, marker)
    with pytest.raises(ConfigError, match="pickle") as err:
        FlairStackEncoder._resolve_words(str(evil), None)
    assert err.value.field == "word_embeddings"
    assert not marker.exists()


def test_flairs_glove_table_is_the_bag_of_words_table():
    """One source for both encoders: flair's row of a word is the bag-of-words vector of that word."""
    vocab, vectors = glove_vectors()
    words = glove_word_embeddings()
    table = words.embedding.weight.detach()
    assert table.shape == (len(vocab) + 1, vectors.shape[1]) and not table[-1].any()  # unknown words: zeros
    for word in ["kidney", "the", "42nd", "naïve"]:
        if word in vocab:
            assert torch.equal(table[words.vocab[word]], torch.from_numpy(vectors[vocab[word]].copy()))
