"""Experiments are configuration (issue 55): every config under ``benchmarks/experiments/`` loads, names a
runner, and dry-runs to commands whose every flag its script or ``textkg`` defines; a bad config is one
error naming its file and field, exit status 2, before anything runs. No training: ``--dry-run`` only."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"
EXPERIMENTS = BENCHMARKS / "experiments"
NAMES = sorted(p.stem for p in EXPERIMENTS.glob("*.yaml"))


def _load(name: str, module: str):
    spec = importlib.util.spec_from_file_location(module, BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded


@pytest.fixture(scope="module")
def cli():
    """``benchmarks/__main__.py`` as a module; it imports ``runners`` from its own folder."""
    return _load("__main__", "benchmarks_main")


@pytest.fixture(scope="module")
def textkg_parser():
    from textkg.cli.main import build_parser

    return build_parser()


def test_there_are_experiments():
    assert len(NAMES) >= 15, NAMES


@pytest.mark.parametrize("name", NAMES)
def test_every_experiment_dry_runs_to_commands_its_scripts_accept(name, cli, textkg_parser, capsys):
    assert cli.main(["run", name, "--dry-run"]) == 0
    printed = capsys.readouterr().out.strip().splitlines()
    experiment = sys.modules["runners"].load(name)
    steps = experiment.steps()
    assert printed == [str(step) for step in steps] and steps
    assert experiment.question and experiment.baseline
    assert all(r.startswith("benchmarks/results/") for r in experiment.results), experiment.results
    for step in steps:
        argv = list(step.argv)
        if argv[0] == "textkg":
            with _no_exit():
                textkg_parser.parse_args(argv[1:])  # every flag is one of the command's
            continue
        assert argv[0] == "python"
        if argv[1:3] == ["-m", "benchmarks"]:
            assert argv[3] in {"collect-sweep"}, argv
            continue
        script = ROOT / argv[1]
        assert script.parent == BENCHMARKS and script.is_file(), argv[1]
        source = script.read_text(encoding="utf-8")
        for word in argv[2:]:
            if word.startswith("--") and word != "--":
                flag = word.split("=")[0]
                common = "add_common_flags" in source and flag in {"--out", "--seed", "--threads"}
                assert f'"{flag}"' in source or common, (argv[1], flag)
            if word == "--":  # what follows goes to `textkg train` (main_command.py)
                with _no_exit():
                    textkg_parser.parse_args(["train", *argv[argv.index("--") + 1 :]])
                break


class _no_exit:
    """Turn argparse's SystemExit into a test failure that names the command."""

    def __enter__(self):
        return self

    def __exit__(self, kind, value, traceback):
        if kind is SystemExit:
            pytest.fail(f"textkg refused the command's flags (exit {value.code})")
        return False


def test_python_m_benchmarks_prints_the_commands_from_the_repository_root():
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks", "run", "optimizer_step", "--dry-run"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == (
        "OMP_NUM_THREADS=1 python benchmarks/optimizer_step.py --steps 10 --out benchmarks/results/optimizer_step.json"
    )


def test_an_unknown_experiment_exits_2_listing_the_experiments():
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks", "run", "no_such_experiment"], cwd=ROOT, capture_output=True, text=True
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("error: benchmarks/experiments/no_such_experiment.yaml: no such experiment")
    assert "main_command" in proc.stderr


BAD = {
    "unknown key": ("question: q\nrunner: step-cost\narguments: {}\nbaseline: b\nresults: []\nseed: 3\n", "'seed'"),
    "missing key": ("question: q\nrunner: step-cost\narguments: {}\nresults: []\n", "'baseline'"),
    "unknown runner": ("question: q\nrunner: magic\narguments: {}\nbaseline: b\nresults: []\n", "'runner'"),
    "not YAML": ("question: [q\n", "not YAML"),
    "environment": (
        "question: q\nrunner: step-cost\narguments: {script: optimizer_step}\nbaseline: b\nresults: []\n"
        "environment: {LD_PRELOAD: x.so}\n",
        "'LD_PRELOAD'",
    ),
    "unknown flag": (
        "question: q\nrunner: step-cost\narguments: {script: optimizer_step, stepz: 3}\nbaseline: b\nresults: []\n",
        "has no --stepz",
    ),
    "script of another runner": (
        "question: q\nrunner: step-cost\narguments: {script: health_setting}\nbaseline: b\nresults: []\n",
        "not one of step-cost's",
    ),
    "missing argument": ("question: q\nrunner: real-additions\narguments: {}\nbaseline: b\nresults: []\n", "needs"),
    "wrong shape": (
        "question: q\nrunner: real-additions\narguments: {releases: [CL]}\nbaseline: b\nresults: []\n",
        "field 'arguments'",
    ),
}


