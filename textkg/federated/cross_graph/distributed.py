"""Cross-graph federation with every party in its own process, on gRPC over mutual TLS.

Each process owns one party and starts from its own files only: the holders file (the federation's
public agreement: names, settings, the schedule), its own dataset, its certificate and key, and the
other parties' addresses. It never opens another party's dataset, and its graph, model, ledger and
noise key never leave it. Messages go through :mod:`textkg.federated.cross_graph.transport`: a fixed
frame (JSON header and raw arrays, never pickle), checked against a schema, from a peer whose
certificate names it. No process holds a model but its own and none coordinates: every party derives
the PSI pairs and the exchange schedule from the holders file
(:func:`textkg.federated.cross_graph.runner.schedule`) and walks them in the same global order. A
send only files the message in the receiver's mailbox, and a party waits only for messages of earlier
or equal steps, so the walk cannot deadlock.

One machine (what ``textkg federate --mode cross-graph --processes`` runs)::

    run_cross_graph_processes(config, out_dir)      # throwaway CA, K processes on 127.0.0.1

Separate machines (docs/cross_graph.md, "Processes"): one process per holder, each with the same
holders file, its own name, certificate and key, the CA, and a peers file ``{name: "HOST:PORT"}``::

    python -m textkg.federated.cross_graph.distributed --holders H.yaml --party OMIM --peers peers.yaml \\
        --ca ca.pem --cert OMIM.pem --key OMIM.key --out DIR [--listen 0.0.0.0:50051] [--resume]

**Resume.** Each party checkpoints after each of its steps (as in process) and keeps the frames of
the releases it sent (``outbox/``). A resumed party runs the PSI again (fresh keys, the same
intersection), sends every release again, the stored frame when it has one (so a partner never gets
a second, different release of a step), and applies only the steps it had not applied.
"""

from __future__ import annotations

import argparse
import itertools
import json
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from textkg.errors import ConfigError, TextKGError
from textkg.federated.cross_graph.config import CrossGraphConfig, load_holders
from textkg.federated.cross_graph.methods import get_exchange_method, list_exchange_methods
from textkg.federated.cross_graph.psi import PSIParty
from textkg.federated.cross_graph.runner import (
    METRICS,
    PartyRuntime,
    apply_release,
    make_runtime,
    noise_multiplier_of,
    schedule,
    send_release,
    start_party,
    write_party_metrics,
    write_start_files,
)
from textkg.federated.cross_graph.tls import Credentials, write_federation_certs
from textkg.federated.cross_graph.transport import (
    MAX_MESSAGE_BYTES,
    Mailbox,
    Message,
    Outbox,
    PeerMessageError,
    encode,
)
from textkg.federated.names import check_name

#: seconds a party waits for one message (a peer's local training comes first), and a send for its peer
TIMEOUT_S = 600.0
#: the engine named in the summary
ENGINE = "grpc-mtls"
#: a party's folder of the release frames it sent (what a resumed party sends again)
OUTBOX = "outbox"
#: a party's record of every frame it sent: header and size (:class:`~textkg.federated.cross_graph.transport.Outbox`)
WIRE_LOG = "sent.jsonl"


def check_one_way(config: CrossGraphConfig) -> None:
    """Processes carry one message per exchange; an interactive method (``ppat``) runs in process only."""
    if not get_exchange_method(config.exchange.method).one_way:
        one_way = [m for m in list_exchange_methods() if get_exchange_method(m).one_way]
        msg = (
            f"exchange.method {config.exchange.method!r} is interactive and runs in process only; "
            f"--processes carries {', '.join(one_way)}"
        )
        raise ConfigError(msg, field="method")


def expected_keys(config: CrossGraphConfig, me: str) -> set[tuple[str, str, int]]:
    """Every message ``(kind, sender, step)`` party ``me`` takes in a run; its mailbox refuses the rest."""
    names = [h.name for h in config.holders]
    keys = set()
    for a, b in itertools.combinations(names, 2):
        if me == a:
            keys.add(("psi-reply", b, 0))
        elif me == b:
            keys |= {("psi-request", a, 0), ("psi-result", a, 0)}
    for step, (_, s, t) in enumerate(schedule(names, config.exchange.rounds), 1):
        if t == me:
            keys.add(("release", s, step))
    return keys


