"""What the cross-graph trust boundaries cost: the prime-order PSI and the mutual-TLS transport.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/cross_graph_transport.py --sizes 1000,10000 \\
        --out benchmarks/results/cross_graph_transport.json

Rows:
- ``psi``: one DH-PSI between two sets of n ids each (half shared) in edwards25519's prime-order
  subgroup (``textkg.federated.cross_graph.psi``), against the simplest alternative a user would try:
  both sides hash their ids with a shared salt and compare (what ``attacks.psi_membership_scores``
  shows to leak every id: a membership AUC of 1.0).
- ``twist attack``: the responder's guess between two requests that differ in one id it lacks, by
  counting the request's points on Curve25519's twist (issue 36, item 6; chance is 0.5).
- ``release``: one release of a ``rows x dim`` float64 table, party to party: in process (the
  tensor is handed over) and over gRPC with mutual TLS on loopback (encode, send, schema checks,
  decode), the mean of ``--repeats`` sends after one warm-up.
"""

from __future__ import annotations

import argparse
import hashlib
import secrets
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/: the shared harness
import _harness

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _twist(point: bytes) -> int:
    p = 2**255 - 19
    u = int.from_bytes(point, "little") & ((1 << 255) - 1)
    rhs = (u**3 + 486662 * u * u + u) % p
    return int(rhs != 0 and pow(rhs, (p - 1) // 2, p) == p - 1)


def twist_attack(runs: int) -> float:
    """The share of runs in which the responder names the requester's set (tests/…/test_cross_graph_psi.py)."""
    from textkg.federated.cross_graph.psi import PSIParty, hash_to_point

    session, shared = "attack", [f"HP:{i:07d}" for i in range(30)]
    candidates = [f"OMIM:{i}" for i in range(200)]
    bits = {z: _twist(hash_to_point(z, session=session)) for z in candidates}
    pair = (next(z for z in candidates if bits[z] == 0), next(z for z in candidates if bits[z] == 1))
    predicted = [sum(_twist(hash_to_point(x, session=session)) for x in [*shared, z]) for z in pair]
    right = 0
    for _ in range(runs):
        secret = secrets.randbelow(2)
        count = sum(_twist(p) for p in PSIParty([*shared, pair[secret]], session=session).blind())
        matches = [g for g in (0, 1) if predicted[g] == count]
        right += (matches[0] if len(matches) == 1 else secrets.randbelow(2)) == secret
    return right / runs


def psi_rows(n: int) -> list[dict]:
    from textkg.federated.cross_graph.psi import PSIParty, private_intersection

    a = [f"HP:{i:07d}" for i in range(n)]
    b = [f"HP:{i:07d}" for i in range(n // 2, n + n // 2)]
    t0 = time.perf_counter()
    found = private_intersection(PSIParty(a, session="s"), PSIParty(b, session="s")).intersection
    dh = time.perf_counter() - t0
    t0 = time.perf_counter()
    salt = secrets.token_bytes(16)
    theirs = {hashlib.sha256(salt + x.encode()).digest() for x in b}
    salted = [x for x in a if hashlib.sha256(salt + x.encode()).digest() in theirs]
    plain = time.perf_counter() - t0
    assert len(found) == len(salted) == n // 2
    return [
        {"row": "psi", "method": "DH-PSI, prime-order group", "ids_each": n, "seconds": round(dh, 3)},
        {"row": "psi", "method": "shared-salt hash (leaks every id)", "ids_each": n, "seconds": round(plain, 4)},
    ]


def release_rows(rows: int, dim: int, repeats: int) -> list[dict]:
    import torch

    from textkg.federated.cross_graph.tls import write_federation_certs
    from textkg.federated.cross_graph.transport import Mailbox, Message, Outbox

    table = np.random.default_rng(0).normal(size=(rows, dim))
    steps = list(range(1, repeats + 2))
    with tempfile.TemporaryDirectory() as tmp:
        creds = write_federation_certs(["alpha", "beta"], Path(tmp))
        box = Mailbox("alpha", "127.0.0.1:0", creds["alpha"], [("release", "beta", s) for s in steps])
        out = Outbox("beta", {"alpha": f"127.0.0.1:{box.port}"}, creds["beta"], timeout_s=60)
        times = []
        for step in steps:
            t0 = time.perf_counter()
            out.send(Message("release", "beta", "alpha", step, {"rows": table}, {"privacy": {"epsilon": 1.0}}))
            got = torch.from_numpy(box.take("release", "beta", step, timeout_s=60).arrays["rows"].copy())
            times.append(time.perf_counter() - t0)
        out.close()
        box.stop(0)
    assert torch.equal(got, torch.from_numpy(table))
    t0 = time.perf_counter()
    for _ in range(repeats):
        handed = {"rows": torch.from_numpy(table)}["rows"]
    in_process = (time.perf_counter() - t0) / repeats
    assert handed.shape == (rows, dim)
    mean = sum(times[1:]) / repeats
    return [
        {"row": "release", "method": "in process", "rows": rows, "dim": dim, "seconds": in_process},
        {
            "row": "release",
            "method": "gRPC + mutual TLS, loopback",
            "rows": rows,
            "dim": dim,
            "seconds": round(mean, 4),
        },
    ]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    _harness.add_common_flags(ap, out="benchmarks/results/cross_graph_transport.json")
    ap.add_argument("--sizes", default="1000,10000", help="ids per side of the PSI, comma-separated")
    ap.add_argument("--attack-runs", type=int, default=40)
    ap.add_argument("--release", default="5709,32", help="ROWS,DIM of the release (FB15k-237 domains: 5,709 x 32)")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    rows: list[dict] = []
    for n in (int(x) for x in args.sizes.split(",")):
        rows += psi_rows(n)
        print(rows[-2], rows[-1], flush=True)
    rows.append({"row": "twist attack", "method": "DH-PSI, prime-order group", "right": twist_attack(args.attack_runs)})
    print(rows[-1], flush=True)
    r, d = (int(x) for x in args.release.split(","))
    rows += release_rows(r, d, args.repeats)
    print(rows[-2], rows[-1], flush=True)
    _harness.write_results(args.out, _harness.result("cross_graph_transport", rows=rows))


if __name__ == "__main__":
    main()
