"""Record-level and client-level DP in one federation: both ledgers, each about its own unit, each the
one its mechanism gives alone (the other level is post-processing for it: Dwork & Roth 2014, Prop. 2.1)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("flwr")

from textkg.cli.main import main
from textkg.federated import client_dp
from textkg.federated.runner import RECORD_UNIT

FLAGS = ("--partition", "random", "--clients", "2", "--rounds", "2")
RECORD = ("--privacy", "full", "--private-size", "6000", "--target-epsilon", "2")
CLIENT = ("--client-noise-multiplier", "2")


def _run(base, out, *extra) -> dict:
    assert main([*base, *FLAGS, *extra, "--out", str(out)]) == 0
    return json.loads((out / "metrics.json").read_text(), parse_constant=lambda c: pytest.fail(c))


def test_both_ledgers_are_reported_and_equal_each_level_alone(federate_base, tmp_path):
    record = _run(federate_base, tmp_path / "record", *RECORD)
    client = _run(federate_base, tmp_path / "client", *CLIENT)
    both = _run(federate_base, tmp_path / "both", *RECORD, *CLIENT)

    block = both["privacy"]
    assert block["unit"] == RECORD_UNIT and block["guarantee"] == "dp"
    assert block["epsilon"] == record["privacy"]["epsilon"] and block["delta"] == record["privacy"]["delta"]
    assert record["privacy"]["client_level"] is None
    # every holder's record-level ledger: the same steps, sigma, sample rate and epsilon as without client level
    assert [c["privacy"] for c in both["clients"]] == [c["privacy"] for c in record["clients"]]
    assert all(c["privacy"]["steps"] == c["privacy"]["planned_steps"] > 0 for c in both["clients"])
    # the client-level accountant: the same as without record level; its public inputs name the counts
    level = block["client_level"]
    assert level["unit"] == client_dp.CLIENT_UNIT and level["guarantee"] == "dp" and level["releases"] == 2
    alone = client["privacy"]
    assert level["public_inputs"] == [*alone.pop("public_inputs"), client_dp.RECORD_LEDGER_INPUT]
    level.pop("public_inputs")
    assert level == alone
    # nothing else about a holder's data: equal weights, no sizes, no counts in the clients list
    assert both["federated"]["sizes"] is None and both["federated"]["weights"].startswith("equal")
    assert all(set(c) == {"name", "privacy", "test"} for c in both["clients"])
    assert both["rounds"][-1]["epsilon_max"] == pytest.approx(block["epsilon"])
