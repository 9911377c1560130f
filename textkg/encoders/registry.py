"""Registries of encoders, by name.

Two families, one registry each (house style: one registry per family):

* **frozen text encoders** (:func:`get_encoder`, :func:`list_encoders`):
  ``"bert"``, ``"sentence-transformers"``, ``"glove-bow"``, ``"flair"``,
  ``"char-ngrams"`` (hashed character n-grams of the name: word forms, no weights),
  and ``"concat"`` (several of them side by side);
  each is a :class:`textkg.encoders.base.TextEncoder` with ``.encode(texts)``.
* **trainable text modules** (:func:`get_trainable_encoder`,
  :func:`list_trainable_encoders`): ``"dkrl"``, ``"lstm-ae"``; each is an
  ``nn.Module`` mapping token features ``(n, L, d)`` + mask ``(n, L)`` to
  ``(n, out_dim)``, trained together with (or before) the KG model.

Both accept a name, a class or an instance plus keyword arguments. Allowed
names in error messages come from the registry itself.
"""

from __future__ import annotations

import importlib
from typing import Any

import torch

from textkg.registry import Registry

from .base import TextEncoder


def _import(target: str) -> type:
    """The class of ``"module:Class"``."""
    module, _, cls = target.partition(":")
    return getattr(importlib.import_module(module), cls)


# name -> "module:Class"; imported lazily so `import textkg.encoders` stays cheap.
_FROZEN: Registry[str] = Registry("encoder", field="encoder", load=_import)
_TRAINABLE: Registry[str] = Registry("trainable encoder", field="encoder", load=_import)
for _name, _target in {
    "bert": "textkg.encoders.bert:BertEncoder",
    "sentence-transformers": "textkg.encoders.sbert:SentenceTransformerEncoder",
    "glove-bow": "textkg.encoders.glove:GloveBowEncoder",
    "flair": "textkg.encoders.flair_stack:FlairStackEncoder",
    "concat": "textkg.encoders.concat:ConcatEncoder",
    "char-ngrams": "textkg.encoders.char_ngrams:CharNgramEncoder",
}.items():
    _FROZEN.register(_name, _target)
for _name, _target in {
    "dkrl": "textkg.encoders.dkrl:DKRLEncoder",
    "lstm-ae": "textkg.encoders.lstm_ae:LSTMAutoencoder",
}.items():
    _TRAINABLE.register(_name, _target)


def register_encoder(name: str, target: str | type, *, trainable: bool = False, replace: bool = False) -> None:
    """Make an encoder class available by name.

    Args:
        name: Registry name; a taken name raises (:class:`textkg.registry.DuplicateNameError`)
            unless ``replace=True``.
        target: The class, or ``"module:Class"`` for a lazy import.
        trainable: Register in the trainable-module family instead.
        replace: Replace the class registered as ``name``.
    """
    table = _TRAINABLE if trainable else _FROZEN
    table.register(
        name, target if isinstance(target, str) else f"{target.__module__}:{target.__qualname__}", replace=replace
    )


def list_encoders() -> list[str]:
    """Names of the frozen text encoders, sorted."""
    return _FROZEN.names()


def list_trainable_encoders() -> list[str]:
    """Names of the trainable text modules, sorted."""
    return _TRAINABLE.names()


def get_encoder(name_or_class_or_instance: str | type | TextEncoder, **kwargs: Any) -> TextEncoder:
    """Build a frozen text encoder.

    Args:
        name_or_class_or_instance: A registry name (see :func:`list_encoders`),
            a :class:`TextEncoder` subclass, or an instance (returned as is;
            then ``kwargs`` must be empty).
        **kwargs: Constructor arguments (e.g. ``device="cpu"``, ``pooling="mean"``).

    Raises:
        ConfigError: Unknown name, bad kwargs, or kwargs given with an instance.
    """
    encoder: TextEncoder = _FROZEN.make(name_or_class_or_instance, base=TextEncoder, **kwargs)
    return encoder


def get_trainable_encoder(name_or_class_or_instance: str | type | torch.nn.Module, **kwargs: Any) -> torch.nn.Module:
    """Build a trainable text module (``"dkrl"``, ``"lstm-ae"``).

    Args:
        name_or_class_or_instance: Registry name, ``nn.Module`` subclass or instance.
        **kwargs: Constructor arguments, e.g. ``token_dim=50, out_dim=128``.

    Raises:
        ConfigError: Unknown name, bad kwargs, or kwargs given with an instance.
    """
    module: torch.nn.Module = _TRAINABLE.make(name_or_class_or_instance, base=torch.nn.Module, **kwargs)
    return module
