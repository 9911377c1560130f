"""Text encoders: lists of strings in, float tensors out (no knowledge of graphs).

Public API::

    from textkg.encoders import get_encoder, list_encoders, cached_encode, TextEncoder
    enc = get_encoder("bert")                # MiniLM (384-d), offline
    x = enc.encode(["Abnormal enlargement of the kidney."])   # (1, 384)
    x = cached_encode(enc, texts)            # on-disk feature cache

See docs/encoders.md.
"""

from .base import TextEncoder
from .cache import cached_encode, cached_encode_tokens
from .registry import (
    get_encoder,
    get_trainable_encoder,
    list_encoders,
    list_trainable_encoders,
    register_encoder,
)

__all__ = [
    "TextEncoder",
    "cached_encode",
    "cached_encode_tokens",
    "get_encoder",
    "get_trainable_encoder",
    "list_encoders",
    "list_trainable_encoders",
    "register_encoder",
]
