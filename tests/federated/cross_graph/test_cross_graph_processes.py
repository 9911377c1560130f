"""Separate processes on gRPC with mutual TLS (``federate --processes``) give the in-process results,
resume across processes, start from their own files, and disclose the same for neighbouring datasets."""

from __future__ import annotations

import json

import pytest
import yaml

from textkg.cli.main import main
from textkg.federated.cross_graph.config import CrossGraphConfig
from textkg.federated.cross_graph.distributed import ENGINE, WIRE_LOG, _party_holders, run_cross_graph_processes
from textkg.federated.cross_graph.runner import run_cross_graph
from textkg.federated.cross_graph.transport import PeerMessageError


@pytest.fixture(scope="module")
def federation(tmp_path_factory, module_graphs, holders):
    """The holders both tests run and the in-process run of it (the reference), made once."""
    raw = holders(*module_graphs, target_epsilon=3.0, reproducible_noise=7)
    inproc = tmp_path_factory.mktemp("inproc")
    run_cross_graph(CrossGraphConfig.from_dict(raw), inproc, progress=False)
    return raw, inproc


def _same_as_in_process(procs, inproc) -> None:
    for name in ("alpha", "beta"):
        p = json.loads((procs / name / "metrics.json").read_text())
        i = json.loads((inproc / name / "metrics.json").read_text())
        assert p["ledger"] == i["ledger"]
        assert p["federated"] == i["federated"] and p["alone"] == i["alone"]
        assert p["aligned"] == i["aligned"]


@pytest.mark.slow
def test_real_processes_match_the_in_process_federation(tmp_path, federation, capsys):
    raw, inproc = federation
    path = tmp_path / "holders.yaml"
    path.write_text(yaml.safe_dump(raw))
    argv = ["federate", "--mode", "cross-graph", "--holders", str(path), "--processes", "--no-progress"]
    assert main([*argv, "--out", str(tmp_path / "procs")]) == 0
    assert json.loads(capsys.readouterr().out)["engine"] == ENGINE == "grpc-mtls"
    _same_as_in_process(tmp_path / "procs", inproc)
    # each process was given only its own dataset: the other's is not even named
    party = _party_holders(CrossGraphConfig.from_dict(raw), "alpha")
    assert [h["dataset"] for h in party["holders"]] == [raw["holders"][0]["dataset"], "(held by beta)"]
    sent = [json.loads(line) for line in (tmp_path / "procs" / "alpha" / WIRE_LOG).read_text().splitlines()]
    assert [m["header"]["kind"] for m in sent] == ["psi-request", "psi-result", "release", "release"]


@pytest.mark.slow
def test_a_party_crashing_mid_run_resumes_across_processes_with_the_same_ledgers(tmp_path, federation):
    raw, inproc = federation
    config = CrossGraphConfig.from_dict(raw)
    with pytest.raises(PeerMessageError, match="party beta exited with status 3"):
        run_cross_graph_processes(config, tmp_path / "procs", stop_after={"beta": 2}, timeout_s=120)
    assert not (tmp_path / "procs" / "metrics.json").exists()
    assert main(["federate", "--mode", "cross-graph", "--resume", str(tmp_path / "procs"), "--processes"]) == 0
    _same_as_in_process(tmp_path / "procs", inproc)
    # the release alpha had sent before the crash went out again as the same frame: one per step
    sent = [json.loads(line) for line in (tmp_path / "procs" / "alpha" / WIRE_LOG).read_text().splitlines()]
    releases = [(m["header"]["step"], m["bytes"]) for m in sent if m["header"]["kind"] == "release"]
    assert len({s for s, _ in releases}) == 2 and len(set(releases)) == 2
