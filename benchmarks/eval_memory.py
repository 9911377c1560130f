"""Peak memory of filtered evaluation on a synthetic large graph, with and without candidate chunks.

Usage::

    python benchmarks/eval_memory.py [--out benchmarks/results/eval_memory.json]
        [--num-entities 200000] [--num-relations 100] [--dim 64] [--num-triples 1000]
        [--num-filter 400000] [--batch-size 512] [--chunks all,default,16384]

Each setting runs in a fresh one-thread process that builds the same synthetic
graph (random DistMult embeddings, random test and filter triples, seed 0),
ranks the test triples in both directions against every entity with
:func:`textkg.evaluation.compute_ranks`, and reports its peak resident set
size (``VmHWM`` of ``/proc/self/status``) before and after ranking, the
seconds spent ranking and a digest of the ranks. ``all`` is one call over
every candidate (the behaviour before candidate chunks), ``default`` the
chunk derived from the 256 MiB bound (:func:`textkg.evaluation.ranking.default_candidate_chunk`),
a number that chunk size. The ranks must be identical in every setting.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))  # the shared harness
import _harness  # noqa: E402


def _vm(key: str) -> int:
    """``VmHWM`` / ``VmRSS`` of this process in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"{key} not in /proc/self/status")


class DistMult:
    def __init__(self, entities, relations) -> None:
        self.entities, self.relations = entities, relations

    def score_tails(self, heads, relations, candidates):
        return (self.entities[heads] * self.relations[relations]) @ self.entities[candidates].T

    def score_heads(self, relations, tails, candidates):
        return (self.relations[relations] * self.entities[tails]) @ self.entities[candidates].T


def worker(args) -> dict:
    import torch

    torch.set_num_threads(1)
    from textkg.evaluation import FilterIndex, compute_ranks
    from textkg.evaluation.ranking import default_candidate_chunk

    g = torch.Generator().manual_seed(0)
    n, r = args.num_entities, args.num_relations
    entities = torch.randn(n, args.dim, generator=g)
    relations = torch.randn(r, args.dim, generator=g)

    def triples(k: int) -> torch.Tensor:
        return torch.stack(
            [
                torch.randint(0, n, (k,), generator=g),
                torch.randint(0, r, (k,), generator=g),
                torch.randint(0, n, (k,), generator=g),
            ],
            1,
        )

    test = triples(args.num_triples)
    index = FilterIndex.from_triples(torch.cat([triples(args.num_filter), test]), n, r)
    chunk = {"all": n, "default": None}.get(args.chunk)
    chunk = int(args.chunk) if chunk is None and args.chunk != "default" else chunk
    before_peak, before_rss = _vm("VmHWM"), _vm("VmRSS")
    start = time.perf_counter()
    result = compute_ranks(
        DistMult(entities, relations),
        test,
        filter_index=index,
        num_entities=n,
        batch_size=args.batch_size,
        candidate_chunk=chunk,
    )
    seconds = time.perf_counter() - start
    ranks = result.all_ranks()
    return {
        "chunk": args.chunk,
        "candidate_chunk": chunk if chunk is not None else default_candidate_chunk(args.batch_size),
        "peak_rss_before_ranking_mib": round(before_peak / 2**20, 1),
        "rss_before_ranking_mib": round(before_rss / 2**20, 1),
        "peak_rss_mib": round(_vm("VmHWM") / 2**20, 1),
        "ranking_peak_above_rss_before_mib": round((_vm("VmHWM") - before_rss) / 2**20, 1),
        "ranking_seconds": round(seconds, 2),
        "mrr": float((1.0 / ranks).mean()),
        "ranks_sha256": hashlib.sha256(ranks.numpy().tobytes()).hexdigest(),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "eval_memory.json"))
    p.add_argument("--num-entities", type=int, default=200_000)
    p.add_argument("--num-relations", type=int, default=100)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--num-triples", type=int, default=1_000)
    p.add_argument("--num-filter", type=int, default=400_000)
    p.add_argument("--batch-size", type=int, default=512)
    p.add_argument("--chunks", default="all,default,16384")
    p.add_argument("--chunk", help=argparse.SUPPRESS)  # worker mode: one setting
    args = p.parse_args()
    if args.chunk is not None:
        print(json.dumps(worker(args)))
        return
    common = [
        f"--num-entities={args.num_entities}",
        f"--num-relations={args.num_relations}",
        f"--dim={args.dim}",
        f"--num-triples={args.num_triples}",
        f"--num-filter={args.num_filter}",
        f"--batch-size={args.batch_size}",
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    runs = []
    for chunk in args.chunks.split(","):
        proc = subprocess.run(
            [sys.executable, __file__, *common, f"--chunk={chunk}"], capture_output=True, text=True, env=env
        )
        if proc.returncode:
            sys.exit(proc.stderr)
        runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        print(json.dumps(runs[-1]), file=sys.stderr)
    out = _harness.result(
        "eval_memory",
        setting={
            "num_entities": args.num_entities,
            "num_relations": args.num_relations,
            "dim": args.dim,
            "num_test_triples": args.num_triples,
            "directions": 2,
            "num_filter_triples": args.num_filter,
            "batch_size": args.batch_size,
            "scorer": "DistMult, random embeddings, float32",
            "threads": 1,
        },
        identical_ranks=len({r["ranks_sha256"] for r in runs}) == 1,
        runs=runs,
    )
    _harness.write_results(args.out, out, indent=2)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
