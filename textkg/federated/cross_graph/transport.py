"""The cross-graph parties' messages between processes: gRPC over mutual TLS, a fixed frame, no pickle.

**Trust.** A peer's message is data from a party that may be an adversary. The transport therefore
never unpickles and never calls anything a message names. A frame (:func:`encode`) is::

    MAGIC | uint32 LE header length | JSON header | raw little-endian array bytes

The header holds ``kind``, ``sender``, ``receiver``, ``step``, a list of arrays (``name``, ``dtype``,
``shape``) and JSON ``meta``. Arrays are read with ``numpy.frombuffer`` in a fixed dtype
(``float64`` or ``uint8``), never as objects. :func:`decode` checks every field against
:data:`SCHEMAS` (kind, array names, dtype, rank, fixed dimensions, the bound of every dimension, the
exact byte size, JSON types, finite floats) before anything is used.

**Who may talk.** Every party runs a gRPC server (:class:`Mailbox`) that requires a client
certificate signed by the federation's CA (:mod:`textkg.federated.cross_graph.tls`) and takes a
message only if that certificate's common name is the header's ``sender`` and the message is one
the party expects from that sender (its key is in ``expected``; each key once). A connection
without such a certificate fails in the TLS handshake. A sender checks the receiver's certificate
against the receiver's name. The server binds to loopback unless told otherwise.

**Limits.** A frame is at most ``max_message_bytes`` (gRPC refuses a larger one before reading
it), its header at most :data:`MAX_HEADER_BYTES`; a send waits at most ``timeout_s`` for the peer
to come up and accept; a party waits at most ``timeout_s`` for each message it expects.

A rejected message is logged, refused to its sender (``INVALID_ARGUMENT``, with the reason), and
makes the receiver's next :meth:`Mailbox.take` from that sender raise :class:`PeerMessageError`:
an authenticated party that sends garbage is a protocol failure, and the run stops with exit 2.
"""

from __future__ import annotations

import json
import math
import struct
import sys
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from textkg.errors import TextKGError
from textkg.federated.cross_graph.ledger import check_privacy_block
from textkg.federated.cross_graph.tls import Credentials
from textkg.schema import MAX_DEPTH, AnyJSON, SchemaError, load_json

#: the first bytes of every frame (and its version)
MAGIC = b"TKGXG1\n"
#: the largest JSON header (the statement level's privacy block carries a party's ledger)
MAX_HEADER_BYTES = 4 * 1024 * 1024
#: the default bound of a whole frame
MAX_MESSAGE_BYTES = 256 * 1024 * 1024
#: how often (ms) a send tries again to reach a peer that is not up yet (gRPC's default backs off to
#: 120 s, so a party that starts late could leave its partner idle for minutes)
RECONNECT_BACKOFF_MS = 1000
#: the gRPC service and method every party serves
SERVICE, METHOD = "textkg.crossgraph.Party", "Deliver"
#: the array dtypes a frame may hold (little-endian, never an object dtype)
DTYPES: dict[str, np.dtype] = {"float64": np.dtype("<f8"), "uint8": np.dtype("u1")}
#: the widest embedding a release may carry, and the most items a PSI message may carry
MAX_DIM, MAX_ITEMS = 4096, 10_000_000


class PeerMessageError(TextKGError):
    """A peer's message that is not what the protocol allows, or a peer that cannot be reached."""


@dataclass(frozen=True)
class ArraySpec:
    """An array a kind of message must hold: its dtype, its shape (``None``: any size) and each dimension's bound."""

    dtype: str
    shape: tuple[int | None, ...]
    bounds: tuple[int, ...]


_POINTS = ArraySpec("uint8", (None, 32), (MAX_ITEMS, 32))  # group elements (textkg.federated.cross_graph.psi)

#: every kind of message: its arrays and its meta keys, each with the check of its value (a release's
#: privacy block: :func:`textkg.federated.cross_graph.ledger.check_privacy_block`, by :mod:`textkg.schema`)
SCHEMAS: dict[str, tuple[dict[str, ArraySpec], dict[str, Callable[..., object]]]] = {
    "psi-request": ({"points": _POINTS}, {}),
    "psi-reply": ({"reply": _POINTS, "offer": _POINTS}, {}),
    "psi-result": ({"points": _POINTS}, {}),
    "release": (
        {"rows": ArraySpec("float64", (None, None), (MAX_ITEMS, MAX_DIM))},
        {"privacy": check_privacy_block},
    ),
}


