"""Negatives are per-example and independent; schedules mix public and private steps."""

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from textkg.training.losses import margin_ranking, softplus_loss
from textkg.training.negatives import corrupt
from textkg.training.schedule import interleave, plan_epoch, public_batches


def test_corrupt_shape_and_one_side_changed():
    g = torch.Generator().manual_seed(0)
    pos = torch.tensor([[0, 0, 1], [2, 1, 3], [4, 0, 5]])
    pool = torch.arange(10, 20)
    out = corrupt(pos, num_negatives=7, entity_pool=pool, generator=g)
    assert out.shape == (3, 8, 3)
    assert torch.equal(out[:, 0], pos)
    neg = out[:, 1:]
    assert torch.equal(neg[..., 1], pos[:, 1:2].expand(3, 7))
    head_kept = neg[..., 0] == pos[:, 0:1]
    tail_kept = neg[..., 2] == pos[:, 2:3]
    # exactly one side is replaced (pool is disjoint from the positives' entities)
    assert torch.all(head_kept ^ tail_kept)
    replaced = torch.where(head_kept, neg[..., 2], neg[..., 0])
    assert torch.all((replaced >= 10) & (replaced < 20))


def test_negatives_do_not_depend_on_other_examples():
    """Example i's corruptions depend only on the generator stream, not on the others' content."""
    pool = torch.arange(100)
    a = torch.tensor([[1, 0, 2], [3, 1, 4]])
    b = torch.tensor([[1, 0, 2], [50, 2, 60]])
    out_a = corrupt(a, num_negatives=5, entity_pool=pool, generator=torch.Generator().manual_seed(3))
    out_b = corrupt(b, num_negatives=5, entity_pool=pool, generator=torch.Generator().manual_seed(3))
    assert torch.equal(out_a[0], out_b[0])


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 500), st.integers(1, 300), st.integers(1, 64))
def test_interleave_counts_and_ratio(num_public, num_private, batch):
    plan = plan_epoch(num_public=num_public, num_private=num_private, batch_size=batch)
    kinds = interleave(plan) if plan.public_steps else ["private"] * plan.private_steps
    assert kinds.count("public") == plan.public_steps
    assert kinds.count("private") == plan.private_steps
    if plan.public_steps and plan.private_steps:
        # after every prefix, done fractions differ by at most one step's share
        done_u = done_c = 0
        for kind in kinds:
            done_u += kind == "public"
            done_c += kind == "private"
            assert abs(done_u / plan.public_steps - done_c / plan.private_steps) <= (
                1 / plan.public_steps + 1 / plan.private_steps
            )


def test_public_batches_partition():
    g = torch.Generator().manual_seed(0)
    batches = list(public_batches(103, batch_size=10, generator=g))
    assert len(batches) == 11
    assert torch.equal(torch.sort(torch.cat(batches)).values, torch.arange(103))


def test_losses_known_values():
    scores = torch.tensor([[2.0, 1.5, -1.0]])
    # margin 1: relu(1-2+1.5)=0.5, relu(1-2-1)=0 → mean 0.25
    assert torch.allclose(margin_ranking(scores, margin=1.0), torch.tensor([0.25]))
    sp = torch.nn.functional.softplus
    expected = sp(torch.tensor(-2.0)) + (sp(torch.tensor(1.5)) + sp(torch.tensor(-1.0))) / 2
    assert torch.allclose(softplus_loss(scores), expected.reshape(1))
