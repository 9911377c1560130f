"""PyKEEN's triples (a duck-typed TriplesFactory or Dataset, or its files on disk) as a textkg graph."""

from __future__ import annotations

import json

import pytest
import torch

from textkg.cli.main import main
from textkg.data import load_dataset, make_split
from textkg.data.pykeen import from_triples_factory
from textkg.errors import ConfigError, DataError

ROWS = [("usa", "trades_with", "uk"), ("uk", "trades_with", "france"), ("france", "borders", "spain")]


class Factory:
    """What textkg reads of a PyKEEN TriplesFactory: ids in PyKEEN's own (here: reversed) order."""

    def __init__(self, rows):
        labels = sorted({x for h, _, t in rows for x in (h, t)}, reverse=True)
        self.entity_to_id = {label: i for i, label in enumerate(labels)}
        self.relation_to_id = {r: i for i, r in enumerate(sorted({r for _, r, _ in rows}, reverse=True))}
        self.mapped_triples = torch.tensor(
            [[self.entity_to_id[h], self.relation_to_id[r], self.entity_to_id[t]] for h, r, t in rows]
        )


class Dataset:
    def __init__(self):
        self.training, self.validation, self.testing = Factory(ROWS[:2]), Factory(ROWS[2:]), Factory(ROWS[2:])


def _labels(kg, name="all"):
    return {(kg.entities[h], kg.relations[r], kg.entities[t]) for h, r, t in kg.triples[name].tolist()}


def test_triples_factory_with_descriptions():
    texts = {e: f"{e}: a country" for e in ("usa", "uk", "france", "spain")}
    kg = from_triples_factory(Factory(ROWS), descriptions=texts)
    assert _labels(kg) == set(ROWS)
    assert kg.entities == ("france", "spain", "uk", "usa")  # textkg's own sorted ids
    assert kg.entity_descriptions[0] == "france: a country"
    assert kg.relation_texts == ("borders", "trades with")
    with pytest.raises(DataError, match="no description"):
        from_triples_factory(Factory(ROWS), descriptions={"usa": "x"})


def test_dataset_gives_its_split():
    kg = from_triples_factory(Dataset())
    assert set(kg.triples) == {"train", "valid", "test"} and _labels(kg, "valid") == {ROWS[2]}
    assert kg.info["descriptions"] == "labels" and kg.entity_descriptions == kg.entities
    split = make_split(kg, "transductive")
    assert len(split.train) == 2 and len(split.test) == 1


def test_pykeen_files_on_disk(tmp_path, capsys):
    folder = tmp_path / "nations"
    folder.mkdir()
    for name, rows in (("train.txt", ROWS[:2]), ("valid.txt", ROWS[2:]), ("test.txt", ROWS[2:])):
        (folder / name).write_text("".join("\t".join(r) + "\n" for r in rows), encoding="utf-8")
    side = tmp_path / "texts.tsv"
    side.write_text("".join(f"{e}\t{e} is a country\n" for e in ("usa", "uk", "france", "spain")), encoding="utf-8")
    kg = load_dataset(f"pykeen:{folder}#descriptions={side}")
    assert _labels(kg, "train") == set(ROWS[:2]) and kg.entity_descriptions[-1] == "usa is a country"
    assert main(["data", "stats", f"pykeen:{folder}"]) == 0
    assert json.loads(capsys.readouterr().out)["triple_sets"] == {"train": 2, "valid": 1, "test": 1}
    single = load_dataset(f"pykeen:{folder / 'train.txt'}")
    assert set(single.triples) == {"all"}
    with pytest.raises(DataError, match="unknown option"):
        load_dataset(f"pykeen:{folder}#types=a=b")
    (folder / "test.txt").unlink()
    with pytest.raises(DataError, match="test.txt"):
        load_dataset(f"pykeen:{folder}")


def test_registered_factory_loads_by_name_and_never_stale(tmp_path, monkeypatch):
    from textkg.data import registry
    from textkg.data.registry import register_triples_factory

    monkeypatch.setattr(registry, "_REGISTRY", registry._REGISTRY.copy())  # registered for this test only

    first = register_triples_factory("pykeen-test", Factory(ROWS))
    assert _labels(load_dataset("pykeen-test", cache_dir=tmp_path)) == _labels(first)
    with pytest.raises(ConfigError, match="already registered"):  # the one duplicate rule of every registry
        register_triples_factory("pykeen-test", Factory(ROWS[:2]))
    register_triples_factory("pykeen-test", Factory(ROWS[:2]), replace=True)  # other triples, same name
    assert _labels(load_dataset("pykeen-test", cache_dir=tmp_path)) == set(ROWS[:2])