@dataclass(frozen=True)
class Message:
    """A decoded frame. ``arrays`` are read-only numpy arrays of the schema's dtypes."""

    kind: str
    sender: str
    receiver: str
    step: int
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.kind, self.sender, self.step)


def encode(message: Message) -> bytes:
    """The frame of ``message`` (module docstring). Arrays are written little-endian, C order."""
    spec, _ = SCHEMAS[message.kind]
    arrays = []
    for name in spec:
        arr = np.ascontiguousarray(message.arrays[name], dtype=DTYPES[spec[name].dtype])
        arrays.append((name, spec[name].dtype, arr))
    header = {
        "kind": message.kind,
        "sender": message.sender,
        "receiver": message.receiver,
        "step": message.step,
        "arrays": [{"name": n, "dtype": d, "shape": list(a.shape)} for n, d, a in arrays],
        "meta": message.meta,
    }
    head = json.dumps(header, allow_nan=False, separators=(",", ":")).encode()
    return MAGIC + struct.pack("<I", len(head)) + head + b"".join(a.tobytes() for _, _, a in arrays)


def _refuse(reason: str) -> PeerMessageError:
    return PeerMessageError(reason, field="message")


def decode(frame: bytes, *, max_message_bytes: int = MAX_MESSAGE_BYTES) -> Message:
    """Parse and check a frame against :data:`SCHEMAS`; raises :class:`PeerMessageError`, never runs it."""
    if not isinstance(frame, bytes) or len(frame) > max_message_bytes:
        raise _refuse(f"a frame must be bytes of at most {max_message_bytes} bytes")
    if not frame.startswith(MAGIC) or len(frame) < len(MAGIC) + 4:
        raise _refuse("not a textkg cross-graph frame (no magic bytes): refused unread")
    (n,) = struct.unpack_from("<I", frame, len(MAGIC))
    start = len(MAGIC) + 4
    if n > MAX_HEADER_BYTES or start + n > len(frame):
        raise _refuse(f"header of {n} bytes: more than the frame or than {MAX_HEADER_BYTES}")
    try:  # bounded in bytes and depth (a crafted nesting is refused, never recursed into), no NaN
        header = load_json(frame[start : start + n], AnyJSON(max_str=n, max_len=n), file="header", max_depth=MAX_DEPTH)
    except SchemaError as exc:
        raise _refuse(f"the header is not JSON within the limits: {exc}") from None
    if not isinstance(header, dict) or set(header) != {"kind", "sender", "receiver", "step", "arrays", "meta"}:
        raise _refuse("the header must hold exactly kind, sender, receiver, step, arrays and meta")
    kind, step = header["kind"], header["step"]
    if kind not in SCHEMAS:
        raise _refuse(f"unknown kind {kind!r}; expected one of {', '.join(SCHEMAS)}")
    if not isinstance(header["sender"], str) or not isinstance(header["receiver"], str):
        raise _refuse("sender and receiver must be strings")
    if isinstance(step, bool) or not isinstance(step, int) or not 0 <= step < 2**31:
        raise _refuse(f"step must be an integer in [0, 2^31), got {step!r}")
    arrays = _read_arrays(kind, header["arrays"], memoryview(frame)[start + n :])
    return Message(kind, header["sender"], header["receiver"], step, arrays, _check_meta(kind, header["meta"]))


