"""1-vs-all softmax training (``loss: softmax``, ``negatives: all``).

Oracle: the 1-vs-all loss of a triple equals the sampled-softmax loss when
the "sampled" candidates are every pool entity, scored one triple at a time
through ``model(triples)``.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))
from models_cases import NUM_ENTITIES, NUM_RELATIONS, SEEN, random_triples

from textkg.errors import ConfigError
from textkg.models import build_model, get_preset
from textkg.training.config import PrivacyConfig, RunConfig, TrainConfig
from textkg.training.losses import make_loss, softmax_cross_entropy
from textkg.training.one_vs_all import one_vs_all_loss, pool_positions


def _model(name: str, **changes):
    cfg = dataclasses.replace(get_preset(name), dim=8, **changes)
    x = torch.randn(NUM_ENTITIES, 7, generator=torch.Generator().manual_seed(0))
    torch.manual_seed(0)
    features = {"text_features": x} if cfg.encoder is not None else {}
    return build_model(cfg, num_entities=NUM_ENTITIES, num_relations=NUM_RELATIONS, seen_entities=SEEN, **features)


def test_softmax_cross_entropy_matches_torch():
    scores = torch.randn(5, 9, generator=torch.Generator().manual_seed(1))
    expected = F.cross_entropy(scores / 0.3, torch.zeros(5, dtype=torch.long), reduction="none")
    assert torch.allclose(softmax_cross_entropy(scores, temperature=0.3), expected, atol=1e-6)


def _oracle(model, triple, pool, temperature):
    """Tail and head cross-entropy from ``model(...)`` over every pool entity."""
    h, r, t = (int(x) for x in triple)
    tails = torch.stack([torch.full_like(pool, h), torch.full_like(pool, r), pool], dim=-1)
    heads = torch.stack([pool, torch.full_like(pool, r), torch.full_like(pool, t)], dim=-1)
    tail_target = int((pool == t).nonzero())
    head_target = int((pool == h).nonzero())
    ce_t = F.cross_entropy(model(tails)[None] / temperature, torch.tensor([tail_target]))
    ce_h = F.cross_entropy(model(heads)[None] / temperature, torch.tensor([head_target]))
    return ce_t + ce_h


@pytest.mark.parametrize("name", ["transe", "transe-l2", "distmult", "cpu-best", "blp-transe", "fused-transe"])
def test_one_vs_all_equals_per_triple_oracle(name):
    model = _model(name)
    model.eval()  # no structural dropout: the oracle and the fast path read the same rows
    pool = SEEN
    triples = random_triples((6,), seed=3, num_entities=len(SEEN))  # ends among the seen ids 0..9
    got = one_vs_all_loss(
        model, triples, entity_pool=pool, positions=pool_positions(pool, NUM_ENTITIES), temperature=0.5
    )
    want = torch.stack([_oracle(model, tr, pool, 0.5) for tr in triples])
    assert got.shape == (6,)
    assert torch.allclose(got, want, atol=1e-5)


def test_one_vs_all_gradients_match_oracle():
    model = _model("cpu-best")
    pool = SEEN
    triples = random_triples((4,), seed=5, num_entities=len(SEEN))
    one_vs_all_loss(
        model, triples, entity_pool=pool, positions=pool_positions(pool, NUM_ENTITIES), temperature=0.2
    ).sum().backward()
    fast = {k: p.grad.clone() for k, p in model.named_parameters()}
    model.zero_grad()
    torch.stack([_oracle(model, tr, pool, 0.2) for tr in triples]).sum().backward()
    for k, p in model.named_parameters():
        assert torch.allclose(fast[k], p.grad, atol=1e-5), k


def test_entity_outside_pool_is_refused():
    model = _model("transe")
    pool = SEEN
    bad = torch.tensor([[0, 0, 12]])  # 12 is not a training entity
    with pytest.raises(ConfigError, match="entity pool"):
        one_vs_all_loss(model, bad, entity_pool=pool, positions=pool_positions(pool, NUM_ENTITIES))


def test_config_rules():
    assert TrainConfig(loss="softmax", negatives="all").negatives == "all"
    with pytest.raises(ConfigError) as err:
        TrainConfig(loss="margin", negatives="all")
    assert err.value.field == "train.negatives"
    with pytest.raises(ConfigError) as err:
        TrainConfig(negatives="every")
    assert err.value.field == "train.negatives"
    with pytest.raises(ConfigError) as err:
        TrainConfig(loss="softmax", temperature=0.0)
    assert err.value.field == "train.temperature"
    with pytest.raises(ConfigError, match="sampled") as err:
        RunConfig(
            model=get_preset("transe"),
            train=TrainConfig(loss="softmax", negatives="all"),
            privacy=PrivacyConfig(mode="full", noise_multiplier=1.0),
        )
    assert err.value.field == "train.negatives"
    # the sampled softmax is a per-example loss, so DP training may use it
    RunConfig(
        model=get_preset("transe"),
        train=TrainConfig(loss="softmax"),
        privacy=PrivacyConfig(mode="full", noise_multiplier=1.0),
    )


def test_make_loss_binds_options():
    scores = torch.randn(3, 5, generator=torch.Generator().manual_seed(2))
    assert torch.allclose(
        make_loss(TrainConfig(loss="softmax", temperature=0.1))(scores), softmax_cross_entropy(scores, temperature=0.1)
    )
    margin = make_loss(TrainConfig(loss="margin", margin=2.0))(scores)
    assert torch.allclose(margin, F.relu(2.0 - scores[:, :1] + scores[:, 1:]).mean(-1))


def test_pipeline_trains_with_one_vs_all(tmp_path):
    """End to end: a toy graph's planted links are learned with 1-vs-all training."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))
    from test_predict_planted import ANIMALS, FOODS, _toy_graph

    import textkg
    from textkg.pipeline.job import run
    from textkg.training.config import DataConfig

    data = _toy_graph(tmp_path / "toy")
    model = dataclasses.replace(get_preset("glove-bow"), dim=32, interaction_kwargs={"p": 2})
    cfg = RunConfig(
        data=DataConfig(dataset=str(data), split="transductive"),
        model=model,
        train=TrainConfig(
            epochs=40, batch_size=4, lr=0.02, loss="softmax", negatives="all", temperature=0.1, eval_every=20
        ),
        model_name="glove-bow",
    )
    import json

    metrics = run(cfg, tmp_path / "run", progress=False)
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert (saved["train"]["loss"], saved["train"]["negatives"]) == ("softmax", "all")
    losses = [h["public_loss"] for h in metrics["train"]["history"]]
    assert losses[-1] < 0.5 * losses[0]
    predictor = textkg.load(tmp_path / "run")
    for k in (0, 5):
        out = predictor.predict(description=ANIMALS[k], relation="likes", direction="tail", top_k=1)
        assert out["predictions"][0]["entity"] == f"/f/{FOODS[k]}"


