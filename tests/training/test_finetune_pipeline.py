"""``text_module: finetune`` through the training pipeline (BLP's full recipe).

On the tiny BLP-format fixture with the packaged MiniLM (nothing is fetched):
the token ids come from the frozen ``bert`` encoder's own tokenizer, one epoch
changes the transformer's weights, ``textkg train`` writes ``metrics.json``,
``textkg predict`` embeds a new description with the fine-tuned weights, and
a DP-SGD step clips and noises the transformer's parameters per example.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from pathlib import Path

import pytest
import torch

from textkg.cli.main import main
from textkg.errors import ConfigError
from textkg.models import ModelConfig, PooledTransformer, get_preset
from textkg.training import checkpoint as ckpt
from textkg.training.config import DataConfig, PrivacyConfig, RunConfig, TrainConfig
from textkg.training.features import finetune_settings, finetune_token_ids, text_inputs

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiny_blp"
PROBE = "text.module.model.encoder.layer.0.attention.self.query.weight"
TRAIN_ARGS = [
    "train",
    "--dataset",
    str(FIXTURE),
    "--split",
    "inductive",
    "--model",
    "blp-transe-finetune",
    "--dim",
    "8",
    "--epochs",
    "1",
    "--batch-size",
    "100",
    "--num-negatives",
    "2",
    "--no-progress",
]


def _finetune_cfg(**kwargs) -> ModelConfig:
    return dataclasses.replace(get_preset("blp-transe-finetune"), dim=8, **kwargs)


def _pretrained_probe() -> torch.Tensor:
    from transformers import AutoModel

    from textkg.encoders.bert import default_minilm_path

    return AutoModel.from_pretrained(default_minilm_path()).state_dict()[PROBE.removeprefix("text.module.model.")]


# -- settings and inputs (fast) ----------------------------------------------------------------
@pytest.mark.parametrize(
    ("model", "field"),
    [
        ({"encoder": "glove-bow", "encoder_kwargs": {}}, "model.encoder"),
        ({"encoder_kwargs": {"device": "cuda"}}, "model.encoder_kwargs.device"),
        ({"encoder_kwargs": {"pooling": "max"}}, "model.encoder_kwargs.pooling"),
        ({"encoder_kwargs": {"max_tokens": 1}}, "model.encoder_kwargs.max_tokens"),
    ],
)
def test_bad_finetune_settings_name_the_field(model, field):
    with pytest.raises(ConfigError) as info:
        finetune_settings(_finetune_cfg(**model))
    assert info.value.field == field


def test_defaults_are_the_frozen_bert_encoders():
    from textkg.encoders.bert import default_minilm_path

    assert finetune_settings(_finetune_cfg()) == {
        "model_name_or_path": default_minilm_path(),
        "pooling": "cls",
        "max_tokens": 32,
    }


def test_token_ids_are_the_frozen_encoders_tokenisation():
    from textkg.encoders import get_encoder

    texts = ["Ada Lovelace", "Łódź", "word " * 100]
    cfg = _finetune_cfg(encoder_kwargs={"pooling": "cls", "max_tokens": 16})
    ids = finetune_token_ids(cfg, texts)
    expected = get_encoder("bert", pooling="cls", max_tokens=16).tokenize(texts)
    assert set(ids) == {"input_ids", "attention_mask"}
    torch.testing.assert_close(ids["input_ids"], expected["input_ids"])
    torch.testing.assert_close(ids["attention_mask"], expected["attention_mask"])
    assert ids["input_ids"].shape == (3, 16)


def test_text_inputs_build_a_trainable_transformer_with_the_encoders_pooling():
    inputs = text_inputs(_finetune_cfg(encoder_kwargs={"pooling": "mean"}), ["Oslo", "Lima is a city"])
    module = inputs.pop("text_module")
    assert isinstance(module, PooledTransformer) and module.pooling == "mean" and module.out_dim == 384
    assert set(inputs) == {"input_ids", "attention_mask"}
    trained = [n for n, p in module.named_parameters() if p.requires_grad]
    assert trained and not any(n.startswith("model.pooler.") for n in trained)  # the unread pooler is frozen


# -- the CLI end to end --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def finetuned_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("finetune") / "run"
    assert main([*TRAIN_ARGS, "--out", str(out)]) == 0
    return out


def test_cli_run_fine_tunes_the_transformer(finetuned_run):
    metrics = json.loads((finetuned_run / "metrics.json").read_text())
    assert metrics["model"]["text_module"] == "finetune" and metrics["train"]["steps"] >= 1
    assert 0 < metrics["test"]["mrr"] <= 1
    config = json.loads((finetuned_run / "config.json").read_text())
    assert config["train"]["lr"] == 2e-5 and config["train"]["margin"] == 1.0  # the preset's BLP settings
    state = ckpt.load(finetuned_run / ckpt.BEST_MODEL)
    assert not torch.equal(state[PROBE], _pretrained_probe())
    assert "text.text_input_ids" in state and "text.text_attention_mask" in state


def test_predict_embeds_new_entities_with_the_fine_tuned_weights(finetuned_run, capsys):
    from textkg.predict import load_predictor

    capsys.readouterr()
    assert (
        main(
            [
                "predict",
                str(finetuned_run),
                "--description",
                "Bergen is a city in Norway",
                "--relation",
                "/geo/near_by",
                "--direction",
                "tail",
                "--top-k",
                "3",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert len(out["predictions"]) == 3
    predictor = load_predictor(finetuned_run)
    assert torch.equal(predictor.model.state_dict()[PROBE], ckpt.load(finetuned_run / ckpt.BEST_MODEL)[PROBE])
    # a known entity's description, embedded as a new one, gives its own (text-only) vector
    kg = predictor.kg
    new = predictor.embed([kg.entity_descriptions[3]])
    with torch.no_grad():
        known = predictor.model.entity_matrix(torch.tensor([3]))
    torch.testing.assert_close(new, known, rtol=1e-4, atol=1e-5)


# -- privacy ---------------------------------------------------------------------------------------
def _prepared_private(tmp_path, **privacy):
    from textkg.pipeline.job import build_trainer, prepare

    cfg = RunConfig(
        data=DataConfig(dataset=str(FIXTURE), split="inductive"),
        model=_finetune_cfg(),
        train=TrainConfig(epochs=1, batch_size=2, num_negatives=1, lr=2e-5),
        privacy=PrivacyConfig(**privacy),
        model_name="blp-transe-finetune",
    )
    prep = prepare(cfg)
    _trainer, private, _audit = build_trainer(prep, cfg, tmp_path)
    return prep, private


def test_dp_per_example_gradients_of_the_transformer_match_autograd(tmp_path):
    from textkg.training.losses import margin_ranking
    from textkg.training.private_step import PrivateStep

    prep, _ = _prepared_private(tmp_path)
    model = prep.model.eval()  # no dropout: vmap and the loop see the same function
    loss_fn = functools.partial(margin_ranking, margin=1.0)
    step = PrivateStep(
        model,
        private_triples=prep.split.train,
        entity_pool=prep.split.train_entities,
        loss_fn=loss_fn,
        num_negatives=1,
        mechanism=None,
        sample_rate=0.01,
        generator=torch.Generator().manual_seed(0),
    )
    batch = prep.split.train[:2, None, :].repeat(1, 2, 1)  # (B=2, 1+K=2, 3): positive, corrupted tail
    batch[:, 1, 2] = prep.split.train_entities[[5, 9]]
    dense, _rows = step.per_example_gradients(batch)
    assert dense[PROBE].abs().sum() > 0
    names = [PROBE, "text.module.model.embeddings.word_embeddings.weight", "text.projection.weight"]
    for i in range(2):
        model.zero_grad()
        loss_fn(model(batch[i])).backward()
        params = dict(model.named_parameters())
        for name in names:
            # float32 through 2 attention layers, vmap vs. eager summation order: a fresh
            # install saw one of 3,072 entries differ by 1.5e-6 (rel 3.7e-4), so atol is
            # 1e-5: still 77x below the median non-zero entry of the smallest gradient
            # checked (7.7e-4, the attention query weight; 0.29 for the projection).
            torch.testing.assert_close(dense[name][i], params[name].grad, rtol=1e-4, atol=1e-5)


def test_dp_step_clips_and_noises_the_transformer(tmp_path):
    prep, private = _prepared_private(tmp_path, mode="full", noise_multiplier=1.0, max_grad_norm=1.0)
    model = prep.model.train()
    assert PROBE in private.report()["covered_parameters"]
    private.step(model, torch.Generator().manual_seed(0))
    grads = {n: p.grad for n, p in model.named_parameters() if p.requires_grad}
    assert all(g is not None and torch.isfinite(g).all() for g in grads.values())
    # noise σC/B with B = 2: far above any clipped gradient of a single entry
    assert grads[PROBE].std() > 0.1
    assert private.accountant.steps == 1


@pytest.mark.slow
def test_cli_dp_run_fine_tunes_under_dp_sgd(tmp_path):
    out = tmp_path / "dp"
    args = [
        *TRAIN_ARGS,
        "--batch-size",
        "8",
        "--privacy",
        "confidential",
        "--confidential-fraction",
        "0.1",
        "--private-size",
        "40",  # ~11 confidential statements; 40 / 8 = 5 private steps (1000 made 125, each through MiniLM)
        "--noise-multiplier",
        "1.0",
        "--out",
        str(out),
    ]
    assert main(args) == 0
    privacy = json.loads((out / "metrics.json").read_text())["privacy"]
    assert privacy["guarantee"] == "dp" and privacy["steps"] >= 1 and privacy["epsilon"] > 0
    assert PROBE in privacy["covered_parameters"]
    assert not torch.equal(ckpt.load(out / ckpt.BEST_MODEL)[PROBE], _pretrained_probe())