def _read_arrays(kind: str, listed: object, body: memoryview) -> dict[str, np.ndarray]:
    specs, _ = SCHEMAS[kind]
    if not isinstance(listed, list) or [a.get("name") if isinstance(a, dict) else None for a in listed] != list(specs):
        raise _refuse(f"a {kind} message holds the arrays {', '.join(specs) or 'none'}, in that order")
    out, offset = {}, 0
    for entry in listed:
        name, spec = entry["name"], specs[entry["name"]]
        shape = entry.get("shape")
        if entry.get("dtype") != spec.dtype or set(entry) != {"name", "dtype", "shape"}:
            raise _refuse(f"{kind}.{name}: dtype must be {spec.dtype}, got {entry.get('dtype')!r}")
        ok = isinstance(shape, list) and len(shape) == len(spec.shape)
        ok = ok and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape)
        ok = ok and all(
            d <= most and (want is None or d == want)
            for d, want, most in zip(shape, spec.shape, spec.bounds, strict=True)
        )
        if not ok:
            want = "x".join("n" if d is None else str(d) for d in spec.shape)
            most = "x".join(map(str, spec.bounds))
            raise _refuse(f"{kind}.{name}: shape must be {want}, each at most {most}, got {shape!r}")
        nbytes = math.prod(shape) * DTYPES[spec.dtype].itemsize
        if offset + nbytes > len(body):
            raise _refuse(f"{kind}.{name}: {nbytes} bytes declared, {len(body) - offset} left in the frame")
        arr = np.frombuffer(body[offset : offset + nbytes], dtype=DTYPES[spec.dtype]).reshape(shape)
        if arr.dtype.kind == "f" and not np.isfinite(arr).all():
            raise _refuse(f"{kind}.{name}: holds NaN or infinity")
        out[name], offset = arr, offset + nbytes
    if offset != len(body):
        raise _refuse(f"{len(body) - offset} bytes after the declared arrays")
    return out


def _check_meta(kind: str, meta: object) -> dict:
    _, keys = SCHEMAS[kind]
    if not isinstance(meta, dict) or set(meta) != set(keys):
        raise _refuse(f"a {kind} message's meta holds exactly {', '.join(keys) or 'nothing'}")
    for key, check in keys.items():
        try:
            check(meta[key], file=f"a {kind} message", path=f"meta.{key}")
        except SchemaError as exc:
            raise _refuse(str(exc)) from None
    return meta


class Mailbox:
    """A party's gRPC server: it files each valid, expected, authenticated message under its key.

    Args:
        name: This party's holder name (its certificate's common name).
        listen: ``HOST:PORT`` to bind (loopback unless the caller says otherwise).
        credentials: The party's CA, certificate and key.
        expected: Every key ``(kind, sender, step)`` the party will take; anything else is refused.
        max_message_bytes: The largest frame gRPC accepts.
    """

    def __init__(
        self,
        name: str,
        listen: str,
        credentials: Credentials,
        expected: Iterable[tuple[str, str, int]],
        *,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
    ) -> None:
        from concurrent import futures

        import grpc

        self.name, self.max_message_bytes = name, max_message_bytes
        self._expected = set(expected)
        self._box: dict[tuple[str, str, int], Message] = {}
        self._rejected: dict[str, str] = {}
        self._arrived = threading.Condition()
        creds = grpc.ssl_server_credentials(
            [(credentials.key, credentials.cert)], root_certificates=credentials.ca, require_client_auth=True
        )
        handler = grpc.unary_unary_rpc_method_handler(self._deliver)  # raw bytes in and out: no deserializer
        self._server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=4),
            handlers=[grpc.method_handlers_generic_handler(SERVICE, {METHOD: handler})],
            options=[("grpc.max_receive_message_length", max_message_bytes), ("grpc.max_send_message_length", 4096)],
            maximum_concurrent_rpcs=8,
        )
        self.port = self._server.add_secure_port(listen, creds)
        if self.port == 0:
            raise PeerMessageError(f"cannot listen on {listen}", field="listen")
        self._server.start()

    def _deliver(self, frame: bytes, context) -> bytes:
        import grpc

        peer = (context.auth_context().get("x509_common_name") or [b""])[0].decode("utf-8", "replace")
        try:
            message = decode(frame, max_message_bytes=self.max_message_bytes)
            if message.sender != peer or message.receiver != self.name:
                raise _refuse(f"sent by {peer!r} as {message.sender!r} to {message.receiver!r}")
            with self._arrived:
                if message.key not in self._expected or message.key in self._box:
                    raise _refuse(
                        f"{message.kind} of step {message.step} from {peer!r} is not expected (or came twice)"
                    )
                self._expected.discard(message.key)
                self._box[message.key] = message
                self._arrived.notify_all()
        except Exception as exc:
            reason = exc.message if isinstance(exc, PeerMessageError) else f"unreadable ({type(exc).__name__})"
            print(f"[{self.name}] refused a message from {peer!r}: {reason}", file=sys.stderr)
            with self._arrived:
                self._rejected.setdefault(peer, reason)
                self._arrived.notify_all()
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, reason)
        return b"ok"

    def take(self, kind: str, sender: str, step: int = 0, *, timeout_s: float) -> Message:
        """The message ``(kind, sender, step)``, waiting at most ``timeout_s``.

        Raises:
            PeerMessageError: ``sender`` sent a message that was refused, or none came in time."""
        key = (kind, sender, step)
        with self._arrived:
            done = self._arrived.wait_for(lambda: key in self._box or sender in self._rejected, timeout=timeout_s)
            if sender in self._rejected:
                raise PeerMessageError(f"party {self.name}: refused a message from {sender}: {self._rejected[sender]}")
            if not done:
                raise PeerMessageError(
                    f"party {self.name}: no {kind} of step {step} from {sender} within {timeout_s} s"
                )
            return self._box.pop(key)

    def stop(self, grace_s: float = 1.0) -> None:
        self._server.stop(grace_s)


