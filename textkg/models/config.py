"""``ModelConfig``: every model option, documented once, as frozen data.

YAML/JSON configs and CLI flags only fill this in (``from_dict``); presets
(:mod:`textkg.models.presets`) are named instances.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from textkg.errors import ConfigError
from textkg.models.fusion import fusion_class
from textkg.models.interactions import get_interaction

#: Allowed values of ``ModelConfig.text_module``.
TEXT_MODULES = ("dkrl", "lstm-ae", "finetune", "top-layers")


#: the widest entity vector a config may ask for (a wider one would exhaust memory while the model
#: is built, before the memory estimate can refuse it; issue 36, item 11)
MAX_DIM = 1 << 16


@dataclass(frozen=True)
class ModelConfig:
    """How to build a :class:`textkg.models.KGEModel`.

    Attributes:
        interaction: Interaction name (``textkg.models.list_interactions()``):
            ``transe``, ``distmult``, ``complex``, ``rotate``.
        interaction_kwargs: Its arguments, e.g. ``{"p": 1}`` (TransE norm).
        dim: Entity width ``d`` (even for ``complex``/``rotate``).
        fusion: ``structural`` (no text), ``text`` (BLP), ``weighted``
            (learned global weights) or ``gate`` (per-entity gate).
        fusion_kwargs: Fusion arguments, e.g. ``{"init": [0.5, 0.5]}`` for ``weighted``.
        encoder: Frozen text encoder name in ``encoders.list_encoders()``
            (``bert``, ``glove-bow``, ``flair``, ...) that the training pipeline
            runs on the descriptions; ``None`` for structural models.
        encoder_kwargs: Its arguments, e.g. ``{"pooling": "mean"}``.
        text_module: Trainable module over the encoder's output: ``dkrl``
            (CNN over token features, trained with the model), ``lstm-ae``
            (LSTM autoencoder codes, pre-trained by the pipeline, then used as
            pooled features), ``finetune`` (the ``bert`` encoder's transformer
            fine-tuned end to end over word-piece ids, BLP's recipe; the
            pipeline builds it from ``encoder_kwargs`` ``model_name_or_path``,
            ``pooling``, ``max_tokens``, and ``train.lr`` applies to it), or
            ``None`` (pooled features → linear projection).
        text_module_kwargs: Constructor arguments of the ``dkrl`` module
            (e.g. ``{"hidden_dim": 64}``) or pre-training arguments of ``lstm-ae``
            (``code_dim``, ``epochs``, ``lr``).
        normalize_entities: L2-normalise fused entity vectors (BLP with TransE).
        structural_dropout: Training-time probability that a seen entity
            reads the learned unseen row instead of its own (fusions with
            structure only).
        structural_buckets: ``0`` (one structural row per seen entity) or ``K``:
            the seen entities share ``K`` hashed rows (a smaller table, each row
            trained by more statements; measured under DP in docs/results/privacy_utility.md).
        irreflexive: relations that never link an entity to itself, so that every
            score of ``(e, r, e)`` is the lowest possible (the query entity is never its
            own answer): ``"auto"`` (default) takes every relation with training
            statements and no self-loop among them (off under ``--privacy``: it would
            read private statements), ``"none"``, or a list of relation names (a public
            input; refused under ``--privacy``). See :mod:`textkg.training.irreflexive`.
        unseen_structure: the structural part of an entity not seen in training, when
            ranking: ``"neighbours"`` (default) the softmax-weighted mean of the structural
            rows of its 16 nearest training entities by description (pooled text features
            only; public inputs), or ``"row"``, the learned unseen row. Training is the same
            either way. See :mod:`textkg.training.unseen_structure`.
    """

    interaction: str = "transe"
    interaction_kwargs: dict = field(default_factory=lambda: {"p": 1})
    dim: int = 128
    fusion: str = "structural"
    fusion_kwargs: dict = field(default_factory=dict)
    encoder: str | None = None
    encoder_kwargs: dict = field(default_factory=dict)
    text_module: str | None = None
    text_module_kwargs: dict = field(default_factory=dict)
    normalize_entities: bool = False
    structural_dropout: float = 0.0
    structural_buckets: int = 0
    irreflexive: str | list = "auto"
    unseen_structure: str = "neighbours"

    def __post_init__(self) -> None:
        for name in ("interaction_kwargs", "fusion_kwargs", "encoder_kwargs", "text_module_kwargs"):
            value = getattr(self, name)
            if value is None:
                value = {}
            if not isinstance(value, dict):
                raise ConfigError(f"must be a mapping, got {value!r}", field=f"model.{name}")
            object.__setattr__(self, name, dict(value))  # defensive copy
        if isinstance(self.dim, bool) or not isinstance(self.dim, int) or not 1 <= self.dim <= MAX_DIM:
            raise ConfigError(f"must be an integer in [1, {MAX_DIM:,}], got {self.dim!r}", field="model.dim")
        get_interaction(self.interaction, **self.interaction_kwargs).check_dim(self.dim)
        fusion = fusion_class(self.fusion)
        if fusion.uses_text and self.encoder is None:
            raise ConfigError(f"fusion '{self.fusion}' uses descriptions; set model.encoder", field="model.encoder")
        if not fusion.uses_text and (self.encoder is not None or self.text_module is not None):
            raise ConfigError(
                f"fusion '{self.fusion}' ignores descriptions; drop model.encoder/text_module "
                "or choose fusion text, weighted or gate",
                field="model.fusion",
            )
        if self.text_module is not None and self.text_module not in TEXT_MODULES:
            raise ConfigError(
                f"unknown text module {self.text_module!r}; choose one of: {', '.join(TEXT_MODULES)}",
                field="model.text_module",
            )
        dropout = self.structural_dropout
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0 <= dropout < 1:
            raise ConfigError(f"must be in [0, 1), got {dropout!r}", field="model.structural_dropout")
        if dropout and not fusion.uses_structure:
            raise ConfigError(
                f"fusion '{self.fusion}' has no structural part to drop", field="model.structural_dropout"
            )
        buckets = self.structural_buckets
        if isinstance(buckets, bool) or not isinstance(buckets, int) or buckets < 0:
            raise ConfigError(f"must be a non-negative integer, got {buckets!r}", field="model.structural_buckets")
        if buckets and not fusion.uses_structure:
            raise ConfigError(f"fusion '{self.fusion}' has no structural table", field="model.structural_buckets")
        irreflexive = self.irreflexive
        if isinstance(irreflexive, (list, tuple)):
            if any(not isinstance(r, str) or not r for r in irreflexive):
                raise ConfigError(
                    f"must be 'auto', 'none' or a list of relation names, got {irreflexive!r}",
                    field="model.irreflexive",
                )
            object.__setattr__(self, "irreflexive", list(irreflexive))
        elif irreflexive not in ("auto", "none"):
            raise ConfigError(
                f"must be 'auto', 'none' or a list of relation names, got {irreflexive!r}", field="model.irreflexive"
            )
        if self.unseen_structure not in ("neighbours", "row"):
            raise ConfigError(
                f"must be 'neighbours' or 'row', got {self.unseen_structure!r}", field="model.unseen_structure"
            )
        object.__setattr__(self, "structural_dropout", float(dropout))
        object.__setattr__(self, "normalize_entities", bool(self.normalize_entities))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict; ``ModelConfig.from_dict(c.to_dict()) == c``."""
        return {
            f.name: (dict(v) if isinstance(v := getattr(self, f.name), dict) else list(v) if isinstance(v, list) else v)
            for f in dataclasses.fields(self)
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, source: str | None = None) -> ModelConfig:
        """Build from a dict (e.g. a config file's ``model`` section).

        Raises:
            ConfigError: An unknown key (the message lists the valid ones) or an invalid value.
        """
        if not isinstance(data, dict):
            raise ConfigError(
                f"the model section must be a mapping, got {type(data).__name__}", file=source, field="model"
            )
        names = [f.name for f in dataclasses.fields(cls)]
        for key in data:
            if key not in names:
                raise ConfigError(f"unknown key; model takes {', '.join(names)}", file=source, field=f"model.{key}")
        try:
            return cls(**data)
        except ConfigError as exc:
            if source is None or exc.file is not None:
                raise
            raise ConfigError(exc.message, file=source, field=exc.field) from None
