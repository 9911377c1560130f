"""``text_module: top-layers`` through the training pipeline, the CLI and ``textkg predict``.

On the tiny BLP-format fixture with the packaged MiniLM (nothing is fetched): a 1-vs-all
run trains the top layer at ``lr x lr_scale`` and saves it without the cached hidden
states; ``textkg predict`` embeds a new description with the trained layer; a resumed
run ends where the uninterrupted one ends; DP training is refused naming the field.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml

from textkg.cli.main import main
from textkg.errors import ConfigError
from textkg.models import ModelConfig
from textkg.training import checkpoint as ckpt
from textkg.training.config import PrivacyConfig, RunConfig

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiny_blp"
PROBE = "text.module.layers.0.attention.self.query.weight"
MODEL = {
    "interaction": "transe",
    "interaction_kwargs": {"p": 2},
    "fusion": "text",
    "encoder": "bert",
    "text_module": "top-layers",
    "text_module_kwargs": {"layers": 1, "live": 8, "refresh_every": 1, "lr_scale": 0.1},
    "normalize_entities": True,
    "dim": 8,
}
TRAIN = {"loss": "softmax", "negatives": "all", "temperature": 0.05, "batch_size": 100, "lr": 5e-3}


def _train(out: Path, tmp: Path, *, epochs: int) -> Path:
    config = tmp / f"top-{epochs}.yaml"
    config.write_text(yaml.safe_dump({"model_name": "transe", "model": MODEL, "train": {**TRAIN, "epochs": epochs}}))
    args = ["train", "--dataset", str(FIXTURE), "--split", "inductive", "--config", str(config), "--no-progress"]
    assert main([*args, "--out", str(out)]) == 0
    return out


def _pretrained_probe() -> torch.Tensor:
    from transformers import AutoModel

    from textkg.encoders.bert import default_minilm_path

    state = AutoModel.from_pretrained(default_minilm_path()).state_dict()
    return state["encoder.layer.5.attention.self.query.weight"]


@pytest.fixture(scope="module")
def top_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("top-layers")
    return _train(tmp / "run", tmp, epochs=2)


def test_run_trains_the_top_layer_and_saves_no_hidden_states(top_run):
    metrics = json.loads((top_run / "metrics.json").read_text())
    assert metrics["model"]["text_module"] == "top-layers" and 0 < metrics["test"]["mrr"] <= 1
    state = ckpt.load(top_run / ckpt.BEST_MODEL)
    assert not torch.equal(state[PROBE], _pretrained_probe())
    assert not any(k.startswith("text.text_token") or "_cached" in k for k in state)
    assert int(state["text.module.step_count"]) >= 1


def test_top_layer_trains_at_its_own_rate(top_run):
    from textkg.pipeline.job import prepare
    from textkg.training.optim import build_optimizer

    cfg = RunConfig.from_dict(json.loads((top_run / "config.json").read_text()))
    model = prepare(cfg, top_run).model
    opt = build_optimizer(model, name="adam", lr=5e-3, weight_decay=0.0)
    layer = {id(p) for p in model.text.module.parameters()}
    rates = {group["lr"] for group in opt.param_groups if all(id(p) in layer for p in group["params"])}
    rest = {group["lr"] for group in opt.param_groups if not any(id(p) in layer for p in group["params"])}
    assert rates == {5e-3 * 0.1} and rest == {5e-3}


def test_predict_embeds_new_entities_with_the_trained_layer(top_run, capsys):
    from textkg.predict import load_predictor

    capsys.readouterr()
    args = ["predict", str(top_run), "--description", "Bergen is a city in Norway", "--relation", "/geo/near_by"]
    args += ["--direction", "tail", "--top-k", "3"]
    assert main(args) == 0
    assert len(json.loads(capsys.readouterr().out)["predictions"]) == 3
    predictor = load_predictor(top_run)
    assert torch.equal(predictor.model.state_dict()[PROBE], ckpt.load(top_run / ckpt.BEST_MODEL)[PROBE])
    # a known entity's description, embedded as a new one, gives its own (text-only) vector
    new = predictor.embed([predictor.kg.entity_descriptions[3]])
    with torch.no_grad():
        known = predictor.model.entity_matrix(torch.tensor([3]))
    torch.testing.assert_close(new, known, rtol=1e-4, atol=1e-4)  # float16 disk cache on both sides


def test_resume_ends_where_the_uninterrupted_run_ends(top_run, tmp_path):
    # refresh_every 1: every cached row is recomputed each step, so the (unsaved) cache
    # cannot make the resumed run differ
    half = _train(tmp_path / "half", tmp_path, epochs=1)
    cfg = json.loads((half / "config.json").read_text())
    cfg["train"]["epochs"] = 2
    (half / "config.json").write_text(json.dumps(cfg))
    assert main(["train", "--resume", str(half), "--no-progress"]) == 0
    resumed, straight = ckpt.load(half / ckpt.CHECKPOINT)["model"], ckpt.load(top_run / ckpt.CHECKPOINT)["model"]
    assert resumed.keys() == straight.keys()
    for key in resumed:
        torch.testing.assert_close(resumed[key], straight[key], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", ["full", "confidential"])
def test_private_training_is_refused_naming_the_field(mode):
    privacy = PrivacyConfig(mode=mode, noise_multiplier=1.0, confidential_fraction=0.5)
    with pytest.raises(ConfigError) as info:
        RunConfig(model=ModelConfig(**MODEL), privacy=privacy)
    assert info.value.field == "model.text_module"


def test_one_vs_all_trains_the_batchs_own_entities(top_run):
    from textkg.pipeline.job import prepare
    from textkg.training.one_vs_all import one_vs_all_loss, pool_positions

    cfg = RunConfig.from_dict(json.loads((top_run / "config.json").read_text()))
    prep = prepare(cfg, top_run)
    model, pool = prep.model.train(), prep.split.train_entities
    module = model.text.module
    module.refresh_every = 1000  # nothing goes stale: only live rows are recomputed after the first step
    triples = prep.split.train[:3]
    for _ in range(2):
        one_vs_all_loss(model, triples, entity_pool=pool, positions=pool_positions(pool, model.num_entities))
    recomputed = torch.nonzero(module._cached_at == module.step_count - 1).flatten()
    ends = torch.unique(torch.cat([triples[:, 0], triples[:, 2]]))
    assert len(recomputed) and torch.equal(recomputed, ends[: module.live])
