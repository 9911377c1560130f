"""A run that nobody watches in a terminal prints one line per stage (issue 30, item 7)."""

from __future__ import annotations

from pathlib import Path

from textkg.cli.main import main

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "tiny_blp"
ARGS = ["train", "--dataset", str(FIXTURE), "--split", "transductive", "--model", "transe", "--dim", "8"]


def test_a_log_gets_one_line_per_stage_and_epoch(tmp_path, capsys):
    assert main([*ARGS, "--epochs", "2", "--out", str(tmp_path / "run")]) == 0
    err = capsys.readouterr().err  # captured: not a terminal
    lines = [line for line in err.splitlines() if line.startswith("[textkg +")]
    text = "\n".join(lines)
    assert "graph ready: 40 entities" in text
    assert "epoch 1/2" in text and "epoch 2/2" in text and "validation MRR" in text
    assert "evaluation done" in text
    assert "\r" not in err  # no progress bar in a log


def test_no_progress_prints_no_stage_line(tmp_path, capsys):
    assert main([*ARGS, "--epochs", "1", "--no-progress", "--out", str(tmp_path / "run")]) == 0
    assert "[textkg +" not in capsys.readouterr().err
