"""User errors: one line naming file/line/field, exit status 2, no traceback."""

import re
import subprocess
import sys
from pathlib import Path

from textkg.cli.main import main

ROOT = Path(__file__).resolve().parents[2]


def _run(argv, capsys):
    code = main(argv)
    err = capsys.readouterr().err
    return code, err


def test_unknown_config_key_names_file_and_field(tmp_path, capsys):
    cfg = tmp_path / "run.yaml"
    cfg.write_text("train:\n  epochz: 3\n")
    code, err = _run(["train", "--config", str(cfg), "--out", str(tmp_path / "o")], capsys)
    assert code == 2
    assert str(cfg) in err and "train.epochz" in err
    assert "Traceback" not in err
    assert not (tmp_path / "o").exists()


def test_yaml_syntax_error_names_line(tmp_path, capsys):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("train:\n  epochs: 3\n  lr: [1, 2\n")
    code, err = _run(["train", "--config", str(cfg)], capsys)
    assert code == 2
    assert re.search(re.escape(str(cfg)) + r":\d+", err)


def test_privacy_without_noise_or_budget_is_an_error(tmp_path, capsys):
    code, err = _run(["train", "--model", "transe", "--privacy", "full", "--out", str(tmp_path / "o")], capsys)
    assert code == 2
    assert "privacy.noise_multiplier" in err


def test_bad_choice_lists_valid_values(tmp_path, capsys):
    cfg = tmp_path / "run.yaml"
    cfg.write_text("train:\n  loss: hinge\n")
    code, err = _run(["train", "--config", str(cfg)], capsys)
    assert code == 2
    assert "margin" in err and "softplus" in err and "train.loss" in err


def test_predict_on_missing_run_dir(tmp_path, capsys):
    code, err = _run(["predict", str(tmp_path / "nope"), "--description", "x"], capsys)
    assert code == 2
    assert "config.json" in err


def test_console_script_exit_code_without_traceback(tmp_path):
    cfg = tmp_path / "run.yaml"
    cfg.write_text("nonsense_section: 1\n")
    proc = subprocess.run(
        [sys.executable, "-m", "textkg.cli.main", "train", "--config", str(cfg)], capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert "nonsense_section" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_readme_test_command_is_what_ci_runs():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    block = readme.split("## Quickstart", 1)[1].split("```", 2)[1]
    commands = [ln.strip() for ln in block.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    test_command = commands[-1]
    assert test_command in ci.splitlines() or any(ln.strip() == test_command for ln in ci.splitlines())
    assert "pip install torch==2.13.0" in ci


def test_finetune_text_module_needs_a_bert_encoder(tmp_path, capsys):
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "tiny_blp"
    cfg = tmp_path / "ft.yaml"
    cfg.write_text("model:\n  text_module: finetune\n")
    code, err = _run(
        [
            "train",
            "--model",
            "blp-transe",
            "--encoder",
            "glove-bow",
            "--dataset",
            str(fixture),
            "--config",
            str(cfg),
            "--out",
            str(tmp_path / "o"),
        ],
        capsys,
    )
    assert code == 2
    assert "model.encoder" in err and "'bert'" in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()


def test_unknown_description_kind_lists_the_loaders_choices(tmp_path, capsys):
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "tiny_blp"
    code, err = _run(
        ["train", "--dataset", str(fixture), "--description", "medium", "--out", str(tmp_path / "o")], capsys
    )
    assert code == 2
    assert "field 'description'" in err and "first-sentence" in err and "long" in err
    assert not (tmp_path / "o").exists()
