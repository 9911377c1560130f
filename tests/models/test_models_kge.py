"""KGEModel contract (docs/architecture.md), run for every registered fusion."""

from __future__ import annotations

import pytest
import torch
from models_cases import DIM, FUSION_CASES, NUM_ENTITIES, NUM_RELATIONS, SEEN, make_model, random_triples
from torch.func import functional_call, grad, vmap

from textkg.errors import ConfigError
from textkg.models.config import ModelConfig

FUSIONS = sorted(FUSION_CASES)
INTERACTIONS = ["transe", "distmult", "complex", "rotate"]


class _ScoreRows(torch.nn.Module):
    """The DP trainer's wrapper: ``functional_call`` drives ``score_rows`` (textkg.training.private_step)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, triples, rows):
        return self.model.score_rows(triples, rows)


def _loss(scores):
    return torch.nn.functional.softplus(-scores[..., 0]) + torch.nn.functional.softplus(scores[..., 1:]).mean(-1)


@pytest.mark.parametrize("fusion", FUSIONS)
def test_tables_and_dense_parameters(fusion):
    model = make_model(fusion)
    tables = model.tables()
    assert tables["relation"].shape == (NUM_RELATIONS, DIM)
    if model.fusion.uses_structure:
        assert tables["entity"].shape == (len(SEEN) + 1, DIM)
    else:
        assert "entity" not in tables
    dense = model.dense_parameters()
    table_ids = {id(t) for t in tables.values()}
    assert not table_ids & {id(p) for p in dense.values()}
    trainable = {id(p) for p in model.parameters() if p.requires_grad}
    assert trainable == table_ids | {id(p) for p in dense.values()}
    names = dict(model.named_parameters())
    assert all(names[k] is v for k, v in dense.items())  # functional_call needs these names


@pytest.mark.parametrize("fusion", FUSIONS)
def test_lookup_plan_rows(fusion):
    model = make_model(fusion).eval()
    triples = random_triples((5, 4))
    plan = model.lookup_plan(triples, generator=torch.Generator().manual_seed(0))
    assert plan["relation"].shape == (5, 4, 1)
    assert torch.equal(plan["relation"][..., 0], triples[..., 1])
    if model.fusion.uses_structure:
        assert plan["entity"].shape == (5, 4, 2)
        for col, end in ((0, 0), (1, 2)):
            ids = triples[..., end]
            expected = torch.where(model.is_seen(ids), torch.searchsorted(SEEN, ids.contiguous()), len(SEEN))
            assert torch.equal(plan["entity"][..., col], expected)


@pytest.mark.parametrize("fusion", FUSIONS)
@pytest.mark.parametrize("interaction", INTERACTIONS)
def test_forward_is_score_rows_of_gathered_rows(fusion, interaction):
    model = make_model(fusion, interaction=interaction).train()
    triples = random_triples((4, 3))
    out = model(triples, generator=torch.Generator().manual_seed(5))
    plan = model.lookup_plan(triples, generator=torch.Generator().manual_seed(5))
    assert out.shape == (4, 3)
    torch.testing.assert_close(out, model.score_rows(triples, model.gather(plan)))


@pytest.mark.parametrize("fusion", FUSIONS)
@pytest.mark.parametrize("interaction", INTERACTIONS)
def test_per_example_gradients_under_vmap_equal_a_loop(fusion, interaction):
    """vmap(grad) over (dense, gathered rows) == ordinary autograd per example on the full tables."""
    model = make_model(fusion, interaction=interaction).train()
    batch = random_triples((5, 4), seed=3)  # (B, 1 + K, 3)
    plan = model.lookup_plan(batch, generator=torch.Generator().manual_seed(1))
    tables = model.tables()
    gathered = {k: tables[k].detach()[idx] for k, idx in plan.items()}
    dense = {f"model.{k}": v.detach() for k, v in model.dense_parameters().items()}
    buffers = {f"model.{k}": v for k, v in model.named_buffers()}
    wrapper = _ScoreRows(model)

    def example_loss(dense_params, rows, triples):
        return _loss(functional_call(wrapper, {**buffers, **dense_params}, (triples, rows)))

    dense_g, row_g = vmap(grad(example_loss, argnums=(0, 1)), in_dims=(None, 0, 0), randomness="different")(
        dense, gathered, batch
    )
    params = dict(model.named_parameters())
    for i in range(len(batch)):
        model.zero_grad()
        rows_i = {k: tables[k][idx] for k, idx in plan.items()}
        _loss(model.score_rows(batch[i], {k: v[i] for k, v in rows_i.items()})).backward()
        for name, g in dense_g.items():
            expected = params[name[len("model.") :]].grad
            torch.testing.assert_close(g[i], torch.zeros_like(g[i]) if expected is None else expected)
        for name, table in tables.items():
            scattered = torch.zeros_like(table).index_add_(
                0, plan[name][i].reshape(-1), row_g[name][i].reshape(-1, table.shape[1])
            )
            torch.testing.assert_close(scattered, table.grad if table.grad is not None else torch.zeros_like(table))


@pytest.mark.parametrize("fusion", ["weighted", "gate", "structural"])
def test_structural_dropout_only_in_training_with_a_generator(fusion):
    model = make_model(fusion, structural_dropout=0.5).train()
    seen_triples = torch.stack([SEEN.repeat(50), torch.zeros(500, dtype=torch.long), SEEN.repeat(50)], dim=1)
    unseen_row = len(SEEN)
    plan = model.lookup_plan(seen_triples, generator=torch.Generator().manual_seed(0))["entity"]
    rate = float((plan == unseen_row).double().mean())
    assert 0.4 < rate < 0.6
    assert not (model.lookup_plan(seen_triples)["entity"] == unseen_row).any()  # no generator
    model.eval()
    assert not (model.lookup_plan(seen_triples, generator=torch.Generator())["entity"] == unseen_row).any()


@pytest.mark.parametrize("fusion", FUSIONS)
@pytest.mark.parametrize("interaction", INTERACTIONS)
def test_scorer_matches_forward(fusion, interaction):
    model = make_model(fusion, interaction=interaction).eval()
    heads, rels = torch.tensor([0, 11, 4]), torch.tensor([0, 2, 1])
    cands = torch.tensor([3, 12, 0, 9, 13])
    with torch.no_grad():
        tails_scores = model.score_tails(heads, rels, cands)
        heads_scores = model.score_heads(rels, heads, cands)
        for i in range(3):
            fwd_t = model(torch.stack([heads[i].expand(5), rels[i].expand(5), cands], dim=1))
            fwd_h = model(torch.stack([cands, rels[i].expand(5), heads[i].expand(5)], dim=1))
            torch.testing.assert_close(tails_scores[i], fwd_t, rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(heads_scores[i], fwd_h, rtol=1e-5, atol=1e-5)


def test_entity_matrix_cache_follows_parameter_updates():
    model = make_model("weighted")
    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    model.eval()
    ids = torch.tensor([0, 1])
    with torch.no_grad():
        before = model.score_tails(ids, ids, torch.arange(NUM_ENTITIES))
        assert model._cache is not None
        again = model.score_tails(ids, ids, torch.arange(NUM_ENTITIES))
    torch.testing.assert_close(before, again)
    model.train()
    model(random_triples((8, 2))).sum().backward()
    opt.step()
    model.eval()
    with torch.no_grad():
        after = model.score_tails(ids, ids, torch.arange(NUM_ENTITIES))
        fresh = torch.stack(
            [
                model(
                    torch.stack(
                        [ids[i].expand(NUM_ENTITIES), ids[i].expand(NUM_ENTITIES), torch.arange(NUM_ENTITIES)], 1
                    )
                )
                for i in range(2)
            ]
        )
    assert not torch.allclose(before, after)
    torch.testing.assert_close(after, fresh, rtol=1e-5, atol=1e-5)
    other = make_model("weighted", seed=9).eval()
    model.load_state_dict(other.state_dict())
    with torch.no_grad():
        torch.testing.assert_close(model.entity_matrix(), other.entity_matrix())
        torch.testing.assert_close(model.score_tails(ids, ids, ids), other.score_tails(ids, ids, ids))


def test_eval_cache_context_and_grad_mode():
    model = make_model("gate").eval()
    with model.eval_cache():
        model.score_tails(torch.tensor([0]), torch.tensor([0]), torch.arange(4))
        assert model._cache is not None
    assert model._cache is None
    # with grad on and outside the context, nothing is cached and scores are differentiable
    s = model.score_tails(torch.tensor([0]), torch.tensor([0]), torch.arange(4))
    assert s.requires_grad and model._cache is None


@pytest.mark.parametrize("fusion", FUSIONS)
def test_entity_matrix_shapes_and_batching(fusion):
    model = make_model(fusion).eval()
    with torch.no_grad():
        full = model.entity_matrix()
        torch.testing.assert_close(model.entity_matrix(batch_size=3), full)
        torch.testing.assert_close(model.entity_matrix(torch.tensor([5, 12])), full[[5, 12]])
    assert full.shape == (NUM_ENTITIES, DIM)
    assert model.relation_matrix().shape == (NUM_RELATIONS, DIM)


def test_normalized_entities_have_unit_norm():
    model = make_model("weighted", normalize_entities=True).eval()
    with torch.no_grad():
        torch.testing.assert_close(model.entity_matrix().norm(dim=-1), torch.ones(NUM_ENTITIES))


def test_is_seen_and_seen_buffer():
    model = make_model("text")
    assert torch.equal(model.seen_entities, SEEN)
    assert model.is_seen(torch.tensor([0, 9, 10, 13])).tolist() == [True, True, False, False]
    assert "seen_entities" in model.state_dict()


@pytest.mark.parametrize("fusion", ["text", "weighted", "gate"])
def test_new_entity_from_text_equals_unseen_entity_with_same_text(fusion):
    model = make_model(fusion).eval()
    feats = model.text.text_text_features[[11, 12]]
    with torch.no_grad():
        torch.testing.assert_close(model.embed_new_entities(text_features=feats), model.entity_matrix()[[11, 12]])
    with pytest.raises(ConfigError):
        model.embed_new_entities(token_features=feats)
    with pytest.raises(ConfigError):
        make_model("structural").embed_new_entities(text_features=feats)


def test_hashed_structural_rows_are_shared_by_seen_entities_only():
    """``structural_buckets=K``: K shared rows plus the unseen row; held-out entities read the unseen row."""
    from textkg.models.representations import StructuralRepresentation

    seen = torch.tensor([7, 1, 4, 9, 2])
    rep = StructuralRepresentation(12, seen, 3, buckets=2)
    assert rep.weight.shape == (3, 3) and rep.unseen_row == 2
    # sorted seen ids 1, 2, 4, 7, 9 take rows 0, 1, 0, 1, 0
    assert rep.struct_index[torch.tensor([1, 2, 4, 7, 9])].tolist() == [0, 1, 0, 1, 0]
    held_out = torch.tensor([0, 3, 5, 6, 8, 10, 11])
    assert (rep.struct_index[held_out] == 2).all()
    # more buckets than seen entities: one row each, as without hashing
    assert StructuralRepresentation(12, seen, 3, buckets=50).weight.shape == (6, 3)


@pytest.mark.parametrize("bad", [-1, 1.5, True, "8"])
def test_structural_buckets_must_be_a_non_negative_integer(bad):
    with pytest.raises(ConfigError, match="non-negative integer"):
        ModelConfig(fusion="structural", structural_buckets=bad)


def test_structural_buckets_need_a_structural_table():
    with pytest.raises(ConfigError, match="structural table"):
        ModelConfig(fusion="text", encoder="bert", structural_buckets=4)


@pytest.mark.parametrize("fusion", ["weighted", "gate"])
def test_training_forward_projects_each_distinct_end_once_same_scores_and_gradients(fusion):
    """Issue 38: a batch with negatives repeats its uncorrupted ends; ``forward`` projects and fuses each
    distinct (table row, entity) end once, with the scores and gradients of ``score_rows`` on every copy."""
    model = make_model(fusion, interaction="transe").train()
    positives = random_triples((2, 1), seed=4)
    batch = positives.repeat(1, 5, 1)  # (2, 5, 3): 4 "negatives" that corrupt the tail only
    batch[:, 1:, 2] = random_triples((2, 4), seed=5)[..., 2]
    projected: list[int] = []
    hook = model.text.projection.register_forward_hook(lambda _m, args, _out: projected.append(args[0].shape[0]))
    out = model(batch, generator=torch.Generator().manual_seed(2))
    hook.remove()
    plan = model.lookup_plan(batch, generator=torch.Generator().manual_seed(2))
    distinct = len(torch.unique(plan["entity"] * NUM_ENTITIES + batch[..., [0, 2]]))
    assert projected == [distinct] and distinct < min(NUM_ENTITIES, batch[..., [0, 2]].numel() - 4)
    out.sum().backward()
    fast = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
    reference = model.score_rows(batch, model.gather(plan))
    torch.testing.assert_close(out, reference)
    reference.sum().backward()
    for name, p in model.named_parameters():
        if p.grad is not None:
            torch.testing.assert_close(fast[name], p.grad, rtol=1e-5, atol=1e-5)
