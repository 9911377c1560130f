"""LSTM-autoencoder runs (``torchcoder-aec``) keep the autoencoder that coded
their descriptions: it is saved as ``lstm_ae.pt``, reused on resume/predict,
and ``textkg encoders pretrain-aec`` output can replace in-run pre-training."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch

import textkg
from textkg.cli.main import main
from textkg.encoders.lstm_ae import LSTMAutoencoder
from textkg.models.presets import get_preset
from textkg.pipeline.job import run
from textkg.training.config import DataConfig, RunConfig, TrainConfig
from textkg.training.features import AUTOENCODER_FILE

TINY = Path(__file__).resolve().parents[1] / "fixtures" / "tiny_blp_ind"
AE_KWARGS = {"code_dim": 8, "epochs": 1}


def _cfg(**ae_kwargs) -> RunConfig:
    model = replace(get_preset("torchcoder-aec"), dim=16, text_module_kwargs=ae_kwargs or AE_KWARGS)
    return RunConfig(
        data=DataConfig(dataset=str(TINY), split="inductive"),
        model=model,
        train=TrainConfig(epochs=1, batch_size=16, num_negatives=2),
        model_name="torchcoder-aec",
    )


def _text_features(model) -> torch.Tensor:
    (features,) = [b for name, b in model.named_buffers() if name.endswith("text_features")]
    return features


@pytest.fixture(scope="module")
def aec_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("aec") / "run"
    run(_cfg(), out, progress=False)
    return out


def test_run_saves_the_autoencoder_and_predict_codes_with_it(aec_run):
    saved = LSTMAutoencoder.load(aec_run / AUTOENCODER_FILE)
    assert (saved.token_dim, saved.code_dim) == (50, 8)
    predictor = textkg.load(aec_run)
    for key, value in saved.state_dict().items():
        assert torch.equal(predictor.prepared.autoencoder.state_dict()[key], value)
    # a "new" entity with a training entity's description gets exactly that entity's codes
    kg = predictor.kg
    inputs = predictor.text_inputs([kg.entity_descriptions[3]])
    torch.testing.assert_close(inputs["text_features"][0], _text_features(predictor.model)[3])
    out = predictor.predict(description=kg.entity_descriptions[3], top_k=2)
    assert len(out["predictions"]) == 2 * 2 * kg.num_relations


def test_pretrained_autoencoder_file_replaces_in_run_pretraining(tmp_path, capsys):
    assert (
        main(
            [
                "encoders",
                "pretrain-aec",
                "--dataset",
                str(TINY),
                "--code-dim",
                "6",
                "--epochs",
                "1",
                "--out",
                str(tmp_path / "ae"),
            ]
        )
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    path = Path(report["out"])
    assert path == tmp_path / "ae" / AUTOENCODER_FILE and report["code_dim"] == 6
    assert (
        main(
            [
                "train",
                "--dataset",
                str(TINY),
                "--split",
                "inductive",
                "--model",
                "torchcoder-aec",
                "--autoencoder",
                str(path),
                "--dim",
                "16",
                "--epochs",
                "1",
                "--no-progress",
                "--out",
                str(tmp_path / "run"),
            ]
        )
        == 0
    )
    capsys.readouterr()
    used = LSTMAutoencoder.load(tmp_path / "run" / AUTOENCODER_FILE)
    given = LSTMAutoencoder.load(path)
    assert used.code_dim == 6
    for key, value in given.state_dict().items():
        assert torch.equal(used.state_dict()[key], value)
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["model"]["text_module_kwargs"] == {"path": AUTOENCODER_FILE}  # the run's own copy


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["--model", "blp-transe", "--autoencoder", "x.pt"], "--autoencoder is for LSTM-autoencoder models"),
        (["--model", "torchcoder-aec", "--autoencoder", "{tmp}/missing.pt"], "missing.pt"),
        (["--model", "torchcoder-aec", "--autoencoder", "{tmp}/bad.pt"], "bad.pt"),
    ],
)
def test_bad_autoencoder_flag_is_a_clear_error(tmp_path, capsys, argv, needle):
    (tmp_path / "bad.pt").write_bytes(b"not a torch file")
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    code = main(
        [
            "train",
            "--dataset",
            str(TINY),
            "--split",
            "inductive",
            *argv,
            "--epochs",
            "1",
            "--no-progress",
            "--out",
            str(tmp_path / "run"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and needle in err and "Traceback" not in err
    assert not (tmp_path / "run").exists()
