"""Issue 51, item 7: the choices a run's ``metrics.json`` makes, checked by one schema before a command acts.

At 1a0007a an unknown ``placement_selection.chosen``, an extra key in ``combined.vote`` or a string
weight gave ``textkg place`` a traceback, and ``k_shot_selection.link_vote.weight: 1e308`` (or
``inf``) was taken, so ``textkg predict`` printed null scores. Each crafted ``test`` block here makes
``predict`` and ``place`` exit 2 naming metrics.json and the JSON path of the field, before the
model is loaded; an honest block passes unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from security_helpers import copy_run

from textkg.cli.main import main

SELECTION = {
    "chosen": "combined",
    "criterion": "validation placement MRR",
    "valid": {"model": {"mrr": 0.2}, "combined": {"mrr": 0.5}},
    "combined": {
        "weights": {"model": 1.0, "description": 0.5, "vote": 2.0},
        "vote": {"k": 20, "temperature": 0.1, "ancestor_decay": 0.0, "per_parent": False},
        "valid_mrr": 0.5,
        "tried_valid_mrr": {"combined[model=1]": 0.2},
    },
}
K_SHOT = {"chosen": "mix:1", "made_by": "textkg train", "link_vote": {"weight": 0.5, "voters": 10}}


def _with(block: dict, path: str, value) -> dict:
    """``block`` (deep-copied) with the dotted ``path`` set to ``value``."""
    out = json.loads(json.dumps(block))
    *parents, last = path.split(".")
    node = out
    for key in parents:
        node = node[key]
    node[last] = value
    return out


CRAFTED = {
    "unknown-chosen": ({"placement_selection": _with(SELECTION, "chosen", "os.system")}, "placement_selection.chosen"),
    "extra-vote-key": (
        {"placement_selection": _with(SELECTION, "combined.vote.exec", "rm -rf")},
        "placement_selection.combined.vote.exec",
    ),
    "string-weight": (
        {"placement_selection": _with(SELECTION, "combined.weights.model", "1")},
        "placement_selection.combined.weights.model",
    ),
    "unknown-component": (
        {"placement_selection": _with(SELECTION, "combined.weights.shell", 1.0)},
        "placement_selection.combined.weights.shell",
    ),
    "names-only-chosen": (
        {"placement_names_only": {"placement_selection": _with(SELECTION, "chosen", 7)}},
        "placement_names_only.placement_selection.chosen",
    ),
    "link-vote-1e308": ({"k_shot_selection": _with(K_SHOT, "link_vote.weight", 1e308)}, "link_vote.weight"),
    "k-shot-prior-1e308": ({"k_shot_selection": _with(K_SHOT, "chosen", "mix:1e308")}, "k_shot_selection.chosen"),
    "neighbour-vote-huge": ({"neighbour_vote": {"weight": 1e300, "spread_weight": 0}}, "neighbour_vote.weight"),
}


def _craft(tiny_run: Path, tmp_path: Path, test: dict, *, raw: str | None = None) -> Path:
    run = copy_run(tiny_run, tmp_path / "crafted")  # tmp_path: a folder the copy creates
    metrics = json.loads((run / "metrics.json").read_text())
    metrics["test"] = {**(metrics.get("test") or {}), **test}
    (run / "metrics.json").write_text(raw if raw is not None else json.dumps(metrics))
    return run


def _commands(run: Path, tmp: Path) -> dict[str, list[str]]:
    terms = tmp / "terms.tsv"
    terms.write_text("NEW:1\tnew term\ta new phenotype\n", encoding="utf-8")
    return {
        "predict": ["predict", str(run), "--description", "a new phenotype", "--device", "cpu"],
        "place": ["place", str(run), "--terms", str(terms), "--out", str(tmp / "placed.tsv"), "--device", "cpu"],
    }


@pytest.mark.parametrize("name", sorted(CRAFTED))
def test_a_crafted_choice_exits_2_naming_the_file_and_field(tiny_run, tmp_path, capsys, name):
    test, field = CRAFTED[name]
    run = _craft(tiny_run, tmp_path, test)
    for command, argv in _commands(run, tmp_path).items():
        try:
            code = main(argv)
        except Exception as exc:  # the traceback the attack gave at 1a0007a
            code = repr(exc)
        err = capsys.readouterr().err
        assert code == 2, (command, code, err)
        assert "metrics.json" in err and field in err and "Traceback" not in err, (command, err)


def test_a_deeply_nested_metrics_file_exits_2(tiny_run, tmp_path, capsys):
    for depth in (100, 950, 100_000):  # within Python's parser, near its limit, beyond it
        raw = json.dumps({"test": {"placement_selection": "NEST"}}).replace('"NEST"', "[" * depth + "]" * depth)
        run = _craft(tiny_run, tmp_path / str(depth), {}, raw=raw)
        for argv in _commands(run, tmp_path).values():
            assert main(argv) == 2
            err = capsys.readouterr().err
            assert "metrics.json" in err and "nested" in err and "Traceback" not in err, err


def test_honest_choices_pass_unchanged(tiny_run, tmp_path):
    from textkg.pipeline.run_dir import open_run

    test = {"placement_selection": SELECTION, "k_shot_selection": K_SHOT, "neighbour_vote": {"weight": 0.0}}
    run = _craft(tiny_run, tmp_path, test)
    assert {k: open_run(run).metrics()["test"][k] for k in test} == test
