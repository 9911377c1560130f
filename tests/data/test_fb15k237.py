"""The reference FB15k-237 copy in ../shared/data (skipped when absent)."""

import time

import pytest
import torch

from textkg.data import load_dataset, make_split

pytestmark = pytest.mark.shared_data


def test_transductive_counts(shared_fb15k237):
    start = time.process_time()  # CPU seconds: a loaded machine (or the other test worker) does not count
    kg = load_dataset(shared_fb15k237)
    assert time.process_time() - start < 10
    assert kg.num_entities == 14_541 and kg.num_relations == 237
    assert [len(kg.triples[k]) for k in ("train", "valid", "test")] == [272_115, 17_535, 20_466]
    assert kg.entity_splits is None


def test_inductive_rebuild_and_star_descriptions(shared_fb15k237):
    kg = load_dataset(
        shared_fb15k237, inductive_dir="ind_rebuilt_seed0", description_file="entity2text_firstsentence_StAR.txt"
    )
    assert kg.num_entities == 14_541
    assert {k: len(v) for k, v in kg.entity_splits.items()} == {
        "ind-train": 11_633,
        "ind-valid": 1_454,
        "ind-test": 1_454,
    }
    assert [len(kg.triples[k]) for k in ("ind-train", "ind-valid", "ind-test")] == [209_352, 49_046, 51_718]
    i = kg.entities.index("/m/016ywr")
    assert kg.entity_names[i] == "Jeremy Irons"
    assert kg.entity_descriptions[i] == "Jeremy Irons -- Jeremy John Irons is an English actor."
    split = make_split(kg, "inductive")
    assert torch.equal(split.train_entities, kg.entity_splits["ind-train"])
    assert len(split.filter_triples) == 209_352 + 49_046 + 51_718
