"""Run the text encoders a model config asks for (data → encoders → model).

Descriptions are public inputs. Frozen encoders' features are cached on disk
by (encoder identity, text hash), so the second run of a recipe skips encoding.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from textkg.data.graph import KnowledgeGraph


def default_cache_dir() -> Path:
    return Path(os.environ.get("TEXTKG_CACHE_DIR", Path.home() / ".cache" / "textkg"))


def entity_texts(kg: KnowledgeGraph) -> list[str]:
    """The text each entity is encoded from: its description."""
    return list(kg.entity_descriptions)


def text_inputs(model_cfg, texts: list[str], *, seed: int = 0, cache_dir: Path | None = None) -> dict:
    """Keyword arguments for :func:`textkg.models.build_model` carrying text features.

    Returns ``{}`` for structural models; ``{"text_features": (n, D)}`` for
    pooled encoders; ``{"token_features": (n, L, d), "token_mask": (n, L),
    "text_module": nn.Module}`` for DKRL; LSTM-AE codes are pre-trained here
    (as in the seed paper) and returned as pooled ``text_features``.
    """
    if getattr(model_cfg, "encoder", None) is None:
        return {}
    from encoders import cached_encode, get_encoder

    cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    encoder = get_encoder(model_cfg.encoder, **dict(model_cfg.encoder_kwargs or {}))
    module = getattr(model_cfg, "text_module", None)
    if module == "finetune":
        from textkg.errors import ConfigError

        raise ConfigError("text_module 'finetune' is built through the Python API (pass "
                          "textkg.models.PooledTransformer to build_model with input_ids); the training "
                          "pipeline trains over frozen encoder features: use text_module null, dkrl or lstm-ae",
                          field="model.text_module")
    if module is None:
        return {"text_features": cached_encode(encoder, texts, cache_dir=cache_dir).float()}
    tokens, mask = _token_features(encoder, texts, cache_dir)
    if module == "lstm-ae":
        from encoders.lstm_ae import pretrain_autoencoder

        kwargs = dict(getattr(model_cfg, "text_module_kwargs", None) or {})
        ae, _history = pretrain_autoencoder(tokens, mask, seed=seed, **kwargs)
        with torch.no_grad():
            codes = ae.encode(tokens, mask)
        return {"text_features": codes.float()}
    return {"token_features": tokens, "token_mask": mask}


def _token_features(encoder, texts, cache_dir):
    try:
        from encoders.cache import cached_encode_tokens
    except ImportError:  # pragma: no cover - cache for tokens is optional
        cached_encode_tokens = None
    if cached_encode_tokens is not None:
        tokens, mask = cached_encode_tokens(encoder, texts, cache_dir=cache_dir)
    else:
        tokens, mask = encoder.encode_tokens(texts)
    return tokens, mask
