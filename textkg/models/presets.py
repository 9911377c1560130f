"""Named model configurations (``textkg models list``).

Each preset is a :class:`ModelConfig`; override any field with
``dataclasses.replace(get_preset(name), dim=64)`` or a config file's
``model`` section. See docs/models.md for the table.
"""

from __future__ import annotations

from textkg.errors import ConfigError
from textkg.models.config import ModelConfig
from textkg.registry import Registry

_L1 = {"p": 1}
_BERT_CLS = {"pooling": "cls"}
_BERT_MEAN = {"pooling": "mean"}

_BUILT_IN: dict[str, ModelConfig] = {
    # structural baselines (classic transductive KGE; unseen entities share the unseen row)
    "transe": ModelConfig(interaction="transe", interaction_kwargs=_L1),
    "transe-l2": ModelConfig(interaction="transe", interaction_kwargs={"p": 2}),
    "distmult": ModelConfig(interaction="distmult", interaction_kwargs={}),
    "complex": ModelConfig(interaction="complex", interaction_kwargs={}),
    "rotate": ModelConfig(interaction="rotate", interaction_kwargs={}),
    # BLP (Daza et al. 2021): description only, BERT [CLS] → linear
    "blp-transe": ModelConfig(
        interaction="transe",
        interaction_kwargs=_L1,
        fusion="text",
        encoder="bert",
        encoder_kwargs=_BERT_CLS,
        normalize_entities=True,
    ),
    "blp-distmult": ModelConfig(
        interaction="distmult", interaction_kwargs={}, fusion="text", encoder="bert", encoder_kwargs=_BERT_CLS
    ),
    "blp-complex": ModelConfig(
        interaction="complex", interaction_kwargs={}, fusion="text", encoder="bert", encoder_kwargs=_BERT_CLS
    ),
    # BLP's full recipe: BERT fine-tuned end to end ([CLS] → linear), TransE L1 on normalised
    # vectors, margin 1, lr 2e-5 for every parameter (PRESET_TRAIN_DEFAULTS)
    "blp-transe-finetune": ModelConfig(
        interaction="transe",
        interaction_kwargs=_L1,
        fusion="text",
        encoder="bert",
        encoder_kwargs=_BERT_CLS,
        text_module="finetune",
        normalize_entities=True,
    ),
    # BLP's GloVe bag-of-words baseline
    "glove-bow": ModelConfig(
        interaction="transe", interaction_kwargs=_L1, fusion="text", encoder="glove-bow", normalize_entities=True
    ),
    # DKRL CNN (Xie et al. 2016) trained over frozen token features
    "dkrl-bert": ModelConfig(
        interaction="transe",
        interaction_kwargs=_L1,
        fusion="text",
        encoder="bert",
        text_module="dkrl",
        normalize_entities=True,
    ),
    # dkrl-flair is trained with the sampled 1-vs-all softmax (PRESET_TRAIN_DEFAULTS): a step
    # runs the CNN over 2,048 drawn candidates, not every training entity (docs/results/text_encoders.md)
    "dkrl-flair": ModelConfig(
        interaction="transe",
        interaction_kwargs={"p": 2},
        fusion="text",
        encoder="flair",
        text_module="dkrl",
        text_module_kwargs={"hidden_dim": 64},
        normalize_entities=True,
    ),
    # the seed paper's model: LSTM autoencoder codes of GloVe tokens, learned global fusion weights,
    # TransE. Trained as cpu-fused (TransE L2 on normalised vectors, 1-vs-all, structural dropout
    # 0.5, so the unseen row every new entity reads is trained; PRESET_TRAIN_DEFAULTS): the seed's
    # margin training never learned (MRR 0.013); this reaches 0.136 (docs/results/text_encoders.md, "seed baselines")
    "torchcoder-aec": ModelConfig(
        interaction="transe",
        interaction_kwargs={"p": 2},
        fusion="weighted",
        encoder="glove-bow",
        text_module="lstm-ae",
        text_module_kwargs={"epochs": 2, "batch_size": 128, "lr": 2e-3},
        normalize_entities=True,
        structural_dropout=0.5,
    ),
    # BLP-TransE for 2 CPU cores: frozen features (MiniLM mean and [CLS] pooling, GloVe
    # bag of words, each L2-normalised, side by side), TransE L2 on normalised vectors; only
    # the projection and relations are trained, with the 1-vs-all softmax loss
    # (PRESET_TRAIN_DEFAULTS; docs/results/fb15k237.md, section 8).
    "cpu-best": ModelConfig(
        interaction="transe",
        interaction_kwargs={"p": 2},
        fusion="text",
        encoder="concat",
        encoder_kwargs={
            "parts": [{"name": "bert", "pooling": "mean"}, {"name": "bert", "pooling": "cls"}, {"name": "glove-bow"}]
        },
        normalize_entities=True,
    ),
    # the private recipe (docs/privacy.md, "The private recipe"): cpu-best's model, trained under
    # --privacy with the exact per-example 1-vs-all clipping, few large Poisson batches
    # (PRESET_TRAIN_DEFAULTS). Text only: under DP a structural table's rows drown in noise
    # (docs/results/privacy_utility.md, private FB15k-237 sections).
    "cpu-private": ModelConfig(
        interaction="transe",
        interaction_kwargs={"p": 2},
        fusion="text",
        encoder="concat",
        encoder_kwargs={
            "parts": [{"name": "bert", "pooling": "mean"}, {"name": "bert", "pooling": "cls"}, {"name": "glove-bow"}]
        },
        normalize_entities=True,
    ),
    # cpu-best plus a structural table for training entities (learned global weights), trained
    # with 1-vs-all and structural dropout on the pool: new entities are ranked from text and
    # the unseen row, seen candidates from text + structure (docs/results/fb15k237.md, section 8)
    "cpu-fused": ModelConfig(
        interaction="transe",
        interaction_kwargs={"p": 2},
        fusion="weighted",
        encoder="concat",
        encoder_kwargs={
            "parts": [{"name": "bert", "pooling": "mean"}, {"name": "bert", "pooling": "cls"}, {"name": "glove-bow"}]
        },
        normalize_entities=True,
        structural_dropout=0.5,
    ),
    # structure + description with learned unseen row and structural dropout
    "fused-transe": ModelConfig(
        interaction="transe",
        interaction_kwargs=_L1,
        fusion="weighted",
        encoder="bert",
        encoder_kwargs=_BERT_MEAN,
        structural_dropout=0.3,
    ),
    "gated-transe": ModelConfig(
        interaction="transe",
        interaction_kwargs=_L1,
        fusion="gate",
        encoder="bert",
        encoder_kwargs=_BERT_MEAN,
        structural_dropout=0.3,
    ),
}
#: listed in the order of docs/models.md
_PRESETS: Registry[ModelConfig] = Registry("model preset", field="model", sort=False)
for _name, _config in _BUILT_IN.items():
    _PRESETS.register(_name, _config)


