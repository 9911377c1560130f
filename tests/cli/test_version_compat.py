"""A run made with another major textkg version is refused by evaluate / predict / load, exit 2."""

from __future__ import annotations

import json

import pytest

import textkg
from textkg.cli.main import main
from textkg.errors import ConfigError
from textkg.versioning import check_run_version, major


def _run_dir(tmp_path, config: dict):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps(config))
    (run / "best_model.pt").write_bytes(b"not read: the version is checked first")
    return run


def test_major():
    assert major("0.1.0") == 0 and major("12.3.4rc1") == 12 and major("x") is None


@pytest.mark.parametrize("command", [["evaluate"], ["predict", "--description", "a term"]])
def test_another_major_version_is_refused_with_a_clear_message(tmp_path, capsys, command):
    other = f"{major(textkg.__version__) + 1}.0.0"
    run = _run_dir(tmp_path, {"textkg_version": other, "data": {"dataset": "hpo-small"}})
    argv = [command[0], str(run), *command[1:]]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert other in err and "major" in err and "config.json" in err and "textkg_version" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("config", [{}, {"textkg_version": "latest"}])
def test_unknown_version_is_refused(tmp_path, config):
    with pytest.raises(ConfigError, match="textkg_version"):
        check_run_version(config, tmp_path / "config.json")


def test_same_major_is_accepted(tmp_path):
    check_run_version({"textkg_version": f"{major(textkg.__version__)}.999.0"}, tmp_path / "config.json")
