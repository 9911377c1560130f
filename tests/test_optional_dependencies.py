"""Each dependency earns its place (issue 40): Opacus is a test reference, matplotlib the ``plots`` extra.

Blocking a package (``sys.modules[name] = None`` makes its import fail) plays an install without it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from textkg.cli.main import main

ROOT = Path(__file__).resolve().parents[1]


def _block(monkeypatch, package: str) -> None:
    for name in [m for m in sys.modules if m == package or m.startswith(package + ".")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, package, None)


def _names(requirements: list[str]) -> set[str]:
    return {r.split(">")[0].split("=")[0].split("<")[0].split("[")[0].strip() for r in requirements}


def test_opacus_and_matplotlib_are_extras_and_the_tests_install_them():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    runtime = _names(project["dependencies"])
    assert "opacus" not in runtime and "matplotlib" not in runtime
    extras = project["optional-dependencies"]
    assert "matplotlib" in _names(extras["plots"]) and "opacus" in _names(extras["test"])
    assert "plots" in next(r for r in extras["test"] if r.startswith("textkg["))


def test_release_recomputes_epsilon_without_opacus(monkeypatch):
    _block(monkeypatch, "opacus")
    from textkg.release import recompute_epsilon

    block = {"orders": [2.0, 4.0, 8.0, 16.0], "ledger": [{"sample_rate": 0.04, "noise_multiplier": 1.5, "steps": 100}]}
    assert 0 < recompute_epsilon({**block, "delta": 1e-5, "epsilon": None}) < 10


def test_plot_without_matplotlib_is_a_clear_error(monkeypatch, tmp_path, capsys):
    _block(monkeypatch, "matplotlib")
    monkeypatch.delitem(sys.modules, "textkg.report.plots", raising=False)
    import textkg.report  # the package itself imports without matplotlib

    assert callable(textkg.report.require_plots)
    assert main(["plot", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "pip install 'textkg[plots]'" in err and "Traceback" not in err


def test_a_sweep_without_matplotlib_stops_before_training(monkeypatch, tmp_path, capsys):
    _block(monkeypatch, "matplotlib")
    out = tmp_path / "sweep"
    assert main(["sweep", "--privacy-modes", "none", "--dataset", "hpo-small", "--epochs", "1", "--out", str(out)]) == 2
    assert "pip install 'textkg[plots]'" in capsys.readouterr().err
    assert not out.exists()
