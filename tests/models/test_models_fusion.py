"""Fusions and representations: registry, unseen-entity isolation, learned weights, text modules."""

from __future__ import annotations

import pytest
import torch
from models_cases import DIM, FUSION_CASES, NUM_ENTITIES, NUM_RELATIONS, SEEN, make_model, text_features
from torch.func import functional_call, grad, vmap

from textkg.errors import ConfigError
from textkg.models import ModelConfig, build_model
from textkg.models.fusion import Fusion, WeightedFusion, get_fusion, list_fusions, register_fusion

UNSEEN = torch.tensor([10, 11, 12, 13])
STRUCTURAL_FUSIONS = [f for f in sorted(FUSION_CASES) if f != "text"]


def test_every_registered_fusion_has_a_case():
    missing = set(list_fusions()) - set(FUSION_CASES)
    assert not missing, f"registered fusions without a test case: {sorted(missing)}"


def test_fusion_registry():
    assert list_fusions() == ["gate", "structural", "text", "weighted"]
    with pytest.raises(ConfigError) as info:
        get_fusion("concat", dim=4)
    assert all(name in str(info.value) for name in list_fusions())
    assert isinstance(get_fusion(WeightedFusion, dim=4), WeightedFusion)
    inst = get_fusion("gate", dim=4)
    assert get_fusion(inst) is inst
    with pytest.raises(ConfigError):
        get_fusion("gate")  # no dim
    with pytest.raises(ConfigError):
        get_fusion("structural", dim=4, init=(1, 1))

    class Dup(Fusion):
        name = "text"

    with pytest.raises(ConfigError):
        register_fusion(Dup)


def test_fusion_formulas():
    s, x = torch.randn(3, 4), torch.randn(3, 4)
    assert torch.equal(get_fusion("structural", dim=4)(s, None), s)
    assert torch.equal(get_fusion("text", dim=4)(None, x), x)
    torch.testing.assert_close(get_fusion("weighted", dim=4)(s, x), 0.5 * s + 0.5 * x)
    torch.testing.assert_close(get_fusion("weighted", dim=4, init=(1.0, 0.0))(s, x), s)
    gate = get_fusion("gate", dim=4)
    torch.testing.assert_close(gate(s, x), 0.5 * s + 0.5 * x)  # g = σ(0) at initialisation
    with torch.no_grad():
        gate.gate.bias.fill_(100.0)
    torch.testing.assert_close(gate(s, x), s)


@pytest.mark.parametrize("fusion", STRUCTURAL_FUSIONS)
def test_unseen_only_triples_never_touch_a_trained_structural_row(fusion):
    model = make_model(fusion, structural_dropout=0.5 if fusion != "structural" else 0.0).train()
    g = torch.Generator().manual_seed(0)
    triples = torch.stack(
        [
            UNSEEN[torch.randint(4, (20,), generator=g)],
            torch.randint(NUM_RELATIONS, (20,)),
            UNSEEN[torch.randint(4, (20,), generator=g)],
        ],
        dim=1,
    )
    model(triples, generator=g).sum().backward()
    table_grad = model.tables()["entity"].grad
    assert torch.count_nonzero(table_grad[: len(SEEN)]) == 0


@pytest.mark.parametrize("fusion", STRUCTURAL_FUSIONS)
def test_mixed_triples_read_only_their_own_rows(fusion):
    model = make_model(fusion).eval()
    triples = torch.tensor([[2, 0, 12], [11, 1, 5]])
    plan = model.lookup_plan(triples)
    assert plan["entity"].tolist() == [[2, len(SEEN)], [len(SEEN), 5]]
    model(triples).sum().backward()
    touched = torch.nonzero(model.tables()["entity"].grad.abs().sum(1)).flatten().tolist()
    assert set(touched) == {2, 5, len(SEEN)}  # the unseen row is learned from mixed triples


@pytest.mark.parametrize("fusion", STRUCTURAL_FUSIONS)
def test_unseen_entity_vectors_ignore_seen_rows(fusion):
    model = make_model(fusion).eval()
    with torch.no_grad():
        before = model.entity_matrix(UNSEEN).clone()
        model.tables()["entity"][: len(SEEN)].add_(torch.randn(len(SEEN), DIM))
        after = model.entity_matrix(UNSEEN)
        assert torch.equal(before, after)
        model.tables()["entity"][len(SEEN)].add_(1.0)
        assert not torch.equal(before, model.entity_matrix(UNSEEN))


def _toy_cluster_graph(seed: int):
    """40 entities in 4 clusters; relation 0 links entities of the same cluster; text = noisy cluster one-hot."""
    g = torch.Generator().manual_seed(seed)
    n, c = 40, 4
    cluster = torch.arange(n) % c
    feats = torch.nn.functional.one_hot(cluster, c).float() + 0.05 * torch.randn(n, c, generator=g)
    train = torch.tensor([(a, 0, b) for a in range(30) for b in range(30) if a != b and cluster[a] == cluster[b]])
    return cluster, feats, train


