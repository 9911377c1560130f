"""Issue 36, item 2: the --processes transport, attacked as a peer would. A pickle payload, a wrong
shape, an oversized array, NaN, a forged sender and a peer without the federation's certificate are
each refused; nothing a message carries is ever run; the old RPC module is gone."""

from __future__ import annotations

import ast
import json
import pickle
import struct
from pathlib import Path
from types import SimpleNamespace

import grpc
import numpy as np
import pytest

from textkg.federated.cross_graph.tls import Credentials, write_federation_certs
from textkg.federated.cross_graph.transport import (
    MAGIC,
    METHOD,
    SERVICE,
    Mailbox,
    Message,
    Outbox,
    PeerMessageError,
    decode,
    encode,
)

PACKAGE = Path(__file__).resolve().parents[3] / "textkg" / "federated" / "cross_graph"
EXPECTED = [("release", "beta", 1), ("psi-request", "beta", 0)]


class Marker:
    """Unpickling this creates the marker file: proof that a payload ran."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self):
        return (Path.touch, (self.path,))


@pytest.fixture
def federation(tmp_path):
    """alpha's mailbox (the honest party), and beta's outbox (an authenticated peer that may misbehave)."""
    creds = write_federation_certs(["alpha", "beta", "gamma"], tmp_path / "tls")
    box = Mailbox("alpha", "127.0.0.1:0", creds["alpha"], EXPECTED, max_message_bytes=1 << 20)
    address = f"127.0.0.1:{box.port}"
    beta = Outbox("beta", {"alpha": address}, creds["beta"], timeout_s=5, max_message_bytes=8 << 20)
    yield SimpleNamespace(box=box, beta=beta, creds=creds, address=address, tmp=tmp_path)
    beta.close()
    box.stop(0)


def _block() -> dict:
    """An honest privacy block: beta's first Gaussian release (:class:`PartyLedger`)."""
    from textkg.federated.cross_graph.ledger import PartyLedger

    ledger = PartyLedger("beta", delta=1e-5, noise_multiplier=1.0, clip=1.0, secret=True)
    return ledger.record_release(step=1, to="alpha", rows=1)


def _release(rows, **meta) -> Message:
    return Message("release", "beta", "alpha", 1, {"rows": rows}, {"privacy": _block(), **meta})


def _frame_with_header(header: dict, body: bytes) -> bytes:
    head = json.dumps(header).encode()
    return MAGIC + struct.pack("<I", len(head)) + head + body


def _refused(fed, frame: bytes, match: str) -> None:
    with pytest.raises(PeerMessageError, match="INVALID_ARGUMENT"):
        fed.beta.send_frame("alpha", frame)
    with pytest.raises(PeerMessageError, match=match):  # the honest party stops with a clear error
        fed.box.take("release", "beta", 1, timeout_s=2)


def test_a_valid_release_arrives_intact(federation):
    rows = np.random.default_rng(0).normal(size=(5, 3))
    federation.beta.send(_release(rows))
    got = federation.box.take("release", "beta", 1, timeout_s=5)
    assert np.array_equal(got.arrays["rows"], rows) and got.meta == {"privacy": _block()}


def test_a_pickle_payload_is_refused_unread_and_nothing_runs(federation):
    marker = federation.tmp / "pwned"
    payload = pickle.dumps(Marker(marker))
    pickle.loads(payload)  # the payload works: unpickling it would create the marker
    assert marker.exists()
    marker.unlink()
    _refused(federation, payload, "no magic bytes")
    assert not marker.exists()


def test_a_pickle_inside_a_well_formed_header_is_refused(federation):
    marker = federation.tmp / "pwned"
    payload = pickle.dumps(Marker(marker))
    header = {
        "kind": "release",
        "sender": "beta",
        "receiver": "alpha",
        "step": 1,
        "arrays": [{"name": "rows", "dtype": "object", "shape": [1, 1]}],
        "meta": {"privacy": {}},
    }
    _refused(federation, _frame_with_header(header, payload), "dtype must be float64")
    assert not marker.exists()


