"""Private (DP-SGD) data-parallel training against one process.

Two gloo processes share each private step: both draw the same Poisson sample,
corruptions, dropout and noise (rank 0's key), each clips its own rows of the
sample, the clipped sums are summed in float64, and the noise is added once. With
a PUBLIC key (``--reproducible-noise``) one process draws the same randomness,
so the noised gradient of a step must equal the one-process gradient; with the
secret key, both ranks must hold the same key, gradient and ledger.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
from test_distributed import BASE, _compare, _env, _torchrun

PRIVATE = ("--privacy", "full", "--private-size", "200", "--noise-multiplier", "0.8", "--batch-size", "16")

STEP_SCRIPT = """
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
rank = dist.get_rank() if distributed else 0
cfg = build_run_config(build_parser().parse_args(argv))
prep = prepare(cfg)
trainer, _, _ = build_trainer(prep, cfg, out, trainer_class=DataParallelTrainer if distributed else Trainer)
trainer.optimizer.step = lambda: None  # keep the gradients of each step
trainer.model.train()
steps = []
for _ in range(3):  # three private steps: samples of different sizes, shares of different sizes
    assert trainer._private_step()
    steps.append({k: p.grad.clone() for k, p in trainer.model.named_parameters() if p.grad is not None})
private = trainer.private
torch.save(
    {
        "steps": steps,
        "key": private.randomness.state_dict()["key"],
        "ledger": list(private.accountant.history),
        "epsilon": private.epsilon(),
    },
    f"{out}/rank{rank}.pt",
)
private.close()
if distributed:
    dist.destroy_process_group()
"""


def _run_step_script(tmp_path, flags, name, nproc):
    script = tmp_path / "steps.py"
    script.write_text(STEP_SCRIPT)
    (tmp_path / "l2.yaml").write_text("model:\n  interaction_kwargs:\n    p: 2\n")  # 1-vs-all under DP: TransE L2
    flags = tuple(str(tmp_path / "l2.yaml") if f == "L2_CONFIG" else f for f in flags)
    launcher = (
        [sys.executable, str(script)]
        if nproc == 1
        else [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}", str(script)]
    )
    (tmp_path / name).mkdir()
    done = subprocess.run(
        [*launcher, str(tmp_path / name), *BASE, *flags], capture_output=True, text=True, env=_env(), timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return [torch.load(tmp_path / name / f"rank{r}.pt", weights_only=False) for r in range(nproc)]


CASES = {
    # structural TransE: per-example row gradients from one batched backward
    "sampled-rows": ("--model", "transe"),
    # fused text + structure with dropout: vmap over dense parameters and gathered rows
    "sampled-vmap-dropout": ("--model", "fused-transe", "--encoder", "glove-bow"),
    # 1-vs-all: exact ghost clipping, the pool's dropout shared by the batch
    "one-vs-all": (
        *("--model", "fused-transe", "--encoder", "glove-bow", "--negatives", "all", "--loss", "softmax"),
        *("--config", "L2_CONFIG"),
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("flags", list(CASES.values()), ids=list(CASES))
def test_a_shared_private_step_is_the_one_process_step(tmp_path, flags):
    flags = (*flags, *PRIVATE, "--reproducible-noise", "7")
    (one,) = _run_step_script(tmp_path, flags, "one", 1)
    two = _run_step_script(tmp_path, flags, "two", 2)
    for rank in two:
        assert rank["ledger"] == one["ledger"] and rank["epsilon"] == one["epsilon"]
        for expected, got in zip(one["steps"], rank["steps"], strict=True):
            assert expected.keys() == got.keys() and expected
            for k, g in expected.items():
                assert torch.allclose(g, got[k], atol=1e-6, rtol=1e-5), (k, float((g - got[k]).abs().max()))
    # the noise is in there: a step's gradient is not the clipped sum alone (sigma = 0.8)
    assert any(float(g.abs().max()) > 0 for g in one["steps"][0].values())


@pytest.mark.slow
def test_secret_key_is_rank_zeros_and_every_rank_takes_the_same_step(tmp_path):
    two = _run_step_script(tmp_path, (*CASES["sampled-vmap-dropout"], *PRIVATE), "two", 2)
    assert two[0]["key"] == two[1]["key"]
    assert two[0]["ledger"] == two[1]["ledger"]
    for a, b in zip(two[0]["steps"], two[1]["steps"], strict=True):
        for k in a:
            assert torch.equal(a[k], b[k]), k


@pytest.mark.slow
def test_private_run_on_two_processes_matches_one_process(tmp_path):
    """End to end with a public key: the files, the ledger and the test MRR of one process."""

    from textkg.cli.main import main

    flags = (*CASES["sampled-vmap-dropout"], *PRIVATE, "--reproducible-noise", "7")
    assert main([*BASE, *flags, "--no-progress", "--out", str(tmp_path / "one")]) == 0
    done = _torchrun(tmp_path / "two", *flags)
    assert done.returncode == 0, done.stderr[-3000:]
    _compare(tmp_path / "one", tmp_path / "two")
    ma, mb = (json.loads((tmp_path / d / "metrics.json").read_text())["privacy"] for d in ("one", "two"))
    assert ma["ledger"] == mb["ledger"] and ma["epsilon_if_secret"] == mb["epsilon_if_secret"]
    assert mb["guarantee"] == "simulation"  # a public key: labelled as such on any number of processes


@pytest.mark.slow
def test_secret_private_run_on_two_processes_is_labelled_dp_and_resumes_on_one(tmp_path):
    flags = (*CASES["sampled-rows"], *PRIVATE)
    done = _torchrun(tmp_path / "run", *flags)
    assert done.returncode == 0, done.stderr[-3000:]
    first = json.loads((tmp_path / "run" / "metrics.json").read_text())["privacy"]
    assert first["guarantee"] == "dp" and first["steps"] > 0
    key = torch.load(tmp_path / "run" / "checkpoint.pt", weights_only=False)["privacy"]["randomness"]["key"]
    # two more epochs in one process: the ledger carries on, under the same key
    from textkg.cli.main import main

    cfg = json.loads((tmp_path / "run" / "config.json").read_text())
    cfg["train"]["epochs"] = 3
    (tmp_path / "run" / "config.json").write_text(json.dumps(cfg))
    assert main(["train", "--resume", str(tmp_path / "run"), "--no-progress"]) == 0
    resumed = json.loads((tmp_path / "run" / "metrics.json").read_text())["privacy"]
    assert resumed["steps"] > first["steps"] and resumed["epsilon"] > first["epsilon"]
    assert torch.load(tmp_path / "run" / "checkpoint.pt", weights_only=False)["privacy"]["randomness"]["key"] == key
