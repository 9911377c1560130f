"""Data-parallel training (``torchrun -m textkg train`` / ``textkg train --nproc``) against one process.

Two gloo processes on the CPU split each batch and sum their gradients; the
update is the one-process update up to float summation order, so the best
model and the checkpoint's state must match one process with the same seed and
flags.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from textkg.cli.main import main
from textkg.cli.training import _without_nproc

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiny_blp"
BASE = ["train", "--dataset", str(FIXTURE), "--split", "transductive", "--model", "transe", "--dim", "8"]
BASE += ["--epochs", "2", "--seed", "0"]


def _env() -> dict:
    env = dict(os.environ)
    env.update(OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")
    env.pop("WORLD_SIZE", None)
    return env


def _torchrun(out: Path, *flags: str, nproc: int = 2) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "textkg", *BASE, *flags, "--no-progress", "--out", str(out), "--nproc", str(nproc)]
    return subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=600)


def _compare(one: Path, two: Path, atol: float = 1e-2) -> None:
    # End to end the weights agree only to about lr x steps: float32 sums in another order differ
    # by ~1e-7, and Adam divides by sqrt(v), so a near-zero gradient entry whose sign flips moves
    # by up to lr (1e-3) per step. TransE is blind to a bias shared by heads and tails, so the
    # text projection's bias has such entries (3.4e-3 seen after 14 steps of 1-vs-all). Adam is
    # also blind to a constant gradient scale: the exact oracle is the one-step gradient test below.
    a = torch.load(one / "best_model.pt", weights_only=False)
    b = torch.load(two / "best_model.pt", weights_only=False)
    assert a.keys() == b.keys()
    for k in a:
        assert torch.allclose(a[k], b[k], atol=atol), (k, float((a[k] - b[k]).abs().max()))
    ca = torch.load(one / "checkpoint.pt", weights_only=False)
    cb = torch.load(two / "checkpoint.pt", weights_only=False)
    assert ca["state"]["step"] == cb["state"]["step"] and torch.equal(ca["generator"], cb["generator"])
    ma, mb = (json.loads((d / "metrics.json").read_text()) for d in (one, two))
    assert ma["test"]["mrr"] == pytest.approx(mb["test"]["mrr"], abs=0.02)


@pytest.mark.slow
@pytest.mark.parametrize(
    "flags",
    [
        ("--model", "transe", "--batch-size", "33"),  # sampled negatives; 33 rows: unequal shares
        (
            "--model",
            "fused-transe",
            "--encoder",
            "glove-bow",
            "--negatives",
            "all",
            "--loss",
            "softmax",
            "--batch-size",
            "32",
        ),  # 1-vs-all with structural dropout on the pool (shared draw)
    ],
    ids=["sampled", "one-vs-all-dropout"],
)
def test_two_processes_give_the_one_process_model(tmp_path, flags):
    assert main([*BASE, *flags, "--no-progress", "--out", str(tmp_path / "one")]) == 0
    done = _torchrun(tmp_path / "two", *flags)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)  # rank 0 alone prints the summary
    assert summary["out"] == str(tmp_path / "two")
    _compare(tmp_path / "one", tmp_path / "two")
    assert sorted(p.name for p in (tmp_path / "two").iterdir()) == sorted(p.name for p in (tmp_path / "one").iterdir())


GRADIENT_SCRIPT = """
import sys, torch, torch.distributed as dist
from textkg.cli.config_loading import build_run_config
from textkg.cli.main import build_parser
from textkg.distributed import DataParallelTrainer, world_size_from_env
from textkg.pipeline.job import build_trainer, prepare
from textkg.training.trainer import Trainer

out, argv = sys.argv[1], sys.argv[2:]
distributed = world_size_from_env() > 1
if distributed:
    dist.init_process_group("gloo")
cfg = build_run_config(build_parser().parse_args(argv))
prep = prepare(cfg)
trainer, _, _ = build_trainer(
    prep, cfg, out, trainer_class=DataParallelTrainer if distributed else Trainer
)
trainer.optimizer.step = lambda: None  # keep the gradients of the first step
trainer.model.train()
loss = trainer._public_step(torch.arange(33))
if not distributed or dist.get_rank() == 0:
    grads = {k: p.grad.to_dense() if p.grad.is_sparse else p.grad
             for k, p in trainer.model.named_parameters() if p.grad is not None}
    sparse = sorted(k for k, p in trainer.model.named_parameters() if p.grad is not None and p.grad.is_sparse)
    rows = {k: p.grad.coalesce().indices()[0] for k, p in trainer.model.named_parameters()
            if p.grad is not None and p.grad.is_sparse}
    torch.save({"loss": loss, "grads": grads, "generator": trainer.generator.get_state(), "sparse": sparse,
                "rows": rows}, out + "/grads.pt")
if distributed:
    dist.destroy_process_group()
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    "flags",
    [
        ("--model", "transe"),
        ("--model", "fused-transe", "--encoder", "glove-bow", "--negatives", "all", "--loss", "softmax"),
        ("--model", "transe", "--optimizer", "lazy-adam"),  # row-sparse gradients: only the batch's rows sent
    ],
    ids=["sampled", "one-vs-all-dropout", "lazy-adam"],
)
def test_one_step_gradient_is_the_one_process_gradient(tmp_path, flags):
    """The oracle Adam cannot blur: the summed gradient of a 33-row batch split over 2 ranks is
    the one-process gradient (a share's mean instead of the global mean would be off by 2x)."""
    script = tmp_path / "grads.py"
    script.write_text(GRADIENT_SCRIPT)
    argv = [*BASE, *flags, "--batch-size", "33"]
    for name, launcher in (
        ("one", [sys.executable, str(script)]),
        ("two", [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", str(script)]),
    ):
        (tmp_path / name).mkdir()
        done = subprocess.run(
            [*launcher, str(tmp_path / name), *argv], capture_output=True, text=True, env=_env(), timeout=600
        )
        assert done.returncode == 0, done.stderr[-3000:]
    one, two = (torch.load(tmp_path / n / "grads.pt", weights_only=False) for n in ("one", "two"))
    assert one["grads"].keys() == two["grads"].keys() and one["grads"]
    for k, g in one["grads"].items():
        assert torch.allclose(g, two["grads"][k], atol=1e-6, rtol=1e-5), (k, float((g - two["grads"][k]).abs().max()))
    assert one["loss"] == pytest.approx(two["loss"], rel=1e-6)
    assert one["sparse"] == two["sparse"]  # lazy Adam: sparse on both, over the same rows
    for k, r in one["rows"].items():
        assert torch.equal(r, two["rows"][k])
    assert torch.equal(one["generator"], two["generator"])


def test_nproc_is_stripped_before_torchrun():
    assert _without_nproc(["train", "--nproc", "2", "--epochs", "1"]) == ["train", "--epochs", "1"]
    assert _without_nproc(["train", "--nproc=4", "--seed", "3"]) == ["train", "--seed", "3"]


def test_each_rank_takes_the_gpu_of_its_local_rank(monkeypatch):
    from textkg.distributed import rank_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setenv("LOCAL_RANK", "3")
    assert rank_device("auto") == "cuda:1" and rank_device("cuda") == "cuda:1"
    assert rank_device("cuda:0") == "cuda:0" and rank_device("cpu") == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert rank_device("auto") == "auto"
