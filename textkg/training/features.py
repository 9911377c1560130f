"""Run the text encoders a model config asks for (data → encoders → model).

Descriptions are public inputs. Frozen encoders' features are cached on disk
by (encoder identity, text hash), so the second run of a recipe skips encoding.

``text_module: finetune`` (BLP's recipe: fine-tune the transformer end to end)
encodes nothing here. The descriptions become word-piece ids from the
``bert`` encoder's own tokenizer, loaded from the same place as the frozen
encoder (``model_name_or_path``, default: the packaged MiniLM), and the same
transformer comes back as a trainable :class:`textkg.models.PooledTransformer`
with the encoder's pooling.
"""

from __future__ import annotations

import inspect
import os
from pathlib import Path

import torch

from textkg.cache_root import default_cache_dir
from textkg.data.graph import KnowledgeGraph
from textkg.errors import ConfigError

#: Environment variable: ``1`` memory-maps the pooled frozen features from the on-disk cache
#: (``cached_encode(..., mmap=True)``) and the model keeps them as mapped buffers, not copies.
MMAP_ENV = "TEXTKG_MMAP_FEATURES"
#: Frozen encoders whose transformer ``text_module: finetune`` can fine-tune.
FINETUNE_ENCODERS = ("bert",)
#: The ``encoder_kwargs`` of ``bert`` that a fine-tuned module reads.
FINETUNE_ENCODER_KWARGS = ("model_name_or_path", "pooling", "max_tokens")


def mmap_features() -> bool:
    """Whether ``TEXTKG_MMAP_FEATURES=1`` asks for memory-mapped pooled features (docs/scaling.md)."""
    return os.environ.get(MMAP_ENV) == "1"


def entity_texts(kg: KnowledgeGraph) -> list[str]:
    """The text each entity is encoded from: its description."""
    return list(kg.entity_descriptions)


def text_inputs(
    model_cfg,
    texts: list[str],
    *,
    seed: int = 0,
    cache_dir: Path | None = None,
    autoencoder=None,
    device: torch.device | None = None,
) -> dict:
    """Keyword arguments for :func:`textkg.models.build_model` carrying text features.

    ``device``: where a frozen encoder computes (unless ``encoder_kwargs`` names one);
    ``None``: the CPU. The features come back on the CPU either way (and are cached on
    disk; features encoded on another device are cached apart from the CPU's, whose
    last bits they need not match).

    Returns ``{}`` for structural models; ``{"text_features": (n, D)}`` for
    pooled encoders (memory-mapped from the cache when :func:`mmap_features`);
    ``{"token_features": (n, L, d), "token_mask": (n, L)}``
    for DKRL (``build_model`` builds the CNN); ``lstm-ae`` codes come back as
    pooled ``text_features`` together with the ``autoencoder`` that made them
    (pre-trained here as in the seed paper, or ``autoencoder`` when given, e.g.
    a run's saved one, or loaded from ``text_module_kwargs.path``: see
    :func:`lstm_autoencoder`); the caller pops ``autoencoder`` before
    :func:`textkg.models.build_model`;
    ``{"input_ids": (n, L), "attention_mask": (n, L), "text_module":
    PooledTransformer}`` for ``finetune``; ``{"token_features", "token_mask", "text_module":
    TopLayers}`` for ``top-layers`` (:mod:`textkg.training.top_layers_features`).

    Raises:
        ConfigError: Bad encoder settings (``finetune``: not a ``bert``
            encoder, an unknown ``encoder_kwargs`` key, bad pooling/length).
    """
    if getattr(model_cfg, "encoder", None) is None:
        return {}
    module = getattr(model_cfg, "text_module", None)
    if module == "finetune":
        ids = finetune_token_ids(model_cfg, texts)  # validates the settings before loading weights
        return {**ids, "text_module": finetune_module(model_cfg)}
    from textkg.encoders import cached_encode, get_encoder

    cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    if module == "top-layers":
        from textkg.training.top_layers_features import top_layers_inputs

        return top_layers_inputs(model_cfg, texts, cache_dir=cache_dir)
    kwargs = dict(model_cfg.encoder_kwargs or {})
    if device is not None and device.type != "cpu":  # on the CPU: built exactly as before devices existed
        kwargs.setdefault("device", str(device))
    encoder = get_encoder(model_cfg.encoder, **kwargs)
    if module is None:  # float32 already: .float() copies nothing, a memory-mapped tensor stays mapped
        return {"text_features": cached_encode(encoder, texts, cache_dir=cache_dir, mmap=mmap_features()).float()}
    tokens, mask = _token_features(encoder, texts, cache_dir)
    if module == "lstm-ae":
        ae = autoencoder if autoencoder is not None else lstm_autoencoder(model_cfg, tokens, mask, seed=seed)
        with torch.no_grad():
            codes = ae.encode(tokens, mask)
        return {"text_features": codes.float(), "autoencoder": ae}
    return {"token_features": tokens, "token_mask": mask}