def test_a_wrong_shape_is_refused(federation):
    frame = encode(Message("psi-request", "beta", "alpha", 0, {"points": np.zeros((4, 32), np.uint8)}, {}))
    frame = frame.replace(b'"shape":[4,32]', b'"shape":[4,31]') + b"\0" * 4
    with pytest.raises(PeerMessageError, match="INVALID_ARGUMENT"):
        federation.beta.send_frame("alpha", frame)
    with pytest.raises(PeerMessageError, match=r"shape must be nx32"):
        federation.box.take("psi-request", "beta", 0, timeout_s=2)


def test_a_release_whose_rows_do_not_match_the_intersection_is_refused():
    from textkg.federated.cross_graph.distributed import _received_release

    rt = SimpleNamespace(aligned={"beta": ["e1", "e2", "e3"]}, party=SimpleNamespace(name="alpha"))
    ok = decode(encode(_release(np.ones((3, 4)))))
    assert _received_release(ok, rt)["rows"].shape == (3, 4)
    with pytest.raises(PeerMessageError, match="the intersection has 3 rows"):
        _received_release(decode(encode(_release(np.ones((4, 4))))), rt)


@pytest.mark.parametrize(
    "rows, match",
    [
        (np.ones((2, 5000)), "each at most"),  # wider than any embedding
        (np.array([[1.0, np.nan]]), "NaN"),
    ],
)
def test_an_oversized_or_non_finite_array_is_refused(federation, rows, match):
    head = {
        "kind": "release",
        "sender": "beta",
        "receiver": "alpha",
        "step": 1,
        "arrays": [{"name": "rows", "dtype": "float64", "shape": list(rows.shape)}],
        "meta": {"privacy": {}},
    }
    _refused(federation, _frame_with_header(head, rows.astype("<f8").tobytes()), match)


def test_a_frame_over_the_byte_limit_never_reaches_the_party(federation):
    with pytest.raises(PeerMessageError, match="RESOURCE_EXHAUSTED"):
        federation.beta.send(_release(np.ones((2000, 100))))  # 1.6 MB against alpha's 1 MiB
    with pytest.raises(PeerMessageError, match="no release of step 1"):
        federation.box.take("release", "beta", 1, timeout_s=1)


def test_a_header_declaring_more_bytes_than_follow_is_refused(federation):
    head = {
        "kind": "release",
        "sender": "beta",
        "receiver": "alpha",
        "step": 1,
        "arrays": [{"name": "rows", "dtype": "float64", "shape": [4000, 4000]}],
        "meta": {"privacy": {}},
    }
    _refused(federation, _frame_with_header(head, b"\0" * 64), "bytes declared")


def test_a_peer_cannot_send_as_another_party_or_an_unexpected_message(federation):
    gamma = Outbox("gamma", {"alpha": federation.address}, federation.creds["gamma"], timeout_s=5)
    forged = Message("release", "beta", "alpha", 1, {"rows": np.ones((1, 1))}, {"privacy": {}})
    with pytest.raises(PeerMessageError, match="INVALID_ARGUMENT"):
        gamma.send(forged)  # gamma's certificate, beta's name
    gamma.close()
    with pytest.raises(PeerMessageError, match="refused a message from gamma"):
        federation.box.take("release", "gamma", 1, timeout_s=1)
    federation.beta.send(_release(np.ones((1, 1))))
    with pytest.raises(PeerMessageError, match="INVALID_ARGUMENT"):  # the same step twice
        federation.beta.send(_release(np.ones((1, 1))))


