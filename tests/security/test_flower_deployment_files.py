"""Flower's deployment engine as real processes, each SuperNode holding only its own holder's file.

A SuperLink and two SuperNodes run on free localhost ports (``--insecure``), each with its own
FLWR_HOME as if on its own machine; ``flwr run`` submits the Flower App that ``textkg federate-app
--partition files`` writes (record-level DP with a declared size). Holder k's statements are in its
own folder, named only in SuperNode k's ``--node-config data-file=...``; the app, its settings and
the ServerApp get no path to them.

Every Python process (the SuperLink, the ServerApp it starts, each SuperNode and every ClientApp
process under it) runs with a ``sitecustomize`` whose audit hook logs every file it opens under the
holders' folders, tagged with the process tree it belongs to. The test checks, from those logs, that
holder k's file is opened under SuperNode k and nowhere else: never by the SuperLink or the ServerApp,
never by the other node. The in-process twin (test_flower_holder_files.py) checks the messages.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("flwr")

from flower_processes import deploy, missing_executables
from holder_files import FLAGS, PRIVATE, make_holder_files

from textkg.cli.main import main

_MISSING = missing_executables()
HOOK = """\
import os, sys
_tag, _watch, _log = (os.environ.get(k) for k in ("TEXTKG_TEST_TAG", "TEXTKG_TEST_WATCH", "TEXTKG_TEST_OPEN_LOG"))
if _tag and _watch and _log:
    _out = os.path.join(_log, f"{_tag}-{os.getpid()}.txt")
    with open(_out, "a") as _fh:
        _fh.write("argv " + " ".join(sys.argv) + "\\n")

    def _audit(event, args):
        if event == "open" and isinstance(args[0], str) and os.path.abspath(args[0]).startswith(_watch):
            with open(_out, "a") as fh:
                fh.write("open " + os.path.abspath(args[0]) + "\\n")

    sys.addaudithook(_audit)
"""


@pytest.mark.slow
@pytest.mark.skipif(bool(_MISSING), reason=f"Flower's executables are missing: {', '.join(_MISSING)}")
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc to find leftover processes")
def test_each_supernode_reads_only_its_own_holder_file_and_the_server_none(tmp_path, capsys):
    import os

    data = tmp_path / "data"
    data.mkdir()
    public, holders = make_holder_files(data)
    watch = str(data.resolve() / "holder-")  # the holders' folders (every process reads the public one)
    app_dir, out = tmp_path / "app", tmp_path / "out"
    argv = ["federate-app", "--dataset", str(public), *FLAGS, *PRIVATE, "--app", str(app_dir), "--out", str(out)]
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out)
    assert any("data-file=" in c for c in summary["commands"])
    for path in app_dir.iterdir():  # the app the SuperLink receives names no holder file
        assert "holder-" not in path.read_text() and "statements.tsv" not in path.read_text()
    hook, logs = tmp_path / "hook", tmp_path / "opens"
    hook.mkdir(), logs.mkdir()
    (hook / "sitecustomize.py").write_text(HOOK)
    pythonpath = os.pathsep.join([str(hook), os.environ.get("PYTHONPATH", "")])
    env = {"PYTHONPATH": pythonpath, "TEXTKG_TEST_WATCH": watch, "TEXTKG_TEST_OPEN_LOG": str(logs)}
    env |= {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    settings = (app_dir / "textkg-settings.json").resolve()  # each node's own settings (here: the app's copy)
    configs = [
        f'partition-id={k} num-partitions=2 data-file="{p.resolve()}" settings="{settings}" '
        f'state-dir="{(tmp_path / "states" / f"client-{k}").resolve()}"'
        for k, p in enumerate(holders)
    ]
    run = deploy(
        app_dir,
        out,
        tmp_path,
        configs,
        env=env,
        link_env={"TEXTKG_TEST_TAG": "superlink"},
        node_env=[{"TEXTKG_TEST_TAG": f"node-{k}"} for k in range(2)],
    )
    assert not run.left, f"processes left running: {run.left}"
    if run.finished is not None:
        pytest.fail(f"{run.finished}\n{run.logs}")

    opened: dict[str, set[str]] = {}
    argvs: dict[str, list[str]] = {}
    for log in logs.iterdir():
        tag = log.name.split("-")[0] if log.name.startswith("superlink") else "-".join(log.name.split("-")[:2])
        for line in log.read_text().splitlines():
            kind, _, rest = line.partition(" ")
            (opened.setdefault(tag, set()).add(rest) if kind == "open" else argvs.setdefault(tag, []).append(rest))
    assert any("flwr-serverapp" in a for a in argvs.get("superlink", [])), argvs  # the ServerApp was watched
    for k in range(2):
        assert any("flwr-clientapp" in a for a in argvs.get(f"node-{k}", [])), argvs  # so was each ClientApp
    paths = [str(p.resolve()) for p in holders]
    assert not opened.get("superlink"), f"the SuperLink's processes opened {opened.get('superlink')}"
    for k in range(2):
        assert opened.get(f"node-{k}") == {paths[k]}, f"node {k} opened {opened.get(f'node-{k}')}"

    metrics = json.loads((out / "metrics.json").read_text(), parse_constant=lambda c: pytest.fail(c))
    assert metrics["privacy"]["guarantee"] == "dp" and [r["round"] for r in metrics["rounds"]] == [0, 1]
    assert all(c["num_statements"] is None and c["num_examples"] == 64 for c in metrics["clients"])
    federated = json.loads((out / "federated.json").read_text())
    assert federated["engine"] == "flower-deployment" and federated["sizes"] is None
    for name in ("config.json", "federated.json", "graph.json", "metrics.json"):
        assert not any(p in (out / name).read_text() for p in paths), name
