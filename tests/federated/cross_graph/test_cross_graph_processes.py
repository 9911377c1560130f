"""Separate processes on torch.distributed RPC (``federate --processes``) give the in-process results."""

from __future__ import annotations

import json

import pytest
import yaml

from textkg.cli.main import main
from textkg.federated.cross_graph.config import CrossGraphConfig
from textkg.federated.cross_graph.runner import run_cross_graph


@pytest.mark.slow
def test_real_processes_match_the_in_process_federation(tmp_path, two_graphs, holders, capsys):
    raw = holders(*two_graphs, target_epsilon=4.0, reproducible_noise=3)
    path = tmp_path / "holders.yaml"
    path.write_text(yaml.safe_dump(raw))
    argv = ["federate", "--mode", "cross-graph", "--holders", str(path), "--processes", "--no-progress"]
    assert main([*argv, "--out", str(tmp_path / "procs")]) == 0
    assert json.loads(capsys.readouterr().out)["engine"] == "grpc-mtls"
    run_cross_graph(CrossGraphConfig.from_dict(raw), tmp_path / "inproc", progress=False)
    for name in ("alpha", "beta"):
        procs = json.loads((tmp_path / "procs" / name / "metrics.json").read_text())
        inproc = json.loads((tmp_path / "inproc" / name / "metrics.json").read_text())
        assert procs["ledger"] == inproc["ledger"]
        assert procs["federated"] == inproc["federated"] and procs["alone"] == inproc["alone"]
        assert procs["aligned"] == inproc["aligned"]
