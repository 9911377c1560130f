"""``textkg predict`` proposes training entities only (issue 50): never the run's held-out (validation/test)
entities, never the new entity's own entry (named by ``--name``, as an id or a name), unless
``--include-held-out`` asks for every entity, as the link-prediction evaluation ranks them.

Played on the tiny inductive fixture, asking for every candidate (``--top-k`` the number of entities), through
each scorer ``predict`` may use: the model alone (scored in chunks), the neighbour vote and the link re-ranker
(a full row), and known links (the k-shot path); and through ``--batch``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from textkg.cli.main import main

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiny_blp_ind"


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("candidates") / "run"
    argv = ["train", "--dataset", str(FIXTURE), "--split", "inductive", "--model", "fused-transe"]
    argv += ["--encoder", "glove-bow", "--dim", "8", "--epochs", "1", "--seed", "0", "--no-progress"]
    assert main([*argv, "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def graph(run) -> dict:
    """Entity ids, training entity ids, a held-out (test) entity and its description."""
    from textkg.predict import Predictor

    predictor = Predictor(run, device="cpu")
    kg, split = predictor.kg, predictor.prepared.split
    train = {kg.entities[e] for e in split.train_entities.tolist()}
    held_out = sorted(set(kg.entities) - train)
    query = held_out[0]
    return {
        "all": set(kg.entities),
        "train": train,
        "held_out": set(held_out),
        "query": query,
        "text": kg.entity_descriptions[kg.entities.index(query)],
        "n": kg.num_entities,
        "relations": list(kg.relations),
    }


def _predict(run: Path, capsys, *args: str) -> dict:
    capsys.readouterr()
    assert main(["predict", str(run), *args, "--device", "cpu"]) == 0
    return json.loads(capsys.readouterr().out)


def _by_pair(out: dict) -> dict[tuple[str, str], set[str]]:
    pairs: dict[tuple[str, str], set[str]] = {}
    for p in out["predictions"]:
        pairs.setdefault((p["relation"], p["direction"]), set()).add(p["entity"])
    return pairs


@pytest.fixture
def scorer(request, run):
    """The run's metrics.json set to make ``predict`` use one scorer; restored afterwards."""
    path = run / "metrics.json"
    saved = path.read_text()
    metrics = json.loads(saved)
    test = metrics["test"]
    if request.param in ("vote", "rerank"):
        test["neighbour_vote"].update(weight=1.0, spread_weight=0.5)
    if request.param == "rerank":
        assert test.get("link_rerank"), "the fixture run fits a link re-ranker"
        test["link_rerank"]["weight"] = 1.0
    elif "link_rerank" in test:
        test["link_rerank"]["weight"] = 0.0
    if request.param == "model":
        test["neighbour_vote"].update(weight=0.0, spread_weight=0.0)
    path.write_text(json.dumps(metrics))
    yield request.param
    path.write_text(saved)


@pytest.mark.parametrize("scorer", ["model", "vote", "rerank"], indirect=True)
def test_every_training_entity_and_nothing_else(run, graph, scorer, capsys):
    """Asked for every candidate, each (relation, direction) gets exactly the training entities: no held-out
    entity, and not the query's own entry (here a held-out test entity, named by its id)."""
    out = _predict(run, capsys, "--name", graph["query"], "--text", graph["text"], "--top-k", str(graph["n"]))
    words = out["scoring"]["method"]
    assert ("vote" in words) == (scorer != "model") and ("re-ranker" in words) == (scorer == "rerank")
    pairs = _by_pair(out)
    assert len(pairs) == 2 * len(graph["relations"])
    if scorer == "rerank":  # the re-ranker re-orders the first stage's top answers: a subset of them
        assert all(entities <= graph["train"] for entities in pairs.values())
    else:
        assert all(entities == graph["train"] for entities in pairs.values())
    assert out["candidates"] == {
        "entities": len(graph["train"]),
        "held_out_left_out": len(graph["held_out"]),
        "query_left_out": [graph["query"]],
        "include_held_out": False,
    }
    assert all(p["score"] > float("-inf") for p in out["predictions"])


def test_a_training_entity_named_by_the_query_is_left_out(run, graph, capsys):
    """A name given as an entity's name (any case) or id leaves that entity out, even a training one."""
    from textkg.predict import Predictor

    predictor = Predictor(run, device="cpu")
    kg = predictor.kg
    e = next(iter(sorted(graph["train"])))
    name = kg.entity_names[kg.entities.index(e)]
    for given in (name.upper(), e):
        out = predictor.predict(description="somebody new", name=given, top_k=graph["n"])
        assert e not in {p["entity"] for p in out["predictions"]}
        assert out["candidates"]["query_left_out"] == [e]


def test_include_held_out_ranks_every_entity(run, graph, capsys):
    out = _predict(
        run, capsys, "--name", graph["query"], "--text", graph["text"], "--top-k", str(graph["n"]), "--include-held-out"
    )
    assert all(entities == graph["all"] for entities in _by_pair(out).values())
    assert out["candidates"]["include_held_out"] is True and out["candidates"]["query_left_out"] == []


def test_batch_and_known_links_leave_the_held_out_entities_out(run, graph, tmp_path, capsys):
    """``--batch`` (each row's name is its query) and ``--known-links`` (the k-shot path)."""
    other = sorted(graph["held_out"])[1]
    batch, links = tmp_path / "batch.tsv", tmp_path / "links.tsv"
    batch.write_text(f"{graph['query']}\t{graph['text']}\n{other}\tsomeone else entirely\n", encoding="utf-8")
    known = sorted(graph["train"])[0]
    links.write_text(f"{graph['query']}\t{graph['relations'][0]}\t{known}\ttail\n", encoding="utf-8")
    argv = ["--batch", str(batch), "--known-links", str(links), "--top-k", str(graph["n"])]
    results = _predict(run, capsys, *argv)["results"]
    assert "known_links" in results[0]["scoring"] and "known_links" not in results[1]["scoring"]
    for result, query in zip(results, (graph["query"], other), strict=True):
        proposed = {p["entity"] for p in result["predictions"]}
        assert proposed <= graph["train"] and query not in proposed
        assert result["candidates"]["query_left_out"] == [query]
