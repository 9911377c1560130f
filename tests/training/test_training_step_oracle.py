"""The non-private training step against a straightforward reference computation.

The step's fast paths (``index_select`` gathers, ``unbind`` of the head/tail rows, the L1
norm as ``abs().sum()``, fused Adam; docs/results/throughput.md, "Throughput against PyKEEN") must
not change what it computes: the loss, the gradients and the updated parameters agree with
the textbook formulas and ``torch.optim.Adam``'s plain (unfused, single-tensor) update.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))
from models_cases import make_model, random_triples

from textkg.models import get_preset
from textkg.models.interactions import TransE
from textkg.pipeline.job import build_trainer, prepare
from textkg.training.config import DataConfig, RunConfig, TrainConfig
from textkg.training.negatives import corrupt
from textkg.training.optim import adam

pytestmark = pytest.mark.portability  # rerun by .ci/run under another thread count and ISA

TINY = Path(__file__).resolve().parents[1] / "fixtures" / "tiny_blp"
ATOL = 1e-6


def _reference_scores(preset: str, entity: torch.Tensor, relation: torch.Tensor, triples: torch.Tensor):
    """Scores of ``(..., 3)`` triples of table rows, written out (no model code).

    The head and tail rows are read as the step read them before it was optimised: one
    advanced-indexing gather of the ``(head, tail)`` pairs. Its backward adds a repeated row's
    gradients in the same order as the step's ``index_select``, so the two gradients agree bit
    for bit; read separately, their sums would differ in the last bits, and Adam's division by
    ``√v`` turns a rounding residue of a row whose gradient cancels to ~0 into a step of ~lr.
    """
    ends = entity[torch.stack([triples[..., 0], triples[..., 2]], dim=-1)]  # (..., 2, d)
    h, r, t = ends[..., 0, :], relation[triples[..., 1]], ends[..., 1, :]
    if preset == "transe":
        return -(h + r - t).abs().sum(-1)
    if preset == "transe-l2":
        return -((h + r - t) ** 2).sum(-1).sqrt()
    return (h * r * t).sum(-1)  # distmult


def _trainer(tmp_path, preset: str, **train):
    cfg = RunConfig(
        data=DataConfig(dataset=str(TINY), split="transductive"),
        model=dataclasses.replace(get_preset(preset), dim=8),
        train=TrainConfig(**{"epochs": 1, "batch_size": 16, "num_negatives": 5, "lr": 0.01, **train}),
        model_name=preset,
    )
    return build_trainer(prepare(cfg), cfg, tmp_path)[0]


@pytest.mark.parametrize("preset", ["transe", "transe-l2", "distmult"])
def test_public_steps_match_the_reference_update(tmp_path, preset):
    """Three trainer steps == three steps of (corrupt, written-out margin loss, plain Adam)."""
    trainer = _trainer(tmp_path, preset)
    model = trainer.model
    index = model.structural.struct_index
    entity = model.structural.weight.detach().clone().requires_grad_(True)
    relation = model.relation_embeddings.detach().clone().requires_grad_(True)
    reference = torch.optim.Adam([entity, relation], lr=0.01, foreach=False, fused=False)
    generator = torch.Generator()
    for step in range(3):
        idx = torch.arange(step * 16, (step + 1) * 16)
        generator.set_state(trainer.generator.get_state())  # the same negatives
        batch = corrupt(trainer.public[idx], num_negatives=5, entity_pool=trainer.entity_pool, generator=generator)
        loss = trainer._public_step(idx)

        reference.zero_grad()
        rows = torch.stack([index[batch[..., 0]], batch[..., 1], index[batch[..., 2]]], dim=-1)
        scores = _reference_scores(preset, entity, relation, rows)  # (B, 1 + K)
        want = torch.clamp(1.0 - scores[:, :1] + scores[:, 1:], min=0).mean()  # margin 1, mean over all pairs
        want.backward()
        assert loss == pytest.approx(float(want.detach()), abs=ATOL)
        torch.testing.assert_close(model.structural.weight.grad, entity.grad, rtol=0, atol=ATOL)
        torch.testing.assert_close(model.relation_embeddings.grad, relation.grad, rtol=0, atol=ATOL)
        reference.step()
        torch.testing.assert_close(model.structural.weight.detach(), entity.detach(), rtol=0, atol=ATOL)
        torch.testing.assert_close(model.relation_embeddings.detach(), relation.detach(), rtol=0, atol=ATOL)


@pytest.mark.parametrize("fusion", ["structural", "weighted", "gate"])
def test_gathered_scores_and_gradients_match_the_entity_matrix(fusion):
    """``model(batch)`` (gather → score_rows) == scoring rows of ``entity_matrix()``, values and gradients."""
    model = make_model(fusion)
    batch = random_triples((4, 3))
    fast = model(batch)
    fast.sum().backward()
    fast_grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
    ent, rel = model.entity_matrix(), model.relation_matrix()
    slow = model.interaction.score(ent[batch[..., 0]], rel[batch[..., 1]], ent[batch[..., 2]])
    slow.sum().backward()
    torch.testing.assert_close(fast, slow, rtol=0, atol=ATOL)
    # rtol: a fused model's forward fuses each distinct end once (issue 38), so a fusion weight's gradient
    # adds the same products in another order (float32: a few units in the last place of a sum of ~30)
    for name, grad in fast_grads.items():
        torch.testing.assert_close(grad, dict(model.named_parameters())[name].grad, rtol=1e-6, atol=ATOL, msg=name)


def test_the_gather_backward_sums_as_advanced_indexing_does():
    """``index_select``'s backward adds repeated rows in the order ``table[idx]``'s does: bit for bit."""
    table = torch.randn(7, 5, requires_grad=True)
    idx = torch.randint(7, (40, 3, 2), generator=torch.Generator().manual_seed(0))
    upstream = torch.randn(40, 3, 2, 5)
    (grad_index,) = torch.autograd.grad(table[idx], table, upstream)
    model = make_model("structural")
    model.structural.weight = torch.nn.Parameter(table.detach().clone())
    gathered = model.gather({"entity": idx})["entity"]
    (grad_select,) = torch.autograd.grad(gathered, model.structural.weight, upstream)
    assert torch.equal(gathered, table[idx])
    assert torch.equal(grad_select, grad_index)


def test_transe_l1_is_the_l1_norm_with_a_zero_gradient_at_zero():
    g = torch.Generator().manual_seed(1)
    h, r, t = (torch.randn(6, 9, generator=g) for _ in range(3))
    torch.testing.assert_close(TransE(p=1).score(h, r, t), -torch.linalg.vector_norm(h + r - t, ord=1, dim=-1))
    x = torch.zeros(2, 3, requires_grad=True)
    (grad,) = torch.autograd.grad(TransE(p=1).score(x, x, x).sum(), x)
    assert torch.equal(grad, torch.zeros_like(x))


def test_fused_adam_follows_the_plain_update():
    g = torch.Generator().manual_seed(2)
    start = torch.randn(50, 8, generator=g)
    grads = [torch.randn(50, 8, generator=g) for _ in range(20)]
    fused, plain = torch.nn.Parameter(start.clone()), torch.nn.Parameter(start.clone())
    optimizers = [adam([fused], lr=0.01, weight_decay=1e-4), torch.optim.Adam([plain], lr=0.01, weight_decay=1e-4)]
    assert optimizers[0].defaults["fused"] and not optimizers[1].defaults["fused"]
    for grad in grads:
        for p, opt in zip((fused, plain), optimizers, strict=True):
            p.grad = grad.clone()
            opt.step()
    torch.testing.assert_close(fused.detach(), plain.detach(), rtol=0, atol=ATOL)
