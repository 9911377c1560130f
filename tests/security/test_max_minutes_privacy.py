"""Issue 36, item 5: ``--max-minutes`` under DP would make the private step count (and ε) depend on wall time.

On 7add106 ``textkg train --privacy full --max-minutes M`` trained and stopped at whatever step the
clock reached, so the released ledger's steps and ε were a readout of the realised (private) Poisson
batch sizes. It is refused now, before anything is written; a public run keeps the flag.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from textkg.cli.main import main
from textkg.errors import ConfigError
from textkg.training.config import PrivacyConfig, RunConfig, TrainConfig

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiny_blp"
ARGS = ["--dataset", str(FIXTURE), "--split", "transductive", "--model", "transe", "--dim", "8", "--epochs", "1"]
PRIVATE = ["--noise-multiplier", "1.0", "--private-size", "256"]


@pytest.mark.parametrize(
    "privacy", [["--privacy", "full"], ["--privacy", "confidential", "--confidential-relations", "/r/likes"]]
)
def test_max_minutes_under_privacy_exits_2_and_writes_nothing(tmp_path, capsys, privacy):
    out = tmp_path / "run"
    assert main(["train", *ARGS, *privacy, *PRIVATE, "--max-minutes", "5", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "train.max_minutes" in err and "epsilon" in err and "Traceback" not in err
    assert not out.exists()


def test_the_federate_command_refuses_it_too(tmp_path, capsys):
    out = tmp_path / "fed"
    argv = ["federate", *ARGS, "--privacy", "full", *PRIVATE, "--max-minutes", "5", "--clients", "2"]
    assert main([*argv, "--rounds", "1", "--out", str(out)]) == 2
    assert "train.max_minutes" in capsys.readouterr().err
    assert not out.exists()


def test_the_python_api_refuses_it():
    with pytest.raises(ConfigError, match="max_minutes"):
        RunConfig(
            train=TrainConfig(max_minutes=1.0),
            privacy=PrivacyConfig(mode="full", noise_multiplier=1.0, private_size=100),
        )


def test_a_public_run_keeps_max_minutes(tmp_path):
    assert main(["train", *ARGS, "--max-minutes", "5", "--batch-size", "64", "--out", str(tmp_path / "run")]) == 0
