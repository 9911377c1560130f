"""``benchmarks/unseen_structure.py`` on a tiny run: row and every grid point ranked, and the
grid's default point gives what ``textkg evaluate`` gives for the run (the library's default)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bench_module import load_benchmark

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "tiny_blp_ind"


def _module():
    return load_benchmark("unseen_structure.py", "unseen_structure_bench")


def test_the_benchmark_ranks_row_and_the_grid_and_its_default_matches_the_run(tmp_path):
    from textkg.cli.main import main

    out = tmp_path / "run"
    args = ["train", "--dataset", str(FIXTURE), "--split", "inductive", "--model", "fused-transe", "--dim", "8"]
    assert main([*args, "--epochs", "1", "--batch-size", "32", "--no-progress", "--out", str(out)]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    row = _module().measure(out, test=True)
    assert set(row["valid"]) == {"row", "k=8,tau=0.05", "k=16,tau=0.05", "k=32,tau=0.05", "k=16,tau=0.1"}
    assert row["test"]["k=16,tau=0.05"]["mrr"] == pytest.approx(metrics["test"]["mrr"], abs=1e-9)
    assert row["test"]["row"]["mrr"] != pytest.approx(row["test"]["k=16,tau=0.05"]["mrr"], abs=1e-12)
