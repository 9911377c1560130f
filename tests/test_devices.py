"""``--device`` / ``train.device``: resolved once, refused when absent, and the CPU results unchanged.

Every test but the last runs without a GPU: the choice ``auto`` makes is checked by
patching ``torch.cuda.is_available``; a tiny run with ``--device cpu`` must equal the
default run bit for bit; ``--device cuda`` on a machine without CUDA exits 2 with a
clear message. The tests marked ``skipif`` run the same tiny train on a real GPU.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from textkg.cli.main import main
from textkg.devices import DEVICE_CHOICES, check_device_name, describe_device, resolve_device
from textkg.encoders.cache import cache_identity
from textkg.errors import ConfigError
from textkg.privacy.noise import add_noise, gaussian_noise
from textkg.training.config import RunConfig, TrainConfig

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "tiny_blp"
BASE = ["train", "--dataset", str(FIXTURE), "--split", "transductive", "--model", "transe", "--dim", "8"]
BASE += ["--epochs", "2", "--batch-size", "32", "--seed", "0", "--no-progress"]
#: a private run: the DP-SGD noise and the Poisson sample, reproducible from a public seed
PRIVATE = ["--privacy", "full", "--noise-multiplier", "1", "--reproducible-noise", "3"]
#: structural dropout: a mask drawn from the trainer's seeded generator
DROPOUT = ["--structural-dropout", "0.3"]
HAS_CUDA = torch.cuda.is_available()


@pytest.fixture
def no_accelerator(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)


# -- resolve_device ------------------------------------------------------------------------------


def test_auto_is_the_cpu_without_an_accelerator(no_accelerator):
    assert resolve_device("auto") == torch.device("cpu")
    assert resolve_device("cpu") == torch.device("cpu")


def test_auto_prefers_cuda_then_mps(monkeypatch):
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device("auto") == torch.device("cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == torch.device("mps")


def test_named_cuda_device_is_checked_against_the_device_count(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert resolve_device("cuda") == torch.device("cuda")
    assert resolve_device("cuda:1") == torch.device("cuda", 1)
    with pytest.raises(ConfigError, match=r"has 2 CUDA device\(s\)") as err:
        resolve_device("cuda:2")
    assert err.value.field == "train.device"


@pytest.mark.parametrize("name", ["cuda", "cuda:0", "mps"])
def test_an_unavailable_device_is_an_error_not_a_fallback(no_accelerator, name):
    with pytest.raises(ConfigError, match="not available on this machine") as err:
        resolve_device(name, field="device")
    assert err.value.field == "device"


@pytest.mark.parametrize("name", ["gpu", "CUDA", "cuda:", "cuda:x", "cuda:-1", "", " cpu", None, 0, "tpu"])
def test_bad_names_list_the_choices(name):
    with pytest.raises(ConfigError, match="is not one of auto, cpu, cuda, cuda:N, mps") as err:
        resolve_device(name)
    assert err.value.field == "train.device"
    with pytest.raises(ConfigError):
        TrainConfig(device=name)  # type: ignore[arg-type]


def test_the_config_checks_the_name_only():
    # a config.json written on a GPU machine still loads on one without
    assert TrainConfig(device="cuda:3").device == "cuda:3"
    assert check_device_name("mps") == "mps" and set(DEVICE_CHOICES) >= {"auto", "cpu", "mps"}
    cfg = RunConfig(train=TrainConfig(device="cpu"))
    assert RunConfig.from_dict(cfg.to_dict()).train.device == "cpu"
    assert TrainConfig().device == "auto"
    assert describe_device(torch.device("cpu")) == "cpu"


# -- the CPU path is unchanged ---------------------------------------------------------------------


def test_random_draws_happen_on_the_generators_device():
    g = torch.Generator().manual_seed(5)
    expected = torch.empty(3, 4).normal_(0.0, 2.0, generator=g)
    g.manual_seed(5)
    assert torch.equal(gaussian_noise((3, 4), std=2.0, generator=g, device=torch.device("cpu")), expected)
    g.manual_seed(5)
    assert torch.equal(add_noise(torch.zeros(3, 4), noise_multiplier=2.0, max_grad_norm=1.0, generator=g), expected)
    assert torch.equal(gaussian_noise((2,), std=0.0, generator=g), torch.zeros(2))


class _Encoder:
    identity = "bert(model=x)"

    def __init__(self, device: str) -> None:
        self.device = torch.device(device)


def test_features_from_another_device_are_cached_apart():
    assert cache_identity(_Encoder("cpu")) == "bert(model=x)"  # CPU keys are unchanged
    assert cache_identity(_Encoder("cuda:1")) == "bert(model=x)@cuda"
    assert cache_identity(_Encoder("mps")) == "bert(model=x)@mps"


def _train(out: Path, *flags: str) -> dict:
    assert main([*BASE, *flags, "--out", str(out)]) == 0
    return json.loads((out / "metrics.json").read_text())


def _same_model(a: Path, b: Path) -> bool:
    sa = torch.load(a / "best_model.pt", map_location="cpu", weights_only=False)
    sb = torch.load(b / "best_model.pt", map_location="cpu", weights_only=False)
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def _without_timings(metrics: dict) -> dict:
    train = {k: v for k, v in metrics["train"].items() if k not in ("seconds", "history")}
    history = [{k: v for k, v in h.items() if k != "seconds"} for h in metrics["train"]["history"]]
    rest = {k: v for k, v in metrics.items() if k != "memory_estimate"}  # the process's measured size, as a time
    return {**rest, "train": {**train, "history": history}}


@pytest.mark.parametrize("flags", [(), DROPOUT, PRIVATE], ids=["plain", "dropout", "dp-sgd"])
def test_device_cpu_equals_the_default_run_bit_for_bit(tmp_path, no_accelerator, flags):
    default = _train(tmp_path / "default", *flags)
    cpu = _train(tmp_path / "cpu", *flags, "--device", "cpu")
    assert _same_model(tmp_path / "default", tmp_path / "cpu")
    assert _without_timings(default) == _without_timings(cpu)
    assert cpu["device"] == "cpu"
    assert json.loads((tmp_path / "cpu" / "config.json").read_text())["train"]["device"] == "cpu"
    assert json.loads((tmp_path / "default" / "config.json").read_text())["train"]["device"] == "auto"


def test_config_file_key_and_evaluate_on_the_cpu(tmp_path, no_accelerator, capsys):
    config = tmp_path / "run.yaml"
    config.write_text("train:\n  device: cpu\n")
    metrics = _train(tmp_path / "run", "--config", str(config))
    assert metrics["device"] == "cpu"
    capsys.readouterr()
    assert main(["evaluate", str(tmp_path / "run"), "--device", "cpu"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["device"] == "cpu" and result["test"]["mrr"] == metrics["test"]["mrr"]


# -- an absent device: exit 2, a clear message, nothing written --------------------------------------


@pytest.mark.skipif(HAS_CUDA, reason="this machine has CUDA")
def test_train_on_cuda_without_cuda_exits_2(tmp_path, capsys):
    out = tmp_path / "run"
    assert main([*BASE, "--device", "cuda", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "train.device" in err and "'cuda' is not available on this machine" in err
    assert "Traceback" not in err
    assert not out.exists()


def test_bad_device_name_exits_2(tmp_path, capsys):
    assert main([*BASE, "--device", "gpu", "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert "train.device" in err and "'gpu' is not one of auto, cpu, cuda, cuda:N, mps" in err
    assert not (tmp_path / "run").exists()


@pytest.mark.skipif(HAS_CUDA, reason="this machine has CUDA")
def test_evaluate_predict_and_place_refuse_an_absent_device(tmp_path, capsys):
    run_dir = tmp_path / "run"
    _train(run_dir)
    terms = tmp_path / "terms.tsv"
    terms.write_text("NEW:1\tsomething new\n")
    for argv in (
        ["evaluate", str(run_dir), "--device", "cuda"],
        ["predict", str(run_dir), "--description", "a new thing", "--device", "cuda:0"],
        ["place", str(run_dir), "--terms", str(terms), "--out", str(tmp_path / "p.tsv"), "--device", "cuda"],
    ):
        capsys.readouterr()
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert "field 'device'" in err and "not available on this machine" in err, argv
    assert not (tmp_path / "p.tsv").exists()


# -- a real GPU ----------------------------------------------------------------------------------------


@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
@pytest.mark.parametrize("flags", [(), DROPOUT, PRIVATE], ids=["plain", "dropout", "dp-sgd"])
def test_tiny_train_on_cuda(tmp_path, capsys, flags):
    metrics = _train(tmp_path / "gpu", *flags, "--device", "cuda")
    assert metrics["device"].startswith("cuda:")
    state = torch.load(tmp_path / "gpu" / "best_model.pt", map_location="cpu", weights_only=False)
    assert all(t.device.type == "cpu" and bool(torch.isfinite(t).all()) for t in state.values())
    cpu = _train(tmp_path / "cpu", *flags, "--device", "cpu")
    # the same batches, negatives, dropout and noise on both devices; only float arithmetic differs
    assert metrics["train"]["steps"] == cpu["train"]["steps"]
    capsys.readouterr()
    assert main(["evaluate", str(tmp_path / "gpu"), "--device", "cpu"]) == 0  # a GPU checkpoint loads on the CPU
    assert json.loads(capsys.readouterr().out)["test"]["num_triples"] == metrics["test"]["num_triples"]
    assert main(["evaluate", str(tmp_path / "cpu"), "--device", "cuda"]) == 0


def test_private_training_on_mps_is_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    assert main([*BASE, *PRIVATE, "--device", "mps", "--out", str(tmp_path / "run")]) == 2
    assert "float64, which MPS does not have" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()
