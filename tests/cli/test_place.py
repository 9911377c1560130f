"""``textkg place``: a curator's new terms placed under existing ones of a toy ontology.

The toy ontology has six categories (dog, cat, bird, fish, tree, flower) with
five member terms each; three members per category are training terms, one is
a validation term and one a test term (BLP's inductive layout). A new term whose
description names its category must get that category as its first suggestion,
whatever method the run chose on its validation terms.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from textkg.cli.main import main
from textkg.errors import ConfigError, DataError
from textkg.place import COLUMNS, NO_DEFINITION_NOTE, read_terms_obo, read_terms_tsv

CATEGORIES = {
    "dog": ("a domestic dog breed, a loyal dog that barks", ["beagle", "poodle", "terrier", "bulldog", "collie"]),
    "cat": ("a domestic cat breed, a cat that purrs and meows", ["siamese", "persian", "tabby", "sphynx", "manx"]),
    "bird": ("a bird with feathers and wings that flies", ["sparrow", "robin", "eagle", "owl", "parrot"]),
    "fish": ("a fish with fins and gills that swims in water", ["salmon", "trout", "tuna", "cod", "carp"]),
    "tree": ("a tree with a wooden trunk, branches and leaves", ["oak", "pine", "maple", "birch", "cedar"]),
    "flower": ("a flower with colourful petals and a sweet scent", ["rose", "tulip", "daisy", "lily", "orchid"]),
}


def _toy_ontology(root: Path) -> Path:
    root.mkdir()
    texts = {"organism": "organism: a living thing"}
    ind = {"train": [], "dev": [], "test": []}
    for cat, (desc, members) in CATEGORIES.items():
        texts[cat] = f"{cat}: {desc}"
        ind["train"].append((cat, "is_a", "organism"))
        for i, m in enumerate(members):
            texts[m] = f"{m}: {desc}"
            ind["train" if i < 3 else "dev" if i == 3 else "test"].append((m, "is_a", cat))
    (root / "entity2text.txt").write_text("".join(f"{e}\t{t}\n" for e, t in texts.items()), encoding="utf-8")
    for name, rows in ind.items():
        (root / f"{name}.tsv").write_text("".join("\t".join(r) + "\n" for r in rows), encoding="utf-8")
        (root / f"ind-{name}.tsv").write_text("".join("\t".join(r) + "\n" for r in ind[name]), encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("place")
    data = _toy_ontology(tmp / "toy")
    out = tmp / "run"
    argv = ["train", "--dataset", str(data), "--split", "inductive", "--model", "fused-transe"]
    argv += ["--encoder", "glove-bow", "--dim", "16", "--epochs", "2", "--batch-size", "8", "--seed", "0"]
    assert main([*argv, "--no-progress", "--out", str(out)]) == 0
    assert json.loads((out / "metrics.json").read_text())["test"]["placement"]["num_queries"] == 6
    return out


def _place(run: Path, tmp_path: Path, *args: str) -> tuple[int, list[dict]]:
    out = tmp_path / "placed.tsv"
    code = main(["place", str(run), *args, "--out", str(out)])
    if code:
        return code, []
    lines = out.read_text(encoding="utf-8").splitlines()
    assert lines[0].split("\t") == list(COLUMNS)
    return code, [dict(zip(COLUMNS, line.split("\t"), strict=True)) for line in lines[1:]]


def test_planted_parent_comes_first(toy_run, tmp_path, capsys):
    terms = tmp_path / "new.tsv"
    terms.write_text(
        "NEW:1\tdachshund\ta domestic dog breed, a loyal dog that barks\n"
        "NEW:2\tgoldfish\ta fish with fins and gills that swims in water\n"
        "NEW:3\tsunflower\n"  # no definition: placed from its name
        "beagle\tbeagle\ta training term: skipped\n"
        "collie\tcollie\ta domestic dog breed, a loyal dog that barks\n",  # a held-out test term: placed
        encoding="utf-8",
    )
    code, rows = _place(toy_run, tmp_path, "--terms", str(terms), "--top-k", "3")
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["terms_placed"] == 4 and summary["terms_in_training_graph"] == 1
    assert summary["terms_without_definition"] == 1
    firsts = {r["term"]: r for r in rows if r["rank"] == "1"}
    assert set(firsts) == {"NEW:1", "NEW:2", "NEW:3", "collie"} and len(rows) == 12
    assert firsts["NEW:1"]["parent"] == firsts["collie"]["parent"] == "dog" and firsts["NEW:2"]["parent"] == "fish"
    assert firsts["NEW:3"]["note"] == NO_DEFINITION_NOTE and firsts["NEW:1"]["note"] == ""
    assert firsts["NEW:1"]["method"] == summary["method"]
    assert "beagle" in firsts["NEW:1"]["nearest_terms"] or "poodle" in firsts["NEW:1"]["nearest_terms"]
    scores = [float(r["score"]) for r in rows if r["term"] == "NEW:1"]
    assert scores == sorted(scores, reverse=True)


def test_obo_input_reports_listed_parents(toy_run, tmp_path, capsys):
    obo = tmp_path / "new.obo"
    obo.write_text(
        "format-version: 1.2\n\n"
        '[Term]\nid: NEW:7\nname: macaw\ndef: "a bird with feathers and wings that flies" []\nis_a: bird ! bird\n\n'
        "[Term]\nid: NEW:8\nname: old term\nis_obsolete: true\n\n"
        "[Typedef]\nid: part_of\nname: part of\n",
        encoding="utf-8",
    )
    code, rows = _place(toy_run, tmp_path, "--obo", str(obo))
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["terms_placed"] == 1 and summary["first_suggestion_is_a_listed_parent"] == 1.0
    assert rows[0]["parent"] == "bird" and rows[0]["listed"] == "yes"


@pytest.mark.parametrize(
    "content, line, field",
    [
        ("NEW:1\n", 1, None),  # one column
        ("NEW:1\tok\n\tno id\n", 2, "id"),
        ("NEW:1\t \n", 1, "name"),
    ],
)
def test_bad_terms_file_names_line_and_field(tmp_path, content, line, field):
    path = tmp_path / "bad.tsv"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(DataError) as err:
        read_terms_tsv(path)
    assert err.value.line == line and err.value.field == field


def test_bad_input_exits_2_and_writes_nothing(toy_run, tmp_path, capsys):
    bad = tmp_path / "bad.tsv"
    bad.write_bytes(b"NEW:1\tname\t\xff\n")
    out = tmp_path / "placed.tsv"
    assert main(["place", str(toy_run), "--terms", str(bad), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "bad.tsv:1, field 'definition': not valid UTF-8" in err and "Traceback" not in err
    assert not out.exists() and not list(tmp_path.glob(".placed.tsv.*"))


def test_duplicate_ids_and_runs_without_placement(tmp_path):
    dup = tmp_path / "dup.obo"
    dup.write_text("[Term]\nid: A\nname: a\n\n[Term]\nid: A\nname: b\n", encoding="utf-8")
    with pytest.raises(DataError, match="defined twice") as err:
        read_terms_obo(dup)
    assert err.value.line == 6
    tsv = tmp_path / "dup.tsv"
    tsv.write_text("A\ta\nA\tb\n", encoding="utf-8")
    with pytest.raises(DataError, match="appears twice"):
        read_terms_tsv(tsv)
    import textkg
    from textkg.place import Placer

    (tmp_path / "run").mkdir()
    config = {"textkg_version": textkg.__version__, "data": {"dataset": "hpo-small", "split": "inductive"}}
    (tmp_path / "run" / "config.json").write_text(json.dumps(config))
    (tmp_path / "run" / "metrics.json").write_text(json.dumps({"test": {"mrr": 0.1}}))
    with pytest.raises(ConfigError, match="no placement evaluation"):
        Placer(tmp_path / "run")


@pytest.mark.parametrize("method", ["model", "description-nn", "parent-of-nearest", "combined"])
def test_every_method_the_run_may_choose(toy_run, method):
    from textkg.place import NewTerm, Placer

    placer = Placer(toy_run)
    assert placer.selection is not None and set(placer.selection["valid"]) == {
        "model",
        "description-nn",
        "parent-of-nearest",
        "combined",
    }
    placer.method = method
    term = NewTerm("NEW:1", "dachshund", CATEGORIES["dog"][0])
    rows = placer.place([term], top_k=4)
    assert [r["rank"] for r in rows] == [1, 2, 3, 4] and {r["method"] for r in rows} == {method}
    assert [r["score"] for r in rows] == sorted((r["score"] for r in rows), reverse=True)
    if method == "parent-of-nearest":  # the nearest existing terms are dogs: their parent comes first
        assert rows[0]["parent"] == "dog"
    if method == "description-nn":  # the most similar description: a dog or a dog breed
        assert rows[0]["parent"] in {"dog", *CATEGORIES["dog"][1]}


def test_a_name_alone_is_placed_with_the_names_only_choice(toy_run):
    """A term without a definition is placed with the method and weights chosen on the validation terms read
    from their names alone (``test.placement_names_only``), and its rows say so."""
    from textkg.place import NewTerm, Placer

    metrics = json.loads((toy_run / "metrics.json").read_text())["test"]
    names_only = metrics["placement_names_only"]
    assert set(names_only["placement_baselines"]) == {"description-nn", "parent-of-nearest", "tfidf-nn"}
    assert names_only["placement"]["num_queries"] == metrics["placement"]["num_queries"]  # the same queries
    placer = Placer(toy_run)
    assert placer.names_method == names_only["placement_selection"]["chosen"]
    rows = placer.place([NewTerm("NEW:1", "poodle dog"), NewTerm("NEW:2", "rose", CATEGORIES["flower"][0])], top_k=2)
    bare = [r for r in rows if r["term"] == "NEW:1"]
    full = [r for r in rows if r["term"] == "NEW:2"]
    assert {r["method"] for r in bare} == {placer.names_method} and {r["note"] for r in bare} == {NO_DEFINITION_NOTE}
    assert {r["method"] for r in full} == {placer.method} and full[0]["parent"] == "flower"


def test_place_uses_the_reranker_when_validation_weighs_it(toy_run):
    """The combination with the re-ranker at a positive weight (as validation may choose) places terms; a
    metrics.json that weighs it without a fitted one is refused, not silently ignored."""
    from textkg.place import NewTerm, Placer

    placer = Placer(toy_run)
    assert placer.reranker is not None and set(placer.reranker["weights"]) >= {"tfidf", "containment"}
    placer.method = "combined"
    placer.selection["combined"]["weights"] = {"description": 1.0, "rerank": 1.0}
    term = NewTerm("NEW:1", "dachshund", CATEGORIES["dog"][0])
    rows = placer.place([term], top_k=3)
    assert [r["rank"] for r in rows] == [1, 2, 3] and rows[0]["parent"] == "dog"
    placer.reranker = None
    with pytest.raises(ConfigError, match="no fitted one"):
        placer.place([term], top_k=3)
    # a tampered metrics.json is data: a bad weight is refused with the file and field, never evaluated
    for bad in ({"weights": {"tfidf": "__import__('os')"}}, {"weights": {**rows_weights(), "depth": float("nan")}}):
        placer.reranker = bad
        with pytest.raises(ConfigError, match="test.placement_rerank.weights"):
            placer.place([term], top_k=3)


def test_a_glove_run_reranks_without_minilm_word_vectors(toy_run, monkeypatch):
    """``maxsim`` reads MiniLM word vectors; a ``glove-bow`` run leaves it out (issue 38: the notebook's glove run
    loaded MiniLM only for them), so neither training nor ``place`` with the re-ranker loads a second encoder."""
    from textkg.evaluation.placement import evaluate
    from textkg.place import NewTerm, Placer

    placer = Placer(toy_run)
    assert placer.reranker is not None and "maxsim" not in placer.reranker["weights"]
    assert {"sibling_mean", "tfidf_vote"} <= set(placer.reranker["weights"])

    def refuse(words):
        raise AssertionError("MiniLM word vectors loaded for a glove-bow run")

    monkeypatch.setattr(evaluate, "minilm_word_encoder", lambda: refuse)
    placer.method = "combined"
    placer.selection["combined"]["weights"] = {"description": 1.0, "rerank": 1.0}
    rows = placer.place([NewTerm("NEW:1", "dachshund", CATEGORIES["dog"][0])], top_k=3)
    assert rows[0]["parent"] == "dog"


def test_rerank_features_by_encoder():
    from types import SimpleNamespace

    from textkg.evaluation.placement.rerank import DEFAULT_EXTRA
    from textkg.pipeline.report import rerank_features

    for encoder in (None, "bert"):
        assert rerank_features(SimpleNamespace(model=SimpleNamespace(encoder=encoder))) == DEFAULT_EXTRA
    for encoder in ("glove-bow", "flair"):
        features = rerank_features(SimpleNamespace(model=SimpleNamespace(encoder=encoder)))
        assert "maxsim" not in features and set(features) == set(DEFAULT_EXTRA) - {"maxsim"}


def rows_weights():
    from textkg.evaluation.placement.rerank import PRIOR_FEATURES, SCORED_FEATURES

    return {name: 1.0 for name in SCORED_FEATURES + PRIOR_FEATURES}


def test_placement_extras_off_leaves_out_the_repeated_placements_only(toy_run, tmp_path):
    """``--placement-extras off`` (issue 39: the full ``hpo`` benchmark rows read the placement only) leaves
    out the names-only and known-links blocks; the placement, its combination and validation's choice are
    those of the same run with them."""
    data, out = toy_run.parent / "toy", tmp_path / "run"
    argv = ["train", "--dataset", str(data), "--split", "inductive", "--model", "fused-transe"]
    argv += ["--encoder", "glove-bow", "--dim", "16", "--epochs", "2", "--batch-size", "8", "--seed", "0"]
    assert main([*argv, "--placement-extras", "off", "--no-progress", "--out", str(out)]) == 0
    full = json.loads((toy_run / "metrics.json").read_text())["test"]
    lean = json.loads((out / "metrics.json").read_text())["test"]
    assert "placement_names_only" in full
    assert "placement_names_only" not in lean and "placement_known_links" not in lean
    for key in ("placement", "placement_baselines", "placement_combined", "placement_selection"):
        assert lean[key] == full[key], key
    assert set(full) - set(lean) <= {"placement_names_only", "placement_known_links"}
    assert json.loads((out / "config.json").read_text())["train"]["placement_extras"] == "off"
