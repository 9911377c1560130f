"""Experiments as data (issue 55): a config under ``benchmarks/experiments/`` names a runner, and the runner
turns the config's arguments into the commands that reproduce a published number.

A config (YAML) holds ``question``, ``runner`` (a name in :data:`RUNNERS`), ``arguments`` (the runner's; most
become flags of a kept script: ``batch_size: 4096`` is ``--batch-size 4096``, ``true`` a bare flag, a list a
comma-joined value; ``variants``: one command per variant), ``baseline``, ``results`` and optionally
``environment`` and ``note``: benchmarks/README.md describes each. ``python -m benchmarks run NAME --dry-run``
prints the commands.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import yaml

from textkg.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENTS = ROOT / "benchmarks" / "experiments"
MAX_CONFIG_BYTES = 64 * 1024
KEYS = {"question", "runner", "arguments", "baseline", "results", "environment", "note"}
REQUIRED = ("question", "runner", "arguments", "baseline", "results")
ENVIRONMENT = {"OMP_NUM_THREADS", "MKL_NUM_THREADS", "TEXTKG_CACHE_DIR"}
EMPTY_DIR = "$(mktemp -d)"  # how a fresh empty folder is printed; `run` makes one per step
COMMON_FLAGS = {"--out", "--seed", "--threads"}  # what _harness.add_common_flags may add


@dataclass(frozen=True)
class Step:
    """One command: ``argv`` (``python`` / ``textkg`` as printed) and the environment it adds."""

    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()

    def __str__(self) -> str:
        env = [f"{key}={value if value == EMPTY_DIR else shlex.quote(value)}" for key, value in self.env]
        return " ".join([*env, shlex.join(self.argv)])


@dataclass(frozen=True)
class Experiment:
    """A loaded config; ``path`` names it in every error."""

    name: str
    path: Path
    question: str
    runner: str
    arguments: Mapping[str, Any]
    baseline: str
    results: tuple[str, ...]
    environment: Mapping[str, str]

    def steps(self) -> list[Step]:
        """The commands that reproduce the experiment, in order."""
        env = tuple((k, EMPTY_DIR if v == "empty" else v) for k, v in self.environment.items())
        try:
            steps = RUNNERS[self.runner].steps(dict(self.arguments))
        except KeyError as error:
            raise ConfigError(f"{self.runner} needs {error}", file=self.path, field="arguments") from None
        except (ValueError, TypeError, AttributeError) as error:
            raise ConfigError(f"{self.runner}: {error}", file=self.path, field="arguments") from None
        return [Step(s.argv, env + s.env) for s in steps]


def flags(arguments: Mapping[str, Any], *, repeated: Iterable[str] = ()) -> list[str]:
    """``{"batch_size": 4096, "fedavg": True, "seeds": [0, 1]}`` -> ``--batch-size 4096 --fedavg --seeds 0,1``.

    A key in ``repeated`` gives its flag once per item (``--set A --set B``); ``None`` and ``False`` give
    nothing; a value that starts with ``-`` is joined with ``=`` so that argparse reads it as a value.
    """
    out: list[str] = []
    for key, value in arguments.items():
        flag = "--" + key.replace("_", "-")
        if value is None or value is False:
            continue
        if value is True:
            out.append(flag)
            continue
        items = list(value) if isinstance(value, list) else [value]
        values = [str(v) for v in items] if key in repeated else [",".join(str(v) for v in items)]
        for v in values:
            out += [f"{flag}={v}"] if v.startswith("-") else [flag, v]
    return out


def script_flags(script: str) -> set[str]:
    """The ``--flags`` a kept script's source names (its argparse options), the harness's common ones too."""
    source = (ROOT / "benchmarks" / f"{script}.py").read_text(encoding="utf-8")
    found = set(re.findall(r"[\"'](--[a-z0-9][a-z0-9-]*)[\"']", source))
    return found | (COMMON_FLAGS if "add_common_flags" in source else set())


def script(name: str, arguments: Mapping[str, Any], *positional: str, repeated: Iterable[str] = ()) -> Step:
    """``python benchmarks/NAME.py POSITIONAL --flags``; a flag the script does not define is an error."""
    argv = flags(arguments, repeated=repeated)
    unknown = sorted({a.split("=")[0] for a in argv if a.startswith("--")} - script_flags(name))
    if unknown:
        raise ValueError(f"benchmarks/{name}.py has no {', '.join(unknown)}")
    return Step(("python", f"benchmarks/{name}.py", *positional, *argv))


def textkg(command: str, arguments: Mapping[str, Any], *positional: str) -> Step:
    """``textkg COMMAND POSITIONAL --flags`` (the flags are checked by the test of every config)."""
    return Step(("textkg", command, *positional, *flags(arguments)))


def variants(arguments: dict[str, Any], repeated: Iterable[str] = ()) -> list[tuple[str, dict[str, Any]]]:
    """``[(name, arguments)]``: one per entry of ``arguments["variants"]`` (its keys override, a repeated key's
    list is appended), or ``[("", arguments)]`` without variants."""
    named = arguments.pop("variants", None) or {"": {}}
    out = []
    for name, extra in named.items():
        merged = dict(arguments)
        for key, value in extra.items():
            merged[key] = [*merged.get(key, []), *value] if key in repeated else value
        out.append((name, merged))
    return out


#: every runner by its name; a subclass of :class:`Runner` registers itself (a name twice is an error)
RUNNERS: dict[str, Runner] = {}


class Runner:
    """Turns a config's arguments into commands; ``scripts`` are the kept scripts it may run."""

    name: ClassVar[str]
    scripts: ClassVar[tuple[str, ...]] = ()
    repeated: ClassVar[tuple[str, ...]] = ("set",)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.name in RUNNERS:
            raise TypeError(f"two runners named {cls.name!r}")
        RUNNERS[cls.name] = cls()

    def pick(self, arguments: dict[str, Any]) -> str:
        name = arguments.pop("script")
        if name not in self.scripts:
            raise ValueError(f"script {name!r} is not one of {self.name}'s: {', '.join(self.scripts)}")
        return name

    def steps(self, arguments: dict[str, Any]) -> list[Step]:
        name = self.pick(arguments)
        return [script(name, a, repeated=self.repeated) for _, a in variants(arguments, self.repeated)]


