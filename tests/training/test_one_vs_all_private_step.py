"""DP-SGD with the 1-vs-all loss: the private step, the noise of an already-clipped sum, the config rules, a run.

Oracle for the step: with σ = 0 every trained parameter's ``.grad`` is
``Σ_b min(1, C/(‖g_b‖ + 1e-6)) g_b / (qN)`` of the one-example-at-a-time
``torch.func.grad`` gradients (``test_one_vs_all_clipping.oracle``).
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_one_vs_all_clipping import POOL, POSITIONS, TEMPERATURE, make_model, make_triples, oracle

from textkg.cli.config_loading import build_run_config
from textkg.cli.main import build_parser
from textkg.errors import ConfigError
from textkg.models import get_preset
from textkg.pipeline.job import run
from textkg.privacy.dp_sgd import DPSGDStep
from textkg.training.config import DataConfig, PrivacyConfig, RunConfig, TrainConfig
from textkg.training.private_step import OneVsAllPrivateStep, noise_shapes

pytestmark = pytest.mark.portability  # rerun by .ci/run under another thread count and ISA

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiny_blp"


def _mechanism(sigma: float, c: float, expected: float) -> DPSGDStep:
    return DPSGDStep(
        noise_multiplier=sigma,
        max_grad_norm=c,
        expected_batch_size=expected,
        accountant=None,
        sample_rate=1.0,
        generator=torch.Generator().manual_seed(0),
    )


def test_private_step_without_noise_is_the_clipped_oracle_mean():
    model = make_model()
    triples = make_triples()
    grads = oracle(model, triples, seed=7, skip=len(triples))  # the step's Poisson sample draws first
    norms = torch.stack([sum(g.square().sum() for g in ex.values()) for ex in grads]).sqrt()
    c, expected = float(norms.median()), 6.5
    coef = (c / (norms + 1e-6)).clamp(max=1.0)
    step = OneVsAllPrivateStep(
        model,
        private_triples=triples,
        entity_pool=POOL,
        positions=POSITIONS,
        temperature=TEMPERATURE,
        mechanism=_mechanism(0.0, c, expected),
        sample_rate=1.0,
        generator=torch.Generator().manual_seed(7),
    )
    assert step() == len(triples)  # q = 1: every triple is sampled
    names = dict(model.named_parameters())
    for k, p in names.items():
        want = sum(cb * ex[k] for cb, ex in zip(coef, grads, strict=True)) / expected
        assert torch.allclose(p.grad, want, rtol=1e-8, atol=1e-13), k
    assert torch.allclose(step.mechanism.last_norms, norms, rtol=1e-9)


def test_noise_of_a_clipped_sum_is_sigma_c_on_every_entry_summed_in_float64():
    sums = {"a": torch.randn(3, 4), "b": torch.zeros(5)}
    unit = {"a": torch.randn(3, 4, dtype=torch.float64), "b": torch.randn(5, dtype=torch.float64)}
    mech = _mechanism(1.3, 0.7, 4.0)
    out = mech.noise_clipped_sum(sums, norms=torch.ones(2), noise=unit)
    for k in sums:  # (σC·unit + Σ) / (qN), formed in float64 and rounded once
        assert out[k].dtype == torch.float32
        assert torch.equal(out[k], (unit[k] * (1.3 * 0.7 / 4.0) + sums[k].double() / 4.0).float()), k
        assert torch.allclose(out[k].double(), (unit[k] * 1.3 * 0.7 + sums[k].double()) / 4.0, atol=1e-6)
    with pytest.raises(ValueError, match="every parameter"):
        mech.noise_clipped_sum(sums, norms=torch.ones(2), noise={"a": unit["a"]})


def test_private_step_noise_covers_every_trained_parameter():
    model = make_model()
    shapes = noise_shapes(model)
    assert set(shapes) == {
        "entity",
        "relation",
        "fusion.w_structural",
        "fusion.w_text",
        "text.projection.weight",
        "text.projection.bias",
    }
    gen = torch.Generator().manual_seed(1)
    unit = {k: torch.randn(s, dtype=torch.float64, generator=gen) for k, s in shapes.items()}
    step = OneVsAllPrivateStep(
        model,
        private_triples=make_triples(),
        entity_pool=POOL,
        positions=POSITIONS,
        temperature=TEMPERATURE,
        mechanism=_mechanism(1e6, 1e-9, 1.0),
        sample_rate=1.0,
        generator=torch.Generator().manual_seed(3),
        noise=unit,
    )
    step()
    params = {**model.dense_parameters(), **model.tables()}
    for k, p in params.items():  # ‖clipped sum‖ ≤ B·C ≪ σC: the gradient is the noise, σC/(qN) · unit
        assert torch.allclose(p.grad, unit[k].to(p.dtype) * 1e-3, rtol=1e-4, atol=1e-10), k


def _private(
    model_name: str = "cpu-fused",
    *,
    privacy: dict | None = None,
    data: dict | None = None,
    model_changes: dict | None = None,
    **train,
):
    model = dataclasses.replace(get_preset(model_name), **(model_changes or {}))
    return RunConfig(
        data=DataConfig(**(data or {})),
        model=model,
        model_name=model_name,
        train=TrainConfig(loss="softmax", negatives="all", **train),
        privacy=PrivacyConfig(**{"mode": "full", "noise_multiplier": 1.0, **(privacy or {})}),
    )


def test_config_accepts_only_the_supported_private_one_vs_all():
    assert _private().train.negatives == "all"
    assert _private("cpu-best").train.negatives == "all"
    assert _private(privacy={"mode": "confidential", "confidential_fraction": 0.5}).privacy.mode == "confidential"
    cases = [
        ({"model_name": "transe"}, "TransE with p=2"),
        ({"model_name": "gated-transe"}, "TransE with p=2"),
        ({"model_name": "gated-transe", "model_changes": {"interaction_kwargs": {"p": 2}}}, "fusions"),
        ({"model_name": "dkrl-flair"}, "text_module"),
        ({"pool_size": 16}, "pool_size"),
        ({"privacy": {"mechanism": "simulation"}}, "dp-sgd"),
        ({"data": {"public_entities": "ids.txt"}}, "public vocabulary"),
    ]
    for kwargs, message in cases:
        with pytest.raises(ConfigError, match=message) as err:
            _private(**kwargs)
        assert err.value.field == "train.negatives"


@pytest.mark.slow
def test_a_private_one_vs_all_run_is_dp_and_trains(tmp_path, monkeypatch):
    args = build_parser().parse_args(
        [
            "train",
            "--dataset",
            str(FIXTURE),
            "--split",
            "transductive",
            "--model",
            "cpu-fused",
            "--encoder",
            "glove-bow",
            "--dim",
            "8",
            "--epochs",
            "2",
            "--batch-size",
            "32",
            "--seed",
            "0",
            "--privacy",
            "full",
            "--private-size",
            "1000",
            "--noise-multiplier",
            "1.0",
            "--negatives",
            "all",
        ]
    )
    cfg = build_run_config(args)
    assert (cfg.train.negatives, cfg.train.loss, cfg.train.temperature) == ("all", "softmax", 0.05)
    calls = []
    original = OneVsAllPrivateStep.__call__

    def counted(self):
        calls.append(self.step)
        return original(self)

    monkeypatch.setattr(OneVsAllPrivateStep, "__call__", counted)
    run(cfg, tmp_path, progress=False)
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    privacy = metrics["privacy"]
    assert privacy["guarantee"] == "dp" and privacy["steps"] > 0 and privacy["epsilon"] > 0
    assert calls == list(range(privacy["steps"]))  # every private step was a 1-vs-all step
    assert set(privacy["covered_parameters"]) == {
        "table:entity",
        "table:relation",
        "fusion.w_structural",
        "fusion.w_text",
        "text.projection.weight",
        "text.projection.bias",
    }
    assert json.loads((tmp_path / "config.json").read_text())["train"]["negatives"] == "all"
    state = torch.load(tmp_path / "best_model.pt")
    assert all(bool(torch.isfinite(v).all()) for v in state.values() if v.is_floating_point())
