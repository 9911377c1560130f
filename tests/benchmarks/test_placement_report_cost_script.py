"""``benchmarks/investigations/placement_report_cost.py``: a folder that is no finished run with a placement report
is refused before anything is loaded or written."""

from __future__ import annotations

import json

import pytest
from bench_module import load_benchmark


@pytest.fixture(scope="module")
def bench():
    return load_benchmark("investigations/placement_report_cost.py", "placement_report_cost_bench")


@pytest.mark.parametrize("metrics", [None, {"test": {"mrr": 0.1}}, {}])
def test_no_placement_report_exits_2(bench, tmp_path, capsys, metrics):
    if metrics is not None:
        (tmp_path / "metrics.json").write_text(json.dumps(metrics), encoding="utf-8")
    with pytest.raises(SystemExit) as exc:
        bench.main(["--run-dir", str(tmp_path), "--label", "L", "--out", str(tmp_path / "o.json")])
    assert exc.value.code == 2
    assert str(tmp_path) in capsys.readouterr().err
    assert not (tmp_path / "o.json").exists()