@pytest.mark.parametrize("case", BAD, ids=list(BAD))
def test_a_bad_config_is_one_error_naming_the_file_and_field(case, cli, tmp_path, monkeypatch, capsys):
    text, expected = BAD[case]
    (tmp_path / "bad.yaml").write_text(text, encoding="utf-8")
    monkeypatch.setattr(sys.modules["runners"], "EXPERIMENTS", tmp_path)
    monkeypatch.setattr(cli, "execute", lambda step: pytest.fail(f"ran {step}"))
    assert cli.main(["run", "bad"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "bad.yaml" in err and expected in err, err


def test_flags_follow_argparse(cli):
    runners = sys.modules["runners"]
    assert runners.flags({"batch_size": 4096, "fedavg": True, "skip": False, "none": None, "seeds": [0, 1]}) == [
        "--batch-size",
        "4096",
        "--fedavg",
        "--seeds",
        "0,1",
    ]
    assert runners.flags({"train_args": "--lr 0.02"}) == ["--train-args=--lr 0.02"]  # a value, not a flag
    assert runners.flags({"set": ["a=1", "b=2"]}, repeated=["set"]) == ["--set", "a=1", "--set", "b=2"]


def test_variants_append_a_repeated_list_and_override_the_rest(cli):
    runners = sys.modules["runners"]
    args = {"seed": 0, "set": ["x=1"], "variants": {"a": {"seed": 1, "set": ["y=2"]}, "b": {}}}
    assert runners.variants(args, ["set"]) == [
        ("a", {"seed": 1, "set": ["x=1", "y=2"]}),
        ("b", {"seed": 0, "set": ["x=1"]}),
    ]


def test_an_empty_cache_folder_is_printed_as_mktemp_and_made_fresh_when_run(cli, monkeypatch):
    runners = sys.modules["runners"]
    step = runners.load("main_command").steps()[0]
    assert str(step).startswith("TEXTKG_CACHE_DIR=$(mktemp -d) python benchmarks/main_command.py --run-dir ")
    seen = []

    def fake_run(argv, cwd, env):
        seen.append((argv, cwd, env["TEXTKG_CACHE_DIR"]))
        return subprocess.CompletedProcess(argv, 0)

    monkeypatch.setattr(cli.subprocess, "run", fake_run)
    assert cli.execute(step) == 0 and cli.execute(step) == 0
    (argv, cwd, first), (_, _, second) = seen
    assert argv[:2] == [sys.executable, "benchmarks/main_command.py"] and cwd == ROOT
    assert first != second and not any(Path(first).iterdir()) and not any(Path(second).iterdir())
    Path(first).rmdir()
    Path(second).rmdir()


def test_a_command_cost_writes_the_ontology_first_then_times_each_job_in_a_fresh_cache(cli):
    """``ontology_time``: the older release written as OBO (``--obo-only``), then the README job and the job on that
    OBO, each from its own empty cache, so that the two times compare the same machine's cold runs."""
    steps = [str(s) for s in sys.modules["runners"].load("ontology_time").steps()]
    assert len(steps) == 3 and "benchmarks/real_additions.py" in steps[0] and steps[0].endswith("--obo-only")
    readme, mondo = steps[1:]
    assert all(s.startswith("TEXTKG_CACHE_DIR=$(mktemp -d) python benchmarks/main_command.py") for s in steps[1:])
    assert readme.endswith("-- --dataset hpo --split inductive --model fused-transe --epochs 3")
    assert "-- --dataset runs/ontology_time/MONDO-v2025-02-04/old.obo " in mondo


def test_collect_sweep_writes_one_row_per_run_first_folder_first(cli, tmp_path):
    def run(folder: Path, name: str, mrr: float, audit: bool) -> None:
        (folder / name).mkdir(parents=True)
        test = {"mrr": mrr, "head": {}, "subsets": {"answer_seen": {"mrr": mrr}}}
        metrics = {"privacy": None, "train": {"epochs": 1, "steps": 2, "seconds": 3.0, "other": 0}, "test": test}
        (folder / name / "metrics.json").write_text(json.dumps(metrics), encoding="utf-8")
        if audit:
            (folder / name / "audit.json").write_text(json.dumps({"roc_auc": 0.5, "roc": [1]}), encoding="utf-8")

    a, b = tmp_path / "a", tmp_path / "b"
    run(a, "full-eps1", 0.02, audit=True)
    run(a, "none", 0.18, audit=False)
    run(b, "none", 0.99, audit=False)
    run(b, "public-only", 0.08, audit=True)
    out = tmp_path / "sweep.json"
    assert cli.main(["collect-sweep", str(a), str(b), "--out", str(out)]) == 0
    record = json.loads(out.read_text(encoding="utf-8"))
    assert record["benchmark"] == "collect_sweep" and record["command"].startswith("python -m benchmarks collect-sweep")
    assert [(r["run"], r["test"]["mrr"]) for r in record["rows"]] == [
        ("none", 0.18),
        ("public-only", 0.08),
        ("full-eps1", 0.02),
    ]
    assert record["rows"][2]["audit"] == {"roc_auc": 0.5} and record["rows"][0]["audit"] is None
    assert record["rows"][0]["train"] == {"epochs": 1, "steps": 2, "seconds": 3.0}
    assert "head" not in record["rows"][0]["test"] and record["rows"][0]["test_subsets_mrr"] == {"answer_seen": 0.18}


# ---- a config reproduces the command its results file records (issue 55) --------------------------------

#: Steps whose command may differ from what their results file records, and why.
UNRECORDED = {
    ("health_setting_hpo", 0): "seed 0 ran --epsilons 1,4 and wrote the merged file itself (the config's note)",
    ("main_command", 0): "main_command.json records the commands of earlier labels, not of the published row's",
    ("patient_diagnosis", 0): "patient_diagnosis.json records only the --merge of its per-seed files",
    **{("privacy_sweep_hpo_small", i): "the results file records its sweeps in prose" for i in range(3)},
    # --max-minutes is refused under --privacy full|confidential (the private step count must not depend on wall
    # time); these runs finished all 5 epochs before their limit, so the number is the same without it
    ("fb15k237_private", 0): "recorded with --max-minutes 85, now refused under privacy; the run did not reach it",
    ("fb15k237_private", 1): "recorded with --max-minutes 85, now refused under privacy; the run did not reach it",
    ("fb15k237_confidential_half", 1): "recorded with --max-minutes 85, now refused under privacy; not reached",
}
#: Flags whose value names a scratch or output file: the numbers do not depend on it.
SCRATCH_FLAGS = {"--out", "--merge"}
#: A word a recorded command writes for any value (``--run-dir RUN``).
PLACEHOLDERS = {"RUN"}


def recorded_commands(data) -> list[str]:
    """Every command a results file records: the strings under any ``command``/``commands``/``*_command`` key."""
    found: list[str] = []
    if isinstance(data, dict):
        for key, value in data.items():
            if key == "command" or key == "commands" or key.endswith("_command"):
                found += [value] if isinstance(value, str) else [v for v in value if isinstance(v, str)]
            else:
                found += recorded_commands(value)
    elif isinstance(data, list):
        for value in data:
            found += recorded_commands(value)
    return found


def canonical(command: str):
    """``(program, positional words, flags)`` of a printed or recorded command, or None when it runs no
    program: environment assignments, ``nice`` and a trailing remark in parentheses dropped; quotes dropped
    (a record is not always shell-quoted: ``--train-args=--placement-extras off``); ``--flag=value`` read as
    ``--flag value``; the flags a multiset, in any order; :data:`SCRATCH_FLAGS` left out."""
    command = re.sub(r"\s+\([^()]*\)$", "", command.strip()).replace("$(mktemp -d)", "EMPTY_DIR")
    words = [w.replace('"', "").replace("'", "") for w in command.split()]
    while words and (re.match(r"[A-Z_]+=", words[0]) or words[0] == "nice"):
        words = words[3:] if words[:2] == ["nice", "-n"] else words[1:]
    if len(words) < 2 or words[0] not in {"python", "textkg"} or words[1] == "-m":
        return None
    program, rest = tuple(words[:2]), []
    for word in words[2:]:
        rest += word.split("=", 1) if word.startswith("--") and "=" in word else [word]
    positional: list[str] = []
    groups: list[list[str]] = []
    for word in rest:
        if word.startswith("--"):
            groups.append([word])
        elif groups:
            groups[-1].append(word)
        else:
            positional.append(word)
    flags = sorted(tuple(g) for g in groups if g[0] not in SCRATCH_FLAGS)
    return program, tuple(positional), tuple(flags)


def same(printed, recorded) -> bool:
    """Whether a printed command is a recorded one (:func:`canonical` forms); a placeholder matches any word."""

    def words(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
        return len(a) == len(b) and all(x == y or y in PLACEHOLDERS for x, y in zip(a, b, strict=True))

    return (
        printed[0] == recorded[0]
        and words(printed[1], recorded[1])
        and len(printed[2]) == len(recorded[2])
        and all(words(a, b) for a, b in zip(printed[2], recorded[2], strict=True))
    )


@pytest.mark.parametrize("name", NAMES)
def test_every_experiment_runs_the_commands_its_results_record(name, cli):
    """Each step equals (up to :func:`canonical`) a command its results files record for the same program;
    a program they record no command of is not compared."""
    experiment = sys.modules["runners"].load(name)
    records = []
    for path in experiment.results:
        if (ROOT / path).is_file():
            records += recorded_commands(json.loads((ROOT / path).read_text(encoding="utf-8")))
    recorded = [c for c in map(canonical, records) if c is not None]
    for index, step in enumerate(experiment.steps()):
        printed = canonical(str(step))
        if printed is None or (name, index) in UNRECORDED:
            continue
        candidates = [r for r in recorded if r[0] == printed[0]]
        assert not candidates or any(same(printed, r) for r in candidates), (
            f"{name} step {index}: {step}\nis none of the {len(candidates)} commands its results record"
        )


def test_the_comparison_reads_a_record_as_a_shell_would():
    printed = canonical(
        "OMP_NUM_THREADS=1 python benchmarks/health_setting.py --seeds 1 '--train-args=--placement-extras off' "
        "--set 'privacy.mode=\"full\"' --out a.json"
    )
    record = 'nice -n 10 python benchmarks/health_setting.py --set privacy.mode="full" --seeds 1 --out b.json '
    assert same(printed, canonical(record + "--train-args=--placement-extras off (one remark)"))
    assert not same(printed, canonical(record + "--train-args=--placement-extras on"))
    assert not same(
        printed, canonical(record.replace("--seeds 1", "--seeds 2") + "--train-args=--placement-extras off")
    )
    assert same(canonical("python benchmarks/x.py --run-dir runs/q"), canonical("python benchmarks/x.py --run-dir RUN"))
    assert canonical("python -m benchmarks collect-sweep a --out b") is None


def test_a_runner_registers_itself_and_a_name_twice_is_refused(cli):
    runners = sys.modules["runners"]
    assert {"step-cost", "federation", "link-rerank"} <= set(runners.RUNNERS)
    with pytest.raises(TypeError, match="two runners named 'step-cost'"):

        class Again(runners.Runner):
            name = "step-cost"

    assert type(runners.RUNNERS["step-cost"]).__name__ == "StepCost"


def test_no_private_variant_asks_for_a_wall_time_limit():
    """``--max-minutes`` is refused under ``--privacy full|confidential``: a config that passes it to a private
    variant does not reproduce with one command (it exits 2)."""
    for path in sorted(EXPERIMENTS.glob("*.yaml")):
        config = yaml.safe_load(path.read_text(encoding="utf-8"))
        arguments = config.get("arguments") or {}
        for name, variant in (arguments.get("variants") or {"": {}}).items():
            merged = {**arguments, **(variant or {})}
            settings = " ".join(str(x) for x in [*(arguments.get("set") or []), *((variant or {}).get("set") or [])])
            private = 'privacy.mode="full"' in settings or 'privacy.mode="confidential"' in settings
            assert not (private and merged.get("max_minutes")), (path.name, name)
