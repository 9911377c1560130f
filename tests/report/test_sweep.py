"""Sweeps: the grid, per-point configs, rows, sweep.json, reuse — with a fake trainer."""

import json
import sys
import types

import pytest

import textkg
from textkg.errors import ConfigError
from textkg.sweep import SWEEP_FILE, SweepPoint, make_grid, point_config, run_sweep
from textkg.training.config import PrivacyConfig, RunConfig, TrainConfig


def test_grid():
    grid = make_grid(["none", "full", "confidential"], noise_multipliers=[0.5, 1], target_epsilons=[4])
    assert [p.name for p in grid] == [
        "none",
        "full-sigma0.5",
        "full-sigma1",
        "full-eps4",
        "confidential-sigma0.5",
        "confidential-sigma1",
        "confidential-eps4",
    ]
    assert make_grid(["none", "none"]) == [SweepPoint("none")]


@pytest.mark.parametrize("kwargs", [dict(modes=["bogus"]), dict(modes=[]), dict(modes=["full"])])
def test_grid_errors(kwargs):
    with pytest.raises(ConfigError):
        make_grid(kwargs.pop("modes"), **kwargs)


def test_point_config_keeps_base_and_validates():
    base = RunConfig(
        train=TrainConfig(epochs=3), privacy=PrivacyConfig(confidential_relations=("is_a",), max_grad_norm=2.0)
    )
    cfg = point_config(base, SweepPoint("confidential", noise_multiplier=2.0))
    assert cfg.privacy.mode == "confidential" and cfg.privacy.noise_multiplier == 2.0
    assert cfg.privacy.confidential_relations == ("is_a",) and cfg.privacy.max_grad_norm == 2.0
    assert cfg.train.epochs == 3
    none = point_config(base, SweepPoint("none"))
    assert none.privacy.noise_multiplier is None and none.privacy.confidential_relations == ("is_a",)
    with pytest.raises(ConfigError, match="confidential"):
        point_config(RunConfig(), SweepPoint("confidential", noise_multiplier=1.0))


class _FakeModel:
    def to_dict(self):
        return {"dim": 8}


@pytest.fixture
def fake_run(monkeypatch):
    calls = []

    def run(cfg, out_dir, *, resume=False, progress=True):
        calls.append((cfg.privacy.mode, cfg.privacy.noise_multiplier, cfg.privacy.target_epsilon, resume))
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "config.json").write_text(json.dumps({"textkg_version": textkg.__version__, **cfg.to_dict()}))
        private = cfg.privacy.mode != "none"
        sigma = cfg.privacy.noise_multiplier or 1.0
        metrics = {
            "train": {
                "seconds": 1.0,
                "steps": 10,
                "stopped": None,
                "history": [{"epoch": 1, "step": 10, "valid_mrr": 0.2, **({"epsilon": 2 / sigma} if private else {})}],
            },
            "test": {"mrr": 0.5 - (0.2 / sigma if private else 0), "hits@10": 0.7},
            "privacy": {
                "epsilon": 2 / sigma,
                "delta": 1e-5,
                "guarantee": "dp",
                "noise_multiplier": sigma,
                "mode": cfg.privacy.mode,
            }
            if private
            else None,
        }
        (out_dir / "metrics.json").write_text(json.dumps(metrics))
        return metrics

    # a stand-in pipeline module: sweeps are tested without training anything
    monkeypatch.setitem(sys.modules, "textkg.pipeline.job", types.SimpleNamespace(run=run))
    return calls


def test_run_sweep_rows_files_and_reuse(tmp_path, fake_run):
    base = RunConfig(model=_FakeModel(), privacy=PrivacyConfig(confidential_relations=("is_a",)))
    grid = make_grid(["none", "full", "confidential"], noise_multipliers=[0.5, 2])
    rows = run_sweep(base, grid, tmp_path)
    assert len(rows) == 5 and len(fake_run) == 5
    full = rows[1]
    assert full["mode"] == "full" and full["noise_multiplier"] == 0.5 and full["epsilon"] == 4.0
    assert full["guarantee"] == "dp" and full["mrr"] == pytest.approx(0.1) and full["hits@10"] == 0.7
    assert rows[0]["epsilon"] is None and rows[0]["mode"] == "none"
    assert {
        "mode",
        "noise_multiplier",
        "target_epsilon",
        "epsilon",
        "delta",
        "mrr",
        "hits@10",
        "seconds",
        "guarantee",
    } <= set(full)
    assert json.loads((tmp_path / SWEEP_FILE).read_text())["rows"] == rows
    assert (tmp_path / "frontier.png").stat().st_size > 1000
    assert all((tmp_path / p.name / "metrics.json").is_file() for p in grid)
    # re-running reuses finished runs
    assert run_sweep(base, grid, tmp_path) == rows and len(fake_run) == 5


def test_run_sweep_refuses_a_foreign_run(tmp_path, fake_run):
    (tmp_path / "none").mkdir(parents=True)
    (tmp_path / "none" / "config.json").write_text(json.dumps({"textkg_version": textkg.__version__}))
    with pytest.raises(ConfigError, match="different configuration"):
        run_sweep(RunConfig(model=_FakeModel()), [SweepPoint("none")], tmp_path)


def test_run_sweep_validates_every_point_first(tmp_path, fake_run):
    with pytest.raises(ConfigError):
        run_sweep(RunConfig(model=_FakeModel()), [SweepPoint("none"), SweepPoint("confidential", 1.0)], tmp_path)
    assert not fake_run and not tmp_path.joinpath("none").exists()
    with pytest.raises(ConfigError, match="audit-candidates"):
        run_sweep(RunConfig(model=_FakeModel()), [SweepPoint("none")], tmp_path, audit_attack="score")


def test_sweep_cli_flag_errors(tmp_path, capsys):
    from textkg.cli.main import main

    assert main(["sweep", "--privacy", "full", "--out", str(tmp_path)]) == 2
    assert "--privacy-modes" in capsys.readouterr().err
    assert main(["sweep", "--noise-multipliers", "1,x", "--out", str(tmp_path)]) == 2
    assert "comma-separated numbers" in capsys.readouterr().err
    assert main(["sweep", "--privacy-modes", "none"]) == 2
    assert "--out" in capsys.readouterr().err
