"""``textkg charlm train``: trains on the chosen description file of a dataset."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from textkg.cli.main import main
from textkg.encoders.charlm import read_char_lm_metrics

TINY = Path(__file__).resolve().parents[1] / "fixtures" / "tiny_blp"


def _corpus_text(out: Path) -> str:
    return "".join(p.read_text(encoding="utf-8") for p in sorted((out / "corpus").rglob("*")) if p.is_file())


def test_charlm_train_reads_the_requested_description_file(tmp_path):
    """In a subprocess: stdout must be the JSON report alone (flair logs to stdout by default)."""
    out = {}
    for description in ("short", "long"):
        out[description] = tmp_path / description
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "textkg.cli.main",
                "charlm",
                "train",
                "--dataset",
                str(TINY),
                "--description",
                description,
                "--direction",
                "forward",
                "--hidden-size",
                "16",
                "--max-epochs",
                "1",
                "--out",
                str(out[description]),
            ],
            capture_output=True,
            text=True,
            env={**os.environ, "OMP_NUM_THREADS": "1"},
        )
        assert proc.returncode == 0, proc.stderr
        report = json.loads(proc.stdout)
        assert Path(report["model"]).is_file()
        assert report == read_char_lm_metrics(report["model"]) and report["epochs"] == 1
    long_text = (TINY / "entity2textlong.txt").read_text(encoding="utf-8").splitlines()[0].split("\t")[1]
    assert long_text[:40] in _corpus_text(out["long"])
    assert long_text[:40] not in _corpus_text(out["short"])


def test_charlm_train_unknown_description_is_a_clear_error(tmp_path, capsys):
    code = main(
        [
            "charlm",
            "train",
            "--dataset",
            str(TINY),
            "--description",
            "medium",
            "--direction",
            "forward",
            "--out",
            str(tmp_path / "lm"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "description" in err and "Traceback" not in err
    assert not (tmp_path / "lm").exists()
