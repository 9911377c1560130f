"""Issue 51, item 5: a received run folder's symbolic links are never written through.

On 1a0007a ``textkg plot RUN`` on a run whose ``plots/valid_mrr.png`` was a link overwrote the link's
target, and a ``plots`` link to another folder got the PNGs written into it; ``textkg tune --out DIR``
re-using a folder whose ``trials`` was a link deleted (``rmtree``) and trained into the folder it named.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from textkg.cli.main import main

pytest.importorskip("matplotlib")

METRICS = {"train": {"history": [{"epoch": 1, "step": 4, "valid_mrr": 0.1}, {"epoch": 2, "step": 8, "valid_mrr": 0.2}]}}


def _run(tmp_path: Path) -> Path:
    run = tmp_path / "received-run"
    run.mkdir()
    (run / "metrics.json").write_text(json.dumps(METRICS))
    return run


def test_plot_refuses_a_plots_link_to_another_folder(tmp_path, capsys):
    run = _run(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (run / "plots").symlink_to(elsewhere, target_is_directory=True)
    assert main(["plot", str(run)]) == 2
    err = capsys.readouterr().err
    assert "symbolic link" in err and "Traceback" not in err
    assert list(elsewhere.iterdir()) == []


def test_plot_never_overwrites_the_target_of_a_plot_file_link(tmp_path, capsys):
    run = _run(tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    (run / "plots").mkdir()
    (run / "plots" / "valid_mrr.png").symlink_to(victim)
    assert main(["plot", str(run)]) == 2
    err = capsys.readouterr().err
    assert "valid_mrr.png" in err and "symbolic link" in err
    assert victim.read_text() == "precious"
    assert sorted(p.name for p in (run / "plots").iterdir()) == ["valid_mrr.png"]  # nothing half-written


def test_plot_still_writes_into_a_real_plots_folder(tmp_path, capsys):
    run = _run(tmp_path)
    assert main(["plot", str(run)]) == 0, capsys.readouterr().err
    png = run / "plots" / "valid_mrr.png"
    assert png.is_file() and not png.is_symlink() and png.read_bytes().startswith(b"\x89PNG")


def test_tune_never_deletes_or_trains_through_a_trials_link(tmp_path, capsys):
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "tiny_blp_ind"
    out = tmp_path / "tune"
    out.mkdir()
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "train.lr=0.01").mkdir(parents=True)
    (elsewhere / "train.lr=0.01" / "keep.txt").write_text("precious")
    (out / "trials").symlink_to(elsewhere, target_is_directory=True)
    args = ["tune", "--dataset", str(fixture), "--split", "inductive", "--model", "transe", "--dim", "8"]
    args += ["--epochs", "1", "--grid", "train.lr=0.01", "--no-progress", "--out", str(out)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "symbolic link" in err and "Traceback" not in err
    assert (elsewhere / "train.lr=0.01" / "keep.txt").read_text() == "precious"
    assert sorted(p.name for p in elsewhere.iterdir()) == ["train.lr=0.01"]
