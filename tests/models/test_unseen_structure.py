"""``model.unseen_structure: neighbours``: a new entity's structural part is the weighted mean
of its nearest training entities' rows (by description), instead of the shared unseen row.

Oracles: the entity matrix equals the fusion of the hand-computed mean; seen entities and
:meth:`forward` (training) are untouched; a new entity described exactly like a seen one gets
that entity's vector; ``predict`` embeds a graph entity's own description to its row of the
entity matrix; the setting is validated, reported, and kept off where it cannot apply.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from models_cases import NUM_ENTITIES, NUM_RELATIONS, SEEN, random_triples

from textkg.errors import ConfigError
from textkg.models import ModelConfig, build_model, get_preset
from textkg.training.unseen_structure import apply_unseen_structure, nearest_seen

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiny_blp_ind"


def _model(name: str = "cpu-fused", features: torch.Tensor | None = None):
    cfg = dataclasses.replace(get_preset(name), dim=8)
    torch.manual_seed(0)
    x = torch.randn(NUM_ENTITIES, 7, generator=torch.Generator().manual_seed(0)) if features is None else features
    model = build_model(cfg, num_entities=NUM_ENTITIES, num_relations=NUM_RELATIONS, seen_entities=SEEN,
                        text_features=x)  # fmt: skip
    return model.eval(), x


def _unseen() -> torch.Tensor:
    mask = torch.ones(NUM_ENTITIES, dtype=torch.bool)
    mask[SEEN] = False
    return mask.nonzero().squeeze(1)


def test_new_entities_read_the_weighted_mean_of_their_neighbours_rows():
    model, x = _model()
    with torch.no_grad():
        before = model.entity_matrix().clone()
        triples = random_triples((40,), seed=3)
        forward_before = model(triples)
        assert apply_unseen_structure(model, "neighbours", SEEN) == "neighbours"
        after = model.entity_matrix()
        unseen = _unseen()
        ids, w = nearest_seen(x, SEEN, x[unseen])
        table = model.structural.weight
        mean = (w.unsqueeze(-1) * table[model.structural.struct_index[ids]]).sum(1)
        want = model._finish(model.fusion(mean, model.text(unseen)))
    torch.testing.assert_close(after[unseen], want)
    seen = SEEN.sort().values
    torch.testing.assert_close(after[seen], before[seen])  # seen entities keep their own rows
    assert not torch.allclose(after[unseen], before[unseen])
    torch.testing.assert_close(model(triples), forward_before)  # training scores keep the unseen row
    s = model.score_tails(unseen[:3], torch.tensor([0, 1, 0]), torch.arange(NUM_ENTITIES))  # rankings use it
    torch.testing.assert_close(s, model.interaction.score_tails(after[unseen[:3]], model.relation_embeddings[[0, 1, 0]],
                                                                after))  # fmt: skip


def test_a_new_entity_described_like_a_seen_one_gets_its_vector():
    x = torch.eye(NUM_ENTITIES, 16)  # orthogonal descriptions
    unseen, s = int(_unseen()[0]), int(SEEN[2])
    x[unseen] = x[s]  # cosine 1 to s, 0 to the others: the softmax at tau 0.05 puts weight 1 - 1e-8 on s
    model, _ = _model(features=x)
    apply_unseen_structure(model, "neighbours", SEEN)
    with torch.no_grad():
        ents = model.entity_matrix()
    torch.testing.assert_close(ents[unseen], ents[s], atol=1e-4, rtol=1e-4)


def test_nearest_seen_matches_brute_force():
    g = torch.Generator().manual_seed(2)
    feats, queries = torch.randn(30, 5, generator=g), torch.randn(4, 5, generator=g)
    seen = torch.tensor([1, 4, 7, 9, 12, 20, 25])
    ids, w = nearest_seen(feats, seen, queries, k=3, temperature=0.1, chunk=3)
    unit = torch.nn.functional.normalize(feats, dim=1)
    for i, q in enumerate(torch.nn.functional.normalize(queries, dim=1)):
        cos = {int(e): float(q @ unit[e]) for e in seen}
        top = sorted(cos, key=lambda e: -cos[e])[:3]
        assert ids[i].tolist() == top
        torch.testing.assert_close(w[i], torch.softmax(torch.tensor([cos[e] for e in top]) / 0.1, 0))


def test_row_and_models_that_cannot_keep_the_unseen_row():
    model, _ = _model()
    assert apply_unseen_structure(model, "row", SEEN) == "row" and not model.any_unseen_neighbours
    text_only, _ = _model("cpu-best")  # no structural table
    assert apply_unseen_structure(text_only, "neighbours", SEEN) == "row"
    with pytest.raises(ConfigError, match="unseen_structure"):
        ModelConfig(unseen_structure="nearest")
    with pytest.raises(ConfigError, match="unseen"):
        model.set_unseen_neighbours(SEEN[:1], SEEN[1:2].view(1, 1), torch.ones(1, 1))  # a seen entity


def _train(tmp_path, *extra):
    from textkg.cli.main import main

    out = tmp_path / "run"
    args = ["train", "--dataset", str(FIXTURE), "--split", "inductive", "--model", "fused-transe", "--dim", "8"]
    args += ["--epochs", "1", "--batch-size", "32", "--no-progress", "--out", str(out), *extra]
    assert main(args) == 0
    return out, json.loads((out / "metrics.json").read_text(), parse_constant=lambda c: pytest.fail(c))


def test_a_run_reports_it_and_predict_embeds_a_new_description_as_ranking_does(tmp_path):
    from textkg.predict import load_predictor
    from textkg.training.features import entity_texts

    run, metrics = _train(tmp_path)
    assert metrics["model"]["unseen_structure"] == "neighbours"
    assert metrics["model"]["unseen_structure_applied"] == "neighbours"
    predictor = load_predictor(run, device="cpu")
    kg, split = predictor.kg, predictor.prepared.split
    seen = set(split.train_entities.tolist())
    e = next(i for i in range(kg.num_entities) if i not in seen)
    with torch.no_grad():
        want = predictor.model.entity_matrix()[e]
    torch.testing.assert_close(predictor.embed([entity_texts(kg)[e]])[0], want, atol=1e-5, rtol=1e-5)
    config = tmp_path / "row.json"
    config.write_text(json.dumps({"model": {"unseen_structure": "row"}}))
    _, row = _train(tmp_path / "row", "--config", str(config))
    assert row["model"]["unseen_structure_applied"] == "row"
