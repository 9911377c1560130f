"""``textkg export RUN --out DIR``: vectors and vocabulary that numpy and PyKEEN's file layout read."""

from __future__ import annotations

import csv
import gzip
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from textkg.cli.main import main

ONTOLOGY = Path(__file__).resolve().parents[1] / "fixtures" / "ontology"


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("export") / "run"
    argv = ["train", "--dataset", str(ONTOLOGY / "fixture.ttl"), "--split", "transductive", "--model", "fused-transe"]
    argv += ["--encoder", "glove-bow", "--dim", "8", "--epochs", "1", "--batch-size", "16", "--no-progress"]
    assert main([*argv, "--out", str(out)]) == 0
    return out


def _mapping(path: Path) -> dict[str, int]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        rows = list(csv.reader(fh, delimiter="\t"))
    assert rows[0] == ["id", "label"]
    return {label: int(i) for i, label in rows[1:]}


def test_export_matches_the_model(run, tmp_path, capsys):
    from textkg.predict import Predictor

    out = tmp_path / "vectors"
    assert main(["export", str(run), "--out", str(out), "--device", "cpu"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["entity_embeddings"]["shape"] == [43, 8]
    predictor = Predictor(run, device="cpu")
    entities = _mapping(out / "entity_to_id.tsv.gz")
    relations = _mapping(out / "relation_to_id.tsv.gz")
    assert entities == {e: i for i, e in enumerate(predictor.kg.entities)}
    assert relations == {"is_a": 0, "BFO:0000050": 1}
    vectors = np.load(out / "entity_embeddings.npy")
    with torch.no_grad():
        assert np.allclose(vectors, predictor.model.entity_matrix().numpy(), atol=1e-6)
        rel = np.load(out / "relation_embeddings.npy")
        assert np.allclose(rel, predictor.model.relation_matrix().numpy())
    assert (out / "entities.tsv").read_text(encoding="utf-8").splitlines()[1].split("\t")[:2] == ["0", "FX:0000001"]
    # a second export into the same (now full) folder is refused; nothing is changed
    assert main(["export", str(run), "--out", str(out)]) == 2
    assert "not an empty folder" in capsys.readouterr().err
