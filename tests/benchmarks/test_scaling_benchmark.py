"""benchmarks/scaling.py: the synthetic graph it writes, its fits, and one tiny run's JSON."""

import importlib.util
import json
import math
from pathlib import Path

import pytest

from textkg.data import load_dataset

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "scaling.py"


@pytest.fixture(scope="module")
def scaling():
    spec = importlib.util.spec_from_file_location("scaling_benchmark", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_synthetic_graph_is_a_loadable_power_law_blp_directory(scaling, tmp_path):
    info = scaling.write_graph(tmp_path, 2000, num_relations=8, test_triples=50)
    kg = load_dataset(str(tmp_path))
    assert kg.num_entities == 2000  # every entity occurs in some statement
    assert kg.num_relations == 8
    assert info["train_triples"] == 10 * 2000 - 2 * 50
    assert info["max_degree"] > 20 * info["median_degree"]  # hubs: a heavy tail, not a uniform graph
    words = set(scaling.glove_words())
    assert all(set(d.split()) <= words for d in kg.entity_descriptions)


def test_slope_recovers_a_power(scaling):
    xs = [1e4, 1e5, 1e6]
    assert scaling.slope(xs, [3 * x**1.5 for x in xs]) == pytest.approx(1.5)
    assert scaling.slope([1e4], [1.0]) is None


@pytest.mark.slow
def test_tiny_run_writes_the_schema(scaling, tmp_path):
    out = tmp_path / "scaling.json"
    argv = ["--sizes", "300,600", "--out", str(out), "--nproc", "1", "--privacy", "none", "--steps", "2"]
    scaling.main([*argv, "--warmup", "1", "--full-epoch-steps", "2", "--test-triples", "20"])
    record = json.loads(out.read_text())
    assert set(record) >= {"command", "machine", "git", "setting", "graphs", "rows", "exponents", "projection"}
    rows = record["rows"]
    assert [(r["kind"], r["entities"]) for r in rows] == [
        ("encode", 300),
        ("train", 300),
        ("encode", 600),
        ("train", 600),
    ]
    assert not [r for r in rows if "error" in r], rows
    for r in rows:
        assert len(r["loadavg_before"]) == 3 and r["peak_rss_mib"] > 0
    train = rows[-1]
    assert train["epoch_extrapolated"] and train["steps_measured"] == 2
    assert math.isclose(train["epoch_seconds"], train["seconds_per_step"] * train["steps_per_epoch"])
    assert train["eval_queries"] == 40 and train["eval_candidates"] == 600
    fit = record["exponents"]["nproc=1,privacy=none"]
    assert fit["epoch_seconds_vs_triples"]["all"] is not None and fit["eval_seconds_vs_entities"]["sizes"] == 2
    projected = record["projection"]["primekg"]["nproc=1,privacy=none"]  # a line through two noisy tiny sizes
    assert set(projected) == {"seconds_per_step", "epoch_hours", "peak_rss_gib", "fitted_on_sizes"}
