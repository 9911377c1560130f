"""Loading BLP/KG-BERT directories (tiny fixtures)."""

import json

import pytest
import torch

from textkg.data import candidate_entities, kg_stats, load_dataset, make_split
from textkg.data.blp_format import relation_text_fallback
from textkg.errors import ConfigError


def _named(kg, name):
    return {(kg.entities[h], kg.relations[r], kg.entities[t]) for h, r, t in kg.triples[name].tolist()}


def _file_triples(path):
    return {tuple(line.split("\t")) for line in path.read_text(encoding="utf-8").splitlines() if line}


def test_loads_sets_with_one_global_id_map(tiny_blp):
    kg = load_dataset(tiny_blp)
    assert set(kg.triples) == {"train", "valid", "test"}
    assert [len(kg.triples[k]) for k in ("train", "valid", "test")] == [200, 20, 20]
    assert list(kg.entities) == sorted(kg.entities) and list(kg.relations) == sorted(kg.relations)
    for key, fname in (("train", "train.tsv"), ("valid", "dev.tsv"), ("test", "test.tsv")):
        assert _named(kg, key) == _file_triples(tiny_blp / fname)
    assert kg.entity_splits is None


def test_entities_come_from_triples_not_from_entity2text(tiny_blp):
    kg = load_dataset(tiny_blp)
    assert kg.num_entities == 40  # entity2text.txt has 41 rows; '/e/unused' is in no triple
    assert "/e/unused" not in kg.entities


def test_names_descriptions_and_relation_text(tiny_blp):
    kg = load_dataset(tiny_blp)
    i = kg.entities.index("/e/01")
    assert kg.entity_names[i] == kg.entity_descriptions[i] == "Zoë Quinn"
    assert kg.relation_texts[kg.relations.index("/geo/near_by")] == "geo near by (text)"
    long = load_dataset(tiny_blp, description="long")
    assert long.entity_names[i] == "Zoë Quinn"
    assert long.entity_descriptions[i].startswith("Zoë Quinn is entity number 1")


def test_description_file_by_name(tiny_blp):
    kg = load_dataset(tiny_blp, description_file="entity2textlong.txt")
    assert all(d.endswith("of the tiny fixture graph.") for d in kg.entity_descriptions)


def test_relation_text_falls_back_to_ids(tiny_blp_ind):
    kg = load_dataset(tiny_blp_ind)
    assert kg.relation_texts[kg.relations.index("/geo/part_of")] == "geo part of"
    assert relation_text_fallback("/people/person/place_of_birth") == "people person place of birth"


def test_inductive_files_autodetected(tiny_blp_ind):
    kg = load_dataset(tiny_blp_ind)
    assert {"ind-train", "ind-valid", "ind-test"} <= set(kg.triples)
    ents = kg.entity_splits
    train_ents = set(kg.triples["ind-train"][:, [0, 2]].flatten().tolist())
    assert set(ents["ind-train"].tolist()) == train_ents
    assert not set(ents["ind-valid"].tolist()) & train_ents
    assert not set(ents["ind-test"].tolist()) & (train_ents | set(ents["ind-valid"].tolist()))


def test_inductive_dir_with_entity_lists(tiny_blp, tiny_blp_ind):
    kg = load_dataset(tiny_blp, inductive_dir="ind_split")
    auto = load_dataset(tiny_blp_ind)
    assert kg.entities == auto.entities
    for key in ("ind-train", "ind-valid", "ind-test"):
        assert torch.equal(kg.triples[key], auto.triples[key])
        assert torch.equal(kg.entity_splits[key], auto.entity_splits[key])
    split = make_split(kg, "inductive")
    assert split.extra["protocol"] == "given"
    assert torch.equal(split.train, kg.triples["ind-train"])
    filt = {tuple(t) for t in split.filter_triples.tolist()}
    assert filt == {tuple(t) for k in ("ind-train", "ind-valid", "ind-test") for t in kg.triples[k].tolist()}


def test_given_transductive_split_and_candidates(tiny_blp):
    kg = load_dataset(tiny_blp)
    split = make_split(kg, "transductive", seed=123)
    assert split.seed is None and torch.equal(split.valid, kg.triples["valid"])
    assert torch.equal(candidate_entities(kg, split, "test", "all"), torch.arange(40))
    own = candidate_entities(kg, split, "valid", "split")
    assert torch.equal(own, torch.unique(kg.triples["valid"][:, [0, 2]]))
    blp = candidate_entities(kg, split, "valid", "blp")
    assert torch.equal(blp, torch.unique(torch.cat([split.train_entities, split.valid_entities])))


def test_blp_candidates_in_inductive_split(tiny_blp_ind):
    kg = load_dataset(tiny_blp_ind)
    split = make_split(kg, "inductive")
    valid = set(candidate_entities(kg, split, "valid", "blp").tolist())
    test = set(candidate_entities(kg, split, "test", "blp").tolist())
    assert valid == set(split.train_entities.tolist()) | set(split.valid_entities.tolist())
    assert test == valid | set(split.test_entities.tolist())
    assert not set(split.test_entities.tolist()) & valid


def test_unknown_options_are_config_errors(tiny_blp):
    kg = load_dataset(tiny_blp)
    split = make_split(kg, "transductive")
    with pytest.raises(ConfigError, match="transductive"):
        make_split(kg, "semi")
    with pytest.raises(ConfigError, match="blp"):
        candidate_entities(kg, split, "test", "nearby")
    with pytest.raises(ConfigError, match="long"):
        load_dataset(tiny_blp, description="medium")


def test_stats_are_json(tiny_blp_ind):
    kg = load_dataset(tiny_blp_ind)
    stats = kg_stats(kg, make_split(kg, "inductive"))
    json.dumps(stats)
    assert stats["num_entities"] == 40 and stats["triple_sets"]["train"] == 200
    assert stats["split"]["entities"]["valid"] == len(kg.entity_splits["ind-valid"])
    assert sum(v["ind-train"] for v in stats["relations"].values()) == stats["triple_sets"]["ind-train"]
    split_rel = stats["split"]["relations"]
    assert sum(v["train"] for v in split_rel.values()) == stats["split"]["triples"]["train"]
    assert stats["split"]["triples"]["train"] == stats["triple_sets"]["ind-train"]
