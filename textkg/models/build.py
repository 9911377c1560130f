"""``build_model``: a :class:`ModelConfig` + precomputed public features → :class:`KGEModel`.

The training pipeline runs the encoders (data → encoders → models); this
module only receives their outputs. It imports :mod:`textkg.encoders` only to build
a trainable ``dkrl`` module by name.
"""

from __future__ import annotations

import torch
from torch import nn

from textkg.errors import ConfigError
from textkg.models.config import ModelConfig
from textkg.models.fusion import get_fusion
from textkg.models.interactions import get_interaction
from textkg.models.kge import KGEModel
from textkg.models.representations import TextRepresentation


def build_model(
    config: ModelConfig | dict,
    *,
    num_entities: int,
    num_relations: int,
    seen_entities: torch.Tensor,
    text_features: torch.Tensor | None = None,
    token_features: torch.Tensor | None = None,
    token_mask: torch.Tensor | None = None,
    input_ids: torch.Tensor | None = None,
    attention_mask: torch.Tensor | None = None,
    text_module: nn.Module | None = None,
    share_text_inputs: bool = False,
) -> KGEModel:
    """Build a model; the public text inputs become buffers.

    Give exactly one kind of text input when ``config.fusion`` uses text:

    * ``text_features (num_entities, D)``: pooled features (``encoder`` output,
      or ``lstm-ae`` codes) → trainable linear projection (optionally through
      ``text_module`` first);
    * ``token_features (num_entities, L, d_tok)`` + ``token_mask (num_entities, L)``:
      token-level features → ``text_module`` (built from ``config.text_module``,
      i.e. ``dkrl``, when not given) → projection;
    * ``input_ids`` + ``attention_mask (num_entities, L)``: word-piece ids →
      ``text_module`` (required; e.g. a :class:`PooledTransformer`) → projection.

    Args:
        config: The model configuration (or its dict form).
        num_entities: Size of the global entity id space.
        num_relations: Number of relations.
        seen_entities: ``(n_seen,)`` ids of the training entities.
        text_module: A trainable ``nn.Module`` mapping the gathered inputs of
            ``k`` entities to ``(k, D)``; its output width is read from
            ``.out_dim`` or from one dry run.
        share_text_inputs: Keep the given text tensors as the model's buffers
            instead of copies (for features memory-mapped from the encoder
            cache: the copy would read the whole matrix into memory).

    Raises:
        ConfigError: Missing, extra or ill-shaped features; bad config values.
    """
    if isinstance(config, dict):
        config = ModelConfig.from_dict(config)
    if not isinstance(config, ModelConfig):
        raise ConfigError(f"expected a ModelConfig, got {type(config).__name__}", field="model")
    if isinstance(num_entities, bool) or not isinstance(num_entities, int) or num_entities < 1:
        raise ConfigError(f"num_entities must be a positive integer, got {num_entities!r}", field="num_entities")
    interaction = get_interaction(config.interaction, **config.interaction_kwargs)
    fusion_kwargs = dict(config.fusion_kwargs)
    if "init" in fusion_kwargs:  # two finite starting weights (a run's config may be crafted)
        init = fusion_kwargs["init"]
        ok = isinstance(init, (list, tuple)) and len(init) == 2
        ok = ok and all(not isinstance(v, bool) and isinstance(v, (int, float)) and abs(v) <= 1e6 for v in init)
        if not ok:
            raise ConfigError(f"must be two numbers in [-1e6, 1e6], got {init!r}", field="model.fusion_kwargs.init")
        fusion_kwargs["init"] = tuple(float(v) for v in init)
    fusion = get_fusion(config.fusion, dim=config.dim, **fusion_kwargs)
    inputs = _text_inputs(
        text_features=text_features,
        token_features=token_features,
        token_mask=token_mask,
        input_ids=input_ids,
        attention_mask=attention_mask,
        num_entities=num_entities,
    )
    text = None
    if fusion.uses_text:
        text = _text_representation(config, inputs, text_module, copy_inputs=not share_text_inputs)
    elif inputs or text_module is not None:
        raise ConfigError(
            f"fusion '{config.fusion}' does not use text, but text inputs were given", field="model.fusion"
        )
    return KGEModel(
        interaction=interaction,
        fusion=fusion,
        num_entities=num_entities,
        num_relations=num_relations,
        dim=config.dim,
        seen_entities=seen_entities,
        text=text,
        structural_dropout=config.structural_dropout,
        structural_buckets=config.structural_buckets,
        normalize_entities=config.normalize_entities,
    )


