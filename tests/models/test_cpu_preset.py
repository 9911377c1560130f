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
    return build_model(cfg, num_entities=NUM_ENTITIES, num_relations=NUM_RELATIONS, seen_entities=SEEN,
                       text_features=x)


@pytest.mark.parametrize("name", ["blp-transe", "blp-distmult", "cpu-best", "fused-transe"])
def test_many_reads_path_matches_gather_path(name):
    model = _model(name)
    model.eval()  # no structural dropout: both paths must read the same rows
    many = random_triples((9, 3))  # 27 triples = 54 entity reads > 14 entities: all-entities path
    assert many[..., [0, 2]].numel() > NUM_ENTITIES
    chunks = [many[i:i + 2] for i in range(0, len(many), 2)]  # <= 12 reads each: gather path
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
    assert cfg.fusion == "text" and cfg.encoder == "bert" and cfg.text_module is None
    assert cfg.encoder_kwargs == {"pooling": "mean"} and cfg.normalize_entities
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg
