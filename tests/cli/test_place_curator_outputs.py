"""``textkg place`` outputs a curator can use as they are (issue 38): files that follow the umask, a
ROBOT template that asserts only the chosen parent (checked against ROBOT's template grammar by a
small parser below), an OBO fragment that keeps synonym scopes, xrefs and quoting (round-tripped
through ``fastobo`` and textkg's own reader), ``--min-score`` on a documented [0, 1] scale, the
evidence once per term and a summary over placeable terms only."""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

import fastobo
import pytest

from textkg.cli.main import main
from textkg.data.ontology import read_obo
from textkg.place import COLUMNS
from textkg.place.outputs import ROBOT_SPLIT

ONTOLOGY = Path(__file__).resolve().parents[1] / "fixtures" / "ontology"
TRAIN = ["--model", "fused-transe", "--encoder", "glove-bow", "--dim", "8", "--epochs", "1", "--batch-size", "8"]
UMASK = 0o022  # files 0644, folders 0755

NEW_TERMS = r"""format-version: 1.4
ontology: fx

[Term]
id: FX:0009001
name: dachshund
def: "A dachshund: a \"sausage\" dog breed\\hound, a loyal dog that barks." [PMID:123, ORCID:0000-0001]
synonym: "sausage dog" EXACT [WIKI:Dachshund]
synonym: "badger dog" NARROW []
synonym: "wiener dog" RELATED []
xref: UMLS:C0000001
is_a: FX:0000100 ! dog

[Term]
id: FX:0009002
name: goldfish\! \{pet\}
def: "A goldfish: a fish with fins and gills that swims in water." []
is_a: FX:0000103 ! fish

[Term]
id: FX:0009005
name: miniature dachshund
def: "A small dachshund: a dog breed." []
is_a: FX:0009001 ! dachshund (itself new: not placeable)
"""


@pytest.fixture(scope="module")
def placed(tmp_path_factory) -> dict:
    """An inductive run trained and placed under umask 022, with every output."""
    tmp = tmp_path_factory.mktemp("curator")
    old = os.umask(UMASK)
    try:
        run = tmp / "run"
        argv = ["train", "--dataset", str(ONTOLOGY / "fixture.obo"), "--split", "inductive", *TRAIN]
        assert main([*argv, "--seed", "0", "--no-progress", "--out", str(run)]) == 0
        new = tmp / "new.obo"
        new.write_text(NEW_TERMS, encoding="utf-8")
        out = {"run": run, "tsv": tmp / "placed.tsv", "robot": tmp / "robot.tsv", "frag": tmp / "frag.obo"}
        argv = ["place", str(run), "--obo", str(new), "--out", str(out["tsv"]), "--top-k", "3"]
        argv += ["--robot-template", str(out["robot"]), "--obo-fragment", str(out["frag"])]
        code = main(argv)
    finally:
        os.umask(old)
    assert code == 0
    lines = out["tsv"].read_text(encoding="utf-8").splitlines()
    out["rows"] = [dict(zip(COLUMNS, line.split("\t"), strict=True)) for line in lines[1:]]
    return out


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_outputs_follow_the_umask_and_the_checkpoint_stays_private(placed):
    run = placed["run"]
    for name in ("config.json", "metrics.json", "graph.json", "best_model.pt"):
        assert _mode(run / name) == 0o644, name
    assert _mode(run / "checkpoint.pt") == 0o600  # every random generator's state, the noise generator's included
    for key in ("tsv", "robot", "frag"):
        assert _mode(placed[key]) == 0o644, key


# ---- ROBOT's template grammar (https://robot.obolibrary.org/template): row 1 headers, row 2 template strings
_CURIE = r"[A-Za-z][\w.-]*:[\w.-]+"
_SPLIT = rf"(?: SPLIT={re.escape(ROBOT_SPLIT)})?"
_TEMPLATE = {
    "id": r"ID",
    "label": r"LABEL",
    "annotation": rf"A {_CURIE}{_SPLIT}",  # string annotation
    "axiom": r"(?:SC|EC|DC) %" + _SPLIT,  # class expressions (% the cell's value)
    "axiom-annotation": rf">A {_CURIE}{_SPLIT}",  # annotates the annotation or axiom to its left
    "ignored": r"",
}


def _parse_robot(text: str) -> tuple[list[str], list[dict]]:
    """``(kinds of the columns, one dict per class: {"id", "label", "parents", "annotations"})``; asserts
    the grammar as it goes."""
    lines = text.split("\n")
    assert lines[-1] == "" and "\r" not in text
    header, template, *data = (line.split("\t") for line in lines[:-1])
    assert len(header) == len(template)
    kinds = []
    for code in template:
        kind = next((k for k, rx in _TEMPLATE.items() if re.fullmatch(rx, code)), None)
        assert kind is not None, f"not a ROBOT template string: {code!r}"
        if kind == "axiom-annotation":  # must follow an annotation, an axiom or another axiom annotation
            assert kinds and kinds[-1] in ("annotation", "axiom", "axiom-annotation"), code
        kinds.append(kind)
    assert kinds.count("id") == 1
    classes = []
    for row in data:
        assert len(row) == len(template)
        cls: dict = {"parents": [], "annotations": []}
        for kind, code, value in zip(kinds, template, row, strict=True):
            values = [v for v in (value.split(ROBOT_SPLIT) if "SPLIT=" in code else [value]) if v]
            if kind == "id":
                assert re.fullmatch(_CURIE, value)
                cls["id"] = value
            elif kind == "label":
                cls["label"] = value
            elif kind == "axiom":
                assert all(re.fullmatch(_CURIE, v) for v in values)
                cls["parents"] += values
            elif kind in ("annotation", "axiom-annotation"):
                cls["annotations"] += values
        classes.append(cls)
    return kinds, classes


