"""Ontology and RDF files as datasets: one toy ontology in OBO, OWL (RDF/XML) and Turtle gives one graph."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from textkg.cli.main import main
from textkg.data import load_dataset
from textkg.errors import ConfigError, DataError

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "ontology" / "fixture"
FORMATS = (".obo", ".owl", ".ttl")


def _graph(kg) -> dict:
    return {
        "entities": kg.entities,
        "names": kg.entity_names,
        "descriptions": kg.entity_descriptions,
        "relations": kg.relations,
        "relation_texts": kg.relation_texts,
        "triples": kg.triples["all"].tolist(),
    }


def test_three_formats_give_the_same_graph():
    graphs = {suffix: _graph(load_dataset(f"{FIXTURE}{suffix}")) for suffix in FORMATS}
    assert graphs[".owl"] == graphs[".obo"]
    assert graphs[".ttl"] == graphs[".obo"]
    kg = load_dataset(f"{FIXTURE}.obo")
    assert kg.num_entities == 43  # 45 terms less the obsolete one; BFO:0000001 is not defined
    assert kg.relations == ("is_a", "BFO:0000050")
    assert kg.relation_texts == ("is a", "part of")
    names = dict(zip(kg.entities, kg.entity_descriptions, strict=True))
    assert names["FX:0000100"] == "dog: A domestic dog breed, a loyal dog that barks."
    assert names["FX:0000204"] == "leaf. Synonyms: foliage; frond."  # never its parents' names (issue 54)
    statements = {(kg.entities[h], kg.relations[r], kg.entities[t]) for h, r, t in kg.triples["all"].tolist()}
    assert ("FX:0000201", "BFO:0000050", "FX:0000102") in statements  # wing part_of bird
    assert ("FX:0001000", "is_a", "FX:0000100") in statements  # beagle is_a dog


@pytest.mark.parametrize("spec", ["obo:{f}.obo", "owl:{f}.owl", "rdf:{f}.ttl", "rdf:{f}.owl"])
def test_format_prefixes(spec):
    kg = load_dataset(spec.format(f=FIXTURE))
    assert kg.num_entities == 43


def test_obsolete_terms_are_skipped_and_reported():
    kg = load_dataset(f"{FIXTURE}.obo")
    assert "FX:0000099" not in kg.entities
    assert kg.info["obsolete_skipped"] == 1 and kg.info["obsolete_terms"] == ["FX:0000099"]
    assert kg.info["dropped_statements"] == {
        "is_a to a term not defined (or unlabelled) in the file": 1,
        "is_a to an obsolete term": 1,
    }


def test_types_from_root_terms():
    kg = load_dataset(f"{FIXTURE}.ttl#types=organism=FX:0000001,anatomy=FX:0000002")
    types = dict(zip(kg.entities, kg.entity_types, strict=True))
    assert types["FX:0001000"] == "organism" and types["FX:0000204"] == "anatomy"
    assert kg.info["holdout_types"] == ["organism", "anatomy"]
    with pytest.raises(DataError, match="FX:9"):
        load_dataset(f"{FIXTURE}.obo#types=x=FX:9")
    with pytest.raises(DataError, match="TYPE=ROOT"):
        load_dataset(f"{FIXTURE}.obo#types=organism")


def test_plain_rdf_triples(tmp_path):
    path = tmp_path / "g.nt"
    path.write_text(
        "<http://ex.org/alice> <http://ex.org/knows> <http://ex.org/bob> .\n"
        '<http://ex.org/alice> <http://www.w3.org/2000/01/rdf-schema#label> "Alice" .\n'
        '<http://ex.org/bob> <http://www.w3.org/2000/01/rdf-schema#comment> "A person." .\n',
        encoding="utf-8",
    )
    kg = load_dataset(str(path))
    assert kg.entity_names == ("Alice", "bob")
    assert kg.entity_descriptions == ("Alice", "bob: A person.")
    assert kg.relations == ("http://ex.org/knows",) and kg.relation_texts == ("knows",)
    assert kg.triples["all"].tolist() == [[0, 0, 1]]


def test_data_stats_reads_every_format(capsys):
    for suffix in FORMATS:
        assert main(["data", "stats", f"{FIXTURE}{suffix}"]) == 0
        stats = json.loads(capsys.readouterr().out)
        assert stats["num_entities"] == 43 and stats["triple_sets"] == {"all": 46}
        assert stats["read"]["obsolete_skipped"] == 1


def test_options_a_file_does_not_take():
    with pytest.raises(ConfigError, match="long"):
        load_dataset(f"{FIXTURE}.obo", description="long")


OBO_HEAD = "format-version: 1.4\n\n"
BAD = {
    "malformed OBO stanza": ("x.obo", OBO_HEAD + "[Term]\nid: X:1\nname: a\nis_a X:2\n", 6, "malformed OBO"),
    "OBO without [Term]": ("x.obo", "id\tname\n", 1, "malformed OBO"),
    "OBO header only": ("x.obo", OBO_HEAD, None, r"no \[Term\] stanza"),
    "OBO id twice": ("x.obo", OBO_HEAD + "[Term]\nid: X:1\nname: a\n\n[Term]\nid: X:1\nname: b\n", 8, "twice"),
    "Turtle line": ("x.ttl", "@prefix ex: <http://ex.org/> .\nex:a ex:b ex:c .\nex:a ex:b ex:c ex:d .\n", 3, "Turtle"),
    "N-Triples line": ("x.nt", "<http://a> <http://b> <http://c> .\n\n<http://a> <http://b> .\n", 3, "N-Triples"),
    "RDF/XML": ("x.owl", '<?xml version="1.0"?>\n<rdf:RDF\n</rdf:RDF>\n', 3, "RDF/XML"),
    "OWL without labels": (
        "x.owl",
        '<?xml version="1.0"?>\n<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" '
        'xmlns:owl="http://www.w3.org/2002/07/owl#">\n<owl:Class rdf:about="http://x.org/A"/>\n</rdf:RDF>\n',
        None,
        "no labelled",
    ),
    "not UTF-8": ("x.obo", b"format-version: 1.4\n\n[Term]\nid: X:1\nname: caf\xe9\n", 5, "UTF-8"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_files_exit_2_naming_file_and_line(tmp_path, capsys, case):
    name, content, line, problem = BAD[case]
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(DataError, match=problem) as info:
        load_dataset(str(path))
    assert info.value.file == str(path) and info.value.line == line
    assert main(["data", "stats", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {path}" + (f":{line}" if line else ""))


def test_graph_is_deterministic():
    a, b = load_dataset(f"{FIXTURE}.ttl"), load_dataset(f"{FIXTURE}.ttl")
    assert a.entity_descriptions == b.entity_descriptions
    assert torch.equal(a.triples["all"], b.triples["all"])


def test_hp_obo_as_a_file_matches_the_hpo_terms(hpo_small):
    """``--dataset hp.obo`` gives hpo's phenotype terms, texts and is_a statements (annotations left out)."""
    from textkg.data import hpo

    kg = load_dataset(str(hpo.source_paths()["hp.obo"]))
    assert kg.relations == ("is_a",) and kg.info["obsolete_skipped"] > 0
    text = dict(zip(kg.entities, kg.entity_descriptions, strict=True))
    terms = [i for i, t in enumerate(hpo_small.entity_types) if t == "phenotype"]
    assert all(text[hpo_small.entities[i]] == hpo_small.entity_descriptions[i] for i in terms)
    keep = {hpo_small.entities[i] for i in terms}

    def is_a(g, rel):
        return {(g.entities[h], g.entities[t]) for h, r, t in g.triples["all"].tolist() if r == rel}

    small = is_a(hpo_small, hpo_small.relations.index("is_a"))
    assert small == {(h, t) for h, t in is_a(kg, 0) if h in keep and t in keep}


