"""Inputs of a ``text_module: top-layers`` model: cached lower-layer states + the trainable top layers.

The descriptions go through the frozen lower ``L - k`` layers of the ``bert`` encoder's
transformer once (:class:`textkg.encoders.lower_layers.BertLowerLayers`); their token states are
cached on disk by :func:`textkg.encoders.cache.cached_encode_tokens` (float16, keyed by the
encoder identity, which names ``k``, ``max_tokens`` and the weights, and by the text hash).
The top ``k`` layers come back as a trainable :class:`textkg.models.TopLayers`, initialised
from the same pretrained weights. Training entities and brand-new ones (``textkg predict``,
``textkg place``) go through the same functions.
"""

from __future__ import annotations

from pathlib import Path

import torch

from textkg.errors import ConfigError

#: The ``encoder_kwargs`` of ``bert`` that a ``top-layers`` module reads.
TOP_LAYERS_ENCODER_KWARGS = ("model_name_or_path", "max_tokens")
#: The ``text_module_kwargs`` of ``top-layers`` (the rest are :class:`textkg.models.TopLayers` arguments).
TOP_LAYERS_KWARGS = ("layers", "pooling", "live", "refresh_every", "lr_scale")


def top_layers_settings(model_cfg) -> dict:
    """Validated settings: ``{"model_name_or_path", "max_tokens", "layers", "module_kwargs"}``.

    Raises:
        ConfigError: Not the ``bert`` encoder, or an unknown or bad key (the field is named).
    """
    if model_cfg.encoder != "bert":
        raise ConfigError(
            f"text_module 'top-layers' trains the top layers of encoder 'bert', got {model_cfg.encoder!r}",
            field="model.encoder",
        )
    enc = dict(model_cfg.encoder_kwargs or {})
    _check_keys(enc, TOP_LAYERS_ENCODER_KWARGS, "model.encoder_kwargs", "(pooling is text_module_kwargs.pooling)")
    kwargs = dict(model_cfg.text_module_kwargs or {})
    _check_keys(kwargs, TOP_LAYERS_KWARGS, "model.text_module_kwargs", "")
    layers = kwargs.pop("layers", 1)
    if isinstance(layers, bool) or not isinstance(layers, int) or layers < 1:
        raise ConfigError(f"must be an integer >= 1, got {layers!r}", field="model.text_module_kwargs.layers")
    max_tokens = enc.get("max_tokens", 32)
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 2:
        raise ConfigError(
            f"max_tokens must be an integer >= 2, got {max_tokens!r}", field="model.encoder_kwargs.max_tokens"
        )
    return {
        "model_name_or_path": enc.get("model_name_or_path"),
        "max_tokens": max_tokens,
        "layers": layers,
        "module_kwargs": kwargs,
    }


def _check_keys(given: dict, allowed: tuple[str, ...], field: str, hint: str) -> None:
    unknown = sorted(set(given) - set(allowed))
    if unknown:
        raise ConfigError(
            f"text_module 'top-layers' reads {field.split('.')[-1]} {', '.join(allowed)}; got {', '.join(unknown)} "
            f"{hint}".rstrip(),
            field=f"{field}.{unknown[0]}",
        )


def lower_layer_encoder(model_cfg):
    """The frozen lower layers as an encoder (:class:`textkg.encoders.lower_layers.BertLowerLayers`)."""
    from textkg.encoders.lower_layers import BertLowerLayers

    s = top_layers_settings(model_cfg)
    try:
        return BertLowerLayers(s["model_name_or_path"], top_layers=s["layers"], max_tokens=s["max_tokens"])
    except ConfigError as exc:
        if exc.field == "top_layers":
            raise ConfigError(exc.message, field="model.text_module_kwargs.layers") from None
        raise


def lower_layer_states(
    model_cfg, texts: list[str], *, cache_dir: Path | None = None, encoder=None
) -> dict[str, torch.Tensor]:
    """``{"token_features": (n, T, d), "token_mask": (n, T)}``: the cached lower-layer states of ``texts``."""
    from textkg.encoders.cache import cached_encode_tokens

    encoder = encoder if encoder is not None else lower_layer_encoder(model_cfg)
    tokens, mask = cached_encode_tokens(encoder, texts, cache_dir=cache_dir)
    return {"token_features": tokens, "token_mask": mask}


def top_layers_module(model_cfg):
    """A trainable :class:`textkg.models.TopLayers` over the pretrained top ``k`` layers.

    Loaded with ``attn_implementation="eager"`` (the layers are called directly with an
    additive attention mask) and without dropout: the candidate cache and the live rows are
    the same function of the weights, and a resumed run repeats the uninterrupted one.
    """
    from transformers import AutoModel

    from textkg.encoders.bert import default_minilm_path, load_pretrained
    from textkg.models import TopLayers

    s = top_layers_settings(model_cfg)
    path = s["model_name_or_path"] or default_minilm_path()
    model = load_pretrained(
        AutoModel,
        str(path),
        "model",
        attn_implementation="eager",
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    total = int(model.config.num_hidden_layers)
    if s["layers"] > total:
        raise ConfigError(
            f"the model has {total} layers, got layers={s['layers']}", field="model.text_module_kwargs.layers"
        )
    layers = list(model.encoder.layer[total - s["layers"] :])
    module = TopLayers(layers, hidden_size=int(model.config.hidden_size), **s["module_kwargs"])
    module.train()
    return module


def top_layers_inputs(model_cfg, texts: list[str], *, cache_dir: Path | None = None) -> dict:
    """``{"token_features", "token_mask", "text_module"}`` for :func:`textkg.models.build_model`."""
    states = lower_layer_states(model_cfg, texts, cache_dir=cache_dir)
    return {**states, "text_module": top_layers_module(model_cfg)}
