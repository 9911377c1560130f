"""``--privacy-unit statement --unit-entities FILE``: statement-level DP whose confidential statements are
exactly those that mention a listed entity (a patient), the baseline of issue 52's group-privacy row.

What can fail: the mask must be every training statement that mentions a listed entity and nothing else
(with any relation or fraction rule added to it); the listed entities stay entities of the model; the
privacy block must state the rule and the list as a public input; `public-only` must leave out exactly
those statements; `textkg diagnose` must read such a run; bad combinations exit 2 before anything is
written.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest
import torch
from unit_cohort import make_cohort, patient_ids

from textkg.cli.main import main
from textkg.data.io import read_triples
from textkg.errors import ConfigError
from textkg.models import get_preset
from textkg.pipeline.prepared import prepare
from textkg.training.config import DataConfig, PrivacyConfig, RunConfig, TrainConfig
from textkg.training.private_training import LISTED_ENTITIES_RULE, PUBLIC_INPUTS, select_confidential

N_PATIENTS = 30


def _cfg(data: Path, **privacy) -> RunConfig:
    return RunConfig(
        data=DataConfig(dataset=str(data), split="transductive"),
        model=dataclasses.replace(get_preset("transe"), dim=8),
        train=TrainConfig(epochs=1, batch_size=16, num_negatives=4),
        privacy=PrivacyConfig(**{"unit_entities": str(data / "patients.txt"), **privacy}),
        model_name="transe",
    )


def _mentions(prep, names: set[str]) -> torch.Tensor:
    listed = torch.tensor([e in names for e in prep.kg.entities])
    train = prep.split.train
    return listed[train[:, 0]] | listed[train[:, 2]]


def test_the_confidential_statements_are_those_that_mention_a_listed_entity(tmp_path):
    data = make_cohort(tmp_path / "cohort", n=N_PATIENTS)
    prep = prepare(_cfg(data, mode="confidential", noise_multiplier=1.0, private_size=100))
    patients = set(patient_ids(N_PATIENTS))
    assert patients <= set(prep.kg.entities)  # statement level: the patients stay entities of the model
    expected = _mentions(prep, patients)
    assert 0 < int(expected.sum()) < len(expected)
    assert torch.equal(prep.private_mask, expected)
    assert torch.equal(prepare(_cfg(data, mode="public-only")).private_mask, expected)  # what it leaves out
    # the rules add up: is_a statements become confidential too, and nothing else changes
    both = prepare(
        _cfg(data, mode="confidential", noise_multiplier=1.0, private_size=100, confidential_relations=("is_a",))
    )
    is_a = both.split.train[:, 1] == both.kg.relations.index("is_a")
    assert torch.equal(both.private_mask, _mentions(both, patients) | is_a)
    # a list of two patients marks their statements only
    (tmp_path / "two.txt").write_text("P001\nP003\n")
    two = select_confidential(
        prep.split.train,
        prep.kg.relations,
        _cfg(data, mode="confidential", noise_multiplier=1.0, unit_entities=str(tmp_path / "two.txt")).privacy,
        seed=0,
        entities=prep.kg.entities,
    )
    assert torch.equal(two, _mentions(prep, {"P001", "P003"}))


def test_a_caller_without_the_entities_is_refused_by_name(tmp_path):
    data = make_cohort(tmp_path / "cohort")
    cfg = _cfg(data, mode="confidential", noise_multiplier=1.0)
    with pytest.raises(ConfigError) as err:
        select_confidential(torch.zeros(1, 3, dtype=torch.long), ("r",), cfg.privacy, seed=0)
    assert err.value.field == "privacy.unit_entities"


def _train(data: Path, out: Path, *extra: str) -> int:
    argv = ["train", "--dataset", str(data), "--split", "transductive", "--model", "transe", "--dim", "8"]
    argv += ["--epochs", "1", "--batch-size", "16", "--seed", "0", "--no-progress"]
    argv += ["--unit-entities", str(data / "patients.txt"), *extra, "--out", str(out)]
    return main(argv)


def test_a_statement_level_run_states_its_rule_and_diagnose_reads_it(tmp_path, capsys):
    data = make_cohort(tmp_path / "cohort", n=N_PATIENTS)
    dp = ("--privacy", "confidential", "--noise-multiplier", "1.0", "--private-size", "200")
    assert _train(data, tmp_path / "dp", *dp) == 0
    privacy = json.loads((tmp_path / "dp" / "metrics.json").read_text())["privacy"]
    assert privacy["guarantee"] == "dp" and privacy["unit"] == "confidential-statement"
    assert privacy["confidential_entities_rule"] == LISTED_ENTITIES_RULE
    assert privacy["public_inputs"][: len(PUBLIC_INPUTS)] == PUBLIC_INPUTS
    assert "--unit-entities" in privacy["public_inputs"][-1]
    graph = json.loads((tmp_path / "dp" / "graph.json").read_text())
    assert set(patient_ids(N_PATIENTS)) <= set(graph["entities"])  # entities of the model, as the rule says
    capsys.readouterr()
    assert main(["diagnose", str(tmp_path / "dp")]) == 0  # held-out patients folded in from their links
    out = json.loads(capsys.readouterr().out)
    assert out["patients"] > 0 and out["rankers"]["model"]["overall"]["diagnoses"] == out["patients"]
    # public-only leaves out exactly the patients' statements
    assert _train(data, tmp_path / "pub", "--privacy", "public-only") == 0
    public = json.loads((tmp_path / "pub" / "metrics.json").read_text())["privacy"]
    assert public["epsilon"] == 0.0 and public["confidential_entities_rule"] == LISTED_ENTITIES_RULE
    train = read_triples(data / "train.tsv")[0]
    patients = set(patient_ids(N_PATIENTS))
    n_public = sum(h not in patients and t not in patients for h, _, t in train)
    assert json.loads((tmp_path / "pub" / "metrics.json").read_text())["train"]["steps"] == math.ceil(n_public / 16)


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (("--privacy", "full", "--noise-multiplier", "1"), "not --privacy full"),
        (("--privacy", "none"), "not --privacy none"),
        (("--privacy", "confidential", "--noise-multiplier", "1", "--max-statements-per-unit", "4"), "entity"),
        (("--privacy", "confidential", "--noise-multiplier", "1", "--unit-entities", "{bad}"), "bad.txt:2"),
        (  # only held-out patients listed: no training statement is confidential
            ("--privacy", "confidential", "--noise-multiplier", "1", "--unit-entities", "{held_out}"),
            "field 'privacy.unit_entities': no training statement is confidential",
        ),
    ],
)
def test_bad_combinations_exit_2_before_anything_is_written(tmp_path, capsys, flags, words):
    data = make_cohort(tmp_path / "cohort", n=N_PATIENTS)
    (tmp_path / "bad.txt").write_text("P000\nnobody\n")
    (tmp_path / "held_out.txt").write_text("".join(p + "\n" for p in patient_ids(N_PATIENTS)[-3:]))
    given = [f.format(bad=tmp_path / "bad.txt", held_out=tmp_path / "held_out.txt") for f in flags]
    code = _train(data, tmp_path / "o", *given)
    err = capsys.readouterr().err
    assert code == 2, err
    assert words in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()
