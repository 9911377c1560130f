"""``textkg federate --engine ray``: the deployment engine's apps on Flower's simulation engine (Ray).

``ray`` was called ``simulation`` before issue 41 (that word is the privacy label for "not DP"); the old
name is still accepted with a notice."""

from __future__ import annotations

import json
import os
import sys
import tempfile

import pytest
import torch
from fed_threads import one_thread
from filelock import FileLock
from test_resume import crash_at_round, straight_and_resumed  # noqa: F401 (a fixture)

from textkg.cli.main import main

pytest.importorskip("flwr")

from textkg.errors import ConfigError
from textkg.federated.engines import FederatedConfig, federate

#: three holders, two rounds: the sum of FedAvg has three terms, so the order of the replies shows
FLAGS = ("--partition", "random", "--clients", "3", "--rounds", "2")


@pytest.fixture
def one_ray_at_a_time():
    """The Ray tests of this machine one after another (pytest-xdist's workers, a colleague's run): two Ray
    clusters on two cores start slowly enough to fail."""
    with FileLock(f"{tempfile.gettempdir()}/textkg-tests-ray.lock"):
        yield


@pytest.fixture
def ray_dirs(monkeypatch):
    """The folders that ``simulate`` makes for Ray (``tempfile.mkdtemp(prefix="textkg-ray-")``)."""
    made: list[str] = []
    mkdtemp = tempfile.mkdtemp

    def spy(*args, **kwargs):
        path = mkdtemp(*args, **kwargs)
        if kwargs.get("prefix") == "textkg-ray-":
            made.append(path)
        return path

    monkeypatch.setattr(tempfile, "mkdtemp", spy)
    return made


@pytest.mark.slow
@pytest.mark.usefixtures("one_ray_at_a_time")
def test_simulation_engine_equals_the_in_process_engine(federate_base, tmp_path, capfd, ray_dirs):
    """Same settings, same seed: Flower's simulation engine (the deployment apps, holders in Ray actors)
    writes the in-process run's files with its global model bit for bit (PartitionOrderGrid: FedAvg adds
    the three holders in the in-process order), its rounds, reports and test metrics; stdout is the summary
    alone, and Ray is stopped and its directory removed afterwards. Record-level DP on the same apps:
    test_app.py (each holder rebuilt from its own state file every round, as in a Ray actor); here it
    would double the ~40 s that Ray's start takes most of."""
    ray = pytest.importorskip("ray")

    argv = [*federate_base, *FLAGS]
    inproc, sim = tmp_path / "inprocess", tmp_path / "simulation"
    assert one_thread(lambda: main([*argv, "--out", str(inproc)])) == 0
    capfd.readouterr()
    assert one_thread(lambda: main([*argv, "--engine", "ray", "--out", str(sim)])) == 0
    summary = json.loads(capfd.readouterr().out)
    assert [r["round"] for r in summary["rounds"]] == [0, 1, 2]
    assert not ray.is_initialized()
    assert len(ray_dirs) == 1 and not any(os.path.exists(d) for d in ray_dirs)  # not a glob of /tmp: parallel runs

    # the holders' private states: in checkpoint.pt in process, in their own files on the simulation engine
    assert sorted(p.name for p in sim.iterdir() if p.name != "clients") == sorted(p.name for p in inproc.iterdir())
    assert sorted(p.name for p in (sim / "clients" / "client-0").iterdir()) == [
        "holder-round-1.pt",
        "holder-round-2.pt",
    ]
    a, b = (torch.load(d / "best_model.pt", weights_only=True) for d in (inproc, sim))
    assert a.keys() == b.keys() and all(torch.equal(a[name], b[name]) for name in a)
    ma, mb = (json.loads((d / "metrics.json").read_text()) for d in (inproc, sim))
    assert ma == mb
    fa, fb = (json.loads((d / "federated.json").read_text()) for d in (inproc, sim))
    assert (fa.pop("engine"), fb.pop("engine")) == ("flower-inprocess", "flower-simulation")
    assert fb["settings"].pop("engine") == "ray" and fa["settings"].pop("engine") == "inprocess"
    assert fa == fb
    assert (sim / "config.json").read_text() == (inproc / "config.json").read_text()