#: File name of a run's LSTM autoencoder (``text_module: lstm-ae``), next to ``best_model.pt``.
AUTOENCODER_FILE = "lstm_ae.pt"


def lstm_autoencoder(model_cfg, tokens: torch.Tensor, mask: torch.Tensor, *, seed: int = 0):
    """The LSTM autoencoder of an ``lstm-ae`` model: loaded or pre-trained.

    ``text_module_kwargs.path`` names a file written by ``textkg encoders
    pretrain-aec`` (or a run's ``lstm_ae.pt``): it is loaded and checked
    against the encoder's token size. Without it, the autoencoder is
    pre-trained here on ``tokens`` with the other ``text_module_kwargs``
    (``code_dim``, ``epochs``, ``lr``, ``batch_size``, ``num_layers``).

    Raises:
        ConfigError: Unreadable file, or token size mismatch (the file is named).
    """
    from textkg.encoders.lstm_ae import load_autoencoder, pretrain_autoencoder

    kwargs = dict(getattr(model_cfg, "text_module_kwargs", None) or {})
    path = kwargs.pop("path", None)
    if path is None:
        return pretrain_autoencoder(tokens, mask, seed=seed, **kwargs)[0]
    if kwargs:
        raise ConfigError(
            f"a pre-trained autoencoder ('path') takes no pre-training arguments, got {', '.join(sorted(kwargs))}",
            field=f"model.text_module_kwargs.{sorted(kwargs)[0]}",
        )
    ae = load_autoencoder(path)
    if ae.token_dim != tokens.shape[-1]:
        raise ConfigError(
            f"autoencoder reads {ae.token_dim}-d tokens but encoder {model_cfg.encoder!r} gives "
            f"{tokens.shape[-1]}-d tokens",
            file=path,
            field="token_dim",
        )
    return ae


def _token_features(encoder, texts, cache_dir):
    try:
        from textkg.encoders.cache import cached_encode_tokens
    except ImportError:  # pragma: no cover - cache for tokens is optional
        cached_encode_tokens = None
    if cached_encode_tokens is not None:
        tokens, mask = cached_encode_tokens(encoder, texts, cache_dir=cache_dir)
    else:
        tokens, mask = encoder.encode_tokens(texts)
    return tokens, mask


