"""``benchmarks/k_shot.py`` on a tiny run: every k with its baselines, the timing row, strict JSON."""

from __future__ import annotations

import json
from pathlib import Path

from bench_module import load_benchmark

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "tiny_blp_ind"


def _module():
    return load_benchmark("k_shot.py", "k_shot_bench")


def test_the_benchmark_trains_from_a_data_path_and_reports_every_k(tmp_path):
    out = tmp_path / "k_shot.json"
    argv = ["--data", str(FIXTURE), "--run-dir", str(tmp_path / "run"), "--epochs", "1", "--dim", "8"]
    rows = _module().main([*argv, "--timing-entities", "20", "--out", str(out)])
    row = json.loads(out.read_text())["run"]
    assert rows["run"]["k_shot"] == row["k_shot"] and list(row["k_shot"]) == ["0", "1", "3", "5", "10"]
    assert row["timing"]["entities"] == 20 and row["timing"]["seconds"] >= 0
    assert row["timing"]["link_vote_seconds"] >= 0 and row["k_shot_selection"]["link_vote"]["voters"] > 0
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())["test"]
    assert row["k_shot_selection"]["chosen"] == metrics["k_shot_selection"]["chosen"]
    assert row["k_shot"]["1"]["mrr"] == metrics["k_shot"]["1"]["mrr"]  # what the run itself reported


def test_quick_training_and_a_sample_of_entities(tmp_path):
    out = tmp_path / "k_shot.json"
    argv = ["--data", str(FIXTURE), "--run-dir", str(tmp_path / "run"), "--quick", "--epochs", "1", "--dim", "8"]
    rows = _module().main([*argv, "--ks", "0,1", "--max-entities", "3", "--timing-entities", "5", "--out", str(out)])
    row = rows["run"]
    assert not (tmp_path / "run" / "metrics.json").exists()  # --quick: no end-of-run evaluation
    assert row["max_entities"] == 3 and row["epochs"] == "see config.json (--quick)"
    assert 3 <= row["k_shot"]["0"]["num_entities"] < 11  # the sample's statements, and their other new ends
