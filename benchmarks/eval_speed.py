"""Seconds to rank a full inductive FB15k-237-sized test set, filtered, both directions.

Usage::

    python benchmarks/eval_speed.py [--out benchmarks/results/eval_speed.json] [--threads 2]
        [--num-triples 51718] [--num-entities 14541] [--num-relations 237] [--dim 128]
        [--num-filter 310000] [--batch-size 512] [--scorers distmult,transe-l1]
        [--data DIR [--inductive-dir DIR]]

By default the data are synthetic, shaped like the inductive FB15k-237 test
of BLP (Daza et al. 2021): 51,718 test triples ranked in both directions
against all 14,541 entities, with about 310k random filter triples (the test
triples among them), 237 relations and random 128-d embeddings. ``--data``
loads a BLP-format directory instead (its ``ind-test`` or ``test`` triples,
filtered by every triple it holds); embeddings stay random.

Each scorer runs :func:`textkg.evaluation.evaluate` once on the whole set
after one warm-up batch; ``score_seconds`` is the time spent inside the
scorer, the rest is ranking (comparisons, filtering).

Scorers:
  * ``distmult``: ``<h, r, t>`` as one ``(b, d) @ (d, c)`` matrix product.
  * ``transe-l1``: ``-||h + r - t||_1`` by ``torch.cdist(p=1)`` over blocks
    of candidates (head side: ``-||(t - r) - h'||_1``).
  * ``transe-l1-compiled``: the same scores from a ``torch.compile``-fused
    subtract/abs/sum kernel (needs a C++ compiler; compile time is in
    ``warmup_seconds``).

``seconds`` excludes the one-batch warm-up; ``seconds_with_warmup`` includes it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/: the shared harness
import _harness

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from textkg.evaluation import FilterIndex, evaluate  # noqa: E402

#: Sizes of the inductive FB15k-237 test setting (BLP protocol, test against all entities).
FB15K237_IND = {"num_triples": 51_718, "num_entities": 14_541, "num_relations": 237, "num_filter": 310_000}


class _Timed:
    """Scorer base: caches the candidates' embedding rows and times scoring."""

    def __init__(self, entities: torch.Tensor, relations: torch.Tensor) -> None:
        self.entities, self.relations = entities, relations
        self.score_seconds = 0.0
        self._cands: tuple[torch.Tensor, torch.Tensor] | None = None

    def _candidate_rows(self, candidates: torch.Tensor) -> torch.Tensor:
        if self._cands is None or self._cands[0] is not candidates:
            self._cands = (candidates, self.entities[candidates].contiguous())
        return self._cands[1]

    def score_tails(self, heads, relations, candidates):
        start = time.perf_counter()
        out = self._tails(self.entities[heads], self.relations[relations], self._candidate_rows(candidates))
        self.score_seconds += time.perf_counter() - start
        return out

    def score_heads(self, relations, tails, candidates):
        start = time.perf_counter()
        out = self._heads(self.relations[relations], self.entities[tails], self._candidate_rows(candidates))
        self.score_seconds += time.perf_counter() - start
        return out


class DistMult(_Timed):
    """``score(h, r, t) = sum(h * r * t)``: one matrix product per batch."""

    def _tails(self, h, r, cands):
        return (h * r) @ cands.T

    def _heads(self, r, t, cands):
        return (r * t) @ cands.T


class TransEL1(_Timed):
    """``score(h, r, t) = -||h + r - t||_1`` with ``torch.cdist(p=1)`` over candidate blocks.

    Blocks of ``block`` candidates keep the candidate rows cache-resident
    while every query of the batch is compared against them.
    """

    block = 2048

    def _l1(self, queries, cands):
        out = torch.empty(len(queries), len(cands))
        for j in range(0, len(cands), self.block):
            out[:, j : j + self.block] = torch.cdist(queries, cands[j : j + self.block], p=1)
        return out.neg_()

    def _tails(self, h, r, cands):
        return self._l1(h + r, cands)

    def _heads(self, r, t, cands):
        return self._l1(t - r, cands)


def _l1_broadcast(queries: torch.Tensor, cands: torch.Tensor) -> torch.Tensor:
    """``(b, c)`` L1 distances by broadcasting ``(b, 1, d) - (1, c, d)``; only sane compiled."""
    return (queries[:, None, :] - cands[None, :, :]).abs().sum(-1)


class TransEL1Compiled(TransEL1):
    """Same scores as :class:`TransEL1`, by a ``torch.compile``-fused kernel.

    Inductor fuses subtract, abs and sum into one vectorised loop, so the
    ``(b, c, d)`` difference never exists in memory. Shapes are kept static
    (the last, short batch is padded to ``batch_size``) so it compiles once;
    the compile time is reported separately and included in ``seconds`` of
    the first call (the warm-up).
    """

    batch_size = 512

    def __init__(self, entities, relations):
        super().__init__(entities, relations)
        self._kernel = torch.compile(_l1_broadcast, dynamic=False)

    def _l1(self, queries, cands):
        b = len(queries)
        if b < self.batch_size:
            queries = torch.cat([queries, queries.new_zeros(self.batch_size - b, queries.shape[1])])
        return self._kernel(queries, cands)[:b].neg_()


SCORERS = {"distmult": DistMult, "transe-l1": TransEL1, "transe-l1-compiled": TransEL1Compiled}


