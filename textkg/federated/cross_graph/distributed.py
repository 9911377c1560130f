"""Cross-graph federation with every party in its own process, on torch.distributed's RPC.

Each process owns one party: its graph, model, ledger and noise key never leave it. Messages go
through ``torch.distributed.rpc`` (TensorPipe over TCP): a sender calls ``rpc_sync`` on the
receiver's :func:`_deliver`, which files the payload in the receiver's mailbox; the receiver takes
it when its schedule reaches it. No process holds a model but its own and none coordinates: every
party derives the PSI pairs and the exchange schedule from the holders file
(:func:`textkg.federated.cross_graph.runner.schedule`) and walks them in the same global order.
A send never blocks, and a party waits only for messages of earlier or equal steps, so the walk
cannot deadlock. The RPC rendezvous (``init_method``, a TCP address) is the only shared endpoint.

One machine (what the test runs)::

    run_cross_graph_processes(config, out_dir)      # spawns K processes on 127.0.0.1

Separate machines: start one process per holder, each with the same holders file, its rank and the
address of rank 0::

    python -m textkg.federated.cross_graph.distributed --holders H.yaml --rank k \\
        --init-method tcp://HOST:PORT --out DIR
"""

from __future__ import annotations

import argparse
import itertools
import socket
import threading
from pathlib import Path

import torch

from textkg.errors import ConfigError
from textkg.federated.cross_graph.config import CrossGraphConfig, load_holders
from textkg.federated.cross_graph.methods import get_exchange_method, list_exchange_methods
from textkg.federated.cross_graph.psi import PSIParty
from textkg.federated.cross_graph.runner import (
    METRICS,
    apply_release,
    make_runtime,
    noise_multiplier_of,
    schedule,
    send_release,
    start_party,
    write_party_metrics,
    write_start_files,
)

#: seconds a party waits for one message before it gives up
TIMEOUT_S = 600.0

_MAILBOX: dict = {}
_ARRIVED = threading.Condition()


def _deliver(key: tuple, payload) -> None:
    """Runs in the receiver's process (an RPC thread): file ``payload`` under ``key``."""
    with _ARRIVED:
        _MAILBOX[key] = payload
        _ARRIVED.notify_all()


def _take(key: tuple, timeout: float = TIMEOUT_S):
    with _ARRIVED:
        if not _ARRIVED.wait_for(lambda: key in _MAILBOX, timeout=timeout):
            raise TimeoutError(f"no message {key} within {timeout:.0f} s")
        return _MAILBOX.pop(key)


def _worker(k: int) -> str:
    return f"party{k}"


def _send(k: int, key: tuple, payload) -> None:
    from torch.distributed import rpc

    rpc.rpc_sync(_worker(k), _deliver, args=(key, payload))


def _align(rank: int, config: CrossGraphConfig, rt) -> None:
    """The DH-PSI with every partner (:mod:`textkg.federated.cross_graph.psi`), pairs in global order."""
    names = [h.name for h in config.holders]
    for a, b in itertools.combinations(range(len(names)), 2):
        if rank not in (a, b):
            continue
        me = PSIParty(rt.party.items(), session=f"{names[a]}|{names[b]}", fraction=config.exchange.aligned_fraction)
        if rank == a:  # requester
            _send(b, ("psi-request", a, b), me.blind())
            reply, offer = _take(("psi-reply", a, b))
            found = me.intersect(reply, offer)
            _send(b, ("psi-result", a, b), found)
            rt.aligned[names[b]] = found
        else:  # responder
            request = _take(("psi-request", a, b))
            _send(a, ("psi-reply", a, b), (me.reblind(request), me.blind()))
            found = me.confirm(_take(("psi-result", a, b)))
            rt.aligned[names[a]] = found


def check_one_way(config: CrossGraphConfig) -> None:
    """Processes carry one message per exchange; an interactive method (``ppat``) runs in process only."""
    if not get_exchange_method(config.exchange.method).one_way:
        one_way = [m for m in list_exchange_methods() if get_exchange_method(m).one_way]
        msg = (
            f"exchange.method {config.exchange.method!r} is interactive and runs in process only; "
            f"--processes carries {', '.join(one_way)}"
        )
        raise ConfigError(msg, field="method")


def run_party(rank: int, config: CrossGraphConfig, out_dir: Path, init_method: str, *, progress: bool = False) -> dict:
    """Holder ``rank``'s whole federation in this process; returns its summary row."""
    from torch.distributed import rpc

    check_one_way(config)
    torch.set_num_threads(1)
    ex, names = config.exchange, [h.name for h in config.holders]
    sigma = noise_multiplier_of(config)
    rt = make_runtime(config, rank, out_dir, sigma)
    options = rpc.TensorPipeRpcBackendOptions(init_method=init_method, rpc_timeout=TIMEOUT_S)
    rpc.init_rpc(_worker(rank), rank=rank, world_size=len(names), rpc_backend_options=options)
    try:
        start_party(rt, ex, ex.rounds * (len(names) - 1), resume=False, progress=progress)
        _align(rank, config, rt)
        for step, (rnd, s, t) in enumerate(schedule(names, ex.rounds), 1):
            if names[rank] == s and rt.aligned[t]:
                _send(names.index(t), ("release", step), send_release(step, rt, t, ex))
            elif names[rank] == t and rt.aligned[s]:
                apply_release(step, rnd, rt, _take(("release", step)), ex)
        row = write_party_metrics(rt)
    finally:
        rpc.shutdown()  # waits for every party (a barrier)
    return row


def _spawned(rank: int, config_dict: dict, out_dir: str, init_method: str) -> None:
    run_party(rank, CrossGraphConfig.from_dict(config_dict), Path(out_dir), init_method)


def run_cross_graph_processes(config: CrossGraphConfig, out_dir: Path) -> dict:
    """Spawn one process per holder on this machine (RPC over 127.0.0.1) and collect the summary."""
    import torch.multiprocessing as mp

    from textkg.training import checkpoint as ckpt

    check_one_way(config)
    out_dir = Path(out_dir)
    if out_dir.exists() and any(out_dir.iterdir()):
        raise ConfigError(f"output directory {out_dir} is not empty", field="out")
    sigma = noise_multiplier_of(config)
    write_start_files(out_dir, config, sigma)
    with socket.socket() as sock:  # a free port for the rendezvous
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    mp.start_processes(
        _spawned,
        args=(config.to_dict(), str(out_dir), f"tcp://127.0.0.1:{port}"),
        nprocs=len(config.holders),
        start_method="spawn",
    )
    rows = [_summary_row(out_dir / h.name / METRICS) for h in config.holders]
    summary = {"noise_multiplier": sigma, "exchange": config.exchange.to_dict(), "engine": "torch-rpc", "parties": rows}
    ckpt.atomic_write_json(out_dir / METRICS, summary)
    return summary


def _summary_row(path: Path) -> dict:
    import json

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


def main(argv: list[str] | None = None) -> None:
    """One party on its own machine (module docstring)."""
    ap = argparse.ArgumentParser(description="one party of a cross-graph federation (torch.distributed RPC)")
    ap.add_argument("--holders", required=True)
    ap.add_argument("--rank", type=int, required=True, help="this holder's index in the holders file")
    ap.add_argument("--init-method", required=True, help="tcp://HOST:PORT of rank 0")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    config = load_holders(args.holders)
    if not 0 <= args.rank < len(config.holders):
        raise ConfigError(f"--rank must be in 0..{len(config.holders) - 1}", field="rank")
    print(run_party(args.rank, config, Path(args.out), args.init_method, progress=True))


if __name__ == "__main__":
    main()
