"""A budget that allows no step fails before training; one that stops a run early says so."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiny_blp"
BASE = [
    "train",
    "--dataset",
    str(FIXTURE),
    "--split",
    "transductive",
    "--model",
    "transe",
    "--dim",
    "8",
    "--batch-size",
    "32",
    "--privacy",
    "full",
    "--private-size",
    "200",
    "--no-progress",
]


def _cli(args, tmp_path):
    env = {
        "TEXTKG_CACHE_DIR": str(tmp_path / "cache"),
        "PATH": "/usr/bin:/bin",
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
    }
    return subprocess.run(
        [sys.executable, "-m", "textkg.cli.main", *args], capture_output=True, text=True, env=env, timeout=300
    )


def test_a_budget_that_allows_no_step_exits_2_before_writing(tmp_path):
    out = tmp_path / "run"
    proc = _cli(
        [*BASE, "--epochs", "1", "--target-epsilon", "1", "--noise-multiplier", "0.1", "--out", str(out)], tmp_path
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert "not a single step" in proc.stderr and "privacy.target_epsilon" in proc.stderr
    assert not out.exists()


def test_a_budget_that_stops_the_plan_says_so_on_stderr(tmp_path):
    out = tmp_path / "run"
    proc = _cli(
        [*BASE, "--epochs", "5", "--target-epsilon", "3", "--noise-multiplier", "0.9", "--out", str(out)], tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["train"]["stopped"] == "privacy budget reached"
    assert "stopped training after" in proc.stderr
    assert metrics["privacy"]["epsilon"] <= 3
