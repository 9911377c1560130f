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


def test_a_long_encoding_reports_texts_encoded_n_of_n(tmp_path, capsys, monkeypatch):
    """About ten ``texts encoded n/N`` lines while a run encodes (issue 30, item 7); the threshold is
    lowered so that the fixture's 40 descriptions count as long."""
    from textkg.encoders import base

    monkeypatch.setenv("TEXTKG_CACHE_DIR", str(tmp_path / "cache"))  # a cold cache: every text is encoded
    monkeypatch.setattr(base, "REPORT_MIN_TEXTS", 1)
    argv = ["train", "--dataset", str(FIXTURE), "--split", "transductive", "--model", "fused-transe"]
    argv += ["--encoder", "glove-bow", "--dim", "8", "--epochs", "1", "--out", str(tmp_path / "run")]
    assert main(argv) == 0
    lines = [line for line in capsys.readouterr().err.splitlines() if "texts encoded (" in line]
    assert lines and lines[-1].endswith("40/40"), lines
    assert all(line.startswith("[textkg +") for line in lines)


def test_encoding_outside_a_run_prints_nothing(capsys, monkeypatch):
    from textkg.encoders import base, get_encoder

    monkeypatch.setattr(base, "REPORT_MIN_TEXTS", 1)
    get_encoder("glove-bow").encode(["a kidney", "a cyst"] * 100, batch_size=8)
    assert "texts encoded" not in capsys.readouterr().err
