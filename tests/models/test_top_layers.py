"""``TopLayers``: the top transformer layer(s) fine-tuned over cached lower-layer states.

Oracle: the lower ``L - k`` layers' states (``BertLowerLayers``) run through the pretrained
top ``k`` layers reproduce the full frozen ``bert`` encoder. In training, only the live rows
carry gradient to the layers; evaluation never reads the candidate cache; save → load gives
identical vectors. Uses the packaged MiniLM (nothing is fetched).
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn.functional as F

from textkg.encoders.bert import BertEncoder
from textkg.encoders.lower_layers import BertLowerLayers
from textkg.errors import ConfigError
from textkg.models import ModelConfig, TextRepresentation, TopLayers
from textkg.training.top_layers_features import lower_layer_states, top_layers_module, top_layers_settings

TEXTS = [
    "Paris is the capital and most populous city of France.",
    "x",
    "Zürich — a city in Switzerland; naïve café ✓ 東京",
    "A long description " + "that keeps going and going " * 10,
]


def _cfg(**module_kwargs) -> ModelConfig:
    return ModelConfig(
        interaction="transe",
        fusion="text",
        encoder="bert",
        text_module="top-layers",
        text_module_kwargs=module_kwargs,
        dim=8,
    )


@pytest.fixture(scope="module")
def lower():
    return BertLowerLayers(top_layers=1)


@pytest.fixture(scope="module")
def states(lower):
    return lower.encode_tokens(TEXTS)  # float32, not rounded by the disk cache


@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_cached_lower_states_plus_top_layer_reproduce_the_frozen_encoder(states, pooling):
    module = top_layers_module(_cfg(pooling=pooling)).eval()
    with torch.no_grad():
        out = module(*states)
    torch.testing.assert_close(out, BertEncoder(pooling=pooling).encode(TEXTS), rtol=0, atol=1e-5)


def test_two_top_layers_reproduce_the_frozen_encoder():
    tokens, mask = BertLowerLayers(top_layers=2).encode_tokens(TEXTS)
    module = top_layers_module(_cfg(layers=2, pooling="cls")).eval()
    with torch.no_grad():
        out = module(tokens, mask)
    torch.testing.assert_close(out, BertEncoder(pooling="cls").encode(TEXTS), rtol=0, atol=1e-5)


def test_mean_plus_cls_is_both_normalised_side_by_side(states):
    module = top_layers_module(_cfg()).eval()  # default pooling: mean+cls
    with torch.no_grad():
        out = module(*states)
    mean, cls = BertEncoder(pooling="mean").encode(TEXTS), BertEncoder(pooling="cls").encode(TEXTS)
    torch.testing.assert_close(
        out, torch.cat([F.normalize(mean, dim=-1), F.normalize(cls, dim=-1)], -1), atol=1e-5, rtol=0
    )
    assert module.out_dim == out.shape[1] == 768


def test_disk_cache_holds_float16_states_keyed_by_the_cut(tmp_path, states):
    cached = lower_layer_states(_cfg(), TEXTS, cache_dir=tmp_path)
    tokens, mask = cached["token_features"], cached["token_mask"]
    assert torch.equal(mask, states[1])
    torch.testing.assert_close(tokens, states[0], rtol=2e-3, atol=2e-3)  # float16 storage
    again = lower_layer_states(_cfg(), TEXTS, cache_dir=tmp_path)  # read back, not recomputed
    assert torch.equal(again["token_features"], tokens)
    assert BertLowerLayers(top_layers=1).identity != BertLowerLayers(top_layers=2).identity
    assert "lower_layers=5/6" in BertLowerLayers(top_layers=1).identity


def _representation(states, **kwargs) -> TextRepresentation:
    module = top_layers_module(_cfg(**kwargs))
    return TextRepresentation(
        {"token_features": states[0], "token_mask": states[1]},
        8,
        module=module,
        module_dim=module.out_dim,
        persistent_inputs=False,
    )


def test_gradient_reaches_only_the_live_rows_through_the_top_layer(states):
    text = _representation(states, live=4, refresh_every=100).train()
    rows = torch.arange(len(TEXTS))
    with text.module.focus(torch.tensor([0])):
        out = text(rows)
    # row 1 is a cached candidate: its vector trains the projection, never the layer
    out[1].sum().backward(retain_graph=True)
    layer_grads = [p.grad for p in text.module.parameters()]
    assert all(g is None or not g.any() for g in layer_grads)
    assert text.projection.weight.grad is not None and text.projection.weight.grad.any()
    text.zero_grad()
    out[0].sum().backward()  # row 0 is live
    assert any(p.grad is not None and p.grad.any() for p in text.module.parameters())
    assert not states[0].requires_grad  # the lower layers are cached constants


def test_stale_rows_are_refreshed_and_evaluation_never_reads_the_cache(states):
    text = _representation(states, pooling="cls", live=1, refresh_every=2).train()
    rows = torch.arange(len(TEXTS))
    with text.module.focus(torch.tensor([0])):
        text(rows)
    before = text.module._cached.clone()
    with torch.no_grad():
        for p in text.module.parameters():
            p.add_(0.01)
    with text.module.focus(torch.tensor([0])):
        text(rows)  # step 1: rows 1.. are one step old, not yet refreshed
    assert torch.equal(text.module._cached[1:], before[1:])
    with text.module.focus(torch.tensor([0])):
        text(rows)  # step 2: two steps old → recomputed with the new weights
    assert not torch.equal(text.module._cached[1:], before[1:])
    with torch.no_grad():
        for p in text.module.parameters():
            p.add_(0.01)
    text.eval()
    with torch.no_grad():
        fresh = text.module(*states)
        torch.testing.assert_close(text(rows), text.projection(fresh), rtol=0, atol=1e-6)


def test_save_load_gives_identical_vectors_and_no_hidden_states(states):
    text = _representation(states, live=2, refresh_every=1).train()
    opt = torch.optim.Adam(text.parameters(), lr=1e-3)
    for _ in range(2):
        opt.zero_grad()
        text(torch.arange(len(TEXTS))).pow(2).sum().backward()
        opt.step()
    state = text.state_dict()
    assert not any(k.startswith("text_token") or k.endswith("_cached") for k in state)
    assert int(state["module.step_count"]) == 2
    other = _representation(states, live=2, refresh_every=1)
    other.load_state_dict(state)
    text.eval(), other.eval()
    with torch.no_grad():
        assert torch.equal(text(torch.arange(len(TEXTS))), other(torch.arange(len(TEXTS))))


def test_order_of_rows_does_not_change_vectors(states):
    text = _representation(states).eval()
    with torch.no_grad():
        a = text(torch.tensor([0, 1, 2, 3]))
        b = text(torch.tensor([3, 2, 1, 0]))
    torch.testing.assert_close(a, b.flip(0), rtol=0, atol=1e-5)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"encoder": "glove-bow"}, "model.encoder"),
        ({"encoder_kwargs": {"pooling": "cls"}}, "model.encoder_kwargs.pooling"),
        ({"text_module_kwargs": {"layers": 0}}, "model.text_module_kwargs.layers"),
        ({"text_module_kwargs": {"layers": "1"}}, "model.text_module_kwargs.layers"),
        ({"text_module_kwargs": {"depth": 1}}, "model.text_module_kwargs.depth"),
        ({"encoder_kwargs": {"max_tokens": 1}}, "model.encoder_kwargs.max_tokens"),
    ],
)
def test_bad_settings_name_the_field(change, field):
    with pytest.raises(ConfigError) as info:
        top_layers_settings(dataclasses.replace(_cfg(), **change))
    assert info.value.field == field


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"layers": 7}, "model.text_module_kwargs.layers"),
        ({"pooling": "max"}, "model.text_module_kwargs.pooling"),
        ({"live": 0}, "model.text_module_kwargs.live"),
        ({"refresh_every": 1.5}, "model.text_module_kwargs.refresh_every"),
        ({"lr_scale": 0}, "model.text_module_kwargs.lr_scale"),
    ],
)
def test_bad_module_arguments_name_the_field(kwargs, field):
    with pytest.raises(ConfigError) as info:
        top_layers_module(_cfg(**kwargs))
    assert info.value.field == field


def test_module_is_a_top_layers():
    assert isinstance(top_layers_module(_cfg()), TopLayers)
