"""A Flower server as the adversary, against textkg's ClientApp: a data holder is its own authority (issue 51).

Each test plays a malicious server: it builds train messages itself and hands them to one node's
ClientApp (:data:`textkg.federated.app.clientapp`) over :class:`~textkg.federated.grid.InProcessGrid`,
no network. The node has its own settings file and state folder (``--node-config settings=...
state-dir=...``), record-level DP with a declared size. Attacks:

- item 2: the message names a folder for the holder's state (``textkg-holder-dir``) and a round to
  restore (``textkg-rounds-done``); a restarted node is asked to train a round it trained already
  (the same noise twice; a ledger that restarts);
- item 3: the message carries settings of the server's choosing: a public ``reproducible_noise``
  seed, another dataset folder on the node's machine, privacy off, a larger budget, more local epochs;
- parameters that are not the model's (a frozen tensor, an extra one).

Every such message is refused (the node raises, Flower sends the server an error reply) and the node
writes nothing; honest messages (parameters and the round number) train, and the report states the
node's own settings and a ledger that only grows.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
import torch
from fed_threads import one_thread
from flower_nodes import node_configs

pytest.importorskip("flwr")

from flwr.app import ArrayRecord, ConfigRecord, RecordDict

from textkg.errors import ConfigError
from textkg.federated import app
from textkg.federated.grid import REPORT_KEY, InProcessGrid

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiny_blp"
FLAGS = ("--split", "transductive", "--description", "short", "--model", "transe", "--dim", "8",
         "--batch-size", "16", "--partition", "random", "--clients", "2", "--rounds", "3",
         "--valid-max-triples", "10", "--no-progress", "--privacy", "full", "--noise-multiplier", "1.0",
         "--max-grad-norm", "1.0", "--private-size", "64")  # fmt: skip


def _settings(dataset: Path):
    from textkg.cli.config_loading import build_run_config
    from textkg.cli.federation import _federated_config
    from textkg.cli.main import build_parser

    args = build_parser().parse_args(["federate", "--dataset", str(dataset), *FLAGS])
    return build_run_config(args), _federated_config(args)


@pytest.fixture
def node(tmp_path):
    """One honest node (holder 0 of 2) with its own settings and state folder; the server's first parameters."""
    from textkg.federated.runner import prepare_federation, trained_state

    dataset = tmp_path / "data"
    shutil.copytree(FIXTURE, dataset)
    cfg, fed = _settings(dataset)
    configs = node_configs(tmp_path / "nodes", cfg, fed, 2)
    app._HOLDERS.clear()
    fedn = prepare_federation(cfg, fed)
    return {
        "cfg": cfg,
        "fed": fed,
        "configs": configs,
        "state": Path(configs[0]["state-dir"]),
        "arrays": trained_state(fedn.prep.model),
        "grid": InProcessGrid(app.clientapp, 2, node_configs=configs),
    }


def _send(grid: InProcessGrid, arrays: dict, config: dict, *, node: int = 1, **records):
    """What a server's strategy does: one train message to ``node``; returns the reply's content."""
    content = RecordDict({"arrays": ArrayRecord(arrays), "config": ConfigRecord(config), **records})
    message = grid.create_message(content, "train", node, group_id="1")
    app._HOLDERS.clear()  # Flower 1.42 starts every ClientApp message in a new process
    (reply,) = grid.pull_messages(one_thread(lambda: grid.push_messages([message])))
    return reply.content


def _report(content) -> dict:
    return json.loads(str(content[REPORT_KEY]["json"]))


def _old_settings(cfg, fed, **changes) -> str:
    """The settings message of textkg <= 1a0007a (``textkg-settings``), with the server's changes."""
    data = app.settings_dict(cfg, fed)
    for path, value in changes.items():
        section, key = path.split("__")
        data["config"][section][key] = value
    return json.dumps(data, sort_keys=True)