def _points(message: Message, name: str) -> list[bytes]:
    return [row.tobytes() for row in message.arrays[name]]


def _align(config: CrossGraphConfig, rt: PartyRuntime, mailbox: Mailbox, outbox: Outbox, timeout_s: float) -> None:
    """The DH-PSI with every partner (:mod:`textkg.federated.cross_graph.psi`), pairs in global order."""
    names, me = [h.name for h in config.holders], rt.party.name
    fraction = config.exchange.aligned_fraction
    for a, b in itertools.combinations(names, 2):
        if me not in (a, b):
            continue
        psi = PSIParty(rt.party.items(), session=f"{a}|{b}", fraction=fraction)

        def send(kind: str, to: str, **arrays: list[bytes]) -> None:
            packed = {k: np.frombuffer(b"".join(v), dtype=np.uint8).reshape(len(v), 32) for k, v in arrays.items()}
            outbox.send(Message(kind, me, to, 0, packed, {}))

        try:
            if me == a:  # requester
                send("psi-request", b, points=psi.blind())
                answer = mailbox.take("psi-reply", b, timeout_s=timeout_s)
                double_offer = psi.reblind(_points(answer, "offer"))
                rt.aligned[b] = psi.match(_points(answer, "reply"), double_offer)
                send("psi-result", b, points=double_offer)
            else:  # responder
                request = mailbox.take("psi-request", a, timeout_s=timeout_s)
                reply = psi.reblind(_points(request, "points"))
                send("psi-reply", a, reply=reply, offer=psi.blind())
                result = mailbox.take("psi-result", a, timeout_s=timeout_s)
                rt.aligned[a] = psi.match(_points(result, "points"), reply)
        except ConfigError as exc:  # a point outside the group, or counts that do not match what was sent
            raise PeerMessageError(f"party {me}: PSI with {b if me == a else a}: {exc.message}") from None


def _release_frame(step: int, rt: PartyRuntime, to: str, ex) -> bytes:
    """The frame of this party's release at ``step``: the one it sent before (``outbox/``), or a new one."""
    from textkg.training import checkpoint as ckpt

    path = rt.party.out_dir / OUTBOX / f"release-{step}.frame"
    if path.is_file():
        return path.read_bytes()
    message = send_release(step, rt, to, ex)
    frame = encode(
        Message("release", rt.party.name, to, step, {"rows": message["rows"].numpy()}, {"privacy": message["privacy"]})
    )
    path.parent.mkdir(exist_ok=True)
    ckpt.atomic_write_bytes(path, frame)
    return frame


def _received_release(message: Message, rt: PartyRuntime) -> dict:
    """A release frame as :func:`~textkg.federated.cross_graph.runner.apply_release` takes it, its row
    count checked against the pair's intersection."""
    rows = message.arrays["rows"]
    want = len(rt.aligned[message.sender])
    if rows.shape[0] != want or rows.shape[1] < 1:
        raise PeerMessageError(
            f"party {rt.party.name}: release of step {message.step} from {message.sender} has shape "
            f"{tuple(rows.shape)}; the intersection has {want} rows",
            field="release.rows",
        )
    rows_t = torch.from_numpy(rows.copy())
    return {"step": message.step, "from": message.sender, "to": rt.party.name, "rows": rows_t, **message.meta}


