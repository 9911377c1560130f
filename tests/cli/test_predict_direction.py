"""``textkg predict --direction``: the flag means what its help says (issue 41).

``--direction tail`` predicts tails, ``(new, relation, ?)``: for an ontology's ``is_a`` (child
``is_a`` parent) it gives a new term's parents; ``head`` gives entities that would sit under
it. Played on a toy ontology of six categories with five members each, trained long enough that
a new dog breed's parent is learned: the old help text ("head: the new entity is the head")
sent a curator to ``--direction head``, which returns dog breeds, not ``dog``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from textkg.cli.main import build_parser, main

CATEGORIES = {
    "dog": ("a domestic dog breed, a loyal dog that barks", ["beagle", "poodle", "terrier", "bulldog", "collie"]),
    "cat": ("a domestic cat breed, a cat that purrs and meows", ["siamese", "persian", "tabby", "sphynx", "manx"]),
    "bird": ("a bird with feathers and wings that flies", ["sparrow", "robin", "eagle", "owl", "parrot"]),
    "fish": ("a fish with fins and gills that swims in water", ["salmon", "trout", "tuna", "cod", "carp"]),
    "tree": ("a tree with a wooden trunk, branches and leaves", ["oak", "pine", "maple", "birch", "cedar"]),
    "flower": ("a flower with colourful petals and a sweet scent", ["rose", "tulip", "daisy", "lily", "orchid"]),
}
MEMBERS = {m for _, members in CATEGORIES.values() for m in members}


def _toy_ontology(root: Path) -> Path:
    root.mkdir()
    texts = {"organism": "organism: a living thing"}
    ind: dict[str, list[tuple[str, str, str]]] = {"train": [], "dev": [], "test": []}
    for cat, (desc, members) in CATEGORIES.items():
        texts[cat] = f"{cat}: {desc}"
        ind["train"].append((cat, "is_a", "organism"))
        for i, m in enumerate(members):
            texts[m] = f"{m}: {desc}"
            ind["train" if i < 3 else "dev" if i == 3 else "test"].append((m, "is_a", cat))
    (root / "entity2text.txt").write_text("".join(f"{e}\t{t}\n" for e, t in texts.items()), encoding="utf-8")
    for name, rows in ind.items():
        (root / f"{name}.tsv").write_text("".join("\t".join(r) + "\n" for r in rows), encoding="utf-8")
        (root / f"ind-{name}.tsv").write_text("".join("\t".join(r) + "\n" for r in rows), encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("direction")
    data = _toy_ontology(tmp / "toy")
    out = tmp / "run"
    argv = ["train", "--dataset", str(data), "--split", "inductive", "--model", "fused-transe", "--encoder"]
    argv += ["glove-bow", "--dim", "16", "--epochs", "40", "--batch-size", "16", "--lr", "0.01", "--seed", "0"]
    argv += ["--loss", "softmax", "--negatives", "all", "--temperature", "0.1", "--device", "cpu"]
    assert main([*argv, "--no-progress", "--out", str(out)]) == 0
    return out


def _predict(run: Path, direction: str, capsys) -> dict:
    capsys.readouterr()
    text = "dachshund: a domestic dog breed, a loyal dog that barks"
    argv = ["predict", str(run), "--name", "dachshund", "--description", text, "--relation", "is_a"]
    assert main([*argv, "--direction", direction, "--top-k", "3", "--device", "cpu"]) == 0
    return json.loads(capsys.readouterr().out)


def _direction_help() -> str:
    sub = next(a for a in build_parser()._actions if a.dest == "command").choices["predict"]
    return next(a for a in sub._actions if a.dest == "direction").help


def test_the_documented_flag_gives_parents(toy_run, capsys):
    """The help names the direction that gives parents; that direction's first answer is the parent."""
    words = _direction_help()
    assert "--direction tail gives the new term's parents" in words
    out = _predict(toy_run, "tail", capsys)
    assert [p["direction"] for p in out["predictions"]] == ["tail"] * 3
    assert out["predictions"][0]["entity"] == "dog"


def test_the_other_direction_gives_children(toy_run, capsys):
    out = _predict(toy_run, "head", capsys)
    assert {p["entity"] for p in out["predictions"]} <= MEMBERS


def test_predict_says_which_scorer_and_points_to_place(toy_run, capsys):
    """On an ontology run the output says which scorer ranked the links and what place uses."""
    scoring = _predict(toy_run, "tail", capsys)["scoring"]
    assert scoring["method"] == "model"
    assert "textkg place" in scoring["placement"] and "chose on its validation terms" in scoring["placement"]
