"""Issue 51, item 7: a peer's message meta, checked by the one schema validator (:mod:`textkg.schema`).

A cross-graph peer's ``meta.privacy`` nested 950 deep crashed the honest party with a RecursionError;
a 4 MiB block was copied into its ledger.json and metrics.json; ``epsilon: 0`` was recorded as the
peer's claim; and a header nested deeper than Python's parser goes was never recorded as refused (the
party waited out its timeout). Each is now refused at the mailbox, with the field named, at once."""

from __future__ import annotations

import json
import struct
import time
from types import SimpleNamespace

import numpy as np
import pytest

from textkg.federated.cross_graph.ledger import PartyLedger, PPATLedger
from textkg.federated.cross_graph.tls import write_federation_certs
from textkg.federated.cross_graph.transport import MAGIC, Mailbox, Message, Outbox, PeerMessageError, decode, encode


@pytest.fixture
def federation(tmp_path):
    """alpha's mailbox (the honest party) and beta's outbox (an authenticated peer that misbehaves)."""
    creds = write_federation_certs(["alpha", "beta"], tmp_path / "tls")
    box = Mailbox("alpha", "127.0.0.1:0", creds["alpha"], [("release", "beta", 1)], max_message_bytes=16 << 20)
    beta = Outbox("beta", {"alpha": f"127.0.0.1:{box.port}"}, creds["beta"], timeout_s=10, max_message_bytes=16 << 20)
    yield SimpleNamespace(box=box, beta=beta)
    beta.close()
    box.stop(0)


def _honest_block() -> dict:
    return PartyLedger("beta", delta=1e-5, noise_multiplier=1.0, clip=1.0, secret=True).record_release(
        step=1, to="alpha", rows=1
    )


def _release(block: object) -> bytes:
    return encode(Message("release", "beta", "alpha", 1, {"rows": np.ones((1, 2))}, {"privacy": block}))


def _nested(depth: int) -> dict:
    block: dict = {"epsilon": 1.0}
    for _ in range(depth):
        block = {"epsilon": block}
    return {**_honest_block(), "epsilon": block}


def _refused_at_once(fed, frame: bytes, match: str) -> None:
    with pytest.raises(PeerMessageError, match="INVALID_ARGUMENT"):
        fed.beta.send_frame("alpha", frame)
    start = time.monotonic()
    with pytest.raises(PeerMessageError, match="refused a message from beta") as err:  # not: waited out 60 s
        fed.box.take("release", "beta", 1, timeout_s=60)
    assert time.monotonic() - start < 5
    assert match in str(err.value), str(err.value)


def test_honest_blocks_of_every_ledger_pass():
    from textkg.federated.cross_graph.ledger import check_privacy_block

    assert check_privacy_block(_honest_block(), file="m") == _honest_block()
    assert decode(_release(_honest_block())).meta["privacy"] == _honest_block()
    ppat = PPATLedger("beta", delta=1e-5, noise_multiplier=0.0, votes_noise=5.0, clip=1.0, secret=True)
    check_privacy_block(ppat.record_release(step=1, to="alpha", rows=3), file="m")  # rows in the clear: none
    check_privacy_block(ppat.record_votes(step=1, to="alpha", answers=4), file="m")


def _release_nested_by_hand(depth: int) -> bytes:
    """:func:`_release` of :func:`_nested` ``(depth)``, the nesting written as text, as a peer would send it
    (``json.dumps`` itself recurses: 950 levels overflow a test worker's stack before the party sees a byte)."""
    frame = _release({**_honest_block(), "epsilon": "NESTED"})
    head_len = struct.unpack("<I", frame[len(MAGIC) : len(MAGIC) + 4])[0]
    head = frame[len(MAGIC) + 4 : len(MAGIC) + 4 + head_len]
    nested = b'{"epsilon":' * (depth + 1) + b"1.0" + b"}" * (depth + 1)
    head = head.replace(b'"NESTED"', nested)
    return MAGIC + struct.pack("<I", len(head)) + head + frame[len(MAGIC) + 4 + head_len :]


def test_a_privacy_block_nested_100_deep_is_refused_naming_the_field(federation):
    _refused_at_once(federation, _release(_nested(100)), "meta.privacy.epsilon")


def test_a_privacy_block_nested_950_deep_is_refused_at_once(federation):
    """The issue's block: refused promptly, the field named where the parser reaches it (else "nested too
    deeply": how much stack is left to the parser depends on the thread that reads the message)."""
    try:
        _refused_at_once(federation, _release_nested_by_hand(950), "meta.privacy.epsilon")
    except AssertionError as exc:
        assert "nested too deeply" in str(exc), str(exc)


def test_a_header_nested_beyond_the_parser_is_recorded_as_refused_at_once(federation):
    head = b'{"kind":"release","sender":"beta","receiver":"alpha","step":1,"arrays":[],"meta":' + b"[" * 200_000
    head += b"]" * 200_000 + b"}"
    frame = MAGIC + struct.pack("<I", len(head)) + head
    _refused_at_once(federation, frame, "nested too deeply")


def test_a_4_mib_privacy_block_is_refused():
    ledger = [{"sample_rate": 0.01, "noise_multiplier": 1.0, "steps": 1}] * 60_000  # ~4 MiB of JSON
    block = {**_honest_block(), "ledger": ledger}
    assert len(json.dumps(block)) > 3 << 20
    with pytest.raises(PeerMessageError, match="at most 10000 items"):
        decode(_release(block), max_message_bytes=16 << 20)
    block["ledger"] = ledger[:9000]  # within the list bound, beyond the block's 256 KiB
    with pytest.raises(PeerMessageError, match="larger than 262144 bytes"):
        decode(_release(block))


@pytest.mark.parametrize(
    "change, field",
    [
        ({"epsilon": 0}, "meta.privacy.epsilon"),  # no release of a dp party has epsilon 0
        ({"epsilon": -1.0}, "meta.privacy.epsilon"),
        ({"epsilon": None}, "meta.privacy.epsilon"),  # dp without a number
        ({"delta": 1.5}, "meta.privacy.delta"),
        ({"guarantee": "trust me"}, "meta.privacy.guarantee"),
        ({"releases": "1"}, "meta.privacy.releases"),
        ({"exec": "os.system"}, "meta.privacy.exec"),
        ({"unit": "x" * 5000}, "meta.privacy.unit"),
    ],
)
def test_a_block_claiming_what_no_release_can_is_refused(change, field):
    with pytest.raises(PeerMessageError) as err:
        decode(_release({**_honest_block(), **change}))
    assert f"field '{field}'" in str(err.value), str(err.value)
    missing = dict(_honest_block())
    del missing["delta"]
    with pytest.raises(PeerMessageError, match="meta.privacy.delta"):
        decode(_release(missing))