def test_simulation_without_ray_exits_2_naming_the_extra(federate_base, tmp_path, monkeypatch, capsys):
    """No Ray: exit 2 before anything is written, with the extra to install; the Python API raises."""
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    out = tmp_path / "sim"
    assert main([*federate_base, *FLAGS, "--engine", "ray", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "pip install 'textkg[ray]'" in err and "Ray" in err and "Traceback" not in err
    assert not out.exists()
    with pytest.raises(ConfigError, match=r"textkg\[ray\]"):
        federate(None, FederatedConfig(engine="ray"), out)
    assert not out.exists()


def test_the_old_engine_name_is_read_as_ray_with_a_notice(federate_base, tmp_path, monkeypatch, capsys):
    """``--engine simulation`` (the name before issue 41) still runs the Ray engine and says it was renamed;
    a federated.json written with the old name resumes on the engine it ran on."""
    monkeypatch.setitem(sys.modules, "ray", None)  # stop at the Ray check: nothing is trained
    out = tmp_path / "sim"
    assert main([*federate_base, *FLAGS, "--engine", "simulation", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "--engine simulation is now called --engine ray" in err and "textkg[ray]" in err
    assert FederatedConfig(engine="simulation").engine == "ray"


@pytest.mark.slow
@pytest.mark.usefixtures("one_ray_at_a_time")
def test_a_resumed_simulation_equals_an_uninterrupted_one(federate_base, tmp_path, crash_at_round, monkeypatch):  # noqa: F811
    """Record-level DP on the simulation engine, 2 holders, 2 rounds: the server crashes in round 2, after
    round 1's checkpoint.pt and holder files; ``--resume`` starts a new simulation (Flower's cannot
    continue a run) whose holders restore their states from their files. Same global model, history and
    test metrics as an uninterrupted simulation, and every ledger holds the steps of both rounds
    (--reproducible-noise: the straight and the resumed run draw the same noise). The uninterrupted run is
    the in-process engine's, which the simulation engine must equal bit for bit (the test above): one Ray
    start fewer (issue 38: this test took 464 s of the suite on a loaded machine, most of it three Ray starts)."""
    pytest.importorskip("ray")
    inprocess = [
        *federate_base,
        *("--partition", "random", "--clients", "2", "--rounds", "2"),
        *("--privacy", "full", "--target-epsilon", "2", "--reproducible-noise", "7"),
    ]
    args = [*inprocess, "--engine", "ray"]

    straight, resumed = straight_and_resumed(args, tmp_path, crash_at_round, monkeypatch, straight_args=inprocess)
    assert [r["round"] for r in resumed["rounds"]] == [0, 1, 2]
    assert resumed["rounds"] == straight["rounds"] and resumed["test"] == straight["test"]
    for a, b in zip(straight["clients"], resumed["clients"], strict=True):
        assert b["privacy"]["steps"] == b["privacy"]["planned_steps"] == a["privacy"]["steps"]
        assert a["privacy"]["epsilon_if_secret"] == pytest.approx(b["privacy"]["epsilon_if_secret"], rel=1e-12)
    assert resumed["privacy"] == straight["privacy"]


def test_resume_errors_and_unknown_engines(federate_base, tmp_path, capsys):
    """--resume of a simulation: nothing to resume, or another --engine than the run's, exit 2; an unknown
    engine names the known ones."""
    with pytest.raises(ConfigError, match="no checkpoint.pt"):
        federate(None, FederatedConfig(engine="ray"), tmp_path, resume=True)
    out = tmp_path / "inproc"
    assert main([*federate_base, "--partition", "random", "--clients", "2", "--rounds", "1", "--out", str(out)]) == 0
    (out / "metrics.json").unlink()
    capsys.readouterr()
    assert main(["federate", "--resume", str(out), "--engine", "ray"]) == 2
    err = capsys.readouterr().err
    assert "ran on --engine inprocess" in err and "Traceback" not in err
    with pytest.raises(ConfigError, match="inprocess, ray"):
        FederatedConfig(engine="flower")
    assert main([*federate_base, "--engine", "flower", "--out", str(tmp_path / "x")]) == 2  # argparse's choices


def test_partition_order_grid_gives_the_replies_in_the_in_process_order():
    """In process, round r's replies come from the holders of ``Random(seed)``'s r-th ``sample(range(K), K)``
    (position i is holder i); PartitionOrderGrid puts another engine's replies in that order whatever order
    they come in and whatever the global ``random`` did meanwhile (a reply without a report, or a second
    one from a holder, goes last for the server to refuse)."""
    import random
    from types import SimpleNamespace

    from textkg.federated.grid import REPORT_KEY, PartitionOrderGrid

    holder_of = {30: 1, 10: 2, 20: 0}  # the engine's random node ids, and which holder each node runs

    def reply(node, partition):
        content = {} if partition is None else {REPORT_KEY: {"json": json.dumps({"partition": partition})}}
        return SimpleNamespace(node=node, content=content, has_error=lambda: False)

    class Engine:
        def get_node_ids(self):
            return [30, 10, 20]

        def send_and_receive(self, messages, *, timeout=None):
            replies = [reply(m.metadata.dst_node_id, holder_of[m.metadata.dst_node_id]) for m in messages]
            random.shuffle(replies)  # as the actors finish
            return [reply(99, None), *replies, reply(98, 0)]

    expected = random.Random(7)
    grid = PartitionOrderGrid(Engine(), seed=7)
    for _ in range(3):
        nodes = list(grid.get_node_ids())
        random.shuffle(nodes)  # the strategy's own draw, from a global random that other threads moved
        sent = [SimpleNamespace(metadata=SimpleNamespace(dst_node_id=node)) for node in nodes]
        got = list(grid.send_and_receive(sent))
        assert [holder_of.get(r.node) for r in got[:3]] == expected.sample(range(3), 3)
        assert sorted(r.node for r in got[3:]) == [98, 99]
