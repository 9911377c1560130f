"""Presets, ModelConfig and build_model."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch
from models_cases import NUM_ENTITIES, NUM_RELATIONS, SEEN, random_triples

from textkg.errors import ConfigError
from textkg.models import ModelConfig, build_model, get_preset, list_presets, register_preset

REQUIRED = [
    "transe",
    "transe-l2",
    "distmult",
    "complex",
    "rotate",
    "blp-transe",
    "blp-distmult",
    "blp-complex",
    "glove-bow",
    "dkrl-bert",
    "dkrl-flair",
    "torchcoder-aec",
    "fused-transe",
    "gated-transe",
]


def _features(cfg: ModelConfig) -> dict:
    """Small random stand-ins for what the pipeline's encoders would produce."""
    g = torch.Generator().manual_seed(0)
    if cfg.encoder is None:
        return {}
    if cfg.text_module == "dkrl":
        tokens = torch.randn(NUM_ENTITIES, 5, 3, generator=g)
        return {"token_features": tokens, "token_mask": torch.ones(NUM_ENTITIES, 5, dtype=torch.bool)}
    return {"text_features": torch.randn(NUM_ENTITIES, 7, generator=g)}


def test_required_presets_exist():
    assert set(REQUIRED) <= set(list_presets())


def test_unknown_preset_lists_names():
    with pytest.raises(ConfigError) as info:
        get_preset("transx")
    assert all(name in str(info.value) for name in list_presets())


@pytest.mark.parametrize("name", list_presets())
def test_every_preset_builds_and_takes_an_optimiser_step(name):
    cfg = dataclasses.replace(get_preset(name), dim=8)
    torch.manual_seed(0)
    model = build_model(
        cfg, num_entities=NUM_ENTITIES, num_relations=NUM_RELATIONS, seen_entities=SEEN, **_features(cfg)
    )
    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    model.train()
    g = torch.Generator().manual_seed(0)
    batch = random_triples((6, 3))
    before = {k: v.detach().clone() for k, v in model.named_parameters()}
    scores = model(batch, generator=g)
    loss = torch.relu(1 - scores[:, :1] + scores[:, 1:]).mean() + 0 * scores.sum()
    assert torch.isfinite(loss)
    opt.zero_grad()
    (loss + 1e-3 * scores.pow(2).mean()).backward()
    opt.step()
    assert any(not torch.equal(before[k], v) for k, v in model.named_parameters())
    model.eval()
    with torch.no_grad():
        out = model.score_tails(torch.tensor([0, 12]), torch.tensor([0, 1]), torch.arange(NUM_ENTITIES))
    assert out.shape == (2, NUM_ENTITIES) and torch.isfinite(out).all()
    assert json.loads(json.dumps(model.fusion_weights())) == model.fusion_weights()


@pytest.mark.parametrize("name", list_presets())
def test_config_round_trip(name):
    cfg = get_preset(name)
    data = json.loads(json.dumps(cfg.to_dict()))
    assert ModelConfig.from_dict(data) == cfg


def test_blp_transe_matches_blp():
    cfg = get_preset("blp-transe")
    assert (cfg.encoder, cfg.encoder_kwargs, cfg.fusion, cfg.interaction_kwargs, cfg.normalize_entities) == (
        "bert",
        {"pooling": "cls"},
        "text",
        {"p": 1},
        True,
    )


def test_config_is_frozen_and_copies_kwargs():
    kwargs = {"p": 2}
    cfg = ModelConfig(interaction_kwargs=kwargs)
    kwargs["p"] = 1
    assert cfg.interaction_kwargs == {"p": 2}
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.dim = 3


@pytest.mark.parametrize(
    "bad, field",
    [
        ({"dim": 0}, "model.dim"),
        ({"interaction": "complex", "interaction_kwargs": {}, "dim": 7}, "model.dim"),
        ({"interaction": "transh"}, "model.interaction"),
        ({"interaction_kwargs": {"p": 3}}, "model.interaction_kwargs.p"),
        ({"fusion": "concat"}, "model.fusion"),
        ({"fusion": "text"}, "model.encoder"),
        ({"encoder": "bert"}, "model.fusion"),
        ({"fusion": "weighted", "encoder": "bert", "text_module": "cnn"}, "model.text_module"),
        ({"structural_dropout": 1.0}, "model.structural_dropout"),
        ({"fusion": "text", "encoder": "bert", "structural_dropout": 0.2}, "model.structural_dropout"),
    ],
)
def test_invalid_configs_name_the_field(bad, field):
    with pytest.raises(ConfigError) as info:
        ModelConfig(**bad)
    assert info.value.field == field


