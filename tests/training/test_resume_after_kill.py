"""A run killed with SIGKILL and resumed ends with the same ε (and the same model)
as an uninterrupted run: the privacy ledger lives in every checkpoint and a
mid-epoch checkpoint resumes at the exact step it recorded.

The kill is real (``os.kill(pid, SIGKILL)`` from inside the training process,
after a chosen number of DP steps), so nothing gets a chance to clean up.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiny_blp"

# Runs the CLI in a child process that SIGKILLs itself after KILL_AFTER private steps.
KILLER = """
import os, signal, sys
from textkg.training import trainer as t
from textkg.cli.main import main

limit = int(os.environ["KILL_AFTER"])
original = t.Trainer._private_step
taken = [0]

def counting_step(self):
    ok = original(self)
    taken[0] += 1
    if taken[0] == limit:
        os.kill(os.getpid(), signal.SIGKILL)
    return ok

t.Trainer._private_step = counting_step
sys.exit(main(sys.argv[1:]))
"""

TRAIN_ARGS = [
    "train",
    "--dataset",
    str(FIXTURE),
    "--split",
    "transductive",
    "--model",
    "transe",
    "--dim",
    "8",
    "--epochs",
    "3",
    "--batch-size",
    "16",
    "--seed",
    "3",
    "--privacy",
    "full",
    "--private-size",
    "200",
    "--noise-multiplier",
    "1.1",
    "--max-grad-norm",
    "1.0",
    "--checkpoint-every",
    "4",
    "--no-progress",
]


def _env(tmp_path: Path) -> dict:
    env = dict(os.environ)
    env.setdefault("TEXTKG_CACHE_DIR", str(tmp_path / "cache"))
    return env


def _cli(args, tmp_path, *, extra_env=None, script=None) -> subprocess.CompletedProcess:
    env = {**_env(tmp_path), **(extra_env or {})}
    cmd = [sys.executable, "-c", script, *args] if script else [sys.executable, "-m", "textkg.cli.main", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)


@pytest.mark.slow
def test_kill_minus_nine_then_resume_keeps_epsilon(tmp_path):
    # an uninterrupted run can only share the noise of the killed one if both derive it from a
    # public seed: --reproducible-noise (labelled simulation); the secret-key case is the next test
    args = [*TRAIN_ARGS, "--reproducible-noise", "5"]
    whole = tmp_path / "whole"
    done = _cli([*args, "--out", str(whole)], tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    reference = json.loads((whole / "metrics.json").read_text())

    killed = tmp_path / "killed"
    # 200 training triples, B=16 → 12 DP steps per epoch; die in epoch 2, 2 steps after a checkpoint
    proc = _cli([*args, "--out", str(killed)], tmp_path, extra_env={"KILL_AFTER": "18"}, script=KILLER)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    assert not (killed / "metrics.json").exists()
    assert (killed / "checkpoint.pt").exists()

    resumed = _cli(["train", "--resume", str(killed), "--no-progress"], tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    after = json.loads((killed / "metrics.json").read_text())

    for key in ("epsilon_if_secret", "steps", "alpha", "noise_multiplier", "sample_rate", "guarantee", "ledger"):
        assert after["privacy"][key] == reference["privacy"][key], key
    assert after["privacy"]["guarantee"] == "simulation"
    assert after["train"]["steps"] == reference["train"]["steps"]
    # same steps, same noise and same batches: the released model is the same too
    assert after["test"]["mrr"] == pytest.approx(reference["test"]["mrr"], rel=1e-6)


@pytest.mark.slow
def test_a_secret_key_survives_kill_and_resume_exactly(tmp_path):
    """With secret noise, resuming twice from the same crashed checkpoint gives the same model bit
    for bit (the key and the per-step streams live in the checkpoint), and the run stays ``dp``."""
    import shutil

    import torch

    killed = tmp_path / "killed"
    proc = _cli([*TRAIN_ARGS, "--out", str(killed)], tmp_path, extra_env={"KILL_AFTER": "18"}, script=KILLER)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    key = torch.load(killed / "checkpoint.pt", weights_only=False)["privacy"]["randomness"]["key"]
    twin = tmp_path / "twin"
    shutil.copytree(killed, twin)
    for run_dir in (killed, twin):
        resumed = _cli(["train", "--resume", str(run_dir), "--no-progress"], tmp_path)
        assert resumed.returncode == 0, resumed.stderr[-2000:]
    a, b = (torch.load(d / "best_model.pt", weights_only=False) for d in (killed, twin))
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert torch.load(killed / "checkpoint.pt", weights_only=False)["privacy"]["randomness"]["key"] == key
    metrics = json.loads((killed / "metrics.json").read_text())
    assert metrics["privacy"]["guarantee"] == "dp"
    assert key not in (killed / "config.json").read_text() + (killed / "metrics.json").read_text()


def test_resume_needs_a_checkpoint(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = _cli(["train", "--resume", str(empty)], tmp_path)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "config.json" in proc.stderr
