"""``concat``: several frozen encoders side by side, each row L2-normalised.

``get_encoder("concat", parts=[{"name": "bert", "pooling": "mean"}, {"name": "glove-bow"}])``
encodes a description with every part, scales each part's vector to unit
length (so that no part dominates by its scale) and concatenates them:
``dim = sum(part.dim)``. Each part reads and writes its own entry of the
feature cache, so parts shared with other recipes are encoded once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F

from textkg.errors import ConfigError

from .base import DEFAULT_BATCH_SIZE, TextEncoder, validate_texts


class ConcatEncoder(TextEncoder):
    """Concatenation of L2-normalised frozen encoders.

    Args:
        parts: At least one ``{"name": NAME, **kwargs}`` mapping per encoder
            (any frozen encoder but ``concat``).
        normalize: Scale each part's vector to unit L2 norm before concatenating.
        cache_dir: Feature-cache root for the parts (default: the library's).
        device: Torch device; also given to every part that names none (off the CPU).
    """

    name = "concat"

    def __init__(
        self, parts: Sequence[dict] = (), *, normalize: bool = True, cache_dir: str | None = None, device: str = "cpu"
    ) -> None:
        from .registry import get_encoder

        if not parts or isinstance(parts, (str, dict)):
            raise ConfigError(
                'concat needs a list of parts, e.g. [{"name": "bert"}, {"name": "glove-bow"}]',
                field="encoder_kwargs.parts",
            )
        self._parts_config = []
        self.parts: list[TextEncoder] = []
        for i, part in enumerate(parts):
            if not isinstance(part, dict) or not isinstance(part.get("name"), str):
                raise ConfigError(
                    f"each part is a mapping with a 'name', got {part!r}", field=f"encoder_kwargs.parts[{i}]"
                )
            kwargs = {k: v for k, v in part.items() if k != "name"}
            if torch.device(device).type != "cpu":  # the parts compute where the concatenation was asked to
                kwargs.setdefault("device", device)
            if part["name"] == "concat":
                raise ConfigError("a concat part cannot itself be concat", field=f"encoder_kwargs.parts[{i}]")
            self.parts.append(get_encoder(part["name"], **kwargs))
            self._parts_config.append(dict(part))
        self.normalize = bool(normalize)
        self.cache_dir = cache_dir
        self.device = torch.device(device)

    @property
    def dim(self) -> int:
        return sum(p.dim for p in self.parts)

    @property
    def identity(self) -> str:
        inner = ";".join(p.identity for p in self.parts)
        return f"concat(normalize={self.normalize})[{inner}]"

    @property
    def config(self) -> dict[str, Any]:
        return {
            "parts": [dict(p) for p in self._parts_config],
            "normalize": self.normalize,
            "cache_dir": self.cache_dir,
        }

    def _combine(self, vectors: list[torch.Tensor]) -> torch.Tensor:
        if self.normalize:
            vectors = [F.normalize(v.float(), p=2.0, dim=-1) for v in vectors]
        return torch.cat(vectors, dim=-1)

    def _modules(self) -> list[torch.nn.Module]:
        return [m for p in self.parts for m in p._modules()]

    def _encode_batch(self, texts: list[str]) -> torch.Tensor:
        return self._combine([p._encode_batch(texts) for p in self.parts])

    def encode(self, texts: Sequence[str], *, batch_size: int = DEFAULT_BATCH_SIZE) -> torch.Tensor:
        """Each part through the feature cache, then normalised and concatenated."""
        from .cache import cached_encode

        texts = validate_texts(texts)
        if not texts:
            return torch.zeros(0, self.dim)
        return self._combine(
            [cached_encode(p, texts, cache_dir=self.cache_dir, batch_size=batch_size) for p in self.parts]
        )
