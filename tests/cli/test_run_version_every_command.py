"""Every command that opens a run folder refuses one made by another major version: exit 2, a clear
message naming the file and ``textkg_version``, no traceback, nothing written (issue 40, item 4).

The folder is planted with every file any command reads (config.json, metrics.json, best_model.pt,
checkpoint.pt, federated.json, holders.json, cross_graph.json, audit_split.json), each well-formed
apart from the version, so that a command that skips the version check reads on instead of failing.
"""

from __future__ import annotations

import json

import pytest

import textkg
from textkg.cli.main import main
from textkg.versioning import major

OTHER = f"{major(textkg.__version__) + 1}.0.0"


@pytest.fixture
def foreign_run(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    config = {"textkg_version": OTHER, "data": {"dataset": "hpo-small", "split": "inductive"}, "model_name": "transe"}
    files = {
        "config.json": config,
        "metrics.json": {"textkg_version": OTHER, "test": {"mrr": 0.5}, "privacy": {"mode": "none"}},
        "federated.json": {"textkg_version": OTHER, "settings": {"partition": "random", "clients": 2}},
        "holders.json": {"holders": [{"name": "a", "dataset": "hpo-small"}, {"name": "b", "dataset": "hpo-small"}]},
        "cross_graph.json": {"textkg_version": OTHER, "holders": []},
        "audit_split.json": {"members": [[0, 0, 1]], "non_members": [[1, 0, 2]]},
    }
    for name, data in files.items():
        (run / name).write_text(json.dumps(data))
    for name in ("best_model.pt", "checkpoint.pt"):
        (run / name).write_bytes(b"never read: the version is checked first")
    return run


def _commands(run, tmp_path):
    terms = tmp_path / "terms.tsv"
    terms.write_text("NEW:1\ta new term\tits definition\n")
    new = tmp_path / "new"
    return {
        "evaluate": ["evaluate", str(run)],
        "evaluate --k-shot": ["evaluate", str(run), "--k-shot", "0,1"],
        "predict": ["predict", str(run), "--description", "a term"],
        "place": ["place", str(run), "--terms", str(terms), "--out", str(tmp_path / "placed.tsv")],
        "export": ["export", str(run), "--out", str(new)],
        "release": ["release", str(run), "--out", str(new)],
        "audit": ["audit", str(run), "--out", str(tmp_path / "audit.json")],
        "train --resume": ["train", "--resume", str(run)],
        "train --init-from": ["train", "--dataset", "hpo-small", "--split", "transductive", "--model", "transe"]
        + ["--init-from", str(run), "--out", str(new)],
        "federate --resume": ["federate", "--resume", str(run)],
        "federate --mode cross-graph --resume": ["federate", "--mode", "cross-graph", "--resume", str(run)],
        "plot": ["plot", str(run), "--out", str(new)],
    }


NAMES = [
    "evaluate",
    "evaluate --k-shot",
    "predict",
    "place",
    "export",
    "release",
    "audit",
    "train --resume",
    "train --init-from",
    "federate --resume",
    "federate --mode cross-graph --resume",
    "plot",
]


@pytest.mark.parametrize("name", NAMES)
def test_a_run_of_another_major_version_is_refused(name, foreign_run, tmp_path, capsys):
    argv = _commands(foreign_run, tmp_path)[name]
    before = sorted(p.name for p in foreign_run.iterdir())
    assert main(argv) == 2, name
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert OTHER in err and "major version" in err and "textkg_version" in err, err
    assert sorted(p.name for p in foreign_run.iterdir()) == before  # nothing written into the run
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run", "terms.tsv"]  # nor anywhere else


def test_a_sweep_does_not_reuse_a_point_of_another_major_version(foreign_run):
    """``textkg sweep`` re-uses a finished point whose config matches; one of another major version is
    refused (it dropped ``textkg_version`` before comparing, and returned the foreign metrics.json)."""
    from textkg.errors import ConfigError
    from textkg.sweep import _run_point
    from textkg.training.config import RunConfig

    cfg = RunConfig.from_dict(json.loads((foreign_run / "config.json").read_text()))
    stored = {"textkg_version": OTHER, **json.loads(json.dumps(cfg.to_dict()))}
    (foreign_run / "config.json").write_text(json.dumps(stored))
    with pytest.raises(ConfigError, match="major version"):
        _run_point(cfg, foreign_run, progress=False)


def test_tune_does_not_reuse_trials_of_another_major_version(tmp_path, capsys):
    """``textkg tune`` re-uses the rows of its tune.json; one written by another major version is refused."""
    out = tmp_path / "tune"
    out.mkdir()
    (out / "tune.json").write_text(json.dumps({"textkg_version": OTHER, "rows": []}))
    argv = ["tune", "--grid", "train.lr=1e-3", "--dataset", "hpo-small", "--split", "transductive", "--model", "transe"]
    argv += ["--privacy", "none", "--out", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert OTHER in err and "major version" in err and "Traceback" not in err
    assert sorted(p.name for p in out.iterdir()) == ["tune.json"]