def run_party(
    config: CrossGraphConfig,
    me: str,
    out_dir: Path,
    *,
    listen: str,
    addresses: dict[str, str],
    credentials: Credentials,
    resume: bool = False,
    timeout_s: float = TIMEOUT_S,
    max_message_bytes: int = MAX_MESSAGE_BYTES,
    stop_after_step: int | None = None,
    progress: bool = False,
) -> dict:
    """Holder ``me``'s whole federation in this process; returns its summary row.

    ``stop_after_step`` (tests): exit as a crash would once the party has finished that step."""
    check_one_way(config)
    names, ex = [h.name for h in config.holders], config.exchange
    if me not in names:
        raise ConfigError(f"--party {me!r} is not in the holders file ({', '.join(names)})", field="party")
    missing = sorted(set(names) - {me} - set(addresses))
    if missing:
        raise ConfigError(f"no address for {', '.join(missing)}", field="peers")
    torch.set_num_threads(1)
    rt = make_runtime(config, names.index(me), out_dir, noise_multiplier_of(config))
    mailbox = Mailbox(me, listen, credentials, expected_keys(config, me), max_message_bytes=max_message_bytes)
    outbox = Outbox(
        me,
        {n: addresses[n] for n in names if n != me},
        credentials,
        timeout_s=timeout_s,
        max_message_bytes=max_message_bytes,
        wire_log=rt.party.out_dir / WIRE_LOG,
    )
    try:
        start_party(rt, ex, ex.rounds * (len(names) - 1), resume=resume, progress=progress)
        _align(config, rt, mailbox, outbox, timeout_s)
        for step, (rnd, s, t) in enumerate(schedule(names, ex.rounds), 1):
            if me == s and rt.aligned[t]:
                outbox.send_frame(t, _release_frame(step, rt, t, ex))
            elif me == t and rt.aligned[s]:
                apply_release(
                    step, rnd, rt, _received_release(mailbox.take("release", s, step, timeout_s=timeout_s), rt), ex
                )
            if stop_after_step is not None and step >= stop_after_step:
                raise SystemExit(3)
        return write_party_metrics(rt)
    finally:
        outbox.close()
        mailbox.stop()


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in socks]
    finally:
        for sock in socks:
            sock.close()


def _party_holders(config: CrossGraphConfig, me: str) -> dict:
    """The holders file a party's process gets: the others' datasets are not named (it never opens them)."""
    raw = config.to_dict()
    for holder in raw["holders"]:
        if holder["name"] != me:
            holder["dataset"] = f"(held by {holder['name']})"
    return raw


def run_cross_graph_processes(
    config: CrossGraphConfig,
    out_dir: Path,
    *,
    resume: bool = False,
    timeout_s: float = TIMEOUT_S,
    stop_after: dict[str, int] | None = None,
) -> dict:
    """One process per holder on this machine (mutual TLS on 127.0.0.1, a throwaway CA); the summary.

    ``resume``: every party continues from its checkpoint in ``out_dir``. ``stop_after`` (tests):
    ``{party: step}`` parties that exit as a crash would after that step."""
    from textkg.training import checkpoint as ckpt

    check_one_way(config)
    out_dir = Path(out_dir)
    if not resume and out_dir.exists() and any(out_dir.iterdir()):
        raise ConfigError(f"output directory {out_dir} is not empty; pass --resume", field="out")
    names = [h.name for h in config.holders]
    sigma = noise_multiplier_of(config)
    if not resume:
        write_start_files(out_dir, config, sigma)
    with tempfile.TemporaryDirectory(prefix="textkg-xg-") as tmp:
        folder = Path(tmp)
        write_federation_certs(names, folder / "tls")
        peers = dict(zip(names, (f"127.0.0.1:{p}" for p in _free_ports(len(names))), strict=True))
        (folder / "peers.json").write_text(json.dumps(peers))
        procs = []
        for name in names:
            (folder / f"{name}.holders.json").write_text(json.dumps(_party_holders(config, name)))
            argv = [sys.executable, "-m", "textkg.federated.cross_graph.distributed", "--party", name]
            argv += ["--holders", str(folder / f"{name}.holders.json"), "--peers", str(folder / "peers.json")]
            argv += ["--ca", str(folder / "tls" / "ca.pem"), "--cert", str(folder / "tls" / f"{name}.pem")]
            argv += ["--key", str(folder / "tls" / f"{name}.key"), "--out", str(out_dir), "--timeout", str(timeout_s)]
            argv += ["--resume"] if resume else []
            if stop_after and name in stop_after:
                argv += ["--stop-after-step", str(stop_after[name])]
            log = (folder / f"{name}.log").open("wb")
            procs.append((name, subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT), log))
        _wait_all(procs, folder)
    rows = [_summary_row(out_dir / name / METRICS) for name in names]
    summary = {"noise_multiplier": sigma, "exchange": config.exchange.to_dict(), "engine": ENGINE, "parties": rows}
    ckpt.atomic_write_json(out_dir / METRICS, summary)
    return summary


def _wait_all(procs: list, folder: Path) -> None:
    """Wait for every party; when one fails, stop the others and raise with its log's tail."""
    try:
        while any(p.poll() is None for _, p, _ in procs):
            failed = [(n, p) for n, p, _ in procs if p.poll() not in (None, 0)]
            if failed:
                break
            time.sleep(0.2)
        failed = [(n, p) for n, p, _ in procs if p.poll() not in (None, 0)]
    finally:
        for _, p, log in procs:
            if p.poll() is None:
                p.terminate()
                p.wait(timeout=30)
            log.close()
    if failed:
        name, proc = failed[0]
        tail = (folder / f"{name}.log").read_text(errors="replace").strip().splitlines()[-5:]
        raise PeerMessageError(f"party {name} exited with status {proc.returncode}: " + " | ".join(tail))