def test_robot_template_follows_the_grammar_and_asserts_only_the_chosen_parent(placed):
    _, classes = _parse_robot(placed["robot"].read_text(encoding="utf-8"))
    rows = placed["rows"]
    ids = [c["id"] for c in classes]
    assert len(ids) == len(set(ids)) == len({r["term"] for r in rows}) == 3
    for cls in classes:
        mine = [r for r in rows if r["term"] == cls["id"]]
        assert cls["parents"] == [mine[0]["parent"]]  # one asserted parent: the first suggestion
        others = [a for a in cls["annotations"] if a.startswith("textkg place: other candidate parent")]
        assert [a.split("): ")[1].split(" ")[0] for a in others] == [r["parent"] for r in mine[1:]]
        assert sum("nearest terms" in a for a in cls["annotations"]) == 1  # the evidence, once
    dachshund = next(c for c in classes if c["id"] == "FX:0009001")
    assert {"PMID:123", "ORCID:0000-0001"} <= set(dachshund["annotations"])  # the definition's xrefs


def test_obo_fragment_round_trips_through_fastobo_and_textkg(placed):
    text = placed["frag"].read_text(encoding="utf-8")
    doc = fastobo.loads(text)
    remark = next(c for c in doc.header if type(c).__name__ == "RemarkClause")
    assert remark.remark.startswith("textkg place suggestions from ")  # no literal quotes
    firsts = {r["term"]: r["parent"] for r in placed["rows"] if r["rank"] == "1"}
    for frame in doc:
        is_a = [str(c.term) for c in frame if type(c).__name__ == "IsAClause"]
        assert is_a == [firsts[str(frame.id)]]  # the chosen parent only
    terms = read_obo(placed["frag"]).terms
    dachshund = terms["FX:0009001"]
    assert dachshund.definition == 'A dachshund: a "sausage" dog breed\\hound, a loyal dog that barks.'
    assert dachshund.definition_xrefs == ["PMID:123", "ORCID:0000-0001"]
    assert list(zip(dachshund.synonyms, dachshund.synonym_scopes, strict=True)) == [
        ("sausage dog", "EXACT"),
        ("badger dog", "NARROW"),
        ("wiener dog", "RELATED"),
    ]
    assert dachshund.synonym_xrefs[0] == ["WIKI:Dachshund"] and dachshund.xrefs == ["UMLS:C0000001"]
    assert terms["FX:0009002"].name == "goldfish! {pet}"  # unquoted value, escaped
    again = read_obo(placed["frag"])  # textkg's reader gives the same fragment back
    assert again.terms["FX:0009001"].parents == [firsts["FX:0009001"]]


def test_evidence_once_per_term_and_shares_on_a_unit_scale(placed):
    rows = placed["rows"]
    for row in rows:
        assert bool(row["nearest_terms"]) == (row["rank"] == "1")
        assert 0.0 <= float(row["share"]) <= 1.0
    for term in {r["term"] for r in rows}:
        shares = [float(r["share"]) for r in rows if r["term"] == term]
        assert shares == sorted(shares, reverse=True) and sum(shares) <= 1.0 + 1e-6


@pytest.mark.parametrize("bad", ["1.5", "-0.1", "13.27"])
def test_min_score_outside_the_unit_scale_exits_2(placed, tmp_path, capsys, bad):
    out = tmp_path / "x.tsv"
    argv = ["place", str(placed["run"]), "--obo", str(ONTOLOGY / "new_terms.obo"), "--out", str(out)]
    assert main([*argv, "--min-score", bad]) == 2
    err = capsys.readouterr().err
    assert ("min_score" in err or "--min-score" in err) and "[0, 1]" in err and not out.exists()


def test_summary_counts_only_placeable_terms(placed, tmp_path, capsys):
    new = tmp_path / "new.obo"
    new.write_text(NEW_TERMS, encoding="utf-8")
    argv = ["place", str(placed["run"]), "--obo", str(new), "--out", str(tmp_path / "p.tsv"), "--top-k", "3"]
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["terms_placed"] == 3 and summary["placeable_terms"] == 2  # FX:0009005's parent is new
    firsts = {r["term"]: r for r in placed["rows"] if r["rank"] == "1"}
    hits = [firsts[t]["listed"] == "yes" for t in ("FX:0009001", "FX:0009002")]
    assert summary["first_suggestion_is_a_listed_parent"] == sum(hits) / 2