def test_a_peer_without_the_federations_certificate_is_refused(federation):
    outsider = write_federation_certs(["beta"], federation.tmp / "other-ca")["beta"]  # right name, wrong CA
    impostor = Outbox("beta", {"alpha": federation.address}, outsider, timeout_s=2)
    with pytest.raises(PeerMessageError, match="DEADLINE_EXCEEDED|UNAVAILABLE"):
        impostor.send(_release(np.ones((1, 1))))
    impostor.close()
    no_cert = Credentials(federation.creds["beta"].ca, b"", b"")
    channel = grpc.secure_channel(
        federation.address,
        grpc.ssl_channel_credentials(root_certificates=no_cert.ca),
        options=[("grpc.ssl_target_name_override", "alpha")],
    )
    with pytest.raises(grpc.RpcError):
        channel.unary_unary(f"/{SERVICE}/{METHOD}")(encode(_release(np.ones((1, 1)))), timeout=2)
    channel.close()
    plain = grpc.insecure_channel(federation.address)
    with pytest.raises(grpc.RpcError):
        plain.unary_unary(f"/{SERVICE}/{METHOD}")(encode(_release(np.ones((1, 1)))), timeout=2)
    plain.close()
    with pytest.raises(PeerMessageError, match="no release of step 1"):  # nothing got through
        federation.box.take("release", "beta", 1, timeout_s=1)


def test_a_sender_refuses_a_receiver_whose_certificate_names_another_party(federation):
    box = Mailbox("gamma", "127.0.0.1:0", federation.creds["gamma"], [("release", "beta", 1)])
    fooled = Outbox("beta", {"alpha": f"127.0.0.1:{box.port}"}, federation.creds["beta"], timeout_s=2)
    with pytest.raises(PeerMessageError):  # gamma listens where beta expects alpha
        fooled.send(_release(np.ones((1, 1))))
    fooled.close()
    box.stop(0)


