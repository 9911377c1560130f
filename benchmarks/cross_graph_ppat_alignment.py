"""How well does PPAT's translation align two parties' spaces, without any noise, against Procrustes?

Usage::

    OMP_NUM_THREADS=1 python benchmarks/cross_graph_ppat_alignment.py \\
        --holders examples/cross_graph/hpo_small_ppat.yaml --iterations 10,100,300 \\
        --out benchmarks/results/cross_graph_ppat_alignment_hpo_small.json

The first two holders of the file are pre-trained alone (their own seeds, ``train.epochs``). Their
aligned entities (the plain intersection of their trained entities, what the PSI returns) are
translated from the second party's space into the first's:

- ``procrustes``: the scaled orthogonal Procrustes map fitted on the aligned pairs (no noise);
- ``ppat iterations=N``: PPAT's generator W (:mod:`textkg.federated.cross_graph.ppat`) trained for N
  PATE-GAN iterations with the file's other ``exchange.ppat`` settings and noiseless votes (σ = 0);
- ``identity``: no map at all (the spaces are unrelated: the reference).

For each, the mean cosine between an entity's translated row and its own row in the first party's
space (both centred on the first party's mean) and the share of entities whose nearest own row
(by cosine) is their own: per-entity alignment, which the update needs. No privacy is involved.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))  # the shared harness
import _harness  # noqa: E402


def alignment(translated: torch.Tensor, own: torch.Tensor) -> dict:
    """Mean cosine of each translated row to its own row, and the share whose nearest own row is it."""
    mean = own.mean(0)
    a = torch.nn.functional.normalize(translated.double() - mean, dim=1)
    b = torch.nn.functional.normalize(own.double() - mean, dim=1)
    sims = a @ b.T
    hits = (sims.argmax(1) == torch.arange(len(own))).double().mean()
    return {"mean_cosine": float(sims.diagonal().mean()), "nearest_is_own": float(hits)}


def main(argv: list[str] | None = None) -> None:
    import dataclasses

    from textkg.federated.cross_graph.config import load_holders
    from textkg.federated.cross_graph.party import Party
    from textkg.federated.cross_graph.ppat import PPATClient, PPATHost, noisy_argmax, teacher_parts, train_ppat
    from textkg.federated.cross_graph.procrustes import clip_rows, procrustes

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--holders", required=True)
    ap.add_argument("--iterations", default="10,100,300")
    ap.add_argument("--out", default="benchmarks/results/cross_graph_ppat_alignment_hpo_small.json")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    config = load_holders(args.holders)
    host_spec, client_spec = config.holders[0], config.holders[1]
    ex = config.exchange
    rows: list[dict] = []
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="textkg-ppat-align-") as tmp:
        host, client = Party(host_spec, Path(tmp) / "h"), Party(client_spec, Path(tmp) / "c")
        for party in (host, client):
            party.train_epochs(party.cfg.train.epochs)
        names = sorted(set(host.items()) & set(client.items()))
        own, theirs = host.rows(names).double(), client.rows(names).double()
        rows.append({"method": "identity", **alignment(theirs, own)})
        rows.append({"method": "procrustes", **alignment(procrustes(theirs, own)(theirs), own)})
        parts = teacher_parts(names, ex.ppat.teachers, session="alignment")
        for n in [int(x) for x in args.iterations.split(",")]:
            cfg = dataclasses.replace(ex.ppat, iterations=n)
            teachers = PPATHost(clip_rows(own, ex.clip), parts, cfg, seed=0)
            gen = PPATClient(clip_rows(theirs, ex.clip), own.shape[1], cfg, torch.Generator().manual_seed(1))

            def label(queries: torch.Tensor, it: int, teachers: PPATHost = teachers) -> torch.Tensor:
                counts = teachers.votes(queries)
                return noisy_argmax(counts, sigma=0.0, noise=torch.zeros(counts.shape, dtype=torch.float64))

            share = train_ppat(gen, teachers, label)
            rows.append({"method": f"ppat iterations={n}", **alignment(gen.translate(), own), "real_share": share})
            print(rows[-1]["method"], rows[-1]["mean_cosine"], rows[-1]["nearest_is_own"], file=sys.stderr)
    record = _harness.result(
        "cross_graph_ppat_alignment",
        command=_harness.command_line(argv, "cross_graph_ppat_alignment.py"),
        machine_extra={"threads": torch.get_num_threads()},  # the key this file had before the harness
        host=host_spec.name,
        client=client_spec.name,
        aligned=len(names),
        ppat=dataclasses.asdict(ex.ppat),
        rows=rows,
        seconds=time.perf_counter() - t0,
    )
    out = _harness.write_results(args.out, record)
    print(f"wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