def test_a_server_cannot_name_the_holders_state_folder_or_rewind_its_ledger(node, tmp_path):
    """Item 2: the state folder and the round to restore are the node's own; its ledger never goes back."""
    grid, arrays = node["grid"], node["arrays"]
    evil = tmp_path / "server-chosen"
    old_style = {
        "textkg-settings": _old_settings(node["cfg"], node["fed"]),
        "local-epochs": 1,
        "textkg-holder-dir": str(evil),
        "textkg-rounds-done": 0,
    }
    with pytest.raises(ConfigError, match="textkg-holder-dir"):
        _send(grid, arrays, old_style)
    with pytest.raises(ConfigError, match="textkg-rounds-done"):
        _send(grid, arrays, {"server-round": 1, "textkg-rounds-done": 0})
    assert not evil.exists() and not node["state"].exists()  # nothing written, nothing trained

    first = _send(grid, arrays, {"server-round": 1})
    steps = _report(first)["privacy"]["steps"]
    assert steps > 0 and sorted(p.name for p in (node["state"] / "client-0").iterdir()) == ["holder-round-1.pt"]
    second = _send(grid, first["arrays"].to_torch_state_dict(), {"server-round": 2})
    assert _report(second)["privacy"]["steps"] == 2 * steps

    # the node restarts (a new run, an empty Context, a new process): the server asks for round 1 again,
    # from other parameters (the same noise for another input), then skips ahead: both refused
    restarted = InProcessGrid(app.clientapp, 2, node_configs=node["configs"], run_id=7)
    other = {k: v + 0.5 for k, v in arrays.items()}
    with pytest.raises(ConfigError, match="round 1"):
        _send(restarted, other, {"server-round": 1})
    with pytest.raises(ConfigError, match="next round is 3"):
        _send(restarted, other, {"server-round": 5})
    with pytest.raises(ConfigError, match="trained it already"):
        _send(restarted, other, {"server-round": 2})
    third = _send(restarted, second["arrays"].to_torch_state_dict(), {"server-round": 3})
    report = _report(third)
    assert report["privacy"]["steps"] == 3 * steps  # the ledger continued across the restart
    assert report["privacy"]["epsilon"] > _report(second)["privacy"]["epsilon"]
    with pytest.raises(ConfigError, match="3 rounds its settings plan"):  # its plan is spent: no fourth release
        _send(restarted, third["arrays"].to_torch_state_dict(), {"server-round": 4})


def test_a_round_asked_again_with_the_same_parameters_gets_the_same_reply(node):
    """A resumed server (its checkpoint one round behind the holder) gets the holder's saved reply again:
    the very same release, no new noise, no new step in the ledger."""
    grid, arrays = node["grid"], node["arrays"]
    first = _send(grid, arrays, {"server-round": 1})
    again = _send(InProcessGrid(app.clientapp, 2, node_configs=node["configs"], run_id=9), arrays, {"server-round": 1})
    a, b = first["arrays"].to_torch_state_dict(), again["arrays"].to_torch_state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert _report(first) == _report(again)
    assert sorted(p.name for p in (node["state"] / "client-0").iterdir()) == ["holder-round-1.pt"]


@pytest.mark.parametrize(
    "change",
    [
        {"privacy__reproducible_noise": 7},
        {"data__dataset": "OTHER"},
        {"privacy__mode": "none", "privacy__noise_multiplier": None, "privacy__private_size": None},
        {"privacy__noise_multiplier": 0.5},
        {"train__lr": 10.0},
    ],
    ids=["public-noise-seed", "other-dataset-folder", "privacy-off", "smaller-noise", "other-hyper-parameters"],
)
def test_a_server_cannot_change_what_a_node_trains(node, tmp_path, change):
    """Item 3: settings in the message (textkg <= 1a0007a's ``textkg-settings``) are refused; the node trains by
    its own file, and its report says so."""
    other = tmp_path / "other-folder"  # another dataset on the node's machine: every statement public
    shutil.copytree(FIXTURE, other)
    change = {k: str(other) if v == "OTHER" else v for k, v in change.items()}
    message = {"textkg-settings": _old_settings(node["cfg"], node["fed"], **change), "local-epochs": 3}
    with pytest.raises(ConfigError, match="refused the server's message"):
        _send(node["grid"], node["arrays"], {"server-round": 1, **message})
    assert not node["state"].exists()  # the node trained nothing
    honest = _send(node["grid"], node["arrays"], {"server-round": 1})
    report = _report(honest)
    assert report["privacy"]["guarantee"] == "dp" and report["num_statements"] is None
    assert report["privacy"]["noise_multiplier"] == pytest.approx(1.0)
    from textkg.federated.node import settings_digest
    from textkg.federated.runner import prepare_federation

    fedn = prepare_federation(node["cfg"], node["fed"])
    assert report[app.DIGEST_KEY] == settings_digest(fedn.cfg, node["fed"])


