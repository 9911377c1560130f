"""``textkg predict --direction``: the flag means what its help says (issue 41), and on an ontology's
``is_a`` it answers the curator's question as ``textkg place`` does (issue 50).

``--direction tail`` predicts tails, ``(new, relation, ?)``: for an ontology's ``is_a`` (child
``is_a`` parent) it gives a new term's parents, ranked by the run's placement choice, exactly as
``place`` ranks them; ``head`` (the new term's children) is refused for ``is_a``: no method for it was
chosen on validation. Played on a toy ontology of six categories with five members each, trained long
enough that a new dog breed's parent is learned: the old help text ("head: the new entity is the head")
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


def _predict(run: Path, direction: str, capsys, *extra: str) -> dict:
    capsys.readouterr()
    text = "dachshund: a domestic dog breed, a loyal dog that barks"
    argv = ["predict", str(run), "--name", "dachshund", "--description", text, "--relation", "is_a", *extra]
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


def test_the_other_direction_on_is_a_is_refused_with_a_pointer(toy_run, capsys):
    """``is_a`` heads (children of the new term) asked for alone: exit 2, naming the command for parents."""
    capsys.readouterr()
    argv = ["predict", str(toy_run), "--description", "a dog", "--relation", "is_a", "--direction", "head"]
    assert main([*argv, "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert "children" in err and "--direction tail" in err and "textkg place" in err and "Traceback" not in err


def test_without_a_direction_is_a_gives_parents_only_and_says_why(toy_run, capsys):
    capsys.readouterr()
    argv = ["predict", str(toy_run), "--description", "a new dog breed", "--top-k", "3", "--device", "cpu"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert {(p["relation"], p["direction"]) for p in out["predictions"]} == {("is_a", "tail")}
    assert "children" in out["scoring"]["placement"]["children"]


def test_predict_says_it_ranks_parents_by_the_placement_choice(toy_run, capsys):
    """The output names the method that ranked the parents: the run's placement choice, chosen on validation."""
    chosen = json.loads((toy_run / "metrics.json").read_text())["test"]["placement_selection"]["chosen"]
    scoring = _predict(toy_run, "tail", capsys)["scoring"]
    words = "parents ranked by the run's placement choice, as textkg place ranks them: "
    assert scoring["method"].startswith(words + chosen) and "validation terms" in scoring["method"]
    placement = scoring["placement"]
    assert placement["used"] is True and placement["method"] == chosen and placement["relation"] == "is_a"
    assert placement["text"] == "dachshund: a domestic dog breed, a loyal dog that barks"  # the name given once


@pytest.fixture
def chosen(request, toy_run):
    """The run's placement choice set to one method (as validation may choose it); restored afterwards."""
    path = toy_run / "metrics.json"
    saved = path.read_text()
    metrics = json.loads(saved)
    metrics["test"]["placement_selection"]["chosen"] = request.param
    path.write_text(json.dumps(metrics))
    yield request.param
    path.write_text(saved)


#: (name, definition): a new dog breed, a held-out test term (collie), a training term (beagle) and a fish
TERMS = [
    ("dachshund", CATEGORIES["dog"][0]),
    ("collie", CATEGORIES["dog"][0]),
    ("beagle", CATEGORIES["dog"][0]),
    ("goldfish", CATEGORIES["fish"][0]),
]


@pytest.mark.parametrize("chosen", ["model", "description-nn", "parent-of-nearest", "combined"], indirect=True)
def test_predict_parents_equal_place_and_never_the_query_nor_held_out(toy_run, chosen, tmp_path, capsys):
    """For whatever method the run chose, ``predict --relation is_a --direction tail`` (``--batch``, and one
    term at a time) lists the parents ``place`` lists for the same terms, in the same order, every candidate
    asked for; never the query's own entry (beagle, a training term: a candidate of place's ranking of a term
    it does not know by id) nor a held-out term (collie is one: the query here)."""
    from textkg.place import COLUMNS
    from textkg.predict import Predictor

    predictor = Predictor(toy_run, device="cpu")
    kg = predictor.kg
    train = {kg.entities[e] for e in predictor.prepared.split.train_entities.tolist()}
    held_out = set(kg.entities) - train
    assert "collie" in held_out and "beagle" in train
    everything = str(kg.num_entities)
    terms, placed = tmp_path / "terms.tsv", tmp_path / "placed.tsv"
    terms.write_text("".join(f"NEW:{n}\t{n}\t{d}\n" for n, d in TERMS), encoding="utf-8")
    assert main(["place", str(toy_run), "--terms", str(terms), "--out", str(placed), "--top-k", everything]) == 0
    rows = [dict(zip(COLUMNS, line.split("\t"), strict=True)) for line in placed.read_text().splitlines()[1:]]
    assert {r["method"] for r in rows} == {chosen}
    place = {n: [r["parent"] for r in rows if r["term"] == f"NEW:{n}"] for n, _ in TERMS}
    assert "beagle" in place["beagle"]
    batch = tmp_path / "batch.tsv"
    batch.write_text("".join(f"{n}\t{d}\n" for n, d in TERMS), encoding="utf-8")
    capsys.readouterr()
    argv = ["predict", str(toy_run), "--relation", "is_a", "--direction", "tail", "--top-k", everything]
    assert main([*argv, "--batch", str(batch), "--device", "cpu"]) == 0
    results = json.loads(capsys.readouterr().out)["results"]
    for (name, definition), result in zip(TERMS, results, strict=True):
        parents = [p["entity"] for p in result["predictions"]]
        assert parents == [p for p in place[name] if p != name], name
        assert not set(parents) & held_out and name not in parents
        assert result["scoring"]["placement"]["method"] == chosen
        # one term alone: the same scores but for float32 rounding over another batch (a near tie may swap)
        single = {
            p["entity"]: p["score"] for p in _predict_one(toy_run, capsys, name, definition, everything)["predictions"]
        }
        assert single == pytest.approx({p["entity"]: p["score"] for p in result["predictions"]}, rel=1e-4, abs=1e-5)


def _predict_one(run: Path, capsys, name: str, description: str, top_k: str) -> dict:
    capsys.readouterr()
    argv = ["predict", str(run), "--name", name, "--description", description, "--relation", "is_a"]
    assert main([*argv, "--direction", "tail", "--top-k", top_k, "--device", "cpu"]) == 0
    return json.loads(capsys.readouterr().out)


def test_no_vote_and_include_held_out(toy_run, capsys):
    """``--no-vote``: the model alone over place's candidates (as ``place --method model``);
    ``--include-held-out``: every entity by the link scorer, and the output says the placement choice was not used."""
    no_vote = _predict(toy_run, "tail", capsys, "--no-vote")["scoring"]["placement"]
    assert no_vote["used"] is True and no_vote["method"] == "model" and "--no-vote" in no_vote["reading"]
    out = _predict(toy_run, "tail", capsys, "--include-held-out")
    placement = out["scoring"]["placement"]
    assert placement["used"] is False and "--include-held-out" in placement["reason"]
    assert out["scoring"]["method"] == "model" and out["candidates"]["include_held_out"] is True