@pytest.mark.parametrize("seed", [0, 1])
def test_fusion_weights_are_learned_when_text_is_informative(seed):
    torch.manual_seed(seed)
    cluster, feats, train = _toy_cluster_graph(seed)
    cfg = ModelConfig(dim=16, fusion="weighted", encoder="bert", structural_dropout=0.5)
    model = build_model(cfg, num_entities=40, num_relations=1, seen_entities=torch.arange(30), text_features=feats)
    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    g = torch.Generator().manual_seed(seed)
    model.train()
    for _ in range(300):
        pos = train[torch.randint(len(train), (64,), generator=g)]
        neg = pos.clone()
        neg[:, 2] = torch.randint(0, 30, (64,), generator=g)
        s = model(torch.stack([pos, neg], 1), generator=g)
        loss = torch.relu(1 - s[:, 0] + s[:, 1]).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    w = model.fusion_weights()
    assert w["w_text"] > 0.6 and w["w_structural"] < 0.4, w
    model.eval()
    with torch.no_grad():  # unseen heads (30..39) rank same-cluster tails higher: text carries them
        scores = model.score_tails(torch.arange(30, 40), torch.zeros(10, dtype=torch.long), torch.arange(40))
    same = cluster[30:40, None] == cluster[None, :]
    assert scores[same].mean() > scores[~same].mean() + 1.0


def test_gate_parameters_are_trained():
    model = make_model("gate").train()
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    before = model.fusion.gate.weight.detach().clone()
    for _ in range(5):
        opt.zero_grad()
        model(torch.tensor([[0, 0, 1], [2, 1, 3]])).sum().backward()
        opt.step()
    assert not torch.equal(before, model.fusion.gate.weight)


class _BagOfIds(torch.nn.Module):
    """A stand-in for a fine-tuned transformer: ``(input_ids, attention_mask) -> (n, 7)``."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(30, 7)

    def forward(self, input_ids, attention_mask):
        m = attention_mask.to(self.embed.weight.dtype).unsqueeze(-1)
        return (self.embed(input_ids) * m).sum(1) / m.sum(1).clamp(min=1.0)


def _text_module_models():
    g = torch.Generator().manual_seed(0)
    tokens = torch.randn(NUM_ENTITIES, 6, 4, generator=g)
    mask = torch.arange(6)[None, :] < torch.randint(1, 7, (NUM_ENTITIES, 1), generator=g)
    ids = torch.randint(0, 30, (NUM_ENTITIES, 5), generator=g)
    cfg = ModelConfig(dim=DIM, fusion="weighted", encoder="bert", text_module="dkrl")
    common = {"num_entities": NUM_ENTITIES, "num_relations": NUM_RELATIONS, "seen_entities": SEEN}
    dkrl = build_model(cfg, token_features=tokens, token_mask=mask, **common)
    ft_cfg = ModelConfig(dim=DIM, fusion="text", encoder="bert", text_module="finetune")
    finetune = build_model(ft_cfg, input_ids=ids, attention_mask=ids > 3, text_module=_BagOfIds(), **common)
    return {"dkrl": dkrl, "finetune": finetune}


@pytest.mark.parametrize("kind", ["dkrl", "finetune"])
def test_text_module_models_train_under_vmap(kind):
    model = _text_module_models()[kind].train()
    assert any(k.startswith("text.module.") for k in model.dense_parameters())
    batch = torch.tensor([[[0, 0, 1], [0, 0, 12]], [[11, 1, 2], [3, 1, 2]], [[4, 2, 13], [4, 2, 4]]])
    plan = model.lookup_plan(batch)
    tables = model.tables()
    rows = {k: tables[k].detach()[idx] for k, idx in plan.items()}
    dense = {k: v.detach() for k, v in model.dense_parameters().items()}
    buffers = dict(model.named_buffers())
    wrapper = _Wrap(model)

    def loss(d, r, t):
        scores = functional_call(wrapper, {f"m.{k}": v for k, v in {**buffers, **d}.items()}, (t, r))
        return torch.nn.functional.softplus(scores[1] - scores[0])

    dense_g, _ = vmap(grad(loss, argnums=(0, 1)), in_dims=(None, 0, 0))(dense, rows, batch)
    for i in range(len(batch)):
        model.zero_grad()
        s = model.score_rows(batch[i], {k: tables[k][idx[i]] for k, idx in plan.items()})
        torch.nn.functional.softplus(s[1] - s[0]).backward()
        for name, p in model.dense_parameters().items():
            expected = p.grad if p.grad is not None else torch.zeros_like(p)
            torch.testing.assert_close(dense_g[name][i], expected, rtol=1e-4, atol=1e-5)


class _Wrap(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.m = model

    def forward(self, triples, rows):
        return self.m.score_rows(triples, rows)


def test_text_module_new_entities():
    models = _text_module_models()
    dkrl = models["dkrl"].eval()
    tok, mask = dkrl.text.text_token_features[[12]], dkrl.text.text_token_mask[[12]]
    with torch.no_grad():
        torch.testing.assert_close(
            dkrl.embed_new_entities(token_features=tok, token_mask=mask), dkrl.entity_matrix(torch.tensor([12]))
        )


def test_text_features_are_buffers_not_parameters():
    model = make_model("weighted")
    feats = text_features(0)
    assert torch.equal(model.text.text_text_features, feats)
    assert all(not name.startswith("text.text_") for name, _ in model.named_parameters())
    assert "text.text_text_features" in dict(model.named_buffers())
    feats_before = model.text.text_text_features.clone()
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    model(torch.tensor([[0, 0, 1]])).sum().backward()
    opt.step()
    assert torch.equal(model.text.text_text_features, feats_before)
