"""``--init-from RUN``: start from another run's model, only where the privacy guarantee survives it.

A confidential run may start from a ``public-only`` run with the same confidential
statements (it read none of them); a ``full`` run may start from nothing trained
on this graph; a mismatch is refused before anything is written.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from textkg.cli.config_loading import build_run_config
from textkg.cli.main import build_parser
from textkg.errors import ConfigError
from textkg.pipeline.job import initialise_from, prepare, run

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiny_blp"
BASE = ["train", "--dataset", str(FIXTURE), "--split", "transductive", "--model", "transe", "--dim", "8"]
BASE += ["--epochs", "1", "--batch-size", "32", "--seed", "0"]
CONF = ["--confidential-relations", "/r/likes"]


def _cfg(*flags: str):
    return build_run_config(build_parser().parse_args([*BASE, *flags]))


@pytest.fixture(scope="module")
def public_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("init") / "public"
    run(_cfg("--privacy", "public-only", *CONF), out, progress=False)
    return out


def test_confidential_run_starts_from_the_public_only_model(public_run, tmp_path):
    flags = ("--privacy", "confidential", *CONF, "--private-size", "64", "--noise-multiplier", "1")
    cfg = _cfg(*flags, "--init-from", str(public_run))
    prep = prepare(cfg)
    record = initialise_from(prep, cfg, public_run)
    start = torch.load(public_run / "best_model.pt", weights_only=False)
    assert all(torch.equal(v, start[k]) for k, v in prep.model.state_dict().items())
    assert record["privacy_mode"] == "public-only" and len(record["best_model_sha256"]) == 64
    metrics = run(cfg, tmp_path / "conf", progress=False)
    assert metrics["privacy"]["guarantee"] == "dp" and metrics["privacy"]["initialised_from"] == record
    assert json.loads((tmp_path / "conf" / "init_from.json").read_text()) == record


@pytest.mark.parametrize(
    "flags, message",
    [
        (("--privacy", "full", "--noise-multiplier", "1"), "every training statement is private"),
        (("--privacy", "confidential", "--confidential-relations", "/r/knows", "--noise-multiplier", "1"), "same"),
        (("--privacy", "confidential", "--confidential-fraction", "0.5", "--noise-multiplier", "1"), "same"),
    ],
)
def test_refused_where_the_guarantee_would_not_survive(public_run, tmp_path, flags, message):
    cfg = _cfg(*flags, "--init-from", str(public_run))
    with pytest.raises(ConfigError, match=message):
        run(cfg, tmp_path / "out", progress=False)
    assert not (tmp_path / "out").exists()  # nothing half-written


def test_a_non_private_source_cannot_seed_a_confidential_run(tmp_path):
    source = tmp_path / "plain"
    run(_cfg(), source, progress=False)  # read every statement, confidential ones included
    cfg = _cfg("--privacy", "confidential", *CONF, "--noise-multiplier", "1", "--init-from", str(source))
    with pytest.raises(ConfigError, match="public-only"):
        run(cfg, tmp_path / "out", progress=False)
    # without privacy any matching run may seed another
    assert run(_cfg("--init-from", str(source)), tmp_path / "again", progress=False)["train"]["initialised_from"]


def test_shape_mismatch_and_missing_run(public_run, tmp_path):
    with pytest.raises(ConfigError, match="does not match"):
        run(_cfg("--dim", "16", "--init-from", str(public_run)), tmp_path / "a", progress=False)
    with pytest.raises(ConfigError, match="not a finished textkg run"):
        run(_cfg("--init-from", str(tmp_path / "nothing")), tmp_path / "b", progress=False)
