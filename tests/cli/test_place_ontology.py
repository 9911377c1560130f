"""``textkg train --dataset FILE.obo`` then ``textkg place RUN --obo NEW.obo``, with every output.

The fixture ontology (``tests/fixtures/ontology``) has organisms in six
categories; ``new_terms.obo`` adds a dog breed, a fish and a flower (the last
without a definition), an obsolete term and one term of the graph.
"""

from __future__ import annotations

import json
from pathlib import Path

import fastobo
import pytest
import torch

from textkg.cli.main import main
from textkg.place.outputs import ROBOT_COLUMNS

ONTOLOGY = Path(__file__).resolve().parents[1] / "fixtures" / "ontology"
TRAIN = ["--model", "fused-transe", "--encoder", "glove-bow", "--dim", "8", "--epochs", "1", "--batch-size", "8"]


def _train(tmp: Path, split: str, dataset: str) -> Path:
    out = tmp / f"run-{split}"
    assert (
        main(
            ["train", "--dataset", dataset, "--split", split, *TRAIN, "--seed", "0", "--no-progress", "--out", str(out)]
        )
        == 0
    )
    return out


@pytest.fixture(scope="module")
def inductive_run(tmp_path_factory) -> Path:
    return _train(tmp_path_factory.mktemp("ind"), "inductive", str(ONTOLOGY / "fixture.obo"))


@pytest.fixture(scope="module")
def transductive_run(tmp_path_factory) -> Path:
    return _train(tmp_path_factory.mktemp("trans"), "transductive", f"owl:{ONTOLOGY / 'fixture.owl'}")


def test_place_writes_tsv_robot_template_and_obo_fragment(inductive_run, tmp_path, capsys):
    metrics = json.loads((inductive_run / "metrics.json").read_text())
    assert metrics["test"]["placement"]["num_queries"] > 0
    out, robot, frag = tmp_path / "placed.tsv", tmp_path / "robot.tsv", tmp_path / "frag.obo"
    argv = ["place", str(inductive_run), "--obo", str(ONTOLOGY / "new_terms.obo"), "--out", str(out)]
    argv += ["--top-k", "2", "--robot-template", str(robot), "--obo-fragment", str(frag)]
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out)
    placed = {"FX:0009001", "FX:0009002", "FX:0009003"}
    assert summary["terms_read"] == 4  # the obsolete term is skipped
    rows = out.read_text(encoding="utf-8").splitlines()[1:]
    assert placed <= {r.split("\t")[0] for r in rows}
    lines = robot.read_text(encoding="utf-8").splitlines()
    assert lines[1].split("\t") == [code for _, code in ROBOT_COLUMNS]
    assert len(lines) == 2 + len({r.split("\t")[0] for r in rows})  # one row per term: its chosen parent
    first = dict(zip([c for c, _ in ROBOT_COLUMNS], lines[2].split("\t"), strict=True))
    assert first["evidence"].startswith("textkg place: rank 1, share")
    doc = fastobo.load(str(frag))  # the fragment is valid OBO
    terms = {str(f.id): f for f in doc}
    assert placed <= set(terms)
    is_a = [c for c in terms["FX:0009001"] if type(c).__name__ == "IsAClause"]
    assert len(is_a) == 1 and "nearest terms" in str(is_a[0].qualifiers)  # the chosen parent only


def test_score_threshold_keeps_confident_suggestions(inductive_run, tmp_path, capsys):
    out = tmp_path / "all.tsv"
    argv = ["place", str(inductive_run), "--obo", str(ONTOLOGY / "new_terms.obo"), "--top-k", "5"]
    assert main([*argv, "--out", str(out)]) == 0
    capsys.readouterr()
    shares = sorted(float(r.split("\t")[6]) for r in out.read_text(encoding="utf-8").splitlines()[1:])
    threshold = shares[len(shares) // 2]
    assert main([*argv, "--out", str(out), "--min-score", str(threshold)]) == 0
    summary = json.loads(capsys.readouterr().out)
    kept = [float(r.split("\t")[6]) for r in out.read_text(encoding="utf-8").splitlines()[1:]]
    assert kept and min(kept) >= threshold and len(kept) == summary["suggestions"] < len(shares)


def test_transductive_run_says_which_method(transductive_run, tmp_path, capsys):
    out = tmp_path / "placed.tsv"
    assert main(["place", str(transductive_run), "--obo", str(ONTOLOGY / "new_terms.obo"), "--out", str(out)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["method"] == "parent-of-nearest"
    assert "held out no terms" in summary["method_reading"]
    assert summary["terms_in_training_graph"] == 1 and summary["terms_placed"] == 3
    firsts = {r.split("\t")[0]: r.split("\t")[3] for r in out.read_text().splitlines()[1:] if r.split("\t")[2] == "1"}
    assert firsts["FX:0009001"] == "FX:0000100"  # dachshund under dog
    assert main(["place", str(transductive_run), "--obo", str(ONTOLOGY / "new_terms.obo"), "--out", str(out),
                 "--method", "combined"]) == 2  # fmt: skip
    assert "tuned no combination" in capsys.readouterr().err


@pytest.mark.parametrize("content", ["id\tname\tdefinition\nNEW:1\tfoo\tbar\n", "format-version: 1.4\n"])
def test_file_without_term_stanza_exits_2_and_writes_nothing(transductive_run, tmp_path, capsys, content):
    bad = tmp_path / "terms.obo"
    bad.write_text(content, encoding="utf-8")
    out, frag = tmp_path / "placed.tsv", tmp_path / "frag.obo"
    argv = ["place", str(transductive_run), "--obo", str(bad), "--out", str(out), "--obo-fragment", str(frag)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {bad}") and "Traceback" not in err
    assert not out.exists() and not frag.exists() and not list(tmp_path.glob(".*.tmp"))


def test_place_reads_the_graphs_synonyms_for_the_synonym_feature(inductive_run, monkeypatch):
    """The run's re-ranker lists ``synonym_containment`` (a default feature); ``place`` builds its scorer from the
    training ontology's own ``synonym:`` lines (issue 54), read again with the dataset, not from the run folder.
    (This small run's validation gives the re-ranker weight 0, so its scorer is built here as ``place`` builds it
    for a run that weighs it.)"""
    import textkg.evaluation.placement.text as text
    from textkg.place import Placer

    metrics = json.loads((inductive_run / "metrics.json").read_text())
    assert "synonym_containment" in metrics["test"]["placement_rerank"]["weights"]
    seen = []
    real = text.synonym_containment_scorer

    def spy(texts, names, synonyms, fit_on):
        seen.append({names[i]: tuple(s) for i, s in enumerate(synonyms) if s})
        return real(texts, names, synonyms, fit_on)

    monkeypatch.setattr(text, "synonym_containment_scorer", spy)
    placer = Placer(inductive_run)
    kg = placer.predictor.kg
    n = kg.num_entities
    features = placer._description_features([])[0]
    scorer = placer._rerank(features, list(kg.entity_descriptions), list(kg.entity_names))
    assert scorer(torch.arange(2), placer.candidates).shape == (2, len(placer.candidates))
    assert seen == [{kg.entity_names[i]: s for i, s in enumerate(kg.entity_synonyms or ()) if s}]
    assert {"foliage", "frond"} <= {w for syns in seen[0].values() for w in syns}
    assert n == len(features)
