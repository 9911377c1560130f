"""Issue 36, item 4: under record-level DP with a declared size, no holder's exact statement count leaves it.

Played as the adversary (the curious server, and anyone holding the released run): holder D and its
neighbour D plus one private statement are federated as a user would (``textkg federate --privacy
full --private-size N``). On 7add106 ``federated.json``'s ``sizes``, ``metrics.json``'s
``clients[i].num_statements`` / ``num_examples`` and the FedAvg weight sent to the server every round
(``num-examples``) were the exact count (90 against 91). Now every size the server sees or uses is
the declared N: the two federations' released files and every message the strategy receives must
match in everything but noised values.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from neighbours import message_view, neighbour_copy, shape_tree

pytest.importorskip("flwr")

from textkg.cli.main import main
from textkg.federated import runner

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiny_blp"
EXTRA = "/e/unused\t/r/likes\t/e/00\n"  # a statement no other line names
ARGS = ["federate", "--split", "transductive", "--description", "short", "--model", "transe", "--dim", "8"]
ARGS += ["--batch-size", "16", "--partition", "random", "--clients", "2", "--rounds", "2", "--no-progress"]
ARGS += ["--privacy", "full", "--noise-multiplier", "1.0", "--max-grad-norm", "1.0", "--private-size", "64"]
#: values of a reply that carry noise (they move with the noised model, not with the count)
NOISED = {"public-loss"}


def _dataset(tmp_path: Path, name: str, *, extra: bool) -> Path:
    return neighbour_copy(FIXTURE, tmp_path / name, append=("train.tsv", EXTRA) if extra else None)


@pytest.fixture
def received(monkeypatch):
    """Every reply the server's strategy receives: per round, per reply, its arrays' shapes and dtypes
    and its metric and config records' values."""
    log: list[list[dict]] = []
    make = runner.make_strategy

    def spy(*args, **kwargs):
        strategy = make(*args, **kwargs)
        aggregate = strategy.aggregate_train

        def aggregate_train(server_round, replies):
            replies = list(replies)
            log.append([message_view(m.content) for m in replies])
            return aggregate(server_round, replies)

        strategy.aggregate_train = aggregate_train
        return strategy

    monkeypatch.setattr(runner, "make_strategy", spy)
    return log


def _public(message: dict) -> dict:
    out = json.loads(json.dumps(message, default=str))
    for record in out["metrics"].values():
        for key in NOISED & set(record):
            record[key] = type(record[key]).__name__
    return out


def test_neighbouring_holders_send_and_release_the_same_sizes(tmp_path, received):
    runs = []
    for name, extra in (("d", False), ("d_plus", True)):
        out = tmp_path / f"run_{name}"
        assert main([*ARGS, "--dataset", str(_dataset(tmp_path, name, extra=extra)), "--out", str(out)]) == 0
        runs.append(out)
    assert len(received) == 4  # two rounds of each federation
    a_msgs, b_msgs = received[:2], received[2:]
    assert [[_public(m) for m in r] for r in a_msgs] == [[_public(m) for m in r] for r in b_msgs]
    for message in (m for r in received for m in r):
        assert message["metrics"]["metrics"]["num-examples"] == 64  # the declared size, never the count
    fa, fb = (json.loads((d / "federated.json").read_text()) for d in runs)
    assert fa == fb and fa["sizes"] is None
    ma, mb = (json.loads((d / "metrics.json").read_text()) for d in runs)
    assert ma["federated"] == mb["federated"] and ma["federated"]["sizes"] is None
    assert ma["federated"]["weights"].startswith("equal")
    assert shape_tree(ma) == shape_tree(mb)
    for ca, cb in zip(ma["clients"], mb["clients"], strict=True):
        assert ca["num_statements"] is None and ca["num_examples"] == cb["num_examples"] == 64
        assert ca["privacy"] == cb["privacy"] and ca["privacy"]["guarantee"] == "dp"
    assert ma["privacy"] == mb["privacy"]


def test_without_privacy_the_counts_are_still_the_weights(tmp_path, received):
    public = [a for a in ARGS if a not in ("--privacy", "full", "--noise-multiplier", "--private-size")]
    public = [a for a in public if a not in ("1.0", "64", "--max-grad-norm")]
    out = tmp_path / "run"
    assert main([*public, "--dataset", str(FIXTURE), "--out", str(out)]) == 0
    sizes = json.loads((out / "federated.json").read_text())["sizes"]
    weights = sorted(m["metrics"]["metrics"]["num-examples"] for m in received[0])
    assert weights == sorted(v for k, v in sizes.items() if k != "shared") and sum(weights) == 200
