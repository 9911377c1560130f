"""Issue 51, item 9: a cross-graph party's metrics.json under a ``dp`` guarantee holds no exact count of
its private training statements.

On 1a0007a ``sizes.train`` was the exact number of the party's training statements, beside a ``dp``
block: a neighbouring dataset (one statement more) changed it by one.
"""

from __future__ import annotations

import json
import stat

from textkg.federated.cross_graph.config import CrossGraphConfig
from textkg.federated.cross_graph.runner import run_cross_graph

PRIVACY = {"mode": "full", "target_epsilon": 4.0, "private_size": 100}


def test_a_dp_partys_metrics_give_the_declared_size_and_the_owner_file_the_exact_one(tmp_path, two_graphs, holders):
    config = holders(*two_graphs, unit="statement")
    for h in config["holders"]:
        h["privacy"] = dict(PRIVACY)
    out = tmp_path / "out"
    run_cross_graph(CrossGraphConfig.from_dict(config), out, progress=False)
    for name in ("alpha", "beta"):
        metrics = json.loads((out / name / "metrics.json").read_text())
        assert metrics["privacy"]["guarantee"] == "dp"
        assert metrics["sizes"]["train"] == PRIVACY["private_size"]  # the declared, public size
        owner_file = out / name / "private_metrics.json"
        owner = json.loads(owner_file.read_text())
        exact = owner["sizes"]["train"]
        assert exact > 0 and stat.S_IMODE(owner_file.stat().st_mode) == 0o600
        if exact != PRIVACY["private_size"]:
            assert exact not in metrics["sizes"].values()