class CommandCost(Runner):
    """The wall time, CPU time and peak memory of a whole command (the README's job, its memory estimate); one per
    variant, one after the other on the same machine. ``obo_from``: ``real_additions.py`` flags that first write an
    ontology's older release as OBO (``--obo-only``), the dataset a variant's ``train`` may name."""

    name = "command-cost"
    scripts = ("main_command", "memory_estimate")

    def steps(self, arguments: dict[str, Any]) -> list[Step]:
        name = self.pick(arguments)
        obo_from = arguments.pop("obo_from", None)
        out = [script("real_additions", {**obo_from, "obo_only": True})] if obo_from else []
        for _, args in variants(arguments):
            train = args.pop("train", None)
            step = script(name, args)
            out.append(Step((*step.argv, "--", *flags(train))) if train else step)
        return out


class StepCost(Runner):
    """The time and memory of a training step or epoch, against the simplest alternative beside it."""

    name = "step-cost"
    scripts = ("throughput_vs_pykeen", "dp_step", "distributed", "optimizer_step")


class TrainAndReport(Runner):
    """Train (``train``: ``textkg train`` flags; ``sweeps``: a folder -> ``textkg sweep`` flags each, then
    ``collect``: the JSON of their runs), then run a kept script on the result (``script``, ``run``)."""

    name = "train-and-report"
    scripts = ("reproduce_fb15k237", "k_shot_cli", "readme_place", "cross_encoder_shortlist")

    def steps(self, arguments: dict[str, Any]) -> list[Step]:
        steps = [textkg("train", arguments.pop("train"))] if "train" in arguments else []
        sweeps, common = arguments.pop("sweeps", None), arguments.pop("sweep", {})
        if sweeps:
            steps += [textkg("sweep", {**common, **extra, "out": folder}) for folder, extra in sweeps.items()]
            collect = ("python", "-m", "benchmarks", "collect-sweep", *sweeps, "--out", arguments.pop("collect"))
            steps.append(Step(collect))
        if "script" in arguments:
            name, run = self.pick(arguments), arguments.pop("run", None)
            positional = [run] if run else []
            for _, args in variants(arguments, self.repeated):
                steps.append(script(name, args, *positional, repeated=self.repeated))
        return steps


class RealAdditions(Runner):
    """Train on an ontology's older release, place what the newer one added (``releases``: name -> [old, new])."""

    name = "real-additions"
    scripts = ("real_additions",)

    def steps(self, arguments: dict[str, Any]) -> list[Step]:
        releases = arguments.pop("releases")
        return [
            script("real_additions", {"ontology": name, "old": old, "new": new, **arguments})
            for name, (old, new) in releases.items()
        ]


