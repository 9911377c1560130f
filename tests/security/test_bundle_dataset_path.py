"""Issue 51, item 9: a release bundle carries no local path, and never makes its recipient open one.

On 1a0007a a bundle's ``config.json`` kept ``data.dataset`` as the absolute path on the trainer's machine,
and ``textkg predict BUNDLE`` loaded the dataset from it: the sender chose a file of the recipient's machine
to open (``/etc/passwd``, ``../../x``). Now the bundle names the dataset by its last part only, the recipient
gives it (``textkg predict BUNDLE --dataset PATH``, ``textkg.load(BUNDLE, dataset=PATH)``), it is checked
against the bundle's ``graph.json``, and without it the command exits 2 naming the flag. An ordinary run
folder (the user's own ``textkg train --out``) still loads the dataset its config names.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from conftest import train_tiny
from security_helpers import TINY

import textkg
from textkg.cli.main import main
from textkg.errors import ConfigError

#: a folder name only the sender's machine has: no file of the bundle may mention it
SENDER = "sender-home-4f1c"
PREDICT = ["--description", "a new thing near the others", "--relation", "/r/likes", "--direction", "tail"]

_OPENED: list[str] = []  # paths opened or listed while the list is armed (see _track)
_ARMED: list[bool] = []


def _hook(event: str, args: tuple) -> None:
    if _ARMED and event in ("open", "os.listdir", "os.scandir") and args and isinstance(args[0], (str, Path)):
        _OPENED.append(os.path.realpath(args[0]))


sys.addaudithook(_hook)  # an audit hook cannot be removed: it records only while armed


@contextlib.contextmanager
def tracking():
    """The real paths opened or listed inside the ``with`` block."""
    _OPENED.clear()
    _ARMED.append(True)
    try:
        yield _OPENED
    finally:
        _ARMED.clear()


@pytest.fixture(scope="module")
def sent(tmp_path_factory) -> tuple[Path, Path]:
    """``(run, bundle)``: a run trained from a dataset under the sender's folder, and its bundle."""
    base = tmp_path_factory.mktemp("bundle-path")
    dataset = shutil.copytree(TINY, base / SENDER / "tiny_blp")
    run = train_tiny(base / "run", "--dataset", str(dataset), "--model", "fused-transe", "--encoder", "glove-bow")
    assert main(["release", str(run), "--out", str(base / "bundle"), "--allow-simulation"]) == 0
    return run, base / "bundle"


def _copy(dest: Path) -> Path:
    return shutil.copytree(TINY, dest)


def test_no_file_of_a_bundle_names_the_local_path(sent):
    run, bundle = sent
    assert SENDER in (run / "config.json").read_text()  # the run keeps it: it is the user's own
    for path in bundle.rglob("*"):
        if path.is_file():
            assert SENDER.encode() not in path.read_bytes(), path.name
    data = json.loads((bundle / "config.json").read_text())["data"]
    assert data["dataset"] == "tiny_blp"
    assert not any(isinstance(v, str) and Path(v).is_absolute() for v in data.values())


def test_predict_on_the_bundle_with_dataset_equals_predict_on_the_run(sent, tmp_path, capsys):
    run, bundle = sent
    mine = _copy(tmp_path / "my-copy" / "tiny_blp")  # the recipient's own copy, elsewhere
    assert main(["predict", str(run), *PREDICT]) == 0  # the user's own run: no flag needed
    on_run = json.loads(capsys.readouterr().out)
    assert main(["predict", str(bundle), "--dataset", str(mine), *PREDICT]) == 0, capsys.readouterr().err
    assert json.loads(capsys.readouterr().out) == on_run
    kwargs = dict(description="a new thing", relation="/r/likes", direction="tail", top_k=5)
    assert textkg.load(bundle, dataset=mine).predict(**kwargs) == textkg.load(run).predict(**kwargs)


def test_without_dataset_a_bundle_exits_2_naming_the_flag(sent, capsys):
    _, bundle = sent
    assert main(["predict", str(bundle), *PREDICT]) == 2
    err = capsys.readouterr().err
    assert "--dataset" in err and "Traceback" not in err
    with pytest.raises(ConfigError, match="dataset=PATH"):
        textkg.load(bundle)


def test_a_dataset_with_another_vocabulary_is_refused(sent, tmp_path, capsys):
    _, bundle = sent
    other = _copy(tmp_path / "other")
    for path in other.rglob("*"):
        if path.is_file():
            path.write_text(path.read_text().replace("/r/likes", "/r/loves"))
    assert main(["predict", str(bundle), "--dataset", str(other), *PREDICT]) == 2
    err = capsys.readouterr().err
    assert "graph.json" in err and "relations" in err and "Traceback" not in err


@pytest.mark.parametrize("named", ["/etc/passwd", "../../x", "ABSOLUTE"])
def test_a_crafted_bundle_never_opens_the_path_it_names(sent, tmp_path, monkeypatch, capsys, named):
    """A bundle whose config names a dataset of the recipient's machine (each a real, loadable dataset where
    one can be: ``../../x`` from the working folder, an absolute path): nothing under it is opened, with or
    without ``--dataset``."""
    _, bundle = sent
    crafted = shutil.copytree(bundle, tmp_path / "crafted")
    target = _copy(tmp_path / "x")  # ../../x from tmp_path/a/b
    work = tmp_path / "a" / "b"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    named = str(target) if named == "ABSOLUTE" else named
    config = json.loads((crafted / "config.json").read_text())
    config["data"]["dataset"] = named
    (crafted / "config.json").write_text(json.dumps(config))
    victim = os.path.realpath(named)
    mine = _copy(tmp_path / "mine" / "tiny_blp")

    with tracking() as track:
        refused = main(["predict", str(crafted), *PREDICT])
        given = main(["predict", str(crafted), "--dataset", str(mine), *PREDICT])
    err = capsys.readouterr().err
    assert refused == 2 and "--dataset" in err and given == 0, err
    opened = [p for p in track if p == victim or p.startswith(victim + os.sep)]
    assert not opened, f"opened what the bundle names: {opened[:3]}"
    assert any(p.startswith(str(mine.resolve())) for p in track)  # the tracking sees the dataset it did open
