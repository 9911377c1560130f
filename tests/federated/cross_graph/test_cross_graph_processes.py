"""Separate processes on torch.distributed RPC give the in-process federation's results."""

from __future__ import annotations

import json

import pytest

from textkg.federated.cross_graph.config import CrossGraphConfig
from textkg.federated.cross_graph.distributed import run_cross_graph_processes
from textkg.federated.cross_graph.runner import run_cross_graph


@pytest.mark.slow
def test_real_processes_match_the_in_process_federation(tmp_path, two_graphs, holders):
    config = CrossGraphConfig.from_dict(holders(*two_graphs, target_epsilon=4.0, reproducible_noise=3))
    summary = run_cross_graph_processes(config, tmp_path / "procs")
    assert summary["engine"] == "torch-rpc"
    run_cross_graph(config, tmp_path / "inproc", progress=False)
    for name in ("alpha", "beta"):
        procs = json.loads((tmp_path / "procs" / name / "metrics.json").read_text())
        inproc = json.loads((tmp_path / "inproc" / name / "metrics.json").read_text())
        assert procs["ledger"] == inproc["ledger"]
        assert procs["federated"] == inproc["federated"] and procs["alone"] == inproc["alone"]
        assert procs["aligned"] == inproc["aligned"]
