"""``textkg evaluate RUN --placement``: the placement report again, with this version's code, saved for ``place``.

Oracle: on a run whose ``metrics.json`` lost its placement blocks (as a run trained before a placement change lacks
the new ones), the command writes back the same blocks training wrote, to the last digit, and keeps the rest of
the file; a run without a placement task exits 2 and writes nothing."""

from __future__ import annotations

import json
import shutil

from test_place import toy_run  # noqa: F401  (the module fixture)

from textkg.cli.main import main


def test_evaluate_placement_writes_back_what_training_wrote(toy_run, tmp_path, capsys):  # noqa: F811
    run = tmp_path / "run"
    shutil.copytree(toy_run, run)
    trained = json.loads((run / "metrics.json").read_text())
    old = json.loads(json.dumps(trained))
    old["test"] = {
        k: v for k, v in old["test"].items() if k == "placement_known_links" or not k.startswith("placement")
    }
    old["test"]["note"] = "kept"
    (run / "metrics.json").write_text(json.dumps(old))
    capsys.readouterr()
    assert main(["evaluate", str(run), "--placement", "--device", "cpu"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["saved_placement"] == str(run / "metrics.json")
    again = json.loads((run / "metrics.json").read_text())
    assert again["test"]["note"] == "kept"
    for key, block in trained["test"].items():
        if key.startswith("placement"):
            assert again["test"][key] == block, key
    assert "parent_support" in again["test"]["placement_selection"]["combined"]


def test_a_run_without_placement_exits_2_and_writes_nothing(tmp_path, capsys):
    from test_place import _toy_ontology

    data = _toy_ontology(tmp_path / "toy")
    run = tmp_path / "run"
    argv = ["train", "--dataset", str(data), "--split", "transductive", "--model", "transe", "--dim", "8"]
    argv += ["--epochs", "1", "--no-progress"]
    assert main([*argv, "--out", str(run)]) == 0
    before = (run / "metrics.json").read_bytes()
    capsys.readouterr()
    assert main(["evaluate", str(run), "--placement", "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert "--placement" in err and "Traceback" not in err
    assert (run / "metrics.json").read_bytes() == before