def _unseen_row_grad(model, generator):
    model.zero_grad()
    triples = random_triples((8,), seed=7, num_entities=len(SEEN))
    one_vs_all_loss(
        model,
        triples,
        entity_pool=SEEN,
        positions=pool_positions(SEEN, NUM_ENTITIES),
        temperature=0.5,
        generator=generator,
    ).sum().backward()
    return model.structural.weight.grad[model.structural.unseen_row]


def test_structural_dropout_trains_the_unseen_row_under_one_vs_all():
    """Every pool entity is seen, so only dropout can make the loss read the unseen row."""
    model = _model("fused-transe", structural_dropout=0.5)
    model.train()
    assert _unseen_row_grad(model, None).abs().sum() == 0  # no generator: no dropout
    assert _unseen_row_grad(model, torch.Generator().manual_seed(0)).abs().sum() > 0
    model.eval()  # evaluation never drops, even with a generator
    assert _unseen_row_grad(model, torch.Generator().manual_seed(0)).abs().sum() == 0


def test_one_vs_all_dropout_matches_oracle_with_the_same_rows():
    """With dropout, the loss equals the oracle on a model whose dropped rows are the unseen row."""
    model = _model("fused-transe", structural_dropout=0.5)
    model.train()
    triples = random_triples((5,), seed=9, num_entities=len(SEEN))
    got = one_vs_all_loss(
        model,
        triples,
        entity_pool=SEEN,
        positions=pool_positions(SEEN, NUM_ENTITIES),
        temperature=0.5,
        generator=torch.Generator().manual_seed(3),
    )
    rows = model.structural.rows(SEEN, generator=torch.Generator().manual_seed(3), training=True)
    dropped = SEEN[rows == model.structural.unseen_row]
    assert 0 < len(dropped) < len(SEEN)
    with torch.no_grad():  # the oracle model: dropped entities map to the unseen row for good
        model.structural.struct_index[dropped] = model.structural.unseen_row
    model.eval()
    want = torch.stack([_oracle(model, tr, SEEN, 0.5) for tr in triples])
    assert torch.allclose(got, want, atol=1e-5)
