"""``benchmarks/main_command.py`` on a tiny run: wall and CPU time, peak RSS, one row per stage line, strict JSON."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "tiny_blp_ind"


def _module():
    spec = importlib.util.spec_from_file_location("main_command_bench", ROOT / "benchmarks" / "main_command.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_benchmark_times_each_stage_of_a_train_command(tmp_path, capsys):
    out = tmp_path / "main_command.json"
    train = ["--dataset", str(FIXTURE), "--split", "inductive", "--model", "fused-transe", "--encoder", "glove-bow"]
    argv = ["--run-dir", str(tmp_path / "run"), "--label", "tiny", "--out", str(out), "--", *train, "--dim", "8"]
    assert _module().main([*argv, "--epochs", "1"]) == 0
    record = json.loads(out.read_text())
    assert record["benchmark"] == "main_command" and "machine" in record
    (row,) = record["rows"]
    assert row["label"] == "tiny" and row["wall_s"] > 0 and row["cpu_user_s"] + row["cpu_system_s"] > 0
    names = [s["stage"] for s in row["stages"]]
    assert names[0].startswith("reading") and "ranking the test statements" in names
    assert all(s["seconds"] is not None and s["seconds"] >= 0 for s in row["stages"][:-1])


def test_stage_lines_become_durations():
    text = "noise\n[textkg +00:05] a\n[textkg +01:10] b\nmore\n[textkg +02:00] c\n"
    assert _module().stages(text) == [
        {"at_s": 5, "seconds": 65, "stage": "a"},
        {"at_s": 70, "seconds": 50, "stage": "b"},
        {"at_s": 120, "seconds": None, "stage": "c"},
    ]