def _text_inputs(*, num_entities: int, **given: torch.Tensor | None) -> dict[str, torch.Tensor]:
    """The one kind of text input given, validated, in the order a module takes them."""
    kinds = {
        "pooled": ("text_features",),
        "tokens": ("token_features", "token_mask"),
        "ids": ("input_ids", "attention_mask"),
    }
    present = [kind for kind, keys in kinds.items() if any(given[k] is not None for k in keys)]
    if not present:
        return {}
    if len(present) > 1:
        raise ConfigError(f"give one kind of text input, got {' and '.join(present)}", field="text_features")
    keys = kinds[present[0]]
    out: dict[str, torch.Tensor] = {}
    for key in keys:
        value = given[key]
        if value is None:
            raise ConfigError(f"{key} is required together with {', '.join(keys)}", field=key)
        if not isinstance(value, torch.Tensor) or value.shape[0] != num_entities:
            shape = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
            raise ConfigError(f"expected {num_entities} rows (one per entity), got {shape}", field=key)
        out[key] = value
    if present[0] == "pooled":
        out["text_features"] = out["text_features"].float()
    elif present[0] == "tokens":
        if out["token_features"].ndim != 3 or tuple(out["token_mask"].shape) != tuple(out["token_features"].shape[:2]):
            raise ConfigError(
                f"expected token_features (n, L, d) and token_mask (n, L), got "
                f"{tuple(out['token_features'].shape)} and {tuple(out['token_mask'].shape)}",
                field="token_mask",
            )
        out = {"token_features": out["token_features"].float(), "token_mask": out["token_mask"].bool()}
    return out


def _text_representation(
    config: ModelConfig, inputs: dict[str, torch.Tensor], module: nn.Module | None, *, copy_inputs: bool = True
) -> TextRepresentation:
    if not inputs:
        raise ConfigError(
            f"fusion '{config.fusion}' needs text features: pass text_features, "
            "token_features + token_mask, or input_ids + attention_mask",
            field="text_features",
        )
    if module is None and "token_features" in inputs:
        module = _named_token_module(config, inputs["token_features"].shape[-1])
    if module is None and "input_ids" in inputs:
        raise ConfigError(
            "input_ids need a text_module (e.g. models.PooledTransformer over a bert module)", field="text_module"
        )
    module_dim = None
    if module is not None:
        module_dim = _output_dim(module, inputs)
    return TextRepresentation(
        inputs,
        config.dim,
        module=module,
        module_dim=module_dim,
        copy_inputs=copy_inputs,
        # a module may declare its inputs derived data, rebuilt from the descriptions (TopLayers' hidden states)
        persistent_inputs=getattr(module, "persistent_inputs", True),
    )


def _named_token_module(config: ModelConfig, token_dim: int) -> nn.Module:
    if config.text_module != "dkrl":
        raise ConfigError(
            f"token features need text_module 'dkrl' (or a text_module instance), got "
            f"{config.text_module!r}; lstm-ae codes are passed as text_features",
            field="model.text_module",
        )
    from textkg.encoders.registry import get_trainable_encoder

    return get_trainable_encoder("dkrl", token_dim=token_dim, out_dim=config.dim, **config.text_module_kwargs)


def _output_dim(module: nn.Module, inputs: dict[str, torch.Tensor]) -> int:
    out_dim = getattr(module, "out_dim", None)
    if isinstance(out_dim, int) and not isinstance(out_dim, bool):
        return out_dim
    mode = module.training
    module.eval()
    try:
        with torch.no_grad():
            out = module(*(v[:1] for v in inputs.values()))
    finally:
        module.train(mode)
    if not isinstance(out, torch.Tensor) or out.ndim != 2:
        raise ConfigError("text_module must return a (n, D) tensor", field="text_module")
    return int(out.shape[-1])
