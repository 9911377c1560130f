"""``benchmarks/cross_graph.py`` on two tiny graphs: alone once per seed, one row per ε, strict JSON."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[3]


def _module():
    spec = importlib.util.spec_from_file_location("cross_graph_bench", ROOT / "benchmarks" / "cross_graph.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_benchmark_writes_alone_once_and_every_epsilon(tmp_path, two_graphs, holders):
    path = tmp_path / "holders.yaml"
    config = holders(*two_graphs)
    config["exchange"]["rounds"] = 1
    path.write_text(yaml.safe_dump(config))
    out = tmp_path / "bench.json"
    _module().main(["--holders", str(path), "--seeds", "0", "--epsilons", "inf,4", "--out", str(out)])
    record = json.loads(out.read_text())
    methods = sorted(r["method"] for r in record["rows"] if r["party"] == "alpha")
    assert methods == ["alone", "cross-graph eps=4", "cross-graph eps=inf"]
    dp = next(r for r in record["rows"] if r["method"] == "cross-graph eps=4")
    assert dp["privacy"]["epsilon"] <= 4.0 and dp["privacy"]["unit"].startswith("one aligned entity")
    gains = {(s["party"], s["method"]): s["gain_over_alone"] for s in record["summary"]}
    assert gains[("alpha", "alone")] == 0.0


def _statement_holders(tmp_path, two_graphs, holders) -> Path:
    """A statement-level holders file (one round, every holder DP-SGD at ε = 8) in ``tmp_path``."""
    path = tmp_path / "holders.yaml"
    config = holders(*two_graphs, unit="statement")
    config["exchange"]["rounds"] = 1
    for h in config["holders"]:
        h["privacy"] = {"mode": "full", "target_epsilon": 8.0, "private_size": 100}
    path.write_text(yaml.safe_dump(config))
    return path


def test_the_statement_level_benchmark_pairs_each_budget_with_its_own_alone(tmp_path, two_graphs, holders):
    path = _statement_holders(tmp_path, two_graphs, holders)
    out = tmp_path / "bench.json"
    _module().main(["--holders", str(path), "--seeds", "0", "--epsilons", "2", "--out", str(out)])
    record = json.loads(out.read_text())
    rows = {r["method"]: r for r in record["rows"] if r["party"] == "alpha"}
    assert sorted(rows) == ["alone eps=2", "statement-level eps=2"]
    assert rows["alone eps=2"]["privacy"]["ledger"] == rows["statement-level eps=2"]["privacy"]["ledger"]
    assert 0 < rows["statement-level eps=2"]["privacy"]["epsilon"] <= 2.0
    summary = {s["method"]: s for s in record["summary"] if s["party"] == "alpha"}
    assert summary["statement-level eps=2"]["baseline"] == "alone eps=2"


def test_the_benchmark_runs_ppat_beside_procrustes_and_appends(tmp_path, two_graphs, holders):
    path = tmp_path / "holders.yaml"
    quick = {"teachers": 2, "iterations": 1, "queries": 2, "teacher_steps": 1, "student_steps": 1, "generator_steps": 1}
    config = holders(*two_graphs, method="ppat", ppat=quick)
    config["exchange"]["rounds"] = 1
    path.write_text(yaml.safe_dump(config))
    out = tmp_path / "bench.json"
    bench = _module()
    bench.main(["--holders", str(path), "--epsilons", "4", "--methods", "procrustes,ppat", "--out", str(out)])
    more = ["--methods", "ppat-clear", "--merge", str(out)]  # --merge OUT: what --append did (retired, issue 55)
    bench.main(["--holders", str(path), "--epsilons", "4", *more, "--out", str(out)])
    record = json.loads(out.read_text())
    methods = sorted(r["method"] for r in record["rows"] if r["party"] == "alpha")
    assert methods == ["alone", "cross-graph eps=4", "ppat eps=4", "ppat-clear eps=4"] and len(record["commands"]) == 2
    rows = {r["method"]: r for r in record["rows"] if r["party"] == "alpha"}
    assert rows["ppat eps=4"]["privacy"]["answers"] == 2 and rows["ppat eps=4"]["privacy"]["epsilon"] <= 4.0
    assert rows["ppat-clear eps=4"]["privacy"]["guarantee"] == "none"


def test_each_method_has_its_own_no_information_control_and_seeds_merge(tmp_path, two_graphs, holders):
    path = _statement_holders(tmp_path, two_graphs, holders)
    bench = _module()
    common = ["--holders", str(path), "--epsilons", "4", "--methods", "procrustes,average", "--no-information"]
    for seed in (0, 1):
        bench.main([*common, "--paired-noise", "--seeds", str(seed), "--out", str(tmp_path / f"s{seed}.json")])
    out = tmp_path / "bench.json"
    merge = f"{tmp_path / 's0.json'},{tmp_path / 's1.json'}"
    bench.main(["--holders", str(path), "--seeds", "", "--merge", merge, "--out", str(out)])
    record = json.loads(out.read_text())
    assert len(record["commands"]) == 3 and {r["seed"] for r in record["rows"]} == {0, 1}
    rows = [r for r in record["rows"] if r["party"] == "alpha" and r["seed"] == 0]
    assert sorted(r["method"] for r in rows) == [
        "alone eps=4",
        "alone eps=4 (average control run)",
        "alone eps=4 (average run)",
        "alone eps=4 (control run)",
        "average control: no information eps=4",
        "average statement-level eps=4",
        "control: no information eps=4",
        "statement-level eps=4",
    ]
    # --paired-noise: the four runs of a seed share the DP-SGD streams, so their alone tracks agree
    assert len({json.dumps(r["test"]) for r in rows if r["method"].startswith("alone")}) == 1
    summary = {s["method"]: s for s in record["summary"] if s["party"] == "alpha"}
    mine = summary["average statement-level eps=4"]
    assert mine["controls"] == ["average control: no information eps=4", "control: no information eps=4"]
    best = [
        max(r["test"]["mrr"] for r in record["rows"] if r["party"] == "alpha" and r["seed"] == s and r.get("control"))
        for s in (0, 1)
    ]
    got = [r["test"]["mrr"] for r in record["rows"] if r["party"] == "alpha" and r["method"] == mine["method"]]
    assert mine["gain_over_best_control"] == sum(g - b for g, b in zip(got, best, strict=True)) / 2
    assert mine["seeds_above_every_control"] == sum(g > b for g, b in zip(got, best, strict=True))
    assert "controls" not in summary["average control: no information eps=4"]
