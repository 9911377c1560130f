"""``--unit-targets`` / ``--unit-candidates`` against a crafted config.json, and what the privacy block says.

What can fail: a target list with a name repeated (a million times) or with a NUL or newline in a name must
exit 2 naming the config file and ``privacy.unit_targets`` before anything is read or written (it was
accepted and written back to ``config.json``, or refused later without the file's name); the privacy
block of a patient-level run (and of its public-only baseline) must name the target relations and the
candidate list among its public inputs, as it names every other public input.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from unit_cohort import DISEASES, make_cohort

from textkg.cli.main import main


@pytest.fixture(scope="module")
def cohort(tmp_path_factory):
    data = make_cohort(tmp_path_factory.mktemp("cohort") / "c", n=20)
    (data / "diseases.txt").write_text("".join(d + "\n" for d in DISEASES), encoding="utf-8")
    return data


def _config(cohort: Path, path: Path, **privacy) -> Path:
    cfg = {
        "data": {"dataset": str(cohort), "split": "transductive"},
        "model_name": "transe",
        "train": {"epochs": 1, "batch_size": 16, "num_negatives": 4},
        "privacy": {"mode": "none", "unit": "entity", "unit_entities": str(cohort / "patients.txt"), "batch_size": 5}
        | privacy,
    }
    path.write_text(json.dumps(cfg), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "targets",
    [["diagnosed_with"] * 100_000, ["diagnosed_with", "diagnosed_with"], ["diagnosed_with\x00"], ["is_a\nX"]],
    ids=["repeated-100k", "twice", "nul", "newline"],
)
def test_a_crafted_target_list_exits_2_naming_the_config_file(cohort, tmp_path, capsys, targets):
    config = _config(cohort, tmp_path / "crafted.json", unit_targets=targets)
    out = tmp_path / "run"
    code = main(["train", "--config", str(config), "--dim", "8", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2
    assert "Traceback" not in err
    assert "crafted.json" in err and "privacy.unit_targets" in err
    assert not out.exists()


PRIVATE = ["--noise-multiplier", "1", "--private-size", "20"]


@pytest.mark.parametrize("mode", ["confidential", "public-only"])
def test_the_privacy_block_names_the_targets_and_candidates_as_public_inputs(cohort, tmp_path, mode):
    out = tmp_path / "run"
    args = ["train", "--dataset", str(cohort), "--split", "transductive", "--model", "transe", "--dim", "8"]
    args += ["--epochs", "1", "--privacy", mode, "--privacy-unit", "entity"]
    args += ["--unit-entities", str(cohort / "patients.txt"), "--unit-targets", "diagnosed_with"]
    args += ["--unit-candidates", str(cohort / "diseases.txt"), *(PRIVATE if mode == "confidential" else [])]
    assert main([*args, "--out", str(out)]) == 0
    privacy = json.loads((out / "metrics.json").read_text(encoding="utf-8"))["privacy"]
    assert privacy["unit_targets"] == ["diagnosed_with"]
    assert privacy["unit_candidates"] == "listed"
    inputs = "\n".join(privacy["public_inputs"])
    assert "--unit-targets: diagnosed_with" in inputs
    assert "--unit-candidates" in inputs
    # the block names the rule, not the local file or anything counted from it
    assert str(cohort) not in json.dumps(privacy)
