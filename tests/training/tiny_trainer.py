"""A :class:`~textkg.training.trainer.Trainer` on the tiny fixture, for tests of the training loop."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from textkg.models import get_preset
from textkg.pipeline.job import build_trainer, prepare
from textkg.training.config import DataConfig, RunConfig, TrainConfig

TINY = Path(__file__).resolve().parents[1] / "fixtures" / "tiny_blp"


def tiny_trainer(tmp_path, **train):
    """TransE (d = 8) on the transductive tiny fixture: 2 epochs, B = 50, lr 0.1 unless ``train`` says."""
    cfg = RunConfig(
        data=DataConfig(dataset=str(TINY), split="transductive"),
        model=dataclasses.replace(get_preset("transe"), dim=8),
        train=TrainConfig(**{"epochs": 2, "batch_size": 50, "lr": 0.1, **train}),
        model_name="transe",
    )
    return build_trainer(prepare(cfg), cfg, tmp_path)[0]