#: Training settings a preset is meant to be trained with. The CLI applies them
#: unless the config file or a flag sets the key; ``negatives: all`` only
#: without privacy (DP training samples its negatives per example), except for
#: :data:`PRIVATE_RECIPES`, which train 1-vs-all under DP with exact per-example clipping.
PRESET_TRAIN_DEFAULTS: dict[str, dict] = {
    "cpu-best": {"loss": "softmax", "negatives": "all", "temperature": 0.05, "lr": 5e-3},
    # BLP (Daza et al. 2021): margin 1, Adam lr 2e-5 for the transformer and the rest alike, batch 64
    "blp-transe-finetune": {"loss": "margin", "margin": 1.0, "lr": 2e-5, "batch_size": 64},
    # cosine decay over the planned epochs: +0.009 test MRR on FB15k-237 (docs/results/fb15k237.md, section 8)
    "cpu-fused": {"loss": "softmax", "negatives": "all", "temperature": 0.05, "lr": 5e-3, "lr_schedule": "cosine"},
    # expected batch 4,096 over five planned epochs with a cosine rate: sigma is calibrated to
    # --target-epsilon for those steps. On inductive FB15k-237 at eps = 1: test MRR 0.127 against
    # 0.111 for one epoch (docs/results/privacy_utility.md, "More steps")
    "cpu-private": {
        "loss": "softmax",
        "negatives": "all",
        "temperature": 0.05,
        "lr": 5e-3,
        "batch_size": 4096,
        "epochs": 5,
        "lr_schedule": "cosine",
    },
    "dkrl-flair": {"loss": "softmax", "negatives": "all", "pool_size": 2048, "temperature": 0.05, "lr": 5e-3},
    "torchcoder-aec": {"loss": "softmax", "negatives": "all", "temperature": 0.05, "lr": 5e-3},
}


#: presets whose training defaults are meant for private runs: ``negatives: all`` is kept under privacy
PRIVATE_RECIPES = ("cpu-private",)


def preset_train_defaults(name: str, *, private: bool = False) -> dict:
    """The training settings preset ``name`` is meant for (``{}`` for most presets)."""
    defaults = dict(PRESET_TRAIN_DEFAULTS.get(name, {}))
    if private and name not in PRIVATE_RECIPES:
        defaults.pop("negatives", None)
        defaults.pop("pool_size", None)
    return defaults


def list_presets() -> list[str]:
    """Preset names, in the order of docs/models.md."""
    return _PRESETS.names()


def get_preset(name: str) -> ModelConfig:
    """The :class:`ModelConfig` registered as ``name``.

    Raises:
        ConfigError: Unknown name (the message lists the presets).
    """
    return _PRESETS.get(name)


def register_preset(name: str, config: ModelConfig, *, replace: bool = False) -> None:
    """Add a preset; a taken name raises (:class:`textkg.registry.DuplicateNameError`) unless ``replace=True``."""
    if not isinstance(config, ModelConfig):
        raise ConfigError(f"expected a ModelConfig, got {config!r}", field="model")
    _PRESETS.register(name, config, replace=replace)
