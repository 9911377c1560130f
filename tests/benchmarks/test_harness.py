"""benchmarks/_harness.py: the machine record, the strict atomic results file, the common flags (issue 30)."""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import re
import sys
from pathlib import Path

import pytest
import torch

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
RESULTS = BENCHMARKS / "results"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


harness = _load("_harness")


def test_the_machine_record_says_where_and_when():
    record = harness.machine()
    assert {"cpu", "cpu_count", "load_average", "torch", "torch_threads", "git_commit", "date"} <= set(record)
    assert record["cpu_count"] >= 1
    assert record["torch"] == torch.__version__ and record["torch_threads"] == torch.get_num_threads()
    # two machines both named "AMD EPYC" differ by 1.9x in the README job's time: the record says which kernels ran
    assert record["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", record["date"])
    assert record["load_average"] is None or len(record["load_average"]) == 3
    json.dumps(record, allow_nan=False)  # strict JSON as it stands


def test_git_commit_names_the_checkout_and_none_outside_git(tmp_path):
    commit = harness.git_commit()
    if commit is not None:  # an sdist or a copy without .git has none
        assert re.fullmatch(r"[0-9a-f]{40}(\+dirty)?", commit)
    assert harness.git_commit(tmp_path) is None


def test_a_result_has_the_schema_keys_first_then_the_payload():
    command = "python benchmarks/optimizer_step.py --threads 1"
    record = harness.result("optimizer_step", command=command, rows=[{"a": 1}])
    assert list(record)[:4] == ["benchmark", "command", "machine", "date"]
    assert record["benchmark"] == "optimizer_step" and record["rows"] == [{"a": 1}]
    with pytest.raises(ValueError, match="machine"):
        harness.result("x", machine="mine")


def test_machine_extra_adds_a_scripts_own_machine_keys():
    record = harness.result("x", command="c", machine_extra={"cpus": 3, "torch_threads": 7}, rows=[])
    assert record["machine"]["cpus"] == 3 and record["machine"]["torch_threads"] == 7  # the script's word wins
    assert {"cpu", "git_commit", "date"} <= set(record["machine"])


def test_command_line_is_repo_relative_and_quoted():
    assert harness.command_line(["--out", "a b.json"], "/anywhere/benchmarks/k_shot_cli.py") == (
        "python benchmarks/k_shot_cli.py --out 'a b.json'"
    )


