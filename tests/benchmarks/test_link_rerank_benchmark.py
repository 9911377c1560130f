"""``benchmarks/link_rerank.py --from-report``: the row read from a finished run's ``metrics.json``, each
row with its own command (no machine path) and machine, and the results file's header kept."""

from __future__ import annotations

import json
import sys
from types import SimpleNamespace

import pytest
from bench_module import load_benchmark

BEST = {"weight": 16.0, "test": {"mrr": 0.455}}
BLOCK = {"with": {"mrr": 0.455}, "without": {"mrr": 0.409}, "weight": 16.0, "best_weight_above_0": BEST}


def _stub_run(monkeypatch, test: dict) -> None:
    import textkg.pipeline.run_dir as run_dir

    config = SimpleNamespace(data=SimpleNamespace(dataset="/home/someone/data/wn"))
    opened = SimpleNamespace(config=config, metrics=lambda: {"test": test})
    monkeypatch.setattr(run_dir, "open_run", lambda path: opened)


def test_from_report_reads_the_block_and_refuses_a_run_without_one(monkeypatch, tmp_path):
    bench = load_benchmark("link_rerank.py", "link_rerank_bench")
    vote = {"weight": 8.0, "spread_weight": 2.0, "vote_only": {"mrr": 0.15}}
    test = {"mrr": 0.392, "hits@1": 0.26, "hits@10": 0.65, "neighbour_vote": vote, "link_rerank": BLOCK}
    _stub_run(monkeypatch, test)
    row = bench.from_report(tmp_path / "wn_cf5")
    assert row["read_from_report"] and row["link_rerank"] == BLOCK and row["model"]["mrr"] == 0.392
    assert row["dataset"] == "wn"  # an absolute dataset path is recorded by its name: no machine path
    assert row["first_stage_choice"] == {"weight": 8.0, "spread_weight": 2.0} and row["vote_only"] == {"mrr": 0.15}
    _stub_run(monkeypatch, {"mrr": 0.392})  # the report did not reach the re-ranker
    with pytest.raises(SystemExit, match="no test.link_rerank"):
        bench.from_report(tmp_path / "wn_cf5")


def test_a_new_row_keeps_the_header_and_names_no_machine_path(monkeypatch, tmp_path):
    bench = load_benchmark("link_rerank.py", "link_rerank_bench")
    out = tmp_path / "link_rerank.json"
    header = {"benchmark": "link_rerank", "commands": ["python benchmarks/link_rerank.py runs/old"], "note": "kept"}
    out.write_text(json.dumps({**header, "rows": [{"run": "old", "link_rerank": None}]}))
    row = {"model": {"mrr": 0.39}, "link_rerank": BLOCK}
    monkeypatch.setattr(bench, "from_report", lambda run: {"run": run.name, **row})
    run = tmp_path / "deep" / "wn_cf5"
    monkeypatch.setattr(sys, "argv", ["link_rerank.py", str(run), "--from-report", "--out", str(out), "--label", "L"])
    bench.main()
    record = json.loads(out.read_text())
    assert {k: record[k] for k in header} == header  # the earlier rows' commands and note are not overwritten
    assert [r.get("label", r["run"]) for r in record["rows"]] == ["old", "L"]
    new = record["rows"][1]
    assert new["command"].startswith("python benchmarks/link_rerank.py runs/wn_cf5 --from-report")
    assert str(tmp_path) not in new["command"] and new["machine"]["cpu_count"] >= 1
