"""The ``cpu-best`` preset and the many-negatives fast paths of text models.

Batches that read more entity rows than the graph has entities (many
negatives) fuse every entity once and gather; the result must be the same
function, with the same gradients, as gathering first.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
from models_cases import NUM_ENTITIES, NUM_RELATIONS, SEEN, random_triples

from textkg.models import ModelConfig, build_model, get_preset, list_presets


def _model(name: str, **changes):
    cfg = dataclasses.replace(get_preset(name), dim=8, **changes)
    x = torch.randn(NUM_ENTITIES, 7, generator=torch.Generator().manual_seed(0))
    torch.manual_seed(0)
    return build_model(cfg, num_entities=NUM_ENTITIES, num_relations=NUM_RELATIONS, seen_entities=SEEN, text_features=x)


@pytest.mark.parametrize("name", ["blp-transe", "blp-distmult", "cpu-best", "fused-transe"])
def test_many_reads_path_matches_gather_path(name):
    model = _model(name)
    model.eval()  # no structural dropout: both paths must read the same rows
    many = random_triples((9, 3))  # 27 triples = 54 entity reads > 14 entities: all-entities path
    assert many[..., [0, 2]].numel() > NUM_ENTITIES
    chunks = [many[i : i + 2] for i in range(0, len(many), 2)]  # <= 12 reads each: gather path
    assert all(c[..., [0, 2]].numel() <= NUM_ENTITIES for c in chunks)

    model.zero_grad()
    whole = model(many)
    whole.sum().backward()
    grads = {k: p.grad.clone() for k, p in model.named_parameters() if p.grad is not None}

    model.zero_grad()
    parts = []
    for c in chunks:
        out = model(c)
        out.sum().backward()
        parts.append(out.detach())
    assert torch.allclose(whole.detach(), torch.cat(parts), atol=1e-5)
    for k, p in model.named_parameters():
        if k in grads:
            assert torch.allclose(grads[k], p.grad, atol=1e-4), k


def test_cpu_best_preset():
    assert "cpu-best" in list_presets()
    cfg = get_preset("cpu-best")
    assert cfg.fusion == "text" and cfg.encoder == "concat" and cfg.text_module is None
    assert [p["name"] for p in cfg.encoder_kwargs["parts"]] == ["bert", "bert", "glove-bow"]
    assert cfg.interaction_kwargs == {"p": 2} and cfg.normalize_entities
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg


def test_cpu_best_training_defaults_apply_below_flags():
    from types import SimpleNamespace

    from textkg.cli.config_loading import FLAG_FIELDS, build_run_config

    def args(**given):
        base = {dest: None for dest in (*FLAG_FIELDS, "encoder", "dim", "fusion", "structural_dropout")}
        return SimpleNamespace(**{**base, "model": "cpu-best", "config": None, **given})

    train = build_run_config(args()).train
    assert (train.loss, train.negatives, train.temperature, train.lr) == ("softmax", "all", 0.05, 5e-3)
    assert build_run_config(args(lr=1e-3, temperature=0.1)).train.lr == 1e-3
    private = build_run_config(args(privacy="full", noise_multiplier=1.0)).train
    assert (private.loss, private.negatives) == ("softmax", "sampled")  # DP samples its negatives
    assert build_run_config(SimpleNamespace(**{**vars(args()), "model": "transe"})).train.loss == "margin"


def _train_config(*flags: str):
    from textkg.cli.config_loading import build_run_config
    from textkg.cli.main import build_parser

    return build_run_config(build_parser().parse_args(["train", "--dataset", "hpo-small", *flags]))


def test_the_private_recipe_keeps_its_defaults_under_privacy():
    """``cpu-private`` is cpu-best's model with DP defaults that --privacy does not strip (cpu-best's are)."""
    assert dataclasses.replace(get_preset("cpu-private")) == get_preset("cpu-best")
    private = _train_config("--model", "cpu-private", "--privacy", "full", "--target-epsilon", "1")
    t = private.train
    assert (t.negatives, t.loss, t.batch_size, t.epochs, t.lr) == ("all", "softmax", 4096, 5, 5e-3)
    assert t.lr_schedule == "cosine"
    assert private.privacy.mode == "full"  # and RunConfig accepted 1-vs-all under privacy
    best = _train_config("--model", "cpu-best", "--privacy", "full", "--target-epsilon", "1")
    assert best.train.negatives == "sampled"
    flag = _train_config("--model", "cpu-private", "--privacy", "full", "--target-epsilon", "1", "--batch-size", "512")
    assert flag.train.batch_size == 512  # flags still win over the recipe
