"""The text-encoder contract: a list of strings in, a float tensor out.

Modelled on Flair's tiny embedding contract: an encoder exposes its output
size (:attr:`TextEncoder.dim`), a stable :attr:`TextEncoder.identity` used as
the feature-cache key, and one hook (:meth:`TextEncoder._encode_batch`).
Everything else (input validation, batching, eval mode, ``no_grad``) is done
once here, so every encoder behaves the same way.

Empty descriptions are never encoded silently: a text that is empty after
removing whitespace and invisible format characters (Unicode category ``Cf``,
e.g. ``"\\u200b"``) raises :class:`textkg.errors.DataError` naming its index
(field ``'text'``).
"""

from __future__ import annotations

import abc
import hashlib
import os
import unicodedata
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from textkg.cache_root import default_cache_dir as default_cache_dir  # re-exported: scripts import it here
from textkg.errors import DataError
from textkg.progress import count as report_progress

DEFAULT_BATCH_SIZE = 64
#: an encode of at least this many descriptions reports ``texts encoded n/N`` in a run's log
REPORT_MIN_TEXTS = 2048


def is_blank(text: str) -> bool:
    """True when ``text`` holds only whitespace and invisible format characters."""
    return all(ch.isspace() or unicodedata.category(ch) == "Cf" for ch in text)


def validate_texts(texts: Sequence[str]) -> list[str]:
    """Check a batch of descriptions before anything is built from it.

    Args:
        texts: The descriptions, one per entity.

    Returns:
        A new list holding the same strings (the input is never mutated).

    Raises:
        DataError: When ``texts`` is a bare string, an item is not a string, or
            an item is blank (field ``'text'``, message names the index).
    """
    if isinstance(texts, (str, bytes)):
        raise DataError("expected a list of descriptions, got a single string", field="text")
    out = list(texts)
    for i, text in enumerate(out):
        if not isinstance(text, str):
            raise DataError(f"description {i} is a {type(text).__name__}, not a string", field="text")
        if is_blank(text):
            raise DataError(
                f"description {i} is empty (only whitespace or invisible characters); "
                "give the entity a description or drop it",
                field="text",
            )
    return out


def check_batch_size(batch_size: int) -> int:
    if not isinstance(batch_size, int) or batch_size < 1:
        from textkg.errors import ConfigError

        raise ConfigError(f"batch_size must be a positive integer, got {batch_size!r}", field="batch_size")
    return batch_size


