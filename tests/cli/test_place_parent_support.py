"""``textkg place`` applies the parent support validation chose (``placement_selection.combined.parent_support``,
:mod:`textkg.evaluation.placement.parent_support`), as a direct computation of the same scorer over the run's
first stage; a crafted block in ``metrics.json`` exits 2 with the file and field, writing nothing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from test_place import CATEGORIES, _place, toy_run  # noqa: F401  (the module fixture)

from textkg.cli.main import main
from textkg.evaluation.placement.parent_support import parent_support_scorer

SUPPORT = "test.placement_selection.combined.parent_support"


def test_the_run_reports_the_choice_and_the_combination_without_it(toy_run):  # noqa: F811
    test = json.loads((toy_run / "metrics.json").read_text())["test"]
    support = test["placement_selection"]["combined"]["parent_support"]
    assert support["weight"] >= 0 and set(support["tried_valid_mrr"]) >= {"w=0", "w=0.1"}
    assert test["placement_combined_without_parent_support"]["num_queries"] == test["placement"]["num_queries"]


def _with(run: Path, tmp_path: Path, **support) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    metrics = json.loads((copy / "metrics.json").read_text())
    selection = metrics["test"]["placement_selection"]
    selection["chosen"] = "combined"
    selection["combined"]["parent_support"] = {"weight": 0.3, "root": -2.0, **support}
    (copy / "metrics.json").write_text(json.dumps(metrics))
    return copy


def test_place_adds_the_parent_support_as_a_direct_computation(toy_run, tmp_path):  # noqa: F811
    from textkg.place import NewTerm, Placer

    run = _with(toy_run, tmp_path, weight=0.3, root=-2.0)
    placer = Placer(run)
    terms = [NewTerm("NEW:1", "dachshund", CATEGORIES["dog"][0]), NewTerm("NEW:2", "rose", CATEGORIES["flower"][0])]
    rows = placer.place(terms, top_k=4)
    plain = Placer(run)
    plain.selection["combined"]["parent_support"]["weight"] = 0.0
    texts = [t.definition for t in terms]
    stage = plain.term_scorer(texts, [t.name for t in terms], [False] * len(terms)).score
    kg = plain.predictor.kg
    direct = parent_support_scorer(stage, plain.parent_edges, 0.3, root=-2.0)
    scores = direct(torch.arange(kg.num_entities, kg.num_entities + 2), plain.candidates)
    top = scores.topk(4, dim=1)
    expect = [
        (t.id, kg.entities[int(plain.candidates[c])], float(v))
        for t, cols, vals in zip(terms, top.indices.tolist(), top.values.tolist(), strict=True)
        for c, v in zip(cols, vals, strict=True)
    ]
    assert [(r["term"], r["parent"]) for r in rows] == [(i, p) for i, p, _ in expect]
    without = [r["score"] for r in plain.place(terms, top_k=4)]
    assert max(abs(a - b) for a, b in zip(without, [r["score"] for r in rows], strict=True)) > 1e-3


@pytest.mark.parametrize(
    "support, field",
    [
        ({"weight": "NaN"}, "weight"),
        ({"weight": -0.1}, "weight"),
        ({"weight": 1e300}, "weight"),
        ({"weight": True}, "weight"),
        ({"root": 1e300}, "root"),
        ({"root": "__import__('os')"}, "root"),
        ({"root": None}, "root"),
        ({"weight": 0.1, "exec": "rm -rf /"}, "exec"),
    ],
)
def test_a_crafted_parent_support_block_exits_2(toy_run, tmp_path, capsys, support, field):  # noqa: F811
    run = _with(toy_run, tmp_path, **support)
    if support.get("root", 0) is None:
        edit = json.loads((run / "metrics.json").read_text())
        del edit["test"]["placement_selection"]["combined"]["parent_support"]["root"]
        (run / "metrics.json").write_text(json.dumps(edit))
    terms = tmp_path / "new.tsv"
    terms.write_text(f"NEW:1\tdachshund\t{CATEGORIES['dog'][0]}\n", encoding="utf-8")
    out = tmp_path / "placed.tsv"
    capsys.readouterr()
    code = main(["place", str(run), "--terms", str(terms), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err and "metrics.json" in err and f"{SUPPORT}.{field}" in err, err
    assert not out.exists()


def test_a_run_from_before_parent_support_places_as_before(toy_run, tmp_path):  # noqa: F811
    """metrics.json without the block (a run trained before it existed): the first stage alone."""
    run = tmp_path / "old"
    shutil.copytree(toy_run, run)
    metrics = json.loads((run / "metrics.json").read_text())
    metrics["test"]["placement_selection"]["combined"].pop("parent_support", None)
    (run / "metrics.json").write_text(json.dumps(metrics))
    code, rows = _place(run, tmp_path, "--terms", str(_one(tmp_path)), "--top-k", "1")
    assert code == 0 and rows[0]["parent"] == "dog"


def _one(tmp_path: Path) -> Path:
    path = tmp_path / "one.tsv"
    path.write_text(f"NEW:1\tdachshund\t{CATEGORIES['dog'][0]}\n", encoding="utf-8")
    return path
