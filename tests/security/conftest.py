"""Fixtures of the adversary tests: a tiny finished run to tamper with."""

from __future__ import annotations

from pathlib import Path

import pytest
from security_helpers import TINY

from textkg.cli.config_loading import build_run_config
from textkg.cli.main import build_parser
from textkg.pipeline.job import run


def train_tiny(out: Path, *flags: str) -> Path:
    """A 1-epoch run on the tiny fixture (seconds)."""
    argv = ["train", "--dataset", str(TINY), "--split", "transductive", "--model", "transe", "--dim", "8"]
    argv += ["--epochs", "1"]
    args = build_parser().parse_args([*argv, "--batch-size", "32", "--seed", "0", *flags])
    run(build_run_config(args), out, progress=False)
    return out


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory) -> Path:
    """A finished structural TransE run; copy it before tampering (:func:`copy_run`)."""
    return train_tiny(tmp_path_factory.mktemp("security") / "run", "--model", "transe")
