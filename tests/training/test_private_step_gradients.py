"""PrivateStep's per-example gradients against a one-example-at-a-time autograd oracle.

Models without trainable dense parameters take their per-example row
gradients from ONE batched backward through the gathered rows; models with
dense parameters use ``vmap(grad)``. Both must equal ordinary autograd run on
each example alone over the FULL tables, and the whole step (clip, average,
no noise) must equal the mean of the clipped oracle gradients.
"""

from __future__ import annotations

import pytest
import torch

from textkg.models import build_model
from textkg.models.config import ModelConfig
from textkg.privacy.dp_sgd import DPSGDStep
from textkg.privacy.sampling import poisson_sample
from textkg.training.losses import margin_ranking, softplus_loss
from textkg.training.negatives import corrupt
from textkg.training.private_step import PrivateStep

pytestmark = pytest.mark.portability  # rerun by .ci/run under another thread count and ISA

NUM_ENTITIES, NUM_RELATIONS, DIM, TEXT_DIM = 14, 3, 6, 5
SEEN = torch.tensor([0, 1, 2, 3, 4, 5, 6, 7, 8, 9])  # 10..13 are unseen
FUSIONS = {"structural": {}, "text": {"encoder": "bert"}, "weighted": {"encoder": "bert"}, "gate": {"encoder": "bert"}}
INTERACTIONS = ["transe", "distmult", "complex", "rotate"]


def make_model(fusion: str, *, interaction: str = "transe", **overrides):
    torch.manual_seed(0)
    cfg = ModelConfig(
        interaction=interaction,
        interaction_kwargs={"p": 1} if interaction == "transe" else {},
        dim=DIM,
        fusion=fusion,
        **{**FUSIONS[fusion], **overrides},
    )
    feats = {}
    if cfg.encoder:
        feats["text_features"] = torch.randn(NUM_ENTITIES, TEXT_DIM, generator=torch.Generator().manual_seed(0))
    model = build_model(cfg, num_entities=NUM_ENTITIES, num_relations=NUM_RELATIONS, seen_entities=SEEN, **feats)
    return model.train()


def private_triples(n: int = 7, seed: int = 3) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    triples = torch.stack(
        [
            torch.randint(0, NUM_ENTITIES, (n,), generator=g),
            torch.randint(0, NUM_RELATIONS, (n,), generator=g),
            torch.randint(0, NUM_ENTITIES, (n,), generator=g),
        ],
        dim=1,
    )
    triples[1, 2] = triples[1, 0]  # head == tail: the example reads one entity row twice
    return triples


def make_step(
    model,
    *,
    loss_fn=softplus_loss,
    seed: int = 5,
    noise_multiplier: float = 0.0,
    max_grad_norm: float = 1e6,
    expected_batch_size: float = 7.0,
    num_negatives: int = 4,
):
    generator = torch.Generator().manual_seed(seed)
    mechanism = DPSGDStep(
        noise_multiplier=noise_multiplier,
        max_grad_norm=max_grad_norm,
        expected_batch_size=expected_batch_size,
        accountant=None,
        sample_rate=1.0,
        generator=generator,
    )
    return PrivateStep(
        model,
        private_triples=private_triples(),
        entity_pool=torch.arange(NUM_ENTITIES),
        loss_fn=loss_fn,
        num_negatives=num_negatives,
        mechanism=mechanism,
        sample_rate=1.0,
        generator=generator,
    )


def oracle(model, batch, plan, loss_fn):
    """Per example: ordinary autograd on the full tables -> ``[{param name: grad}]`` (zeros if unused)."""
    trained = {n: p for n, p in model.named_parameters() if p.requires_grad}
    table_names = {id(t): name for name, t in model.tables().items()}
    out = []
    for i in range(len(batch)):
        model.zero_grad(set_to_none=True)
        rows = {k: t[plan[k][i]] for k, t in model.tables().items()}
        loss_fn(model.score_rows(batch[i], rows)).backward()
        out.append(
            {
                table_names.get(id(p), n): torch.zeros_like(p) if p.grad is None else p.grad.clone()
                for n, p in trained.items()
            }
        )
    model.zero_grad(set_to_none=True)
    return out


def as_full_grads(model, dense, rows, b):
    """Example b's per-example gradients scattered into full parameter shapes."""
    full = {name: g[b] for name, g in dense.items()}
    for name, table in model.tables().items():
        idx, g = rows[name]
        full[name] = torch.zeros_like(table).index_add_(0, idx[b], g[b])
    return full


def corrupted_batch(model, seed: int = 5, num_negatives: int = 4):
    """The batch and lookup plan PrivateStep draws from a generator seeded with ``seed``."""
    g = torch.Generator().manual_seed(seed)
    triples = private_triples()
    idx = poisson_sample(len(triples), sample_rate=1.0, generator=g)
    batch = corrupt(triples[idx], num_negatives=num_negatives, entity_pool=torch.arange(NUM_ENTITIES), generator=g)
    return batch, g