class HealthSetting(Runner):
    """The ontology public, the annotations confidential: one command per (variant, seed) writing
    ``{per_seed}[_{variant}]_seed{S}.json``, then ``--merge`` into ``out``; without ``per_seed``, one command
    for every seed, writing ``out`` itself."""

    name = "health-setting"
    scripts = ("health_setting",)

    def steps(self, arguments: dict[str, Any]) -> list[Step]:
        if "per_seed" not in arguments:
            return [script("health_setting", a) for _, a in variants(arguments)]
        seeds, prefix, out = arguments.pop("seeds"), arguments.pop("per_seed"), arguments.pop("out")
        steps, parts = [], []
        for name, args in variants(arguments):
            for seed in seeds:
                parts.append(f"{prefix}{'_' + name if name else ''}_seed{seed}.json")
                steps.append(script("health_setting", {**args, "seeds": seed, "out": parts[-1]}))
        return [*steps, Step(("python", "benchmarks/health_setting.py", "--merge", *parts, "--out", out))]


class Federation(Runner):
    """Holders that train together: federated training, its attacks, cross-graph exchange. ``cross_graph``
    with ``per_seed`` runs one command per seed and merges them into ``out``."""

    name = "federation"
    scripts = ("federated", "federated_attack", "cross_graph")

    def steps(self, arguments: dict[str, Any]) -> list[Step]:
        if arguments.get("script") != "cross_graph" or "per_seed" not in arguments:
            return super().steps(arguments)
        self.pick(arguments)
        seeds, prefix, out = arguments.pop("seeds"), arguments.pop("per_seed"), arguments.pop("out")
        parts = [f"{prefix}_seed{seed}.json" for seed in seeds]
        steps = [script("cross_graph", {**arguments, "seeds": s, "out": p}) for s, p in zip(seeds, parts, strict=True)]
        merge = {"holders": arguments["holders"], "seeds": "", "merge": parts, "out": out}
        return [*steps, Step(("python", "benchmarks/cross_graph.py", *flags(merge)))]


class Diagnosis(Runner):
    """A simulated patient cohort per seed, its public-only, ceiling and patient-level DP runs, and ``textkg
    diagnose`` of each on the same held-out patients (``patient_diagnosis``)."""

    name = "diagnosis"
    scripts = ("patient_diagnosis",)


class LinkRerank(Runner):
    """Train a run with ``reproduce_fb15k237`` (``train``), then read its learned link re-ranker's block
    from the run's own report with ``link_rerank --from-report``."""

    name = "link-rerank"
    scripts = ("link_rerank",)

    def steps(self, arguments: dict[str, Any]) -> list[Step]:
        train = arguments.pop("train")
        return [
            script("reproduce_fb15k237", train, repeated=self.repeated),
            script("link_rerank", {"from_report": True, **arguments}, train["run_dir"]),
        ]


def names() -> list[str]:
    """Every experiment under ``benchmarks/experiments/``, sorted."""
    return sorted(p.stem for p in EXPERIMENTS.glob("*.yaml"))


def load(name: str) -> Experiment:
    """The experiment ``benchmarks/experiments/NAME.yaml``, validated before anything runs."""
    if not re.fullmatch(r"[a-z0-9_]+", name):
        raise ConfigError(f"an experiment name is lower-case letters, digits and _, got {name!r}")
    path = EXPERIMENTS / f"{name}.yaml"
    where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    if not path.is_file():
        raise ConfigError(f"no such experiment; there are: {', '.join(names())}", file=where)
    if path.stat().st_size > MAX_CONFIG_BYTES:
        raise ConfigError(f"larger than {MAX_CONFIG_BYTES} bytes", file=where)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as error:
        mark = getattr(error, "problem_mark", None)
        raise ConfigError(f"not YAML: {error}", file=where, line=None if mark is None else mark.line + 1) from None
    if not isinstance(data, dict):
        raise ConfigError("a config is a mapping of question, runner, arguments, ...", file=where)
    unknown = sorted(set(data) - KEYS)
    if unknown:
        raise ConfigError(f"unknown key; a config has {', '.join(sorted(KEYS))}", file=where, field=unknown[0])
    missing = [key for key in REQUIRED if key not in data]
    if missing:
        raise ConfigError("missing", file=where, field=missing[0])
    if data["runner"] not in RUNNERS:
        raise ConfigError(f"unknown runner; choose from {', '.join(RUNNERS)}", file=where, field="runner")
    for key in ("arguments", "environment"):
        if not isinstance(data.get(key) or {}, dict):
            raise ConfigError("a mapping", file=where, field=key)
    environment = {str(k): str(v) for k, v in (data.get("environment") or {}).items()}
    unknown = sorted(set(environment) - ENVIRONMENT)
    if unknown:
        raise ConfigError(f"not allowed; allowed: {', '.join(sorted(ENVIRONMENT))}", file=where, field=unknown[0])
    results = data["results"] if isinstance(data["results"], list) else [data["results"]]
    return Experiment(
        name=name,
        path=where,
        question=str(data["question"]),
        runner=data["runner"],
        arguments=data["arguments"],
        baseline=str(data["baseline"]),
        results=tuple(str(r) for r in results),
        environment=environment,
    )
