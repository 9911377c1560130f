"""A federated holder takes the private step `textkg train` takes (issue 27: "the holders of
`textkg federate` use the same private step"). Before, a 1-vs-all recipe's holder fell back to the
sampled-negatives private step."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from textkg.models import get_preset
from textkg.pipeline.job import build_trainer, prepare
from textkg.training.config import DataConfig, PrivacyConfig, RunConfig, TrainConfig

TINY = Path(__file__).resolve().parents[1] / "fixtures" / "tiny_blp"
SAME = ("one_vs_all_temperature", "num_negatives", "batch_size", "sample_rate", "steps_per_epoch", "delta")


@pytest.mark.parametrize(
    "train",
    [
        {"loss": "softmax", "negatives": "all", "temperature": 0.05},  # the private recipe (cpu-private)
        {"loss": "margin", "negatives": "sampled", "num_negatives": 4},
    ],
)
def test_a_holder_takes_the_private_step_of_textkg_train(tmp_path, train):
    from textkg.federated.holder import DataHolder

    cfg = RunConfig(
        data=DataConfig(dataset=str(TINY), split="transductive"),
        model=dataclasses.replace(get_preset("glove-bow"), dim=8, irreflexive="none", interaction_kwargs={"p": 2}),
        train=TrainConfig(epochs=1, batch_size=16, **train),
        privacy=PrivacyConfig(mode="full", noise_multiplier=1.0, max_grad_norm=1.0, private_size=256),
        model_name="glove-bow",
    )
    prep = prepare(cfg)
    _, private, _ = build_trainer(prep, cfg, tmp_path)
    holder = DataHolder("h", prep, cfg, own=prep.split.train, shared=prep.split.train[:0], out_dir=tmp_path)
    assert holder.private is not None and private is not None
    for attr in SAME:
        assert getattr(holder.private, attr) == getattr(private, attr), attr
    if train["negatives"] == "all":
        assert holder.private.one_vs_all_temperature == 0.05


def test_federate_runs_a_one_vs_all_recipe_under_dp_with_the_exact_step(tmp_path, monkeypatch, capsys):
    """`textkg federate` with a 1-vs-all recipe under record-level DP runs the exact 1-vs-all private step
    and is labelled ``dp`` (a declared --private-size). Before, `federate` refused the combination
    ("1-vs-all under privacy is not supported by federate") although its holders supported it."""
    import json

    pytest.importorskip("flwr")
    import textkg.training.mechanisms as mechanisms
    from textkg.cli.main import main

    calls = {"one-vs-all": 0, "sampled": 0}

    class OneVsAll(mechanisms.OneVsAllPrivateStep):
        def __call__(self, *args, **kwargs):
            calls["one-vs-all"] += 1
            return super().__call__(*args, **kwargs)

    class Sampled(mechanisms.PrivateStep):
        def __call__(self, *args, **kwargs):
            calls["sampled"] += 1
            return super().__call__(*args, **kwargs)

    monkeypatch.setattr(mechanisms, "OneVsAllPrivateStep", OneVsAll)
    monkeypatch.setattr(mechanisms, "PrivateStep", Sampled)
    out = tmp_path / "fed"
    config = tmp_path / "p2.json"  # 1-vs-all under privacy needs TransE with p = 2
    config.write_text(json.dumps({"model": {"interaction_kwargs": {"p": 2}}}))
    argv = ["federate", "--config", str(config), "--dataset", str(TINY), "--split", "transductive",
            "--model", "glove-bow", "--dim", "8",
            "--loss", "softmax", "--negatives", "all", "--temperature", "0.05", "--batch-size", "16",
            "--privacy", "full", "--noise-multiplier", "1.0", "--private-size", "64",
            "--partition", "random", "--clients", "2", "--rounds", "2", "--no-progress", "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    capsys.readouterr()
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["privacy"]["guarantee"] == "dp"
    assert calls["one-vs-all"] > 0 and calls["sampled"] == 0
    steps = sum(c["privacy"]["steps"] for c in metrics["clients"])
    assert calls["one-vs-all"] == steps
