"""The in-process cross-graph federation: outputs, privacy blocks, the ledger, crash and resume, CLI."""

from __future__ import annotations

import json

import pytest
import torch
import yaml

from textkg.cli.main import main
from textkg.errors import ConfigError
from textkg.federated.cross_graph.config import CrossGraphConfig, load_holders
from textkg.federated.cross_graph.ledger import UNIT, recompute_epsilon
from textkg.federated.cross_graph.runner import run_cross_graph


def _run(config: dict, out, **kwargs) -> dict:
    return run_cross_graph(CrossGraphConfig.from_dict(config), out, progress=False, **kwargs)


def test_every_party_reports_alone_and_federated_and_every_message_carries_a_privacy_block(
    tmp_path, two_graphs, holders
):
    messages: list[dict] = []
    summary = _run(holders(*two_graphs, target_epsilon=2.0), tmp_path / "out", on_message=messages.append)
    assert [p["party"] for p in summary["parties"]] == ["alpha", "beta"]
    assert len(messages) == 4  # 2 rounds x 2 directions
    for m in messages:
        block = m["privacy"]
        assert block["unit"] == UNIT and block["guarantee"] == "dp" and block["delta"] == 1e-5
        assert 0 < block["epsilon"] <= 2.0
        assert m["rows"].dtype == torch.float64
    for name in ("alpha", "beta"):
        metrics = json.loads((tmp_path / "out" / name / "metrics.json").read_text())
        assert metrics["alone"]["test"]["mrr"] > 0 and metrics["federated"]["test"]["mrr"] > 0
        ledger = metrics["ledger"]
        assert ledger["epsilon"] == pytest.approx(recompute_epsilon(ledger), abs=0)  # ε recomputes from the block
        assert metrics["privacy"]["epsilon"] <= 2.0 and metrics["privacy"]["releases"] == 2
        assert [e["kept"] in ("update", "local", "none") for e in metrics["exchanges"]] == [True, True]
        assert metrics["aligned"] == {"beta" if name == "alpha" else "alpha": 39}
        if all(e["kept"] != "update" for e in metrics["exchanges"]):  # a party that never gains ends at alone
            assert metrics["federated"] == metrics["alone"]


def test_without_noise_the_block_says_no_guarantee(tmp_path, two_graphs, holders):
    _run(holders(*two_graphs, noise_multiplier=0.0), tmp_path / "out")
    block = json.loads((tmp_path / "out" / "alpha" / "metrics.json").read_text())["privacy"]
    assert block["guarantee"] == "none" and block["epsilon"] is None


def test_a_crash_mid_run_resumes_with_the_same_ledgers_and_models(tmp_path, two_graphs, holders):
    config = holders(*two_graphs, target_epsilon=3.0, reproducible_noise=7)
    _run(config, tmp_path / "full")

    def crash(message):
        if message["step"] == 2:
            raise KeyboardInterrupt("crash")

    with pytest.raises(KeyboardInterrupt):
        _run(config, tmp_path / "crashed", on_message=crash)
    assert not (tmp_path / "crashed" / "metrics.json").exists()
    with pytest.raises(ConfigError):  # a started run is continued, never overwritten
        _run(config, tmp_path / "crashed")
    _run(config, tmp_path / "crashed", resume=True)
    for name in ("alpha", "beta"):
        full = json.loads((tmp_path / "full" / name / "metrics.json").read_text())
        again = json.loads((tmp_path / "crashed" / name / "metrics.json").read_text())
        assert again["ledger"] == full["ledger"]
        assert again["federated"] == full["federated"] and again["alone"] == full["alone"]
        assert again["privacy"]["guarantee"] == "simulation"  # a public noise seed is labelled, not DP
        assert again["privacy"]["epsilon"] is None and again["privacy"]["epsilon_if_secret"] > 0
        a = torch.load(tmp_path / "full" / name / "checkpoint.pt", weights_only=True)["snapshot"]["model"]
        b = torch.load(tmp_path / "crashed" / name / "checkpoint.pt", weights_only=True)["snapshot"]["model"]
        assert all(torch.equal(a[k], b[k]) for k in a)


def test_holders_file_errors_name_the_file_line_and_field(tmp_path, two_graphs, holders):
    config = holders(*two_graphs)
    del config["holders"][1]["dataset"]
    path = tmp_path / "holders.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    with pytest.raises(ConfigError) as err:
        load_holders(path)
    assert err.value.file is not None and err.value.line is not None and err.value.field == "holders[1].dataset"
    assert main(["federate", "--mode", "cross-graph", "--holders", str(path), "--out", str(tmp_path / "o")]) == 2
    config = holders(*two_graphs, mix=2.0)
    path.write_text(yaml.safe_dump(config))
    assert main(["federate", "--mode", "cross-graph", "--holders", str(path), "--out", str(tmp_path / "o")]) == 2


def test_cli_runs_a_federation_and_resumes_a_finished_one_idempotently(tmp_path, two_graphs, holders, capsys):
    path = tmp_path / "holders.yaml"
    path.write_text(yaml.safe_dump(holders(*two_graphs, target_epsilon=4.0)))
    out = tmp_path / "run"
    assert main(["federate", "--mode", "cross-graph", "--holders", str(path), "--out", str(out), "--no-progress"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert {p["party"] for p in printed["parties"]} == {"alpha", "beta"}
    assert main(["federate", "--mode", "cross-graph", "--dim", "4", "--holders", str(path)]) == 2
    assert main(["federate", "--holders", str(path), "--dataset", "hpo-small"]) == 2


def test_a_crash_between_the_release_and_its_use_composes_the_release_once(tmp_path, two_graphs, holders, monkeypatch):
    from textkg.federated.cross_graph import runner

    config = holders(*two_graphs, target_epsilon=3.0, reproducible_noise=5)
    _run(config, tmp_path / "full")
    apply = runner.apply_release

    def crash_at_step_3(step, *args, **kwargs):
        if step == 3:
            raise KeyboardInterrupt("crash after the sender's ledger was saved")
        return apply(step, *args, **kwargs)

    monkeypatch.setattr(runner, "apply_release", crash_at_step_3)
    with pytest.raises(KeyboardInterrupt):
        _run(config, tmp_path / "crashed")
    sender = json.loads((tmp_path / "crashed" / "alpha" / "ledger.json").read_text())
    assert [m["step"] for m in sender["sent"]] == [1, 3]  # step 3's release is on record
    monkeypatch.setattr(runner, "apply_release", apply)
    _run(config, tmp_path / "crashed", resume=True)
    for name in ("alpha", "beta"):
        full = json.loads((tmp_path / "full" / name / "metrics.json").read_text())
        again = json.loads((tmp_path / "crashed" / name / "metrics.json").read_text())
        assert again["ledger"] == full["ledger"] and again["federated"] == full["federated"]
        assert again["privacy"]["releases"] == 2