def test_from_dict_unknown_key_lists_fields():
    with pytest.raises(ConfigError) as info:
        ModelConfig.from_dict({"dimension": 3}, source="run.yaml")
    assert info.value.field == "model.dimension" and info.value.file == "run.yaml"
    assert "structural_dropout" in str(info.value)
    with pytest.raises(ConfigError) as info:
        ModelConfig.from_dict({"dim": -1}, source="run.yaml")
    assert info.value.file == "run.yaml"


def test_register_preset(monkeypatch):
    import textkg.models.presets as presets

    monkeypatch.setattr(presets, "_PRESETS", presets._PRESETS.copy())
    with pytest.raises(ConfigError):
        register_preset("transe", ModelConfig())
    register_preset("test-tiny-transe", ModelConfig(dim=4))
    assert get_preset("test-tiny-transe").dim == 4


def _build(cfg, **kw):
    return build_model(cfg, num_entities=NUM_ENTITIES, num_relations=NUM_RELATIONS, seen_entities=SEEN, **kw)


def test_build_model_input_errors():
    text_cfg = get_preset("blp-transe")
    with pytest.raises(ConfigError, match="needs text features"):
        _build(text_cfg)
    with pytest.raises(ConfigError, match="does not use text"):
        _build(get_preset("transe"), text_features=torch.randn(NUM_ENTITIES, 3))
    with pytest.raises(ConfigError, match="one per entity"):
        _build(text_cfg, text_features=torch.randn(NUM_ENTITIES - 1, 3))
    with pytest.raises(ConfigError, match="one kind"):
        _build(
            text_cfg,
            text_features=torch.randn(NUM_ENTITIES, 3),
            token_features=torch.randn(NUM_ENTITIES, 2, 3),
            token_mask=torch.ones(NUM_ENTITIES, 2, dtype=bool),
        )
    with pytest.raises(ConfigError, match="token_mask"):
        _build(text_cfg, token_features=torch.randn(NUM_ENTITIES, 2, 3))
    with pytest.raises(ConfigError, match="dkrl"):  # token features but no token module
        _build(
            text_cfg, token_features=torch.randn(NUM_ENTITIES, 2, 3), token_mask=torch.ones(NUM_ENTITIES, 2, dtype=bool)
        )
    with pytest.raises(ConfigError, match="text_module"):
        _build(
            text_cfg,
            input_ids=torch.zeros(NUM_ENTITIES, 2, dtype=torch.long),
            attention_mask=torch.ones(NUM_ENTITIES, 2, dtype=torch.long),
        )
    with pytest.raises(ConfigError, match="seen_entities"):
        build_model(
            get_preset("transe"),
            num_entities=NUM_ENTITIES,
            num_relations=NUM_RELATIONS,
            seen_entities=torch.tensor([0, 0, 1]),
        )
    with pytest.raises(ConfigError, match="seen_entities"):
        build_model(
            get_preset("transe"),
            num_entities=NUM_ENTITIES,
            num_relations=NUM_RELATIONS,
            seen_entities=torch.tensor([NUM_ENTITIES]),
        )


def test_build_model_accepts_a_dict_config_and_float16_features():
    model = _build(get_preset("fused-transe").to_dict(), text_features=torch.randn(NUM_ENTITIES, 3).half())
    assert model.text.text_text_features.dtype == torch.float32
    assert model.structural.dropout == pytest.approx(0.3)


@pytest.mark.parametrize("name", list_presets())
@pytest.mark.parametrize("private", [False, True])
def test_preset_train_defaults_make_a_valid_run_config(name, private):
    """Every preset's training defaults are valid, with and without DP (1-vs-all keys dropped)."""
    from textkg.models.presets import preset_train_defaults
    from textkg.training.config import PrivacyConfig, RunConfig, TrainConfig

    defaults = preset_train_defaults(name, private=private)
    privacy = PrivacyConfig(mode="full", noise_multiplier=1.0) if private else PrivacyConfig()
    cfg = RunConfig(model=get_preset(name), train=TrainConfig(**defaults), privacy=privacy, model_name=name)
    from textkg.models.presets import PRIVATE_RECIPES

    if private and name in PRIVATE_RECIPES:  # the private recipe keeps exact 1-vs-all under DP
        assert cfg.train.negatives == "all" and cfg.train.pool_size == 0
    elif private:
        assert cfg.train.negatives == "sampled" and cfg.train.pool_size == 0
