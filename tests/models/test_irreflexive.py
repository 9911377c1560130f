"""``model.irreflexive``: the query entity is never its own answer for relations without self-loops.

Oracles: the masked scores equal the plain scores except at ``(query, r, query)``; the masked
1-vs-all loss equals the cross-entropy over the pool *without* the query's own column. The
motivating failure is played out: TransE with a symmetric relation (``r ≈ 0``) ranks the query
itself first, and the mask puts the true partner first.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from models_cases import NUM_ENTITIES, NUM_RELATIONS, SEEN, random_triples

from textkg.cli.main import main
from textkg.errors import ConfigError
from textkg.models import ModelConfig, build_model, get_preset
from textkg.training.irreflexive import resolve_irreflexive
from textkg.training.one_vs_all import one_vs_all_loss, pool_positions

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiny_blp"
RELATIONS = ["a", "b", "c"]


def _model(name: str = "cpu-best"):
    cfg = dataclasses.replace(get_preset(name), dim=8)
    torch.manual_seed(0)
    x = torch.randn(NUM_ENTITIES, 7, generator=torch.Generator().manual_seed(0))
    features = {"text_features": x} if cfg.encoder is not None else {}
    return build_model(cfg, num_entities=NUM_ENTITIES, num_relations=NUM_RELATIONS, seen_entities=SEEN, **features)


def test_auto_takes_relations_with_statements_and_no_self_loop():
    train = torch.tensor([[0, 0, 1], [2, 0, 3], [4, 1, 4], [5, 1, 6]])  # relation 2 has no statement
    assert resolve_irreflexive("auto", RELATIONS, train, private=False).tolist() == [True, False, False]
    assert resolve_irreflexive("none", RELATIONS, train, private=False).tolist() == [False, False, False]
    assert resolve_irreflexive(["c", "a"], RELATIONS, train, private=False).tolist() == [True, False, True]


def test_private_runs_never_read_the_statements():
    """Under --privacy ``auto`` is off whatever the statements say: the mask is not a function of them."""
    for train in (torch.tensor([[0, 0, 1]]), torch.tensor([[0, 0, 0], [1, 2, 1]])):
        assert not resolve_irreflexive("auto", RELATIONS, train, private=True).any()
    with pytest.raises(ConfigError, match="privacy") as info:
        resolve_irreflexive(["a"], RELATIONS, torch.zeros(0, 3, dtype=torch.long), private=True)
    assert info.value.field == "model.irreflexive"


@pytest.mark.parametrize("bad", ["yes", ["a", ""], [1], None])
def test_bad_settings_name_the_field(bad):
    with pytest.raises(ConfigError) as info:
        ModelConfig(irreflexive=bad)
    assert info.value.field == "model.irreflexive"
    with pytest.raises(ConfigError, match="unknown relation 'z'"):
        resolve_irreflexive(["z"], RELATIONS, torch.zeros(0, 3, dtype=torch.long), private=False)
    with pytest.raises(ConfigError, match="one flag per relation"):
        _model().set_irreflexive(torch.ones(NUM_RELATIONS + 1, dtype=torch.bool))


def test_config_round_trip():
    cfg = ModelConfig(irreflexive=("a", "b"))
    assert cfg.irreflexive == ["a", "b"] and ModelConfig.from_dict(cfg.to_dict()) == cfg
    assert ModelConfig().irreflexive == "auto"


@pytest.mark.parametrize("direction", ["tail", "head"])
def test_masked_scores_equal_plain_scores_but_at_the_query(direction):
    model = _model().eval()
    queries = torch.tensor([0, 3, 5, 11, 3])
    relations = torch.tensor([0, 1, 2, 0, 2])
    candidates = torch.arange(NUM_ENTITIES)
    score = model.score_tails if direction == "tail" else lambda q, r, c: model.score_heads(r, q, c)
    with torch.no_grad():
        plain = score(queries, relations, candidates)
        model.set_irreflexive(torch.tensor([True, False, True]))
        masked = score(queries, relations, candidates)
    lowest = torch.finfo(masked.dtype).min
    for i, (q, r) in enumerate(zip(queries.tolist(), relations.tolist(), strict=True)):
        for c in range(NUM_ENTITIES):
            expected = lowest if (c == q and r in (0, 2)) else float(plain[i, c])
            assert float(masked[i, c]) == expected
    assert torch.isfinite(0.0 * masked).all()  # a mixture weight of 0 stays a number


def test_masked_one_vs_all_loss_is_cross_entropy_without_the_own_column():
    model = _model().eval()
    model.set_irreflexive(torch.tensor([True, True, False]))
    pool = SEEN
    triples = random_triples((8,), seed=7, num_entities=len(SEEN))
    triples = triples[triples[:, 0] != triples[:, 2]]  # irreflexive statements have no self-loop
    got = one_vs_all_loss(model, triples, entity_pool=pool, positions=pool_positions(pool, NUM_ENTITIES))
    vectors = model.entity_matrix(pool)
    want = []
    for h, r, t in triples.tolist():
        rel = model.relation_embeddings[r : r + 1]
        tail_scores = model.interaction.score_tails(vectors[h : h + 1], rel, vectors)[0]
        head_scores = model.interaction.score_heads(rel, vectors[t : t + 1], vectors)[0]
        keep_t = [c for c in range(len(pool)) if not (r in (0, 1) and c == h)]
        keep_h = [c for c in range(len(pool)) if not (r in (0, 1) and c == t)]
        ce_t = F.cross_entropy(tail_scores[keep_t][None], torch.tensor([keep_t.index(t)]))
        ce_h = F.cross_entropy(head_scores[keep_h][None], torch.tensor([keep_h.index(h)]))
        want.append(ce_t + ce_h)
    assert torch.allclose(got, torch.stack(want), atol=1e-5)


def test_a_symmetric_relation_ranks_the_query_first_until_masked():
    """TransE with r = 0 (what a symmetric relation learns): the query beats its true partner."""
    model = _model("transe-l2").eval()
    with torch.no_grad():
        model.relation_embeddings.zero_()
        weight = model.structural.weight
        weight[1] = weight[0] + 0.01  # entity 1 is entity 0's partner: near, not equal
    candidates = torch.arange(len(SEEN))
    plain = model.score_tails(torch.tensor([0]), torch.tensor([0]), candidates)[0]
    assert int(plain.argmax()) == 0  # the query itself
    model.set_irreflexive(torch.tensor([True, False, False]))
    assert int(model.score_tails(torch.tensor([0]), torch.tensor([0]), candidates)[0].argmax()) == 1


def test_exact_dp_clipping_refuses_the_mask():
    from textkg.training.one_vs_all import clipped_gradient_sum

    model = _model()
    model.set_irreflexive(torch.tensor([True, False, False]))
    triples = torch.tensor([[0, 0, 1]])
    with pytest.raises(ConfigError, match="exact DP clipping") as info:
        clipped_gradient_sum(
            model, triples, entity_pool=SEEN, positions=pool_positions(SEEN, NUM_ENTITIES), max_grad_norm=1.0
        )
    assert info.value.field == "model.irreflexive"


def _run(tmp_path, *extra: str) -> dict:
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({"train": {"epochs": 1, "batch_size": 64}}))
    out = tmp_path / "run"
    args = ["train", "--dataset", str(FIXTURE), "--split", "inductive", "--model", "transe", "--no-progress"]
    assert main([*args, "--config", str(config), "--out", str(out), *extra]) == 0
    return json.loads((out / "metrics.json").read_text())


def test_a_run_reports_the_resolved_relations(tmp_path):
    metrics = _run(tmp_path)
    train = [line.split("\t") for line in (FIXTURE / "ind_split" / "ind-train.tsv").read_text().splitlines()]
    expected = sorted({r for _, r, _ in train} - {r for h, r, t in train if h == t})
    assert sorted(metrics["model"]["irreflexive_relations"]) == expected and expected
    assert metrics["model"]["irreflexive"] == "auto"


def test_a_private_run_resolves_auto_to_nothing(tmp_path):
    metrics = _run(tmp_path, "--privacy", "full", "--noise-multiplier", "0.8", "--batch-size", "16")
    assert metrics["model"]["irreflexive_relations"] == [] and metrics["privacy"] is not None


def test_the_neighbour_vote_standardises_without_the_ruled_out_query():
    """A ruled-out score must not swamp the row's mean and std (it did: the combination fell to the vote)."""
    from textkg.evaluation.scoring import standardise

    scores = torch.tensor([[1.0, 2.0, 3.0, 4.0], [0.5, -1.0, 2.0, 7.0]])
    masked = scores.clone()
    masked[0, 1] = torch.finfo(torch.float32).min
    z = standardise(masked)
    rest = torch.tensor([1.0, 3.0, 4.0])
    assert torch.allclose(z[0, [0, 2, 3]], (rest - rest.mean()) / rest.std())
    assert float(z[0, 1]) == torch.finfo(torch.float32).min
    assert torch.allclose(z[1], standardise(scores)[1], atol=1e-6)  # other rows: the same standardisation
    assert torch.equal(standardise(scores), (scores - scores.mean(1, keepdim=True)) / scores.std(1, keepdim=True))
