"""``textkg tune``: a grid chosen on validation statements only, on any BLP-format directory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from textkg.cli.main import main
from textkg.errors import ConfigError
from textkg.tune import apply_point, grid_points, parse_grid

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiny_blp_ind"
BASE = ["tune", "--dataset", str(FIXTURE), "--split", "inductive", "--model", "transe", "--dim", "8"]
BASE += ["--epochs", "2", "--batch-size", "32", "--seed", "0", "--no-progress"]


@pytest.fixture
def no_test_ranking(monkeypatch):
    """Fail if anything ranks the test split (the whole point of tuning on validation)."""
    from textkg.pipeline import job as pipeline

    real = pipeline.evaluate_split

    def guarded(prep, cfg, which, **kwargs):
        assert which != "test", "tune ranked the test split"
        return real(prep, cfg, which, **kwargs)

    monkeypatch.setattr(pipeline, "evaluate_split", guarded)


def test_tune_picks_the_best_validation_point_and_writes_a_config_train_accepts(
    tmp_path, capsys, no_test_ranking, monkeypatch
):
    out = tmp_path / "tune"
    grid = ["--grid", "train.lr=0.0001,0.01", "--grid", "train.margin=1,2"]
    assert main([*BASE, *grid, "--tune-epochs", "1", "--out", str(out)]) == 0
    summary = json.loads(capsys.readouterr().out)
    record = json.loads((out / "tune.json").read_text(), parse_constant=lambda c: pytest.fail(c))
    assert len(record["rows"]) == 4 and record["trial_epochs"] == 1
    assert [r["point"] for r in record["rows"]] == [
        {"train.lr": 0.0001, "train.margin": 1},
        {"train.lr": 0.0001, "train.margin": 2},
        {"train.lr": 0.01, "train.margin": 1},
        {"train.lr": 0.01, "train.margin": 2},
    ]
    mrrs = [r["valid"]["mrr"] for r in record["rows"]]
    best = record["rows"][mrrs.index(max(mrrs))]
    assert record["best"]["name"] == best["name"] == summary["best"]["name"]
    assert all(r["config"]["train"]["epochs"] == 1 for r in record["rows"])
    chosen = json.loads((out / "best_config.json").read_text())
    assert chosen["train"]["epochs"] == 2  # the run's own epochs, not the trials'
    assert (
        chosen["train"]["lr"] == best["point"]["train.lr"]
        and chosen["train"]["margin"] == best["point"]["train.margin"]
    )
    monkeypatch.undo()  # the final run tests once
    run = tmp_path / "final"
    assert main(["train", "--config", str(out / "best_config.json"), "--out", str(run), "--no-progress"]) == 0
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["train"]["epochs"] == 2 and metrics["test"]["mrr"] > 0


def test_a_second_run_reuses_finished_points(tmp_path, capsys, no_test_ranking, monkeypatch):
    out = tmp_path / "tune"
    args = [*BASE, "--grid", "train.lr=0.001,0.01", "--tune-epochs", "1", "--out", str(out)]
    assert main(args) == 0
    from textkg import tune

    monkeypatch.setattr(tune, "_trial", lambda *a, **k: pytest.fail("a finished point was trained again"))
    assert main(args) == 0


@pytest.mark.parametrize(
    "grid, message",
    [
        (["train.lr"], "SECTION.KEY=V1"),
        (["optim.lr=1"], "unknown section"),
        (["train.lr=1", "train.lr=2"], "given twice"),
        (["train.learning_rate=0.1"], "unknown key"),
        (["train.lr=-1"], "lr"),
    ],
)
def test_bad_grids_exit_2_before_any_training(tmp_path, capsys, grid, message):
    out = tmp_path / "tune"
    args = [*BASE, *[x for g in grid for x in ("--grid", g)], "--out", str(out)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not out.exists()


def test_tuning_private_runs_is_refused(tmp_path, capsys):
    out = tmp_path / "tune"
    args = [*BASE, "--grid", "train.lr=0.001,0.01", "--privacy", "full", "--noise-multiplier", "1", "--out", str(out)]
    assert main(args) == 2
    assert "spends privacy" in capsys.readouterr().err and not out.exists()


def test_grid_helpers():
    grid = parse_grid(["model.dim=8,16", "train.loss=softplus"])
    assert grid == {"model.dim": [8, 16], "train.loss": ["softplus"]}
    assert grid_points(grid) == [
        {"model.dim": 8, "train.loss": "softplus"},
        {"model.dim": 16, "train.loss": "softplus"},
    ]
    with pytest.raises(ConfigError):
        parse_grid([])
    from textkg.training.config import RunConfig

    with pytest.raises(ConfigError, match="dim"):
        apply_point(RunConfig(), {"model.dim": 0})