class Outbox:
    """Sends frames to the other parties over mutual TLS, checking each receiver's certificate name.

    Args:
        name: This party's name.
        addresses: ``{party: "HOST:PORT"}`` of every other party.
        credentials: This party's CA, certificate and key.
        timeout_s: How long a send waits for the receiver to come up and accept.
        wire_log: A JSON-lines file that gets, for every frame sent (written just before the send), its
            header and its byte size (the values left out): the owner's record of everything the party
            disclosed, and what the neighbouring-datasets test compares.
    """

    def __init__(
        self,
        name: str,
        addresses: dict[str, str],
        credentials: Credentials,
        *,
        timeout_s: float,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
        wire_log: Path | None = None,
    ) -> None:
        self.name, self.addresses, self.credentials = name, dict(addresses), credentials
        self.wire_log = wire_log
        self.timeout_s, self.max_message_bytes = timeout_s, max_message_bytes
        self._channels: dict[str, Any] = {}

    def _stub(self, receiver: str):
        import grpc

        if receiver not in self._channels:
            creds = grpc.ssl_channel_credentials(
                root_certificates=self.credentials.ca,
                private_key=self.credentials.key,
                certificate_chain=self.credentials.cert,
            )
            options = [
                ("grpc.ssl_target_name_override", receiver),  # the receiver's certificate must name it
                ("grpc.max_send_message_length", self.max_message_bytes),
                ("grpc.max_receive_message_length", 64 * 1024),
                ("grpc.initial_reconnect_backoff_ms", RECONNECT_BACKOFF_MS),
                ("grpc.max_reconnect_backoff_ms", RECONNECT_BACKOFF_MS),
            ]
            self._channels[receiver] = grpc.secure_channel(self.addresses[receiver], creds, options=options)
        return self._channels[receiver].unary_unary(f"/{SERVICE}/{METHOD}")

    def send(self, message: Message) -> None:
        """Deliver ``message`` (its frame) to its receiver; raises PeerMessageError if refused or unreachable."""
        self.send_frame(message.receiver, encode(message))

    def send_frame(self, receiver: str, frame: bytes) -> None:
        import grpc

        if self.wire_log is not None:
            head = frame[len(MAGIC) + 4 : len(MAGIC) + 4 + struct.unpack_from("<I", frame, len(MAGIC))[0]]
            with self.wire_log.open("a", encoding="utf-8") as f:
                f.write(json.dumps({"header": json.loads(head), "bytes": len(frame)}) + "\n")
        try:
            self._stub(receiver)(frame, timeout=self.timeout_s, wait_for_ready=True)
        except grpc.RpcError as exc:
            code, detail = exc.code(), exc.details()  # type: ignore[attr-defined]
            raise PeerMessageError(
                f"party {self.name}: sending to {receiver} at {self.addresses[receiver]} failed ({code.name}): {detail}"
            ) from None

    def close(self) -> None:
        for channel in self._channels.values():
            channel.close()