def _random_triples(n: int, num_entities: int, num_relations: int, g: torch.Generator) -> torch.Tensor:
    return torch.stack(
        [
            torch.randint(0, num_entities, (n,), generator=g),
            torch.randint(0, num_relations, (n,), generator=g),
            torch.randint(0, num_entities, (n,), generator=g),
        ],
        1,
    )


def synthetic(args, g: torch.Generator) -> dict:
    test = _random_triples(args.num_triples, args.num_entities, args.num_relations, g)
    extra = _random_triples(max(args.num_filter - len(test), 0), args.num_entities, args.num_relations, g)
    return {
        "source": "synthetic",
        "test": test,
        "filter": torch.cat([test, extra]),
        "num_entities": args.num_entities,
        "num_relations": args.num_relations,
    }


def from_directory(args) -> dict:
    from textkg.data import load_dataset

    kwargs = {"inductive_dir": args.inductive_dir} if args.inductive_dir else {}
    kg = load_dataset(args.data, **kwargs)
    name = "ind-test" if "ind-test" in kg.triples else "test"
    test = kg.triples[name]
    if args.num_triples < len(test):
        test = test[: args.num_triples]
    return {
        "source": f"{args.data} ({name})",
        "test": test,
        "filter": kg.all_triples(),
        "num_entities": kg.num_entities,
        "num_relations": kg.num_relations,
    }


def run_scorer(name: str, data: dict, args, g: torch.Generator) -> dict:
    dim = args.dim
    entities = torch.randn(data["num_entities"], dim, generator=g) / dim**0.5
    relations = torch.randn(data["num_relations"], dim, generator=g) / dim**0.5
    scorer = SCORERS[name](entities, relations)
    scorer.batch_size = args.batch_size
    kwargs = dict(filter_index=data["index"], num_entities=data["num_entities"], batch_size=args.batch_size)
    start = time.perf_counter()
    evaluate(scorer, data["test"][: args.batch_size], **kwargs)  # warm-up: allocator, thread pool, compile
    warmup_seconds = time.perf_counter() - start
    scorer.score_seconds = 0.0
    start = time.perf_counter()
    metrics = evaluate(scorer, data["test"], progress=args.progress, **kwargs)
    seconds = time.perf_counter() - start
    n = len(data["test"])
    return {
        "scorer": name,
        "seconds": round(seconds, 2),
        "score_seconds": round(scorer.score_seconds, 2),
        "rank_seconds": round(seconds - scorer.score_seconds, 2),
        "triples_per_s": round(n / seconds, 1),
        "queries_per_s": round(2 * n / seconds, 1),
        "scores_per_s": round(2 * n * data["num_entities"] / seconds),
        "warmup_seconds": round(warmup_seconds, 2),
        "seconds_with_warmup": round(seconds + warmup_seconds, 2),
        "mrr_random_embeddings": round(metrics.both["mrr"], 5),
        "within_60s": seconds <= 60.0,
    }


def machine_info() -> dict:
    """The shared machine record (:func:`_harness.machine`; the keys this script wrote before included)."""
    return _harness.machine()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    _harness.add_common_flags(parser, out=ROOT / "benchmarks" / "results" / "eval_speed.json", seed=0, threads=2)
    parser.add_argument("--data", default=None, help="BLP-format directory (default: synthetic data)")
    parser.add_argument("--inductive-dir", default=None, help="inductive split directory for --data")
    parser.add_argument("--num-triples", type=int, default=FB15K237_IND["num_triples"])
    parser.add_argument("--num-entities", type=int, default=FB15K237_IND["num_entities"])
    parser.add_argument("--num-relations", type=int, default=FB15K237_IND["num_relations"])
    parser.add_argument("--num-filter", type=int, default=FB15K237_IND["num_filter"])
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--scorers", default=",".join(SCORERS), help=f"comma-separated, from {sorted(SCORERS)}")
    parser.add_argument("--progress", action="store_true")
    args = parser.parse_args(argv)
    names = [s for s in args.scorers.split(",") if s]
    unknown = [s for s in names if s not in SCORERS]
    if unknown:
        parser.error(f"unknown scorer(s) {unknown}; choose from {sorted(SCORERS)}")

    torch.set_num_threads(args.threads)
    g = torch.Generator().manual_seed(args.seed)
    data = from_directory(args) if args.data else synthetic(args, g)
    start = time.perf_counter()
    data["index"] = FilterIndex.from_triples(data["filter"], data["num_entities"], data["num_relations"])
    index_seconds = time.perf_counter() - start

    results = []
    for name in names:
        try:
            results.append(run_scorer(name, data, args, g))
        except Exception as exc:  # e.g. torch.compile without a C++ compiler: report, go on
            results.append({"scorer": name, "error": f"{type(exc).__name__}: {exc}"[:2000]})
        print(json.dumps(results[-1]), flush=True)
    summary = {
        "benchmark": "eval_speed",
        "command": _harness.command_line(argv, "eval_speed.py"),
        "machine": machine_info(),
        "date": _harness.utc_now(),
        "data": {
            "source": data["source"],
            "num_triples": len(data["test"]),
            "directions": ["head", "tail"],
            "num_candidates": data["num_entities"],
            "num_relations": data["num_relations"],
            "num_filter_triples": data["index"].num_triples,
            "dim": args.dim,
            "batch_size": args.batch_size,
        },
        "filter_index_seconds": round(index_seconds, 3),
        "total_seconds": round(sum(r.get("seconds", 0.0) for r in results), 2),
        "results": results,
    }
    _harness.write_results(args.out, summary, indent=2)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
