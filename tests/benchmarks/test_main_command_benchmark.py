"""``benchmarks/main_command.py`` on a tiny run: wall and CPU time, peak RSS, one row per stage line, strict JSON."""

from __future__ import annotations

import json
from pathlib import Path

from bench_module import load_benchmark

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "tiny_blp_ind"


def _module():
    return load_benchmark("main_command.py", "main_command_bench")


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
    # issue 38: the child's CPU seconds per stage (a loaded machine's wall time measures the other jobs too)
    assert all(s["cpu_s"] is not None and s["cpu_s"] >= 0 for s in row["stages"])
    assert sum(s["cpu_s"] for s in row["stages"]) <= row["cpu_user_s"] + row["cpu_system_s"] + 0.5


def test_stage_lines_become_durations():
    text = "noise\n[textkg +00:05] a\n[textkg +01:10] b\nmore\n[textkg +02:00] c\n"
    assert _module().stages(text) == [
        {"at_s": 5, "seconds": 65, "stage": "a"},
        {"at_s": 70, "seconds": 50, "stage": "b"},
        {"at_s": 120, "seconds": None, "stage": "c"},
    ]