def test_train_on_a_bad_file_exits_2_and_writes_no_run(tmp_path, capsys):
    bad = tmp_path / "bad.ttl"
    bad.write_text(BAD["Turtle line"][1], encoding="utf-8")
    out = tmp_path / "run"
    assert main(["train", "--dataset", str(bad), "--epochs", "1", "--no-progress", "--out", str(out)]) == 2
    assert capsys.readouterr().err.startswith(f"error: {bad}:3: unparsable Turtle")
    assert not out.exists()


def test_a_file_graph_is_cached_until_the_file_changes(tmp_path):
    path = tmp_path / "fx.obo"
    path.write_text(Path(f"{FIXTURE}.obo").read_text(encoding="utf-8"), encoding="utf-8")
    cache_dir = tmp_path / "cache"
    first = load_dataset(str(path), cache_dir=cache_dir)
    (cached,) = (cache_dir / "datasets").glob("file-fx.obo-*.pt")
    again = load_dataset(str(path), cache_dir=cache_dir)
    assert _graph(again) == _graph(first) and dict(again.info) == dict(first.info)
    path.write_text(path.read_text(encoding="utf-8") + "\n[Term]\nid: FX:0000300\nname: extra\n", encoding="utf-8")
    changed = load_dataset(str(path), cache_dir=cache_dir)
    assert changed.num_entities == first.num_entities + 1
    assert len(list((cache_dir / "datasets").glob("file-fx.obo-*.pt"))) == 2 and cached.is_file()


def test_unknown_dataset_message_lists_prefixes_and_suffixes():
    with pytest.raises(ConfigError) as exc:
        load_dataset("terms.xyz")
    message = str(exc.value)
    assert "obo:PATH" in message and ".obo" in message and ".ttl" in message
