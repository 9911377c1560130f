"""The deployment engine's ServerApp and ClientApp (textkg.federated.app), driven in this process.

The real processes (SuperLink, SuperNodes, ``flwr run``) are in test_deployment.py. Here the same
apps run over :class:`~textkg.federated.grid.InProcessGrid`: Flower 1.42 starts every ClientApp message
in a fresh process, which ``fresh`` imitates by dropping the process's holders before every message, so
each holder is rebuilt from its node's own settings file and its latest state in its own ``state-dir``
each round. The attacks of a malicious server on a node are in test_node_authority.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from fed_threads import one_thread
from flower_nodes import node_configs

from textkg.cli.main import main

pytest.importorskip("flwr")

from textkg.errors import ConfigError
from textkg.federated import app
from textkg.federated.grid import PARTITION_ID, InProcessGrid

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "flower_app"
#: the settings of examples/flower_app (and of test_deployment.py), as federate flags
EXAMPLE_FLAGS = ("--partition", "random", "--clients", "2", "--rounds", "2")


def fresh(message, context):
    """A ClientApp call in a new process: no holder survives from the last message."""
    app._HOLDERS.clear()
    return app.clientapp(message, context)


def _settings(federate_base, *flags):
    from textkg.cli.config_loading import build_run_config
    from textkg.cli.federation import _federated_config
    from textkg.cli.main import build_parser

    args = build_parser().parse_args([*federate_base, *EXAMPLE_FLAGS, *flags])
    return build_run_config(args), _federated_config(args)


@pytest.mark.parametrize(
    "flags,client",
    [
        ((), fresh),
        ((), app.clientapp),
        (("--privacy", "full", "--target-epsilon", "2", "--reproducible-noise", "7"), fresh),
        (
            ("--privacy", "full", "--target-epsilon", "2", "--reproducible-noise", "7")
            + ("--upload-top-k", "50", "--noise-decay", "0.5"),
            fresh,
        ),
    ],
    ids=["fresh-processes", "one-process", "record-level-dp", "dp-top-k-decay"],
)
def test_the_apps_equal_the_in_process_runner(federate_base, tmp_path, flags, client):
    """Same settings, same seed: the deployment apps give the runner's global model bit for bit, its
    rounds, its per-holder reports (record-level DP: the same ledgers) and its test metrics; a holder
    rebuilt every round from its own state file continues as if it had stayed in memory."""
    from textkg.federated.engines import federate

    cfg, fed = _settings(federate_base, *flags)

    def both():
        federate(cfg, fed, tmp_path / "inprocess", progress=False)
        app._HOLDERS.clear()
        grid = InProcessGrid(client, 2, node_configs=node_configs(tmp_path / "nodes", cfg, fed, 2))
        return app.serve(grid, cfg, fed, tmp_path / "deployed")

    one_thread(both)
    a, b = (torch.load(tmp_path / d / "best_model.pt", weights_only=True) for d in ("inprocess", "deployed"))
    assert all(torch.equal(a[k], b[k]) for k in a)
    ma, mb = (json.loads((tmp_path / d / "metrics.json").read_text()) for d in ("inprocess", "deployed"))
    assert ma == mb
    assert [r["round"] for r in mb["rounds"]] == [0, 1, 2]
    if flags:
        steps = [c["privacy"]["steps"] for c in mb["clients"]]
        assert steps == [c["privacy"]["planned_steps"] for c in mb["clients"]] and min(steps) > 0
    fa, fb = (json.loads((tmp_path / d / "federated.json").read_text()) for d in ("inprocess", "deployed"))
    assert fb.pop("engine") == "flower-deployment" and fa.pop("engine") == "flower-inprocess" and fa == fb


def test_client_level_dp_runs_on_the_apps(federate_base, tmp_path):
    """Client-level DP-FedAvg is the server's wrapper, so it runs over any Grid: R releases in Flower's
    ledger, and under it the outputs name the holders only."""
    cfg, fed = _settings(federate_base, "--client-noise-multiplier", "2")
    grid = InProcessGrid(fresh, 2, node_configs=node_configs(tmp_path / "nodes", cfg, fed, 2))
    metrics = one_thread(lambda: app.serve(grid, cfg, fed, tmp_path / "out"))
    assert metrics["privacy"]["guarantee"] == "dp" and metrics["privacy"]["releases"] == 2
    assert [set(c) for c in metrics["clients"]] == [{"name", "test"}] * 2
    assert json.loads((tmp_path / "out" / "federated.json").read_text())["sizes"] is None


def test_two_nodes_with_one_partition_id_stop_the_run(federate_base, tmp_path):
    """Each holder must reply once per round: two SuperNodes started as partition-id 0 are refused
    (rather than averaging one holder twice)."""
    cfg, fed = _settings(federate_base)
    grid = InProcessGrid(fresh, 2, node_configs=node_configs(tmp_path / "nodes", cfg, fed, 2))
    grid._contexts[2].node_config[PARTITION_ID] = 0
    with pytest.raises(ConfigError, match=r"partition-ids \[0, 0\].*client-1"):
        app.serve(grid, cfg, fed, tmp_path / "out")
    assert not (tmp_path / "out" / "metrics.json").exists()


def test_federate_app_writes_the_example(federate_base, tmp_path, capsys):
    """``textkg federate-app`` writes a Flower App that flwr validates (its components import), the
    settings read back, and examples/flower_app is what it writes for the example's flags."""
    from flwr.cli.config_utils import load_and_validate

    out = tmp_path / "run"
    argv = ["federate-app", *federate_base[1:], *EXAMPLE_FLAGS, "--app", str(tmp_path / "app"), "--out", str(out)]
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["holders"] == ["client-0", "client-1"]
    assert any("partition-id=1 num-partitions=2" in c for c in summary["commands"])
    # each node names its own settings file and state folder: nothing a server sends decides them
    settings = str((tmp_path / "app" / app.SETTINGS_FILE).resolve())
    nodes = [c for c in summary["commands"] if c.startswith("flower-supernode")]
    assert len(nodes) == 2 and all(f'settings="{settings}"' in c and "state-dir=" in c for c in nodes)
    assert any("trust" in c for c in summary["commands"])  # Flower 1.42 cannot pin the app: the limit is said
    config, _ = load_and_validate(tmp_path / "app" / "pyproject.toml", check_module=True)
    assert config["tool"]["flwr"]["app"]["config"]["out"] == str(out.resolve())
    cfg, fed = app.read_settings(tmp_path / "app" / app.SETTINGS_FILE)
    assert (fed.clients, fed.rounds, cfg.model.dim) == (2, 2, 16)
    assert (EXAMPLE / app.SETTINGS_FILE).read_text() == (tmp_path / "app" / app.SETTINGS_FILE).read_text()
    assert (EXAMPLE / "pyproject.toml").read_text() == app.pyproject_toml(out="runs/federated-deployment")
    load_and_validate(EXAMPLE / "pyproject.toml", check_module=True)
    # a second app into the same directory, or a resume, is refused with exit 2
    assert main(argv) == 2
    assert main([*argv[:-4], "--app", str(tmp_path / "b"), "--out", str(out), "--resume", str(out)]) == 2
    assert "cannot be resumed" in capsys.readouterr().err


def test_the_server_does_not_read_the_holders_statements_for_irreflexive_relations(federate_base):
    """``model.irreflexive: auto`` would read every training statement: a federation resolves it to none."""
    from textkg.federated.runner import prepare_federation

    cfg, fed = _settings(federate_base)
    assert cfg.model.irreflexive == "auto"
    fedn = prepare_federation(cfg, fed)
    assert fedn.cfg.model.irreflexive == "none" and not bool(fedn.prep.model.irreflexive.any())
    # each party sees other entities: the unseen row, not a map built from one party's entity set
    assert fedn.cfg.model.unseen_structure == "row" and not fedn.prep.model.any_unseen_neighbours
