"""``train.optimizer: lazy-adam``: row-sparse entity gradients and SparseAdam on the entity table."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))
from models_cases import make_model, random_triples

from textkg.cli.main import main
from textkg.errors import ConfigError
from textkg.training.config import PrivacyConfig, RunConfig, TrainConfig
from textkg.training.optim import OptimizerSet, build_optimizer

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiny_blp"


def _loss(model, triples):
    return model(triples).sum()


@pytest.mark.parametrize("fusion", ["structural", "weighted"])
def test_the_first_step_is_adams_step_and_later_untouched_rows_stay(fusion):
    dense_model, lazy_model = make_model(fusion), make_model(fusion)
    lazy_model.load_state_dict(dense_model.state_dict())
    dense = build_optimizer(dense_model, name="adam", lr=0.01, weight_decay=0.0)
    lazy = build_optimizer(lazy_model, name="lazy-adam", lr=0.01, weight_decay=0.0)
    assert isinstance(lazy, OptimizerSet) and lazy_model.sparse_entity_rows
    first, second = random_triples((6,), seed=1), torch.tensor([[0, 0, 1]])
    for model, opt in ((dense_model, dense), (lazy_model, lazy)):
        opt.zero_grad()
        _loss(model, first).backward()
        opt.step()
    assert lazy_model.structural.weight.grad.is_sparse
    for (k, a), b in zip(dense_model.state_dict().items(), lazy_model.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7, msg=k)  # Adam's first step is lazy
    before = lazy_model.structural.weight.detach().clone()
    dense_before = dense_model.structural.weight.detach().clone()
    for model, opt in ((dense_model, dense), (lazy_model, lazy)):
        opt.zero_grad()
        _loss(model, second).backward()
        opt.step()
    rows = lazy_model.structural.rows(second[:, [0, 2]]).unique()
    moved = (lazy_model.structural.weight.detach() != before).any(dim=1).nonzero().flatten()
    assert set(moved.tolist()) <= set(rows.tolist())  # lazy: only the touched rows move
    touched_first = lazy_model.structural.rows(first[:, [0, 2]]).unique()
    others = sorted(set(touched_first.tolist()) - set(rows.tolist()))
    assert others and (dense_model.structural.weight.detach()[others] != dense_before[others]).any()  # Adam: momentum


def test_state_round_trips_through_a_checkpoint():
    model = make_model("structural")
    opt = build_optimizer(model, name="lazy-adam", lr=0.01, weight_decay=0.0)
    _loss(model, random_triples((4,), seed=2)).backward()
    opt.step()
    state = opt.state_dict()
    other = build_optimizer(make_model("structural"), name="lazy-adam", lr=0.01, weight_decay=0.0)
    other.load_state_dict(state)
    assert torch.equal(
        other.optimizers[0].state_dict()["state"][0]["exp_avg"], state["optimizers"][0]["state"][0]["exp_avg"]
    )


@pytest.mark.parametrize(
    ("train", "privacy", "message"),
    [
        ({"negatives": "all", "loss": "softmax"}, {}, "1-vs-all touches every row"),
        ({"weight_decay": 0.1}, {}, "no weight decay"),
        ({}, {"mode": "full", "noise_multiplier": 1.0}, "DP-SGD noises every row"),
    ],
)
def test_refused_where_every_row_is_touched(train, privacy, message):
    with pytest.raises(ConfigError, match=message) as err:
        RunConfig(train=TrainConfig(optimizer="lazy-adam", **train), privacy=PrivacyConfig(**privacy))
    assert err.value.field == "train.optimizer"


def test_cli_run_with_lazy_adam_trains_and_resumes(tmp_path):
    out = tmp_path / "run"
    base = ["train", "--dataset", str(FIXTURE), "--split", "transductive", "--model", "transe", "--dim", "8"]
    base += ["--seed", "0"]
    assert main([*base, "--epochs", "1", "--optimizer", "lazy-adam", "--no-progress", "--out", str(out)]) == 0
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["train"]["optimizer"] == "lazy-adam"
    cfg["train"]["epochs"] = 2
    (out / "config.json").write_text(json.dumps(cfg))
    assert main(["train", "--resume", str(out), "--no-progress"]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["test"]["mrr"] > 0


def test_nproc_refuses_lazy_adam_with_structural_dropout_before_torchrun(tmp_path, capsys):
    code = main(
        ["train", "--dataset", str(FIXTURE), "--optimizer", "lazy-adam", "--structural-dropout", "0.2"]
        + ["--model", "fused-transe", "--encoder", "glove-bow", "--nproc", "2", "--out", str(tmp_path / "o")]
    )
    assert code == 2 and "lazy-adam with structural dropout is not supported" in capsys.readouterr().err
