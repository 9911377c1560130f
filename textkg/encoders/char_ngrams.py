"""``char-ngrams``: the word forms of an entity's name, as a hashed character n-gram vector.

Frozen sentence encoders place *run* and *runner*, or *Canis* and *canine*, by what the words
mean; relations such as WordNet's derivationally-related forms are carried by how the words are
*spelt*. This encoder adds that signal with no weights at all, so it works offline and for
every new entity:

1. take the entity's name: the description up to the first separator (``" -- "`` of the StAR
   "Name -- first sentence" files, ``": "`` of "name: definition" texts), or the whole text
   with ``field="all"``;
2. lower-case it, split it into words, and pad each word as ``<word>``;
3. count every character n-gram of the padded words for each n in ``ns`` (fastText's subword
   units, Bojanowski et al. 2017, TACL 5, §3.2);
4. hash each n-gram to one of ``dim`` buckets with a ±1 sign (the hashing trick of Weinberger
   et al. 2009, ICML, §2: the signed hash keeps inner products unbiased, Lemma 2), using
   BLAKE2b so the buckets do not depend on Python's per-process string hashing;
5. scale the row to unit L2 norm.

Two names that share many n-grams then have a high cosine; the trained projection decides how
much that is worth. The encoder is deterministic and public: it reads nothing but the text.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Sequence
from typing import Any

import torch

from textkg.errors import ConfigError

from .base import TextEncoder

_WORD = re.compile(r"\w+", re.UNICODE)

#: where a description's name ends: StAR's "Name -- sentence", then "name: definition"
DEFAULT_SEPARATORS = (" -- ", ": ")


@functools.lru_cache(maxsize=1 << 20)
def _bucket(gram: str, dim: int) -> tuple[int, float]:
    """The signed bucket of one n-gram: 8 bytes of BLAKE2b, bit 0 the sign, the rest the index."""
    h = int.from_bytes(hashlib.blake2b(gram.encode("utf-8"), digest_size=8).digest(), "little")
    return (h >> 1) % dim, (1.0 if h & 1 else -1.0)


class CharNgramEncoder(TextEncoder):
    """Hashed, signed character n-gram counts of an entity's name, L2-normalised.

    Args:
        dim: Number of hash buckets (the vector size).
        ns: The n-gram lengths, e.g. ``[3, 4, 5]``.
        field: ``"name"`` (the text before the first of ``separators``) or ``"all"``.
        separators: Strings that end the name, tried in order.
        device: Accepted for the encoder contract; the work is done in Python on the CPU.
    """

    name = "char-ngrams"

    def __init__(
        self,
        *,
        dim: int = 512,
        ns: Sequence[int] = (3, 4, 5),
        field: str = "name",
        separators: Sequence[str] = DEFAULT_SEPARATORS,
        device: str | torch.device = "cpu",
    ) -> None:
        if not isinstance(dim, int) or isinstance(dim, bool) or not 2 <= dim <= 1 << 20:  # a crafted run: bounded
            raise ConfigError(
                f"char-ngrams dim must be an integer in [2, 1,048,576], got {dim!r}", field="encoder_kwargs.dim"
            )
        if (
            isinstance(ns, (str, bytes))
            or not list(ns)
            or any(not isinstance(n, int) or isinstance(n, bool) or n < 1 for n in ns)
        ):
            raise ConfigError(
                f"char-ngrams ns must be a non-empty list of positive integers, got {ns!r}", field="encoder_kwargs.ns"
            )
        if field not in ("name", "all"):
            raise ConfigError(f"char-ngrams field must be 'name' or 'all', got {field!r}", field="encoder_kwargs.field")
        if isinstance(separators, (str, bytes)) or any(not isinstance(s, str) or not s for s in separators):
            raise ConfigError(
                f"char-ngrams separators must be a list of non-empty strings, got {separators!r}",
                field="encoder_kwargs.separators",
            )
        self._dim = dim
        self.ns = tuple(sorted(set(int(n) for n in ns)))
        self.field = field
        self.separators = tuple(separators)
        self.device = torch.device(device)

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def identity(self) -> str:
        return f"char-ngrams(v1,dim={self._dim},ns={list(self.ns)},field={self.field},sep={list(self.separators)})"

    @property
    def config(self) -> dict[str, Any]:
        return {"dim": self._dim, "ns": list(self.ns), "field": self.field, "separators": list(self.separators)}

    def name_of(self, text: str) -> str:
        """The part of ``text`` this encoder reads."""
        if self.field == "all":
            return text
        for sep in self.separators:
            head, found, _ = text.partition(sep)
            if found and head.strip():
                return head
        return text

    def grams(self, text: str) -> list[str]:
        """Every character n-gram of the padded, lower-cased words of the name, with repeats."""
        out: list[str] = []
        for word in _WORD.findall(self.name_of(text).lower()):
            padded = f"<{word}>"
            for n in self.ns:
                out.extend(padded[i : i + n] for i in range(len(padded) - n + 1))
        return out

    def _encode_batch(self, texts: list[str]) -> torch.Tensor:
        out = torch.zeros(len(texts), self._dim)
        for row, text in enumerate(texts):
            for gram in self.grams(text):
                index, sign = _bucket(gram, self._dim)
                out[row, index] += sign
        norms = out.norm(dim=1, keepdim=True)
        return out / norms.clamp(min=1e-12)  # a name with no word characters stays the zero vector
