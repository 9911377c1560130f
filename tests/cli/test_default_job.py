"""A bare ``textkg train`` is the README's main job (issue 50: it trained ``transe`` on ``hpo-small``, transductive).

The README's command is read from its quickstart block, parsed by the same parser, and its resolved
config compared with the one a bare ``textkg train --out R`` resolves, so the defaults and the README
cannot drift apart. The one field that differs by design is ``train.min_steps``: a run that names no
epochs may have them raised on a small graph (issue 37), which on ``hpo`` leaves them at 3.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
from pathlib import Path

import pytest

from textkg.cli.config_loading import DEFAULT_MIN_STEPS, build_run_config
from textkg.cli.flags import default_job_flags
from textkg.cli.main import build_parser
from textkg.cli.training import default_out
from textkg.models.presets import get_preset
from textkg.pipeline.job import scale_epochs
from textkg.training.config import DataConfig, RunConfig, TrainConfig

ROOT = Path(__file__).resolve().parents[2]
#: training statements of the README job's graph (``hpo``, inductive, split seed 0: 458,308 / 40,150 / 49,576
#: train / valid / test statements, the run's "graph ready" line; 896 steps an epoch at batch 512)
HPO_INDUCTIVE_TRAIN_STATEMENTS = 458_308


def readme_main_job() -> list[str]:
    """The arguments after ``textkg`` of the README quickstart's ``textkg train`` command."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    quickstart = text.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    block = quickstart.split("```bash", 1)[1].split("```", 1)[0]  # the two commands, not the prose below them
    (command,) = re.findall(r"textkg train [^\n&|;]*", block)
    return shlex.split(command)[1:]


def _resolve(argv: list[str]) -> RunConfig:
    return build_run_config(build_parser().parse_args(argv))


def _without_out(argv: list[str]) -> list[str]:
    i = argv.index("--out")
    return argv[:i] + argv[i + 2 :]


def test_the_readme_command_is_found():
    argv = readme_main_job()
    assert argv[0] == "train" and "--out" in argv and "--dataset" in argv


def test_a_bare_train_resolves_to_the_readme_main_job(tmp_path):
    readme = _resolve(_without_out(readme_main_job()) + ["--out", str(tmp_path / "r")])
    bare = _resolve(["train", "--out", str(tmp_path / "r")])
    assert bare.train.min_steps == DEFAULT_MIN_STEPS and readme.train.min_steps == 0  # epochs named or not
    assert dataclasses.replace(bare, train=dataclasses.replace(bare.train, min_steps=0)) == readme
    # the floor never raises the README job's epochs: hpo gives far more than min_steps steps in 3 epochs
    scaled = scale_epochs(bare, HPO_INDUCTIVE_TRAIN_STATEMENTS)
    assert scaled.train.epochs == readme.train.epochs == 3


def test_the_python_api_defaults_are_the_same_job(tmp_path):
    readme = _resolve(_without_out(readme_main_job()) + ["--out", str(tmp_path / "r")])
    assert RunConfig() == readme
    assert RunConfig().to_dict() == readme.to_dict()
    assert (DataConfig().dataset, DataConfig().split, TrainConfig().epochs) == ("hpo", "inductive", 3)
    assert RunConfig().model == get_preset(RunConfig().model_name)


def test_help_states_each_default_of_the_main_job():
    parser = build_parser()
    train = next(a for a in parser._subparsers._group_actions[0].choices.items() if a[0] == "train")[1]
    assert f"textkg train {' '.join(default_job_flags())}" in train.description  # the help's first paragraph
    assert default_job_flags() == _without_out(readme_main_job())[1:]
    for flag, default in (("--dataset", "hpo"), ("--split", "inductive"), ("--model", "fused-transe")):
        help_text = " ".join(next(a.help for a in train._actions if flag in a.option_strings).split())
        assert help_text.endswith(f"default {default}]"), (flag, help_text)
    assert "default 3" in " ".join(next(a.help for a in train._actions if "--epochs" in a.option_strings).split())
    assert "runs/MODEL-DATASET-SPLIT" in next(a.help for a in train._actions if "--out" in a.option_strings)


def test_the_default_run_directory():
    assert default_out(RunConfig()) == Path("runs") / "fused-transe-hpo-inductive"
    cfg = _resolve(["train", "--dataset", "hpo-small", "--split", "transductive", "--model", "transe"])
    assert default_out(cfg) == Path("runs") / "transe-hpo-small-transductive"


@pytest.mark.parametrize("name", ["transe", "transe-l2", "distmult", "complex", "rotate"])
def test_structure_only_models_stay_available_by_name(name):
    cfg = _resolve(["train", "--model", name, "--dataset", "hpo-small", "--split", "transductive"])
    assert cfg.model_name == name and cfg.model == get_preset(name)
    assert cfg.model.fusion == "structural" and cfg.model.encoder is None
    assert RunConfig(model_name=name).model == get_preset(name)
