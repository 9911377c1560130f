"""``--privacy public-only``: the "train on the public part only" baseline (U-only, Han et al. 2022).

It leaves the confidential statements out and never reads them, so its release
is (0, 0)-DP with respect to them. The adversary's test: two datasets that
differ in one confidential statement must give bit-identical weights and graph
with the same seed (nothing secret is needed when nothing private is read).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from textkg.cli.config_loading import build_run_config
from textkg.cli.main import build_parser
from textkg.errors import ConfigError
from textkg.pipeline.job import run
from textkg.release import recompute_epsilon, release
from textkg.training.config import PrivacyConfig

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiny_blp"
EXTRA = "/e/unused\t/r/likes\t/e/00\n"  # a confidential statement naming an otherwise unused entity


def _dataset(tmp_path: Path, name: str, *, extra: bool) -> Path:
    out = tmp_path / name
    shutil.copytree(FIXTURE, out)
    if extra:
        with open(out / "train.tsv", "a", encoding="utf-8") as fh:
            fh.write(EXTRA)
    return out


def _run(dataset: Path, out: Path, *flags: str) -> dict:
    args = build_parser().parse_args(
        [
            "train",
            "--dataset",
            str(dataset),
            "--split",
            "transductive",
            "--description",
            "short",  # entity2text.txt, where the fixture's unused entity has its row
            "--model",
            "transe",
            "--dim",
            "8",
            "--epochs",
            "2",
            "--batch-size",
            "32",
            "--seed",
            "0",
            "--privacy",
            "public-only",
            "--confidential-relations",
            "/r/likes",
            *flags,
        ]
    )
    return run(build_run_config(args), out, progress=False)


def test_one_confidential_statement_changes_nothing_released(tmp_path):
    a = _run(_dataset(tmp_path, "a", extra=False), tmp_path / "ra")
    b = _run(_dataset(tmp_path, "b", extra=True), tmp_path / "rb")
    wa = torch.load(tmp_path / "ra" / "best_model.pt", weights_only=False)
    wb = torch.load(tmp_path / "rb" / "best_model.pt", weights_only=False)
    assert wa.keys() == wb.keys()
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    ga, gb = (json.loads((tmp_path / r / "graph.json").read_text()) for r in ("ra", "rb"))
    assert ga.pop("name") != gb.pop("name")  # the dataset's path, chosen by the user
    assert ga == gb
    assert a["test"] == b["test"] and a["valid"] == b["valid"]
    # the number of confidential statements is private (add/remove adjacency): not even it differs
    assert a["privacy"] == b["privacy"] and a["privacy"]["num_private_triples"] is None


def test_privacy_block_and_release(tmp_path):
    metrics = _run(_dataset(tmp_path, "a", extra=False), tmp_path / "run")
    block = metrics["privacy"]
    assert block["guarantee"] == "dp" and block["mode"] == "public-only"
    assert block["epsilon"] == 0.0 and block["delta"] == 0.0 and block["ledger"] == []
    assert block["num_private_triples"] is None  # 53 /r/likes statements in the fixture: never released
    assert recompute_epsilon(block) == 0.0
    release(tmp_path / "run", tmp_path / "bundle")
    card = (tmp_path / "bundle" / "MODEL_CARD.md").read_text()
    assert "(0, 0)-differential privacy" in card and "never read" in card
    assert json.loads((tmp_path / "bundle" / "metrics.json").read_text())["privacy"]["epsilon"] == 0.0


def test_trains_on_the_unrestricted_statements_only(tmp_path):
    metrics = _run(_dataset(tmp_path, "a", extra=False), tmp_path / "run", "--batch-size", "1000", "--epochs", "1")
    assert metrics["train"]["steps"] == 1  # one batch over the 147 unrestricted statements
    assert "evaluation_filter" in metrics  # the public filter, as for every privacy mode


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({}, "privacy.confidential_relations"),
        ({"confidential_fraction": 1.0}, "privacy.confidential_fraction"),
    ],
)
def test_needs_what_to_leave_out(kwargs, field):
    with pytest.raises(ConfigError) as err:
        PrivacyConfig(mode="public-only", **kwargs)
    assert err.value.field == field
