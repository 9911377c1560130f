"""k-shot from the command line: ``test.k_shot`` in an inductive run's metrics.json,
``textkg evaluate --k-shot``, ``textkg predict --known-links`` and its bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from textkg.cli.main import main

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiny_blp_ind"


@pytest.fixture(scope="module")
def ind_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("kshot") / "run"
    argv = ["train", "--dataset", str(FIXTURE), "--split", "inductive", "--model", "fused-transe"]
    argv += ["--encoder", "glove-bow", "--dim", "8", "--epochs", "1", "--seed", "0", "--no-progress"]
    assert main([*argv, "--out", str(out)]) == 0
    return out


def test_inductive_run_reports_k_shot(ind_run):
    test = json.loads((ind_run / "metrics.json").read_text())["test"]
    assert list(test["k_shot"]) == ["0", "1", "3", "5", "10"]
    for k, block in test["k_shot"].items():
        assert {"mrr", "hits@1", "hits@3", "hits@10", "num_queries", "too_few_statements", "seed"} <= set(block)
        assert (block["baselines"]["eravg_no_text"] is None) == (k == "0")
    assert test["k_shot"]["0"]["too_few_statements"] == 0
    assert test["k_shot_selection"]["chosen"] in test["k_shot_selection"]["valid_mrr"]


def test_evaluate_k_shot(ind_run, capsys):
    assert main(["evaluate", str(ind_run), "--k-shot", "2,0", "--device", "cpu"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert list(out["test"]["k_shot"]) == ["0", "2"]
    before = json.loads((ind_run / "metrics.json").read_text())["test"]["k_shot"]["0"]
    assert out["test"]["k_shot"]["0"]["mrr"] == pytest.approx(before["mrr"])


def test_evaluate_bad_k_shot_exits_2(ind_run, capsys):
    assert main(["evaluate", str(ind_run), "--k-shot", "1,x"]) == 2
    assert "--k-shot" in capsys.readouterr().err


def _links(tmp_path, text: str) -> Path:
    path = tmp_path / "links.tsv"
    path.write_text(text, encoding="utf-8")
    return path


def test_predict_with_known_links(ind_run, tmp_path, capsys):
    links = _links(tmp_path, "# relation\tentity\tdirection\n/r/likes\t/e/33\ttail\n\n/geo/near_by\t/e/22\thead\n")
    argv = ["predict", str(ind_run), "--text", "a new person", "--relation", "/r/likes", "--direction", "tail"]
    assert main([*argv, "--top-k", "5", "--known-links", str(links), "--device", "cpu"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["scoring"]["known_links"]["count"] == 2 and out["scoring"]["known_links"]["method"]
    assert len(out["predictions"]) == 5 and "/e/33" not in {p["entity"] for p in out["predictions"]}
    assert main([*argv, "--top-k", "5", "--device", "cpu"]) == 0
    assert "known_links" not in json.loads(capsys.readouterr().out)["scoring"]


def test_known_links_move_the_new_vector_to_the_erav_estimate(ind_run, monkeypatch):
    from textkg.models.known_links import LinkMethod
    from textkg.predict import Predictor

    predictor = Predictor(ind_run, device="cpu")
    monkeypatch.setattr(Predictor, "known_links_method", LinkMethod("mix", 0.0))  # the links alone (ERAvg)
    new = predictor.embed(["a new person"])
    r, o = predictor.kg.relations.index("/r/likes"), predictor.kg.entities.index("/e/33")
    moved = predictor._with_known_links(new, torch.tensor([[r, o, 0]]))  # (new, likes, /e/33)
    expected = predictor.model.entity_matrix()[o] - predictor.model.relation_matrix()[r]
    torch.testing.assert_close(moved[0], expected.detach())


@pytest.mark.parametrize(
    "content, line, field",
    [
        ("/r/likes\t/e/33\ttail\n/r/hates\t/e/33\ttail\n", 2, "relation"),
        ("/r/likes\t/e/nobody\ttail\n", 1, "entity"),
        ("# header\n/r/likes\t/e/33\tsideways\n", 2, "direction"),
        ("/r/likes\t/e/33\n", 1, None),
    ],
)
def test_bad_known_links_exit_2_naming_file_line_field(ind_run, tmp_path, capsys, content, line, field):
    links = _links(tmp_path, content)
    argv = ["predict", str(ind_run), "--text", "someone", "--known-links", str(links), "--device", "cpu"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"{links}:{line}" in err
    assert (f"field '{field}'" in err) if field else ("field" not in err)


def test_evaluate_k_shot_on_a_transductive_run_exits_2(tmp_path, capsys):
    out = tmp_path / "trun"
    argv = ["train", "--dataset", str(FIXTURE.parent / "tiny_blp"), "--split", "transductive", "--model", "transe"]
    assert main([*argv, "--dim", "8", "--epochs", "1", "--no-progress", "--out", str(out)]) == 0
    assert "k_shot" not in json.loads((out / "metrics.json").read_text())["test"]
    capsys.readouterr()
    assert main(["evaluate", str(out), "--k-shot", "0,1", "--device", "cpu"]) == 2
    assert "inductive" in capsys.readouterr().err


def test_inductive_run_reports_the_link_vote_choice(ind_run):
    selection = json.loads((ind_run / "metrics.json").read_text())["test"]["k_shot_selection"]
    vote = selection["link_vote"]
    assert vote["weight"] in {float(w) for w in vote["valid_mrr"]} and vote["statements_read"] > 0


def test_predict_with_known_links_adds_the_link_vote_the_run_chose(ind_run, monkeypatch):
    """With a large chosen weight, the top answer is what the training entities sharing the known
    link do (the vote's oracle), and without known links the vote is not used."""
    from textkg.pipeline.k_shot import link_vote_of
    from textkg.predict import Predictor

    predictor = Predictor(ind_run, device="cpu")
    monkeypatch.setattr(Predictor, "link_vote_weight", 1e6)
    r, o = predictor.kg.relations.index("/r/likes"), predictor.kg.entities.index("/e/33")
    link_vote, _ = link_vote_of(predictor.prepared)
    _, ids, weights = link_vote.voters(torch.tensor([[0, r, o, 0]]))
    out = predictor.predict(
        description="a new person", relation="/r/likes", direction="tail", known_links=torch.tensor([[r, o, 0]])
    )
    assert out["scoring"]["known_links"]["link_vote_weight"] == 1e6 and "link_vote_weight" in out["scoring"]["method"]
    votes = link_vote.votes(ids, weights, torch.tensor([r]), "tail")[0]
    votes[o] = -1.0  # the known link is not proposed again
    assert float(votes.max()) > 0  # the fixture has training entities that like /e/33 and others
    best = {predictor.kg.entities[int(i)] for i in torch.nonzero(votes == votes.max()).flatten()}
    # the vote's best answers come first, in the model's order where the vote ties (the fixture has ties)
    assert {p["entity"] for p in out["predictions"][: len(best)]} == best
    plain = predictor.predict(description="a new person", relation="/r/likes", direction="tail")
    assert "link_vote_weight" not in plain["scoring"]["method"] and "known_links" not in plain["scoring"]