def finetune_settings(model_cfg) -> dict:
    """Validated settings of a ``finetune`` text module.

    Unset keys take the frozen ``bert`` encoder's defaults (``pooling="cls"``,
    ``max_tokens=32``, the packaged MiniLM), read from its signature.

    Returns:
        ``{"model_name_or_path": str, "pooling": str, "max_tokens": int}``.

    Raises:
        ConfigError: The encoder is not in :data:`FINETUNE_ENCODERS`, or an
            ``encoder_kwargs`` key or value is invalid (the field is named).
    """
    from textkg.encoders.bert import POOLINGS, BertEncoder, default_minilm_path

    if model_cfg.encoder not in FINETUNE_ENCODERS:
        raise ConfigError(
            f"text_module 'finetune' fine-tunes the transformer of encoder "
            f"{' or '.join(repr(e) for e in FINETUNE_ENCODERS)}, got {model_cfg.encoder!r}",
            field="model.encoder",
        )
    kwargs = dict(model_cfg.encoder_kwargs or {})
    unknown = sorted(set(kwargs) - set(FINETUNE_ENCODER_KWARGS))
    if unknown:
        raise ConfigError(
            f"text_module 'finetune' reads encoder_kwargs {', '.join(FINETUNE_ENCODER_KWARGS)} "
            f"(every transformer parameter is trained, on the pipeline's CPU device); "
            f"got {', '.join(unknown)}",
            field=f"model.encoder_kwargs.{unknown[0]}",
        )
    defaults = inspect.signature(BertEncoder).parameters
    pooling = kwargs.get("pooling", defaults["pooling"].default)
    max_tokens = kwargs.get("max_tokens", defaults["max_tokens"].default)
    if pooling not in POOLINGS:
        raise ConfigError(
            f"pooling must be one of {', '.join(POOLINGS)}, got {pooling!r}", field="model.encoder_kwargs.pooling"
        )
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 2:
        raise ConfigError(
            f"max_tokens must be an integer >= 2, got {max_tokens!r}", field="model.encoder_kwargs.max_tokens"
        )
    path = kwargs.get("model_name_or_path") or default_minilm_path()
    return {"model_name_or_path": str(path), "pooling": pooling, "max_tokens": max_tokens}


def finetune_tokenizer(model_cfg):
    """The ``finetune`` transformer's own tokenizer (offline from a local folder or the HF cache)."""
    from transformers import AutoTokenizer

    from textkg.encoders.bert import load_pretrained

    return load_pretrained(AutoTokenizer, finetune_settings(model_cfg)["model_name_or_path"], "tokenizer")


def finetune_token_ids(model_cfg, texts: list[str], *, tokenizer=None) -> dict[str, torch.Tensor]:
    """Word-piece inputs of a ``finetune`` text module, one row per text.

    Training entities and brand-new ones (``textkg predict``) go through this
    same function. Rows are padded to the longest text, truncated at
    ``max_tokens`` (special tokens included).

    Args:
        model_cfg: The model configuration (``text_module: finetune``).
        texts: Descriptions; blank ones raise :class:`textkg.errors.DataError`.
        tokenizer: A tokenizer from :func:`finetune_tokenizer` (loaded if ``None``).

    Returns:
        ``{"input_ids": (n, L), "attention_mask": (n, L)}`` long tensors, ``L <= max_tokens``.
    """
    from textkg.encoders.base import validate_texts

    texts = validate_texts(texts)
    settings = finetune_settings(model_cfg)
    tokenizer = tokenizer if tokenizer is not None else finetune_tokenizer(model_cfg)
    batch = tokenizer(texts, padding=True, truncation=True, max_length=settings["max_tokens"], return_tensors="pt")
    return {"input_ids": batch["input_ids"].long(), "attention_mask": batch["attention_mask"].long()}


def finetune_module(model_cfg):
    """A trainable :class:`textkg.models.PooledTransformer` over the encoder's pretrained weights.

    Loaded with ``attn_implementation="eager"`` so that DP-SGD can take
    per-example gradients under ``torch.func.vmap`` (the SDPA path branches on
    the attention mask's values). A pooler head, which the pooled output never
    reads, is frozen so that it is neither trained nor noised.
    """
    from transformers import AutoModel

    from textkg.encoders.bert import load_pretrained
    from textkg.models import PooledTransformer

    settings = finetune_settings(model_cfg)
    model = load_pretrained(AutoModel, settings["model_name_or_path"], "model", attn_implementation="eager")
    if getattr(model, "pooler", None) is not None:
        model.pooler.requires_grad_(False)
    model.train()
    return PooledTransformer(model, pooling=settings["pooling"])
