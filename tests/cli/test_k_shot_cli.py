"""k-shot from the command line: ``test.k_shot`` in an inductive run's metrics.json,
``textkg evaluate --k-shot``, ``textkg predict --known-links`` and its bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

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
    assert test["k_shot_selection"]["prior_weight"] in test["k_shot_selection"]["valid_mrr_by_prior_weight"]


def test_evaluate_k_shot(ind_run, capsys):
    assert main(["evaluate", str(ind_run), "--k-shot", "2,0", "--device", "cpu"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert list(out["test"]["k_shot"]) == ["0", "2"]
    before = json.loads((ind_run / "metrics.json").read_text())["test"]["k_shot"]["0"]
    assert out["test"]["k_shot"]["0"]["mrr"] == pytest.approx(before["mrr"])


def test_evaluate_bad_k_shot_exits_2(ind_run, capsys):
    assert main(["evaluate", str(ind_run), "--k-shot", "1,x"]) == 2
    assert "--k-shot" in capsys.readouterr().err