def check_against_oracle(model, step, loss_fn):
    batch, g = corrupted_batch(model)
    step.generator = torch.Generator().manual_seed(123)
    plan = model.lookup_plan(batch, generator=torch.Generator().manual_seed(123))
    dense, rows = step.per_example_gradients(batch)
    assert set(dense) == set(model.dense_parameters())
    expected = oracle(model, batch, plan, loss_fn)
    for b, ref in enumerate(expected):
        got = as_full_grads(model, dense, rows, b)
        assert set(got) == set(ref)
        for name in ref:
            torch.testing.assert_close(got[name], ref[name], rtol=1e-5, atol=1e-6)
    return dense, rows


def forbid_vmap(monkeypatch):
    def boom(*args, **kwargs):
        raise AssertionError("a model without dense parameters must not take the vmap path")

    monkeypatch.setattr(PrivateStep, "_vmap_gradients", boom)


@pytest.mark.parametrize("interaction", INTERACTIONS)
@pytest.mark.parametrize("dropout", [0.0, 0.5])
def test_structural_model_batched_backward_equals_oracle(interaction, dropout, monkeypatch):
    model = make_model("structural", interaction=interaction, structural_dropout=dropout)
    assert not model.dense_parameters()
    step = make_step(model)
    forbid_vmap(monkeypatch)
    check_against_oracle(model, step, softplus_loss)


@pytest.mark.parametrize("interaction", INTERACTIONS)
def test_batched_backward_equals_vmap(interaction):
    model = make_model("structural", interaction=interaction, structural_dropout=0.5)
    step = make_step(model, loss_fn=margin_ranking)
    batch, _ = corrupted_batch(model)
    step.generator = torch.Generator().manual_seed(9)
    dense, rows = step.per_example_gradients(batch)
    plan = model.lookup_plan(batch, generator=torch.Generator().manual_seed(9))
    gathered = {k: model.tables()[k].detach()[idx] for k, idx in plan.items()}
    vdense, vrows = step._vmap_gradients(batch, gathered)
    assert dense == {} and vdense == {}
    for name, (idx, g) in rows.items():
        torch.testing.assert_close(idx, plan[name].reshape(len(batch), -1))
        torch.testing.assert_close(g, vrows[name].reshape(g.shape), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("fusion", ["text", "weighted", "gate"])
@pytest.mark.parametrize("interaction", ["transe", "rotate"])
def test_models_with_dense_parameters_use_vmap_and_equal_oracle(fusion, interaction):
    model = make_model(fusion, interaction=interaction, **({"structural_dropout": 0.5} if fusion != "text" else {}))
    assert model.dense_parameters()
    check_against_oracle(model, make_step(model), softplus_loss)


def test_text_only_model_with_frozen_dense_parameters_takes_batched_path(monkeypatch):
    """Only the relation table is trained; the batch reads more entity rows than exist (all-entities branch)."""
    model = make_model("text")
    for p in model.dense_parameters().values():
        p.requires_grad_(False)
    assert not model.dense_parameters() and set(model.tables()) == {"relation"}
    step = make_step(model)
    forbid_vmap(monkeypatch)
    batch, _ = corrupted_batch(model)
    assert batch[..., [0, 2]].numel() > NUM_ENTITIES
    check_against_oracle(model, step, softplus_loss)


def test_loss_that_is_not_per_example_falls_back_to_vmap():
    def summed(scores):  # one value per example under vmap, a scalar for a batch
        return softplus_loss(scores).sum()

    model = make_model("structural")
    calls = []
    original = PrivateStep._vmap_gradients

    def spy(self, *args):
        calls.append(1)
        return original(self, *args)

    PrivateStep._vmap_gradients = spy
    try:
        check_against_oracle(model, make_step(model, loss_fn=summed), summed)
    finally:
        PrivateStep._vmap_gradients = original
    assert calls == [1]


@pytest.mark.parametrize("fusion", ["structural", "weighted"])
def test_noiseless_step_is_mean_of_clipped_oracle_gradients(fusion):
    model = make_model(fusion, **({"structural_dropout": 0.5} if fusion != "structural" else {}))
    c, expected_b = 0.05, 9.0
    step = make_step(model, max_grad_norm=c, expected_batch_size=expected_b, seed=11)
    # replay the step's randomness: Poisson sample, corruptions, then the lookup plan
    batch, g = corrupted_batch(model, seed=11)
    plan = model.lookup_plan(batch, generator=g)
    expected = oracle(model, batch, plan, softplus_loss)
    assert step() == len(batch)
    target = {}
    for ref in expected:
        norm = torch.sqrt(sum(v.pow(2).sum() for v in ref.values()))
        scale = min(1.0, c / (norm.item() + 1e-6))
        assert scale < 1.0  # clipping is active
        for k, v in ref.items():
            target[k] = target.get(k, 0) + scale * v / expected_b
    params = {**dict(model.named_parameters()), **model.tables()}
    for k, v in target.items():
        torch.testing.assert_close(params[k].grad, v, rtol=1e-5, atol=1e-7)
