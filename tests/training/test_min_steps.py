"""Training steps scaled to the graph's size when nobody asked for a number of epochs (issue 37)."""

from __future__ import annotations

import dataclasses

import pytest

from textkg.cli.config_loading import DEFAULT_MIN_STEPS, build_run_config
from textkg.cli.main import build_parser
from textkg.errors import ConfigError
from textkg.pipeline.job import scale_epochs
from textkg.training.config import PrivacyConfig, RunConfig, TrainConfig
from textkg.training.schedule import MAX_SCALED_EPOCHS, epochs_for_min_steps


@pytest.mark.parametrize(
    ("epochs", "min_steps", "per_epoch", "expected"),
    [
        (5, 300, 7, 43),  # CL's 2,874 terms: 7 steps an epoch, 35 steps in 5 epochs; 43 epochs = 301 steps
        (5, 300, 60, 5),  # already 300 steps: unchanged
        (5, 300, 61, 5),
        (3, 300, 100, 3),  # the README's hpo job: asked for, never raised (and 300 reached anyway)
        (5, 0, 7, 5),  # off
        (5, 300, 1, MAX_SCALED_EPOCHS),  # a tiny graph: capped
        (250, 300, 1, 250),  # never lowered
    ],
)
def test_epochs_for_min_steps(epochs: int, min_steps: int, per_epoch: int, expected: int) -> None:
    assert epochs_for_min_steps(epochs=epochs, min_steps=min_steps, steps_per_epoch=per_epoch) == expected


def _cfg(*args: str) -> RunConfig:
    return build_run_config(build_parser().parse_args(["train", "--dataset", "hpo-small", *args]))


def test_train_scales_only_when_no_epochs_are_given(tmp_path) -> None:
    assert _cfg().train.min_steps == DEFAULT_MIN_STEPS
    assert _cfg("--epochs", "3").train.min_steps == 0
    config = tmp_path / "c.yaml"
    config.write_text("train:\n  epochs: 4\n")
    assert _cfg("--config", str(config)).train.min_steps == 0


def test_scale_epochs_on_a_small_graph_and_never_under_privacy() -> None:
    cfg = RunConfig(train=TrainConfig(epochs=5, batch_size=512, min_steps=300))
    assert scale_epochs(cfg, 4055).train.epochs == 38  # ceil(4055 / 512) = 8 steps an epoch
    assert scale_epochs(cfg, 512 * 60).train.epochs == 5
    private = dataclasses.replace(cfg, privacy=PrivacyConfig(mode="full", noise_multiplier=1.0, private_size=100))
    assert scale_epochs(private, 4055).train.epochs == 5  # under DP the planned epochs fix epsilon


def test_min_steps_is_checked() -> None:
    with pytest.raises(ConfigError, match="train.min_steps"):
        TrainConfig(min_steps=-1)
