"""``textkg evaluate DIR --exclude-query``: the protocol switch end to end."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from textkg.cli.main import main
from textkg.models import get_preset
from textkg.pipeline.job import run
from textkg.training.config import DataConfig, RunConfig, TrainConfig

TINY = Path(__file__).resolve().parents[1] / "fixtures" / "tiny_blp"


def test_evaluate_with_and_without_the_query_entity(tmp_path, capsys):
    cfg = RunConfig(
        data=DataConfig(dataset=str(TINY), split="transductive"),
        # "none": with the default "auto" the model itself never ranks the query as its own answer
        model=dataclasses.replace(get_preset("transe"), dim=8, irreflexive="none"),
        train=TrainConfig(epochs=1, batch_size=64),
        model_name="transe",
    )
    run(cfg, tmp_path / "run", progress=False)
    out = {}
    for flag in ("--no-exclude-query", "--exclude-query"):
        assert main(["evaluate", str(tmp_path / "run"), flag]) == 0
        out[flag] = json.loads(capsys.readouterr().out)
    plain, excluded = out["--no-exclude-query"], out["--exclude-query"]
    assert (plain["exclude_query"], excluded["exclude_query"]) == (False, True)
    # removing a candidate never worsens a rank: every metric is at least as good
    for key in ("mrr", "hits@1", "hits@3", "hits@10"):
        assert excluded["test"][key] >= plain["test"][key]
    assert excluded["test"]["mr"] <= plain["test"]["mr"]
    assert excluded["test"]["mr"] < plain["test"]["mr"]  # an untrained-ish TransE ranks some queries' own entity above
