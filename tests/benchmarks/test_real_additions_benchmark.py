"""``benchmarks/real_additions.py``'s conversion and scoring: a release to OBO and back, the real
additions it selects, and the filtered ranks it scores them with."""

from __future__ import annotations

from pathlib import Path

from bench_module import load_benchmark

ROOT = Path(__file__).resolve().parents[2]


def _module():
    return load_benchmark("real_additions.py", "real_additions_bench")


OLD = {
    "X:1": {"label": "cell", "description": 'a "unit" of life', "ancestors": {}},
    "X:2": {"label": "neuron", "description": "", "synonyms": ["nerve cell"], "ancestors": {"X:1": 1}},
    "X:3": {"label": "gone", "deprecated": True, "ancestors": {"X:1": 1}},
    "Y:1": {"label": "imported", "ancestors": {}},
}
NEW = {
    **OLD,
    "X:4": {"label": "motor neuron", "ancestors": {"X:2": 1, "X:1": 2}},  # a real addition under X:2
    "X:5": {"label": "orphan", "ancestors": {"X:9": 1}},  # its parent is new too: not placeable
}


def test_release_to_obo_reads_back_as_the_same_ontology(tmp_path):
    from textkg.data.ontology import read_obo

    bench = _module()
    old = bench.live_terms(OLD, "X")
    assert set(old) == {"X:1", "X:2"} and old["X:2"]["parents"] == ["X:1"]  # deprecated and other prefixes left out
    bench.write_obo(old, tmp_path / "old.obo")
    onto = read_obo(tmp_path / "old.obo")
    assert onto.terms["X:1"].definition == 'a "unit" of life' and list(onto.terms["X:2"].parents) == ["X:1"]
    assert list(onto.terms["X:2"].synonyms) == ["nerve cell"]


def test_additions_are_new_terms_under_old_parents_and_ranks_are_filtered():
    bench = _module()
    old, new = bench.live_terms(OLD, "X"), bench.live_terms(NEW, "X")
    added = bench.additions(old, new, cap=10, seed=0)
    assert [(tid, gold) for tid, _, gold in added] == [("X:4", ["X:2"])]
    ranks = bench.ranks_of({"a": ["p2", "x", "p1"], "b": ["y"]}, {"a": ["p1", "p2"], "b": ["z"]})
    assert ranks == [2.0, 1.0, float("inf")]  # p1: p2 filtered out; z never listed
    assert bench.summarise([1.0, 2.0, float("inf"), 4.0])["mrr"] == (1 + 0.5 + 0 + 0.25) / 4


def test_subsample_keeps_the_parents_asked_for_and_every_path_to_the_root():
    bench = _module()
    chain = {f"X:{i}": {"label": f"t{i}", "ancestors": {f"X:{j}": i - j for j in range(i)}} for i in range(40)}
    wide = {f"X:{100 + i}": {"label": f"w{i}", "ancestors": {"X:0": 1}} for i in range(60)}
    old = bench.live_terms({**chain, **wide}, "X")
    sub = bench.subsample(old, {"X:20"}, max_terms=30, seed=0)
    assert "X:20" in sub and all(f"X:{j}" in sub for j in range(20))  # the kept term's ancestors
    assert len(sub) < len(old)
    for tid, term in sub.items():
        assert term["parents"] == [p for p in old[tid]["parents"] if p in sub] and set(term["parents"]) <= set(sub)
        assert all(a in sub for a in term["ancestors"])  # closed under ancestors
    assert bench.subsample(old, set(), max_terms=1000, seed=0) is old  # small enough: untouched
    assert sub == bench.subsample(old, {"X:20"}, max_terms=30, seed=0)  # seeded


def test_a_label_keeps_a_rerun_beside_the_earlier_run_in_the_results_file():
    bench = _module()
    assert bench.run_key("CL", "v1", "v2") == "CL:v1->v2"  # no label: the key of the earlier runs
    assert bench.run_key("CL", "v1", "v2", label=" prior fixed ") == "CL:v1->v2 [prior fixed]"
    assert bench.run_key("CL", "v1", "v2", label="  ") == "CL:v1->v2"


def test_the_recorded_command_names_the_wheel_without_its_folder():
    bench = _module()
    wheel = Path("/somewhere/wheels/cog-1.whl")
    argv = ["--wheel", str(wheel), "--ontology", "CL", f"--wheel={wheel}"]
    assert bench.recorded_argv(argv, wheel) == ["--wheel", "cog-1.whl", "--ontology", "CL", "--wheel=cog-1.whl"]


def test_training_runs_with_the_readme_jobs_threads_not_the_placements():
    """``--threads`` (1 by default) sets the placement's threads; the train run it times must not inherit it, or
    its ``train_seconds`` compare a one-thread run with the README job's two threads."""
    bench = _module()
    env = bench.train_env({"OMP_NUM_THREADS": "1", "PATH": "/bin"}, None)
    assert env == {"PATH": "/bin"}
    assert bench.train_env({"OMP_NUM_THREADS": "1"}, 2) == {"OMP_NUM_THREADS": "2"}
