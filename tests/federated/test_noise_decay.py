"""``--noise-decay γ``: each holder's σ is σ_0 γ^r in round r, its ledger composes each round's σ, and
a calibrated σ_0 meets the target like the constant schedule; a resumed federation keeps the schedule."""

from __future__ import annotations

import json

import pytest
from test_resume import crash_at_round, straight_and_resumed  # noqa: F401 (a fixture)

from textkg.cli.main import main

pytest.importorskip("flwr")

DECAY = ["--privacy", "full", "--private-size", "6000", "--target-epsilon", "2", "--noise-decay", "0.5"]


def test_each_round_runs_at_its_sigma_and_the_ledger_meets_the_target(federate_base, tmp_path):
    """The ledger is one entry per round at σ_0 γ^r (the σ the mechanism used: it emits the event),
    Opacus recomputes its ε from the block, ε <= target, and σ_0 is above the constant schedule's σ."""
    from textkg.release import recompute_epsilon

    base = [*federate_base, "--partition", "random", "--clients", "2", "--rounds", "3", "--local-epochs", "2"]
    assert main([*base, *DECAY, "--out", str(tmp_path / "decay")]) == 0
    assert main([*base, *DECAY[:6], "--out", str(tmp_path / "constant")]) == 0
    decay, constant = (json.loads((tmp_path / d / "metrics.json").read_text()) for d in ("decay", "constant"))
    for client, flat in zip(decay["clients"], constant["clients"], strict=True):
        block = client["privacy"]
        assert block["guarantee"] == "dp" and block["steps"] == block["planned_steps"]
        per_round = block["steps"] // 3
        sigma0, q = block["noise_multiplier"], block["sample_rate"]
        expected = [{"sample_rate": q, "noise_multiplier": sigma0 * 0.5**r, "steps": per_round} for r in range(3)]
        assert block["ledger"] == expected  # powers of 1/2: exact in floating point
        assert block["noise_schedule"] == {"kind": "geometric", "decay": 0.5, "stage_steps": per_round}
        assert block["epsilon"] <= 2.0 + 1e-9 and block["epsilon"] > 2.0 * 0.99  # calibrated: tight
        assert recompute_epsilon(block) == pytest.approx(block["epsilon"], rel=1e-6)
        assert sigma0 > flat["privacy"]["noise_multiplier"] > sigma0 * 0.25


def test_a_resumed_federation_keeps_the_schedule(federate_base, tmp_path, crash_at_round, monkeypatch):  # noqa: F811
    """Crash in round 2 of 3, resume: the same ledgers (round 3 at σ_0/4, not σ_0) and the same model
    (--reproducible-noise, whose keys come from the seed)."""
    args = [*federate_base, "--partition", "random", "--clients", "2", "--rounds", "3", *DECAY]
    args += ["--reproducible-noise", "7"]

    straight, resumed = straight_and_resumed(args, tmp_path, crash_at_round, monkeypatch)
    for a, b in zip(straight["clients"], resumed["clients"], strict=True):
        assert a["privacy"]["ledger"] == b["privacy"]["ledger"] and len(b["privacy"]["ledger"]) == 3


@pytest.mark.parametrize(
    "extra",
    [
        ["--noise-decay", "0.5"],  # no record-level DP to schedule
        ["--noise-decay", "1.5", "--privacy", "full", "--target-epsilon", "2"],
        ["--noise-decay", "0.5", "--privacy", "full", "--target-epsilon", "2", "--accountant", "pld"],
    ],
)
def test_bad_decay_exits_2_and_writes_nothing(federate_base, tmp_path, capsys, extra):
    out = tmp_path / "fed"
    assert main([*federate_base, "--partition", "random", "--rounds", "1", *extra, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert ("field 'noise-decay'" in err or "argument --noise-decay:" in err) and "Traceback" not in err
    assert not out.exists()
