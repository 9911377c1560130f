"""``private_metrics.json``'s ``confidential_test``: the owner's test on confidential statements at new entities.

Issue 27's health setting: with the annotations confidential, no annotation may be a public test
statement, yet the owner must see whether DP on them beats public-only on the annotations themselves.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from textkg.cli.config_loading import build_run_config
from textkg.cli.main import build_parser
from textkg.pipeline.job import prepare, run
from textkg.training.private_split import owner_test_statements

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiny_blp"
FLAGS = ["--confidential-relations", "/r/likes", "--split", "inductive"]


def _config(data: Path, mode: str, *extra: str):
    args = build_parser().parse_args(
        ["train", "--dataset", str(data), "--description", "short", "--model", "transe", "--dim", "8"]
        + ["--epochs", "1", "--batch-size", "32", "--seed", "0", "--privacy", mode, *FLAGS, *extra]
    )
    return build_run_config(args)


@pytest.fixture
def data(tmp_path) -> Path:
    out = tmp_path / "d"
    shutil.copytree(FIXTURE, out)  # no ind-*.tsv: the inductive split is generated
    return out


@pytest.mark.parametrize("mode", ["public-only", "confidential"])
def test_the_owner_test_holds_the_confidential_statements_at_test_entities(tmp_path, data, mode):
    extra = ["--noise-multiplier", "1.0", "--private-size", "256"] if mode == "confidential" else []
    cfg = _config(data, mode, *extra)
    prep = prepare(cfg)
    held = owner_test_statements(prep.kg, prep.split, cfg)
    likes = prep.kg.relations.index("/r/likes")
    is_test = torch.zeros(prep.kg.num_entities, dtype=torch.bool)
    is_test[prep.split.test_entities] = True
    assert held is not None and len(held) > 0
    assert bool((held[:, 1] == likes).all())
    assert bool((is_test[held[:, 0]] | is_test[held[:, 2]]).all())
    # none of them is a training, validation or public test statement
    public = {tuple(t) for t in torch.cat([prep.split.train, prep.split.valid, prep.split.test]).tolist()}
    assert not public & {tuple(t) for t in held.tolist()}

    run(cfg, tmp_path / "run", progress=False)
    owner = json.loads((tmp_path / "run" / "private_metrics.json").read_text())
    assert "NOT covered by the privacy guarantee" in owner["note"]
    block = owner["confidential_test"]
    assert 0 < block["mrr"] <= 1 and "relation:/r/likes" in block["subsets"]
    popular = owner["confidential_test_baselines"]["relation-popularity"]
    assert popular["num_triples"] == block["num_triples"] == len(held)
    released = (tmp_path / "run" / "metrics.json").read_text()
    assert "confidential_test" not in released


def test_no_owner_test_under_full_privacy(data):
    """``full``: every statement is private and the split a public draw; nothing is set aside."""
    cfg = _config(data, "full", "--noise-multiplier", "1", "--private-size", "256")
    prep = prepare(cfg)
    assert owner_test_statements(prep.kg, prep.split, cfg) is None


def test_relation_popularity_ranks_by_the_slot_counts():
    """Oracle: counts by hand on a 3-entity graph."""
    from textkg.evaluation.popularity import RelationPopularity

    triples = torch.tensor([[0, 0, 1], [2, 0, 1], [2, 0, 0], [1, 1, 2]])
    scorer = RelationPopularity(triples, num_entities=3, num_relations=2)
    cands = torch.arange(3)
    assert scorer.score_heads(torch.tensor([0]), torch.tensor([1]), cands).tolist() == [[1.0, 0.0, 2.0]]
    assert scorer.score_tails(torch.tensor([0, 1]), torch.tensor([0, 1]), cands).tolist() == [
        [1.0, 2.0, 0.0],
        [0.0, 0.0, 1.0],
    ]
