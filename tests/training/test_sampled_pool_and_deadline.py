"""Sampled 1-vs-all (``train.pool_size``) and the per-step ``max_minutes`` check."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))
from models_cases import NUM_ENTITIES, NUM_RELATIONS, SEEN, random_triples

from textkg.errors import ConfigError
from textkg.models import build_model, get_preset
from textkg.pipeline.job import build_trainer, prepare
from textkg.training.config import DataConfig, RunConfig, TrainConfig
from textkg.training.one_vs_all import one_vs_all_loss, pool_positions, sample_pool

TINY = Path(__file__).resolve().parents[1] / "fixtures" / "tiny_blp"


@pytest.mark.parametrize("size", [0, 1, 3, 7])
def test_sample_pool_holds_the_batch_ends_and_size_draws(size):
    triples = random_triples((4,), seed=1, num_entities=len(SEEN))
    gen = torch.Generator().manual_seed(size)
    pool, positions = sample_pool(SEEN, triples, size, num_entities=NUM_ENTITIES, generator=gen)
    ends = set(triples[:, 0].tolist()) | set(triples[:, 2].tolist())
    assert ends <= set(pool.tolist()) <= set(SEEN.tolist())
    assert len(ends) <= len(pool) <= len(ends) + size
    assert pool.tolist() == sorted(set(pool.tolist()))
    assert torch.equal(positions, pool_positions(pool, NUM_ENTITIES))
    again, _ = sample_pool(
        SEEN, triples, size, num_entities=NUM_ENTITIES, generator=torch.Generator().manual_seed(size)
    )
    assert torch.equal(pool, again)  # seeded


def test_sample_pool_draws_uniformly():
    """Each non-batch entity is drawn with probability size / |pool| (binomial 5-sigma band)."""
    triples = torch.tensor([[0, 0, 1]])
    gen = torch.Generator().manual_seed(0)
    counts = torch.zeros(NUM_ENTITIES)
    trials, size = 4000, 4
    for _ in range(trials):
        pool, _ = sample_pool(SEEN, triples, size, num_entities=NUM_ENTITIES, generator=gen)
        counts[pool] += 1
    assert counts[0] == counts[1] == trials and counts[10:].sum() == 0
    p = size / len(SEEN)
    sd = (trials * p * (1 - p)) ** 0.5
    others = counts[2:10]
    # 2..9 are in the pool only when among the `size` drawn of 10: probability size / 10 each
    assert bool((others - trials * p).abs().max() < 5 * sd), others


def test_whole_pool_size_equals_full_one_vs_all():
    cfg = dataclasses.replace(get_preset("transe-l2"), dim=8)
    torch.manual_seed(0)
    model = build_model(cfg, num_entities=NUM_ENTITIES, num_relations=NUM_RELATIONS, seen_entities=SEEN)
    triples = random_triples((5,), seed=2, num_entities=len(SEEN))
    pool, positions = sample_pool(SEEN, triples, len(SEEN), num_entities=NUM_ENTITIES)
    assert torch.equal(pool, SEEN)
    full = one_vs_all_loss(model, triples, entity_pool=SEEN, positions=pool_positions(SEEN, NUM_ENTITIES))
    assert torch.allclose(one_vs_all_loss(model, triples, entity_pool=pool, positions=positions), full)


def test_pool_size_config_rules():
    assert TrainConfig(loss="softmax", negatives="all", pool_size=64).pool_size == 64
    for bad in (-1, 2.5, True):
        with pytest.raises(ConfigError) as err:
            TrainConfig(loss="softmax", negatives="all", pool_size=bad)
        assert err.value.field == "train.pool_size"
    with pytest.raises(ConfigError, match="negatives 'all'"):
        TrainConfig(pool_size=8)


def _cfg(**train) -> RunConfig:
    model = dataclasses.replace(get_preset("transe-l2"), dim=8)
    return RunConfig(
        data=DataConfig(dataset=str(TINY), split="transductive"),
        model=model,
        train=TrainConfig(**{"epochs": 3, "batch_size": 8, "loss": "softmax", "negatives": "all", **train}),
        model_name="transe-l2",
    )


def test_sampled_pool_training_steps_see_only_the_drawn_rows(tmp_path):
    """With pool_size k, one step's gradient touches at most k + 2B entity rows."""
    cfg = _cfg(pool_size=5, batch_size=4)
    prep = prepare(cfg)
    trainer, _, _ = build_trainer(prep, cfg, tmp_path)
    idx = torch.arange(4)
    trainer._public_step(idx)
    (table,) = [
        p
        for name, p in prep.model.named_parameters()
        if p.grad is not None and p.ndim == 2 and p.shape[0] >= prep.kg.num_entities
    ]
    touched = int((table.grad.abs().sum(1) > 0).sum())
    assert 0 < touched <= 5 + 2 * 4 < len(prep.split.train_entities)


def test_max_minutes_stops_mid_epoch_and_validates(tmp_path):
    cfg = _cfg(batch_size=2, max_minutes=1e-9, epochs=2)
    prep = prepare(cfg)
    trainer, _, _ = build_trainer(prep, cfg, tmp_path)
    steps_per_epoch = trainer.plan.public_steps
    assert steps_per_epoch > 10
    state = trainer.fit(progress=False)
    assert state.step == 1 and state.stopped.startswith("max_minutes")
    assert len(state.history) == 1 and "valid_mrr" in state.history[0]
    assert (tmp_path / "best_model.pt").is_file() and (tmp_path / "checkpoint.pt").is_file()