def test_results_are_strict_json_written_whole(tmp_path):
    out = tmp_path / "deep" / "r.json"
    assert harness.write_results(out, {"rows": [{"mrr": 0.25}]}) == out
    assert json.loads(out.read_text()) == {"rows": [{"mrr": 0.25}]}
    with pytest.raises(ValueError):
        harness.write_results(out, {"rows": [{"mrr": math.nan}]})
    with pytest.raises(ValueError):
        harness.write_results(out, {"rows": [{"mrr": math.inf}]})
    assert json.loads(out.read_text()) == {"rows": [{"mrr": 0.25}]}  # the previous file is untouched
    assert [p.name for p in out.parent.iterdir()] == ["r.json"]  # no temporary file left behind


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    out = tmp_path / "r.json"
    harness.write_results(out, {"v": 1})

    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(harness.os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        harness.write_results(out, {"v": 2})
    assert json.loads(out.read_text()) == {"v": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_common_flags_take_the_given_defaults_and_only_those_asked_for():
    parser = harness.add_common_flags(argparse.ArgumentParser(), out="benchmarks/results/x.json", threads=2)
    args = parser.parse_args([])
    assert args.out == Path("benchmarks/results/x.json") and args.threads == 2 and not hasattr(args, "seed")
    args = parser.parse_args(["--out", "y.json", "--threads", "1"])
    assert args.out == Path("y.json") and args.threads == 1
    with pytest.raises(SystemExit):
        parser.parse_args(["--threads", "0"])
    seeded = harness.add_common_flags(argparse.ArgumentParser(), seed=3)
    assert seeded.parse_args([]).seed == 3 and seeded.parse_args(["--seed", "7"]).seed == 7


def test_set_threads(monkeypatch):
    before = torch.get_num_threads()
    monkeypatch.setenv("OMP_NUM_THREADS", "9")
    try:
        harness.set_threads(1)
        assert torch.get_num_threads() == 1
        assert harness.os.environ["OMP_NUM_THREADS"] == "1"
        harness.set_threads(None)  # leaves torch's choice
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def _machine_keys(path: Path) -> set[str]:
    data = json.loads(path.read_text())
    records = data if isinstance(data, list) else [data, *(v for v in data.values() if isinstance(v, dict))]
    return set().union(*(set(r["machine"]) for r in records if isinstance(r, dict) and "machine" in r))


@pytest.mark.parametrize(
    ("script", "results"),
    [("health_setting", "health_setting_hpo_small.json"), ("reproduce_fb15k237", "reproduce_fb15k237.json")],
)
def test_a_script_on_the_harness_keeps_the_machine_keys_its_results_have(script, results):
    source = (BENCHMARKS / f"{script}.py").read_text(encoding="utf-8")
    assert '"machine": _harness.machine(load_at_end_key=True)' in source, script
    old = _machine_keys(RESULTS / results)
    assert old, f"{results} has no machine record"
    new = harness.machine(load_at_end_key=True)
    assert old <= set(new), sorted(old - set(new))
    assert {"cpu", "git_commit", "date", "load_average"} <= set(new)
    assert "load_average_at_end" not in harness.machine()


def test_the_scripts_find_the_harness_when_run_from_anywhere(tmp_path):
    import subprocess

    proc = subprocess.run(
        [sys.executable, str(BENCHMARKS / "k_shot_cli.py"), "--help"], cwd=tmp_path, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr


def test_a_results_file_follows_the_umask(tmp_path):
    """Colleagues in a shared folder can read the results (mkstemp alone gives 0o600 whatever the umask)."""
    import os

    old = os.umask(0o022)
    try:
        out = harness.write_results(tmp_path / "r.json", {"v": 1})
        assert out.stat().st_mode & 0o777 == 0o644
        os.umask(0o077)
        assert harness.write_results(tmp_path / "s.json", {"v": 1}).stat().st_mode & 0o777 == 0o600
    finally:
        os.umask(old)


def test_merge_row_replaces_the_row_of_the_same_label(tmp_path):
    out = tmp_path / "r.json"
    for label, value in (("a", 1), ("b", 2), ("a", 3)):
        harness.merge_row(out, "x", {"label": label, "v": value})
    record = json.loads(out.read_text())
    assert record["benchmark"] == "x" and "machine" in record
    assert [(r["label"], r["v"]) for r in record["rows"]] == [("b", 2), ("a", 3)]


def test_watch_child_times_each_stage_line_and_keeps_each_stages_peak():
    """What ``main_command`` and ``memory_estimate`` measure: the child's CPU at each stderr line, its rusage, and
    the largest RSS of each ``[textkg +mm:ss]`` stage, the stage named without its counts."""
    script = (
        "import sys, time\n"
        "sys.stderr.write('[textkg +00:00] texts encoded 1/2\\n'); sys.stderr.flush()\n"
        "x = b'x' * (64 * 2**20); sum(range(10**6)); time.sleep(0.3)\n"
        "sys.stderr.write('[textkg +00:01] done\\n')\n"
    )
    child = harness.watch_child([sys.executable, "-c", script], sample_rss=True)
    assert child["returncode"] == 0 and child["wall_s"] >= 0.3 and child["stderr"].count("[textkg") == 2
    assert 0 in child["cpu_at"] and child["cpu_end"] >= child["cpu_at"][0] >= 0
    assert child["rss_by_stage"]["texts encoded"] >= 64 * 2**20
    assert child["usage"].ru_maxrss * 1024 >= 64 * 2**20  # Linux: KiB
    assert harness.watch_child([sys.executable, "-c", "raise SystemExit(3)"])["returncode"] == 3