def file_fingerprint(path: str | os.PathLike[str]) -> str:
    """sha256 of a file's bytes (memoised on path, size and mtime)."""
    p = Path(path)
    st = p.stat()
    key = (str(p.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _FINGERPRINTS:
        h = hashlib.sha256()
        with p.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        _FINGERPRINTS[key] = h.hexdigest()[:16]
    return _FINGERPRINTS[key]


_FINGERPRINTS: dict[tuple[str, int, int], str] = {}


def masked_mean(tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over the real tokens.

    Args:
        tokens: FloatTensor (n, L, d).
        mask: BoolTensor (n, L), True at real tokens.

    Returns:
        FloatTensor (n, d); rows without any real token are zero.
    """
    m = mask.to(tokens.dtype).unsqueeze(-1)
    return (tokens * m).sum(1) / m.sum(1).clamp(min=1.0)


def pad_stack(rows: list[torch.Tensor], dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad a list of (L_i, dim) tensors into (n, L, dim) plus a (n, L) mask."""
    length = max((r.shape[0] for r in rows), default=0)
    out = torch.zeros(len(rows), length, dim)
    mask = torch.zeros(len(rows), length, dtype=torch.bool)
    for i, r in enumerate(rows):
        out[i, : r.shape[0]] = r
        mask[i, : r.shape[0]] = True
    return out, mask


class TextEncoder(abc.ABC):
    """A frozen text encoder: ``encode(texts) -> FloatTensor (n, dim)``.

    Subclasses set :attr:`name` (the registry name), implement
    :meth:`_encode_batch`, :attr:`dim`, :attr:`identity` and :attr:`config`.
    Token-level encoders also implement :meth:`_encode_tokens_batch` and
    :attr:`token_dim`.

    Attributes:
        name: Registry name.
        device: The torch device the encoder computes on (explicit, default "cpu").
    """

    name: str = ""
    device: torch.device

    @property
    @abc.abstractmethod
    def dim(self) -> int:
        """Size of one description vector."""

    @property
    @abc.abstractmethod
    def identity(self) -> str:
        """Stable string of name + config + weights fingerprint (the cache key)."""

    @property
    @abc.abstractmethod
    def config(self) -> dict[str, Any]:
        """Constructor keyword arguments: ``get_encoder(enc.name, **enc.config)`` rebuilds it."""

    @abc.abstractmethod
    def _encode_batch(self, texts: list[str]) -> torch.Tensor:
        """Encode one validated batch: FloatTensor (b, dim) on any device."""

    @property
    def token_dim(self) -> int:
        raise NotImplementedError(f"encoder '{self.name}' is not token-level")

    @property
    def is_token_level(self) -> bool:
        return type(self)._encode_tokens_batch is not TextEncoder._encode_tokens_batch

    def _encode_tokens_batch(self, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        raise NotImplementedError(f"encoder '{self.name}' is not token-level")

    def _modules(self) -> list[torch.nn.Module]:
        """nn.Modules put in eval mode during encoding (restored afterwards)."""
        return []

    def _lengths(self, texts: list[str]) -> list[int] | None:
        """Each text's length in the encoder's own units (word pieces), or ``None``.

        When given, :meth:`encode` batches the texts in order of length and puts the rows back
        in the caller's order, so a batch pads to nearly its own length: ``hpo``'s 36,853
        descriptions (MiniLM, 32 word pieces) pad to 720,736 positions instead of 998,416.
        Only for encoders whose rows do not depend on their batch neighbours."""
        return None

    def encode(self, texts: Sequence[str], *, batch_size: int = DEFAULT_BATCH_SIZE) -> torch.Tensor:
        """Encode descriptions, deterministically, in eval mode, without gradients.

        Args:
            texts: n descriptions (not mutated).
            batch_size: Descriptions per forward pass.

        Returns:
            FloatTensor (n, dim) on the CPU.

        Raises:
            DataError: A description is blank or not a string (field 'text').
        """
        texts = validate_texts(texts)
        check_batch_size(batch_size)
        if not texts:
            return torch.zeros(0, self.dim)
        lengths = self._lengths(texts)
        order = None if lengths is None else sorted(range(len(texts)), key=lengths.__getitem__)
        if order is not None:
            texts = [texts[i] for i in order]
        starts = range(0, len(texts), batch_size)
        # about ten "texts encoded n/N" lines in a run's log, for encodings long enough to need them
        every = max(1, len(starts) // 10) if len(texts) >= REPORT_MIN_TEXTS else 0
        parts = []
        with _eval_mode(self._modules()), torch.inference_mode():
            for k, i in enumerate(starts, 1):
                # clone: a batch's rows may be a view of a much larger tensor (BERT's CLS
                # row of the (B, L, d) hidden states) that would otherwise stay alive
                # until the final cat (~1.8 GB for MiniLM over 36k descriptions)
                parts.append(self._encode_batch(texts[i : i + batch_size]).float().cpu().clone())
                if every and (k % every == 0 or k == len(starts)):
                    report_progress(f"texts encoded ({self.name})", min(i + batch_size, len(texts)), len(texts))
        out = torch.cat(parts)
        if order is None:
            return out
        back = torch.empty(len(order), dtype=torch.long)
        back[torch.tensor(order)] = torch.arange(len(order))
        return out[back]

    def encode_tokens(
        self, texts: Sequence[str], *, batch_size: int = DEFAULT_BATCH_SIZE
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Token-level features for DKRL / LSTM-AE.

        Args:
            texts: n descriptions (not mutated).
            batch_size: Descriptions per forward pass.

        Returns:
            ``(tokens, mask)``: FloatTensor (n, L, token_dim) right-padded with
            zeros and BoolTensor (n, L), True at real tokens; L is the longest
            row in ``texts``.
        """
        texts = validate_texts(texts)
        check_batch_size(batch_size)
        rows: list[torch.Tensor] = []
        with _eval_mode(self._modules()), torch.inference_mode():
            for i in range(0, len(texts), batch_size):
                tok, mask = self._encode_tokens_batch(texts[i : i + batch_size])
                tok, mask = tok.float().cpu(), mask.cpu()
                rows.extend(tok[j, mask[j]] for j in range(tok.shape[0]))
        return pad_stack(rows, self.token_dim)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.identity})"


class _eval_mode:
    """Put modules in eval mode; restore each module's previous mode on exit."""

    def __init__(self, modules: list[torch.nn.Module]) -> None:
        self.modules = modules
        self.saved: list[bool] = []

    def __enter__(self) -> None:
        self.saved = [m.training for m in self.modules]
        for m in self.modules:
            m.eval()

    def __exit__(self, *exc: object) -> None:
        for m, mode in zip(self.modules, self.saved, strict=True):
            m.train(mode)
