"""``benchmarks/private_epoch.py`` on the tiny fixture (glove-bow): both workers, ratios, strict JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bench_module import load_benchmark

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures"


def _module():
    return load_benchmark("private_epoch.py", "private_epoch_bench")


@pytest.mark.slow  # two worker processes: about 15 s
def test_dp_and_nonprivate_steps_are_timed_and_compared(tmp_path):
    out = tmp_path / "private_epoch.json"
    argv = ["--data", str(FIXTURE / "tiny_blp"), "--inductive-dir", "ind_split", "--batch-size", "16"]
    argv += ["--private-size", "200", "--steps", "1", "--repeats", "1"]
    argv += ["--set", 'data.description="auto"']
    argv += ["--set", 'model.encoder="glove-bow"', "--set", "model.encoder_kwargs={}", "--set", "model.dim=8"]
    result = _module().main([*argv, "--out", str(out)])
    rows = json.loads(out.read_text())
    assert rows[-1]["summary"] == result["summary"]
    assert {r["method"] for r in result["runs"]} == {"dp", "nonprivate"}
    dp = next(r for r in result["runs"] if r["method"] == "dp")
    assert dp["steps_per_epoch"] == round(200 / 16) and dp["peak_rss_mb"] > 0
    assert result["summary"]["step_ratio_cpu_ms_per_step_median"] > 0 and result["machine"]["torch"]
