"""``train.lr_schedule: cosine``: the rate each step uses, from the step count alone."""

from __future__ import annotations

import math

import pytest
import torch
from tiny_trainer import tiny_trainer
from tqdm.auto import tqdm

from textkg.errors import ConfigError
from textkg.training.config import TrainConfig


def _record_lrs(trainer):
    seen = []
    step = trainer.optimizer.step

    def recording_step(*args, **kwargs):
        seen.append(trainer.optimizer.param_groups[0]["lr"])
        return step(*args, **kwargs)

    trainer.optimizer.step = recording_step
    return seen


def test_cosine_rates_follow_the_formula(tmp_path):
    trainer = tiny_trainer(tmp_path, lr_schedule="cosine")
    seen = _record_lrs(trainer)
    trainer.fit(progress=False)
    total = 2 * trainer.plan.public_steps
    assert len(seen) == total > 2
    want = [0.1 * 0.5 * (1 + math.cos(math.pi * t / total)) for t in range(total)]
    assert seen == pytest.approx(want)
    assert seen[0] == pytest.approx(0.1) and seen[-1] < 0.1 * (math.pi / total) ** 2


def test_constant_is_the_default_and_leaves_the_rate(tmp_path):
    trainer = tiny_trainer(tmp_path)
    seen = _record_lrs(trainer)
    trainer.fit(progress=False)
    assert set(seen) == {0.1}


def test_resume_continues_the_schedule(tmp_path):
    (tmp_path / "a").mkdir()
    first = tiny_trainer(tmp_path / "a", lr_schedule="cosine", epochs=2)
    first._run_epoch(tqdm(disable=True))  # epoch 1 of 2, then "crash" after its checkpoint
    first.state.epoch += 1
    first.save()
    resumed = tiny_trainer(tmp_path / "a", lr_schedule="cosine", epochs=2)
    resumed.restore(torch.load(tmp_path / "a" / "checkpoint.pt", weights_only=False))
    seen = _record_lrs(resumed)
    resumed.fit(progress=False)
    total = 2 * resumed.plan.public_steps
    half = resumed.plan.public_steps
    assert seen == pytest.approx([0.1 * 0.5 * (1 + math.cos(math.pi * t / total)) for t in range(half, total)])


def test_unknown_schedule_names_the_field():
    with pytest.raises(ConfigError) as err:
        TrainConfig(lr_schedule="linear")
    assert err.value.field == "train.lr_schedule"
