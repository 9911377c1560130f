"""Issue 51, item 9: a release bundle's ``graph.json`` and ``metrics.json`` carry no absolute local path.

On 1a0007a a bundle's ``graph.json`` (``name``) and ``metrics.json`` (``dataset``, ``descriptions``) held
the absolute path of the dataset on the trainer's machine (its user name, its folders). ``config.json``'s
``data.dataset``, and what a bundle's predictor loads: tests/security/test_bundle_dataset_path.py.
"""

from __future__ import annotations

import json
from pathlib import Path

from textkg.cli.main import main


def test_a_bundle_names_its_dataset_without_the_local_path(tiny_run, tmp_path, capsys):
    config = json.loads((tiny_run / "config.json").read_text())
    dataset = str(config["data"]["dataset"])
    local = str(Path(dataset).parent)
    assert Path(dataset).is_absolute() and local in (tiny_run / "graph.json").read_text()  # the run has it
    out = tmp_path / "bundle"
    assert main(["release", str(tiny_run), "--out", str(out), "--allow-simulation"]) == 0, capsys.readouterr().err
    for name in ("graph.json", "metrics.json", "privacy.json", "MODEL_CARD.md", "RELEASE.json"):
        assert local not in (out / name).read_text(), f"{name} names {local}"
    assert json.loads((out / "graph.json").read_text())["name"] == Path(dataset).name
    assert json.loads((out / "metrics.json").read_text())["dataset"] == Path(dataset).name
    from textkg.pipeline.run_dir import open_run

    open_run(out)  # the bundle still opens


def test_a_registry_name_or_a_format_prefix_is_kept():
    from textkg.release import public_dataset

    assert public_dataset("hpo") == "hpo"
    assert public_dataset("obo:/home/someone/data/hp.obo") == "obo:hp.obo"
    assert public_dataset("/home/someone/data/tiny_blp/") == "tiny_blp"
