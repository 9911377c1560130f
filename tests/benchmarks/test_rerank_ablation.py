"""``benchmarks/investigations/rerank_ablation.py``: what it reads from a placement report, and an unknown feature
refused before any run is opened."""

from __future__ import annotations

import pytest
from bench_module import load_benchmark


@pytest.fixture(scope="module")
def bench():
    return load_benchmark("investigations/rerank_ablation.py", "rerank_ablation_bench")


def test_summary_reads_both_blocks(bench):
    block = {"mrr": 0.61234, "hits@1": 0.5, "hits@10": 0.9, "num_queries": 3}
    out = {
        "placement_combined": block,
        "placement_selection": {"valid": {"combined": block}, "combined": {"weights": {"rerank": 1.0}}},
        "placement_rerank": {"weights": {"description": 1.23456, "synonym_containment": 0.05}},
        "placement_names_only": {"placement_combined": block, "placement_selection": {"valid": {"combined": block}}},
    }
    got = bench.summary(out)
    assert got["test_combined"] == {"mrr": 0.6123, "hits@1": 0.5, "hits@10": 0.9}
    assert got["names_only_valid_combined"] == got["valid_combined"] == got["test_combined"]
    assert got["rerank_weights"] == {"description": 1.2346, "synonym_containment": 0.05}
    assert bench.summary({**out, "placement_names_only": None})["names_only_test_combined"] is None


def test_an_unknown_feature_exits_2(bench, tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        bench.main(["--run-dir", str(tmp_path), "--drop", "no_such_feature", "--out", str(tmp_path / "o.json")])
    assert exc.value.code == 2
    assert "no_such_feature" in capsys.readouterr().err
    assert not (tmp_path / "o.json").exists()