def test_no_module_of_the_package_imports_pickle_or_torch_rpc_or_calls_eval():
    """The old attack (a peer's rpc_sync(party0, os.system, ...)) needs torch.distributed.rpc."""
    banned_modules = {"pickle", "torch.distributed.rpc", "dill", "cloudpickle", "marshal"}
    for path in sorted(PACKAGE.glob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                names = {node.module or ""} | {f"{node.module}.{a.name}" for a in node.names}
            else:
                names = set()
            assert not names & banned_modules, f"{path.name}:{node.lineno} imports {names & banned_modules}"
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                assert node.func.id not in ("eval", "exec"), f"{path.name}:{node.lineno} calls {node.func.id}"
            if isinstance(node, ast.Attribute) and node.attr == "rpc":
                raise AssertionError(f"{path.name}:{node.lineno} uses .rpc")


def test_an_honest_party_process_stops_with_exit_2_when_its_partner_answers_with_a_pickle(
    tmp_path, two_graphs, holders, capsys
):
    """The whole party (``python -m textkg.federated.cross_graph.distributed``'s main) against a
    malicious beta that answers alpha's PSI request with a pickle payload: exit 2, a clear error,
    no traceback, and the payload never runs."""
    import threading

    import yaml

    from textkg.federated.cross_graph.distributed import _free_ports, main

    creds = write_federation_certs(["alpha", "beta"], tmp_path / "tls")
    tls = tmp_path / "tls"
    raw = holders(*two_graphs, target_epsilon=4.0)
    (tmp_path / "holders.yaml").write_text(yaml.safe_dump(raw))
    attacker_box = Mailbox("beta", "127.0.0.1:0", creds["beta"], [("psi-request", "alpha", 0)])
    (alpha_port,) = _free_ports(1)
    peers = {"alpha": f"127.0.0.1:{alpha_port}", "beta": f"127.0.0.1:{attacker_box.port}"}
    (tmp_path / "peers.yaml").write_text(yaml.safe_dump(peers))
    marker = tmp_path / "pwned"

    def attack() -> None:
        attacker_box.take("psi-request", "alpha", timeout_s=120)  # alpha trained and asked
        out = Outbox("beta", {"alpha": peers["alpha"]}, creds["beta"], timeout_s=10)
        try:
            out.send_frame("alpha", pickle.dumps(Marker(marker)))
        except PeerMessageError:
            pass  # refused, as it should be
        out.close()

    thread = threading.Thread(target=attack, daemon=True)
    thread.start()
    argv = ["--holders", str(tmp_path / "holders.yaml"), "--party", "alpha", "--peers", str(tmp_path / "peers.yaml")]
    argv += ["--ca", str(tls / "ca.pem"), "--cert", str(tls / "alpha.pem"), "--key", str(tls / "alpha.key")]
    argv += ["--out", str(tmp_path / "out"), "--timeout", "60"]
    code = main(argv)
    thread.join(30)
    attacker_box.stop(0)
    err = capsys.readouterr().err
    assert code == 2 and "refused a message from beta" in err and "no magic bytes" in err
    assert "Traceback" not in err and not marker.exists()
    assert not (tmp_path / "out" / "alpha" / "metrics.json").exists()


def test_a_party_binds_to_loopback_unless_told_otherwise():
    from textkg.errors import ConfigError
    from textkg.federated.cross_graph.distributed import default_listen

    assert default_listen({"alpha": "omim.example.org:50051", "beta": "10.0.0.7:50052"}, "alpha") == "127.0.0.1:50051"
    with pytest.raises(ConfigError, match="no address for 'gamma'"):
        default_listen({"alpha": "h:1"}, "gamma")


@pytest.mark.parametrize(
    "peers, match",
    [
        ({"alpha": "h:1", "zeta": "h:2"}, "'zeta' is not a holder"),
        ({"alpha": "h:1", "beta": "h:99999"}, "HOST:PORT"),
        ({"alpha": "h:1", "beta": "nohost"}, "HOST:PORT"),
        ({"alpha": "h:1", "../beta": "h:2"}, "not allowed"),
        (["alpha"], "mapping"),
    ],
)
def test_a_bad_peers_file_names_the_file_and_the_entry(tmp_path, peers, match):
    from textkg.errors import ConfigError
    from textkg.federated.cross_graph.distributed import load_peers

    path = tmp_path / "peers.json"
    path.write_text(json.dumps(peers))
    with pytest.raises(ConfigError, match=match) as err:
        load_peers(path, ["alpha", "beta"])
    assert err.value.file == str(path)


def _header(**change) -> dict:
    head = {
        "kind": "psi-request",
        "sender": "beta",
        "receiver": "alpha",
        "step": 0,
        "arrays": [{"name": "points", "dtype": "uint8", "shape": [1, 32]}],
        "meta": {},
    }
    return {**head, **change}


@pytest.mark.parametrize(
    "header, body, match",
    [
        (_header(kind="exec"), bytes(32), "unknown kind"),
        (_header(step=True), bytes(32), "step must be an integer"),
        (_header(step=-1), bytes(32), "step must be an integer"),
        ({**_header(), "code": "os.system"}, bytes(32), "exactly kind"),
        (_header(meta={"privacy": {}}), bytes(32), "meta holds exactly nothing"),
        (_header(), bytes(33), "1 bytes after"),
        (_header(arrays=[]), b"", "holds the arrays points"),
        (_header(arrays=[{"name": "points", "dtype": "uint8", "shape": [1, 32], "x": 1}]), bytes(32), "dtype"),
        (_header(arrays=[{"name": "points", "dtype": "uint8", "shape": [-1, 32]}]), bytes(32), "shape must be"),
        (_header(arrays=[{"name": "points", "dtype": "uint8", "shape": [10**8, 32]}]), bytes(32), "at most"),
    ],
)
def test_every_header_field_is_checked_before_use(header, body, match):
    with pytest.raises(PeerMessageError, match=match):
        decode(_frame_with_header(header, body))


def test_non_json_constants_and_a_lying_header_length_are_refused():
    frame = _frame_with_header(_header(), bytes(32)).replace(b'"step": 0', b'"step": NaN')
    with pytest.raises(PeerMessageError, match="not JSON"):
        decode(frame)
    with pytest.raises(PeerMessageError, match="more than the frame"):
        decode(MAGIC + struct.pack("<I", 2**31) + b"{}")
