"""``textkg federate --resume DIR``: a federation that crashed after round r continues as if it had not."""

from __future__ import annotations

import json

import pytest
import torch
from fed_threads import one_thread

from textkg.cli.main import main

pytest.importorskip("flwr")

ROUNDS = ["--rounds", "3"]


class Crash(RuntimeError):
    pass


@pytest.fixture
def crash_at_round(monkeypatch):
    """Make the server's validation of round ``r`` raise (round 0 is the initial model): the
    checkpoint of round r - 1 is then the last one written."""
    from textkg.pipeline import job as pipeline

    real = pipeline.evaluate_split

    def arm(r: int) -> None:
        calls = {"valid": 0}

        def flaky(prep, cfg, split, **kwargs):
            if split == "valid":
                calls["valid"] += 1
                if calls["valid"] == r + 1:
                    raise Crash(f"simulated crash in round {r}")
            return real(prep, cfg, split, **kwargs)

        monkeypatch.setattr(pipeline, "evaluate_split", flaky)

    yield arm
    monkeypatch.setattr(pipeline, "evaluate_split", real)


def _crash_then_resume(args, out, crash_at_round, monkeypatch, r=2):
    from textkg.pipeline import job as pipeline

    real = pipeline.evaluate_split
    crash_at_round(r)
    with pytest.raises(Crash):
        main([*args, "--out", str(out)])
    assert not (out / "metrics.json").exists() and not (out / "best_model.pt").exists()
    saved = torch.load(out / "checkpoint.pt", weights_only=False)
    assert saved["round"] == r - 1
    monkeypatch.setattr(pipeline, "evaluate_split", real)
    assert main(["federate", "--resume", str(out), "--no-progress"]) == 0
    return json.loads((out / "metrics.json").read_text())


def straight_and_resumed(args, tmp_path, crash_at_round, monkeypatch, *, straight_args=None):
    """``(straight, resumed)`` metrics of an uninterrupted run and one crashed in round 2 and resumed;
    asserts that both end with the same ``best_model.pt``. ``straight_args``: the uninterrupted run's
    arguments when they differ (another engine that must give the same run), else ``args``."""

    def both():
        assert main([*(args if straight_args is None else straight_args), "--out", str(tmp_path / "straight")]) == 0
        return _crash_then_resume(args, tmp_path / "resumed", crash_at_round, monkeypatch)

    resumed = one_thread(both)
    straight = json.loads((tmp_path / "straight" / "metrics.json").read_text())
    a, b = (torch.load(tmp_path / d / "best_model.pt", weights_only=True) for d in ("straight", "resumed"))
    assert all(torch.equal(a[k], b[k]) for k in a)
    return straight, resumed


def test_a_resumed_federation_equals_an_uninterrupted_one(federate_base, tmp_path, crash_at_round, monkeypatch):
    """Non-private, 3 holders, 3 rounds: crash in round 2, resume; same global model and history."""
    args = [*federate_base, "--partition", "random", "--clients", "3", *ROUNDS]

    straight, resumed = straight_and_resumed(args, tmp_path, crash_at_round, monkeypatch)
    assert [r["round"] for r in resumed["rounds"]] == [0, 1, 2, 3]
    assert resumed["rounds"] == straight["rounds"]
    assert resumed["test"] == straight["test"]


def test_record_level_ledgers_and_noise_streams_survive_a_crash(federate_base, tmp_path, crash_at_round, monkeypatch):
    """Record-level DP: each holder's ledger after resume holds every step of every round, and the
    noise continues the same streams (checked with --reproducible-noise, whose keys come from the seed:
    the resumed run equals the uninterrupted one; secret keys live only in the private checkpoint)."""
    args = [
        *federate_base,
        *("--partition", "random", "--clients", "2", *ROUNDS, "--privacy", "full", "--target-epsilon", "2"),
        *("--reproducible-noise", "7"),
    ]

    straight, resumed = straight_and_resumed(args, tmp_path, crash_at_round, monkeypatch)
    for a, b in zip(straight["clients"], resumed["clients"], strict=True):
        assert a["privacy"]["steps"] == b["privacy"]["steps"] == b["privacy"]["planned_steps"]
        assert a["privacy"]["epsilon_if_secret"] == pytest.approx(b["privacy"]["epsilon_if_secret"], rel=1e-12)


def test_client_level_ledger_survives_a_crash(federate_base, tmp_path, crash_at_round, monkeypatch):
    """Client-level DP-FedAvg: R releases in Flower's ledger after a resume, the same epsilon as R
    uninterrupted rounds, and the same secret key (from the private checkpoint)."""
    args = [
        *federate_base,
        *("--partition", "random", "--clients", "3", *ROUNDS, "--client-noise-multiplier", "2"),
    ]
    out = tmp_path / "resumed"
    key = {}
    from textkg.federated import client_dp

    real_state = client_dp.client_dp_state

    def spy(wrapped):
        state = real_state(wrapped)
        key.setdefault("first", state["randomness"]["key"])
        key["last"] = state["randomness"]["key"]
        return state

    monkeypatch.setattr(client_dp, "client_dp_state", spy)
    resumed = _crash_then_resume(args, out, crash_at_round, monkeypatch)
    assert key["first"] == key["last"]
    block = resumed["privacy"]
    assert block["guarantee"] == "dp" and block["releases"] == 3
    assert main([*args, "--out", str(tmp_path / "straight")]) == 0
    straight = json.loads((tmp_path / "straight" / "metrics.json").read_text())["privacy"]
    assert block["epsilon"] == pytest.approx(straight["epsilon"], rel=1e-12)


def test_resume_errors_exit_2(federate_base, tmp_path, capsys):
    assert main(["federate", "--resume", str(tmp_path / "nowhere"), "--no-progress"]) == 2
    assert "cannot resume" in capsys.readouterr().err
    out = tmp_path / "done"
    assert main([*federate_base, "--partition", "random", "--clients", "2", "--rounds", "1", "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["federate", "--resume", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "has finished" in err and "Traceback" not in err