def _summary_row(path: Path) -> dict:
    m = json.loads(path.read_text())
    alone = (m["alone"] or {}).get("test") or {}
    test = m["federated"]["test"] or {}
    return {
        "party": m["party"],
        "alone_test_mrr": alone.get("mrr"),
        "federated_test_mrr": test.get("mrr"),
        "updates_kept": sum(e["kept"] == "update" for e in m["exchanges"]),
        "exchanges": len(m["exchanges"]),
        "epsilon": m["privacy"]["epsilon"],
        "delta": m["privacy"]["delta"],
    }


def load_peers(path: str | Path, names: list[str]) -> dict[str, str]:
    """``{name: "HOST:PORT"}`` from a JSON or YAML file; every name a holder's, every port in 1..65535."""
    import yaml

    path = Path(path)
    if not path.is_file() or path.stat().st_size > 1024 * 1024:
        raise ConfigError("no such peers file (or larger than 1 MiB)", file=path, field="peers")
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot parse: {exc}", file=path, field="peers") from None
    if not isinstance(raw, dict):
        raise ConfigError("expected a mapping {name: HOST:PORT}", file=path, field="peers")
    for name, address in raw.items():
        check_name(name, field=f"peers.{name}", file=path)
        if name not in names:
            raise ConfigError(f"{name!r} is not a holder", file=path, field=f"peers.{name}")
        host, _, port = str(address).rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(f"expected HOST:PORT, got {address!r}", file=path, field=f"peers.{name}")
    return {str(k): str(v) for k, v in raw.items()}


def default_listen(peers: dict[str, str], me: str) -> str:
    """Loopback and this party's port from the peers file: another interface only when ``--listen`` says so."""
    if me not in peers:
        raise ConfigError(f"the peers file has no address for {me!r}; give its port there or --listen", field="peers")
    return f"127.0.0.1:{peers[me].rpartition(':')[2]}"


def main(argv: list[str] | None = None) -> int:
    """One party in its own process (module docstring); exit 2 with a message on a user or peer error."""
    ap = argparse.ArgumentParser(description="one party of a cross-graph federation (gRPC, mutual TLS)")
    ap.add_argument("--holders", required=True, help="the federation's holders file (the same for every party)")
    ap.add_argument("--party", required=True, help="this party's holder name")
    ap.add_argument("--peers", required=True, help="JSON or YAML {name: HOST:PORT} of the parties")
    ap.add_argument("--ca", required=True, help="the federation CA's certificate (PEM)")
    ap.add_argument("--cert", required=True, help="this party's certificate (PEM; common name = its name)")
    ap.add_argument("--key", required=True, help="this party's private key (PEM)")
    ap.add_argument("--out", required=True, help="the run folder; the party writes OUT/<party>/ only")
    ap.add_argument("--listen", help="HOST:PORT to bind (default: 127.0.0.1 and the party's port in --peers)")
    ap.add_argument("--timeout", type=float, default=TIMEOUT_S, help="seconds to wait for each message")
    ap.add_argument("--max-message-mb", type=float, default=MAX_MESSAGE_BYTES / 2**20)
    ap.add_argument("--resume", action="store_true", help="continue from the party's checkpoint")
    ap.add_argument("--stop-after-step", type=int, help=argparse.SUPPRESS)  # tests: a crash after a step
    args = ap.parse_args(argv)
    try:
        config = load_holders(args.holders)
        names = [h.name for h in config.holders]
        peers = load_peers(args.peers, names)
        listen = args.listen or default_listen(peers, args.party)
        row = run_party(
            config,
            args.party,
            Path(args.out),
            listen=listen,
            addresses=peers,
            credentials=Credentials.from_files(args.ca, args.cert, args.key),
            resume=args.resume,
            timeout_s=args.timeout,
            max_message_bytes=int(args.max_message_mb * 2**20),
            stop_after_step=args.stop_after_step,
            progress=True,
        )
    except TextKGError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
