"""``train.ema_decay``: a moving average of the weights, validated beside the raw ones."""

from __future__ import annotations

import pytest
import torch
from tiny_trainer import tiny_trainer
from tqdm.auto import tqdm

from textkg.errors import ConfigError
from textkg.training import checkpoint as ckpt
from textkg.training.config import TrainConfig


def test_average_follows_the_formula(tmp_path):
    """Oracle: the average replayed by hand from the weights after every step."""
    trainer = tiny_trainer(tmp_path, ema_decay=0.9, epochs=1)
    name = "entity_embeddings.weight" if "entity_embeddings.weight" in trainer.ema else next(iter(trainer.ema))
    param = dict(trainer.model.named_parameters())[name]
    want = param.detach().clone()
    step = trainer.optimizer.step
    count = [0]

    def recording_step(*args, **kwargs):
        out = step(*args, **kwargs)
        t = count[0]
        d = min(0.9, (1 + t) / (10 + t))
        want.mul_(d).add_(param.detach(), alpha=1 - d)
        count[0] += 1
        return out

    trainer.optimizer.step = recording_step
    trainer._run_epoch(tqdm(disable=True))
    assert count[0] > 3
    torch.testing.assert_close(trainer.ema[name], want)
    assert not torch.equal(trainer.ema[name], param.detach())


def test_validation_scores_both_and_keeps_the_better(tmp_path):
    trainer = tiny_trainer(tmp_path, ema_decay=0.5)
    calls = []

    def validate(model):
        calls.append(next(model.parameters()).detach().clone())
        return 0.1 * len(calls) if len(calls) % 2 == 0 else 0.1  # the average (second call) wins

    trainer.validate = validate
    state = trainer.fit(progress=False)
    record = state.history[-1]
    assert record["valid_mrr_raw"] == 0.1 and record["valid_mrr_ema"] == pytest.approx(0.4)
    assert record["weights"] == "ema" and record["valid_mrr"] == pytest.approx(0.4)
    assert len(calls) == 4 and not torch.equal(calls[-2], calls[-1])
    # the published best model is the average; the model is restored from it after fit
    best = ckpt.load(tmp_path / ckpt.BEST_MODEL)
    first = next(iter(trainer.ema))
    torch.testing.assert_close(best[first], trainer.ema[first])


def test_raw_weights_come_back_after_validating_the_average(tmp_path):
    trainer = tiny_trainer(tmp_path, ema_decay=0.9, epochs=1)
    trainer._run_epoch(tqdm(disable=True))
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    trainer._validate({})
    for n, p in trainer.model.named_parameters():
        assert torch.equal(p, before[n])


def test_resume_restores_the_average(tmp_path):
    first = tiny_trainer(tmp_path, ema_decay=0.9)
    first._run_epoch(tqdm(disable=True))
    first.state.epoch += 1
    first.save()
    resumed = tiny_trainer(tmp_path, ema_decay=0.9)
    resumed.restore(ckpt.load(tmp_path / ckpt.CHECKPOINT))
    for n, t in first.ema.items():
        assert torch.equal(resumed.ema[n], t)


def test_off_by_default(tmp_path):
    trainer = tiny_trainer(tmp_path)
    assert trainer.ema is None
    state = trainer.fit(progress=False)
    assert "valid_mrr_ema" not in state.history[-1]


@pytest.mark.parametrize("bad", [1.0, -0.1, True, "0.9"])
def test_bad_decay_names_the_field(bad):
    with pytest.raises(ConfigError) as err:
        TrainConfig(ema_decay=bad)
    assert err.value.field == "train.ema_decay"