@pytest.mark.parametrize("bad", ["frozen", "extra", "metrics-record"])
def test_parameters_and_records_beyond_the_models_are_refused(node, bad):
    from flwr.app import MetricRecord

    arrays = dict(node["arrays"])
    records = {}
    if bad == "frozen":
        arrays.pop(next(iter(arrays)))
    elif bad == "extra":
        arrays["text_features"] = torch.zeros(3, 3)
    else:
        records = {"noise": MetricRecord({"seed": 7})}
    with pytest.raises(ConfigError, match="refused the server's"):
        _send(node["grid"], arrays, {"server-round": 1}, **records)
    assert not node["state"].exists()


def test_the_server_stops_when_a_nodes_own_settings_differ(node, tmp_path):
    """The server learns each node's settings digest from its report: a node with another budget is not
    averaged in under the server's label."""
    cfg, fed = node["cfg"], node["fed"]
    theirs = dataclasses.replace(cfg, privacy=dataclasses.replace(cfg.privacy, noise_multiplier=2.0))
    configs = node["configs"]
    configs[1] = node_configs(tmp_path / "other-node", theirs, fed, 1)[0]
    grid = InProcessGrid(app.clientapp, 2, node_configs=configs)
    with pytest.raises(ConfigError, match=r"holder 1 \(client-1\) trains by other settings"):
        one_thread(lambda: app.serve(grid, cfg, fed, tmp_path / "out"))
    assert not (tmp_path / "out" / "metrics.json").exists()


def test_a_resumed_server_gets_the_holders_saved_round_and_their_ledgers_go_on(node, tmp_path, monkeypatch):
    """The simulation engine's resume, over the in-process grid: the server crashes after the holders sent
    round 2 and before its checkpoint of round 2; resumed from round 1's checkpoint it sends round 2 again
    with the very same parameters, gets each holder's saved reply (no new noise, no new step), and round 3
    continues the holders' ledgers. The result equals the uninterrupted federation bit for bit; a server
    that then asks for round 2 from other parameters is refused."""
    from textkg.federated.checkpointing import load_checkpoint
    from textkg.federated.runner import prepare_federation

    cfg, fed = node["cfg"], node["fed"]
    cfg = dataclasses.replace(cfg, privacy=dataclasses.replace(cfg.privacy, reproducible_noise=7))  # both runs alike
    straight_nodes = node_configs(tmp_path / "straight-nodes", cfg, fed, 2)
    crashed_nodes = node_configs(tmp_path / "crashed-nodes", cfg, fed, 2)

    def fresh(message, context):
        app._HOLDERS.clear()
        return app.clientapp(message, context)

    def run(nodes, out, **kwargs):
        grid = InProcessGrid(fresh, 2, node_configs=nodes, **kwargs.pop("grid", {}))
        return one_thread(lambda: app.serve(grid, cfg, fed, tmp_path / out, checkpoint=True, **kwargs))

    straight = run(straight_nodes, "a")
    real, calls = app.validation_mrr, []

    def crash_in_round_2(fedn, state):
        calls.append(1)
        if len(calls) == 3:  # rounds 0, 1, then 2: after the holders replied, before checkpoint 2
            raise RuntimeError("crash")
        return real(fedn, state)

    monkeypatch.setattr(app, "validation_mrr", crash_in_round_2)
    with pytest.raises(RuntimeError, match="crash"):
        run(crashed_nodes, "b")
    monkeypatch.setattr(app, "validation_mrr", real)
    held = Path(crashed_nodes[0]["state-dir"]) / "client-0"
    assert sorted(p.name for p in held.iterdir()) == ["holder-round-1.pt", "holder-round-2.pt"]
    saved = load_checkpoint(tmp_path / "b", prepare_federation(cfg, fed).cfg, fed)
    assert saved["round"] == 1
    resumed = run(crashed_nodes, "b", saved=saved, grid={"run_id": 2})
    assert resumed["rounds"] == straight["rounds"] and resumed["clients"] == straight["clients"]
    a, b = (torch.load(tmp_path / d / "best_model.pt", weights_only=True) for d in ("a", "b"))
    assert all(torch.equal(a[k], b[k]) for k in a)
    other = {k: v + 1.0 for k, v in node["arrays"].items()}
    with pytest.raises(ConfigError, match="refused round 2"):
        _send(InProcessGrid(app.clientapp, 2, node_configs=crashed_nodes, run_id=3), other, {"server-round": 2})
