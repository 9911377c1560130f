"""Two frozen text encoders compared on placement of new HPO terms, without training, at a CPU cost that fits.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/encoder_placement.py --key minilm [--model-folder DIR]
        [--max-tokens 32] [--queries 400] [--distractors 3000] [--seed 0] [--threads 1] [--full]
        [--out benchmarks/results/text_encoder_mpnet.json]

The README split (``--dataset hpo --split inductive``, its default split seed) and its test placement
queries (:func:`textkg.evaluation.placement.methods.placement_queries`). Encoding all 36,853 ``hpo``
descriptions with a 12-layer, 768-d encoder (``all-mpnet-base-v2``) costs about 2,000 CPU-seconds
(55 ms a description at 32 word pieces, one thread), so each encoder is compared on a **reduced
protocol** the two share exactly:

* ``--queries`` new test terms, drawn with ``--seed``, with all their placement statements;
* a candidate pool: their true parents, every training child of those parents (the siblings a
  neighbour vote reads) and ``--distractors`` other training terms of the same type, drawn with
  ``--seed``. Each term's true parent is ranked among the pool (filtered, as in the full protocol).

Methods (no training, the two a user would try first): ``description-nn`` (cosine of the pooled
descriptions), ``parent-of-nearest`` (the parents of the most similar pool terms), and ``tfidf-nn``
(TF-IDF cosine of the texts, fitted on the training terms: no encoder at all, the same for every
``--key``). Reported per encoder: load seconds, encode CPU-seconds and wall seconds for the texts the
protocol needs (``texts``), CPU ms per description, and the process's peak RSS. Run each encoder in
its own process (its own ``--key``) so that the peak RSS is its own. ``--full`` adds both description
methods on the full protocol (all test queries, every training term) through the on-disk feature cache;
use it only where that cache is already filled (MiniLM after any README run).

The encoder is ``bert`` with mean pooling over 32 word pieces (``--max-tokens``), as in the
``fused-transe`` preset the README trains; ``--model-folder`` replaces its weights (what
``textkg train --encoder-model`` does).
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

import torch

from textkg.encoders import cached_encode, get_encoder
from textkg.evaluation.placement.methods import (
    PlacementQueries,
    cosine_scorer,
    parent_of_nearest_scorer,
    placement_queries,
    rank_placement,
)
from textkg.evaluation.placement.text import tfidf_scorer
from textkg.pipeline.prepared import load_graph_and_split
from textkg.training.config import RunConfig
from textkg.training.features import default_cache_dir, entity_texts

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))  # the shared harness
import _harness  # noqa: E402

DEFAULT_OUT = ROOT / "benchmarks" / "results" / "text_encoder_mpnet.json"


def reduced_queries(
    queries: PlacementQueries, edges: torch.Tensor, *, num_terms: int, distractors: int, seed: int
) -> PlacementQueries:
    """The queries of ``num_terms`` drawn new terms, ranked among a pool (see the module docstring).

    Args:
        queries: The full protocol's queries.
        edges: ``(m, 2)`` long ``(child, parent)`` training statements of the parent relation.
        num_terms: New terms drawn (all when fewer).
        distractors: Other training terms drawn into the pool, per candidate group.
        seed: Seed of both draws.
    """
    gen = torch.Generator().manual_seed(seed)
    uniq = torch.unique(queries.terms)
    terms = uniq[torch.randperm(len(uniq), generator=gen)[:num_terms]].sort().values
    keep = torch.isin(queries.terms, terms)
    parents = torch.unique(queries.parents[keep])
    siblings = edges[torch.isin(edges[:, 1], parents), 0]
    groups = []
    for cands in queries.groups:
        core = cands[torch.isin(cands, torch.cat([parents, siblings]))]
        rest = cands[~torch.isin(cands, core)]
        drawn = rest[torch.randperm(len(rest), generator=gen)[:distractors]]
        groups.append(torch.cat([core, drawn]).sort().values)
    kept = set(terms.tolist())
    return PlacementQueries(
        terms=queries.terms[keep],
        parents=queries.parents[keep],
        relation=queries.relation,
        groups=tuple(groups),
        group_of=queries.group_of[keep],
        true_parents={t: p for t, p in queries.true_parents.items() if t in kept},
        close={t: c for t, c in queries.close.items() if t in kept},
    )


def rank_all(features: torch.Tensor, edges: torch.Tensor, queries: PlacementQueries, n: int) -> dict:
    """MRR, Hits@k and close@1 of ``description-nn`` and ``parent-of-nearest`` on ``features``."""
    return {
        "description-nn": rank_placement(cosine_scorer(features), queries, num_entities=n).to_dict(),
        "parent-of-nearest": rank_placement(
            parent_of_nearest_scorer(features, edges), queries, num_entities=n
        ).to_dict(),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--key", required=True, help="name of this encoder's entry in --out (e.g. minilm, mpnet)")
    ap.add_argument("--model-folder", default=None, help="local transformer folder; default: the packaged MiniLM")
    ap.add_argument("--max-tokens", type=int, default=32, help="word pieces kept per description (the preset's 32)")
    ap.add_argument("--queries", type=int, default=400)
    ap.add_argument("--distractors", type=int, default=3000)
    ap.add_argument("--full", action="store_true", help="also the full protocol, through the feature cache")
    _harness.add_common_flags(ap, out=DEFAULT_OUT, seed=0, threads=1)
    args = ap.parse_args(argv)
    _harness.set_threads(args.threads)
    torch.set_grad_enabled(False)

    cfg = RunConfig.from_dict({"data": {"dataset": "hpo", "split": "inductive"}})
    kg, split = load_graph_and_split(cfg)
    full = placement_queries(kg, split, which="test")
    if full is None:
        sys.exit("no placement queries on the test side")
    n = kg.num_entities
    edges = split.train[split.train[:, 1] == full.relation][:, [0, 2]]
    queries = reduced_queries(full, edges, num_terms=args.queries, distractors=args.distractors, seed=args.seed)
    needed = torch.unique(torch.cat([queries.terms, *queries.groups]))
    texts = entity_texts(kg)
    pool_edges = edges[torch.isin(edges, needed).all(dim=1)]

    t = time.time()
    encoder = get_encoder("bert", model_name_or_path=args.model_folder, pooling="mean", max_tokens=args.max_tokens)
    load_seconds = time.time() - t
    cpu, t = time.process_time(), time.time()
    rows = encoder.encode([texts[i] for i in needed.tolist()])
    encode_cpu, encode_wall = time.process_time() - cpu, time.time() - t
    features = torch.zeros(n, rows.shape[1])
    features[needed] = rows.float()
    entry = {
        "encoder": encoder.identity.replace(str(args.model_folder), "MODEL_FOLDER")
        if args.model_folder
        else encoder.identity,
        "dim": int(rows.shape[1]),
        "texts": len(needed),
        "load_seconds": round(load_seconds, 1),
        "encode_cpu_seconds": round(encode_cpu, 1),
        "encode_wall_seconds": round(encode_wall, 1),
        "cpu_ms_per_description": round(1000 * encode_cpu / len(needed), 2),
        "reduced": rank_all(features, pool_edges, queries, n),
    }
    entry["reduced"]["tfidf-nn"] = rank_placement(
        tfidf_scorer(texts, split.train_entities), queries, num_entities=n
    ).to_dict()
    if args.full:
        full_features = cached_encode(encoder, texts, cache_dir=default_cache_dir()).float()
        entry["full"] = rank_all(full_features, edges, full, n)
    entry["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    for proto in ("reduced", "full"):
        for name, m in entry.get(proto, {}).items():
            print(
                f"{args.key:8s} {proto:8s} {name:20s} MRR {m['mrr']:.3f}  hits@10 {m['hits@10']:.3f}", file=sys.stderr
            )
    print(f"{args.key}: {entry['texts']} texts, encode {entry['encode_cpu_seconds']} CPU-s", file=sys.stderr)

    store = json.loads(args.out.read_text()) if args.out.is_file() else {}
    protocol = {
        "split": "hpo inductive (README)",
        "queries": queries.num_queries,
        "new_terms": len(queries.true_parents),
        "candidates": [len(g) for g in queries.groups],
        "full_queries": full.num_queries,
        "full_candidates": [len(g) for g in full.groups],
        "seed": args.seed,
    }
    if store.get("protocol", protocol) != protocol:
        sys.exit(f"{args.out} holds another protocol: {store['protocol']}")
    store["protocol"] = protocol
    command = "OMP_NUM_THREADS=1 " + _harness.command_line(argv, "encoder_placement.py")
    if args.model_folder:  # no machine paths in a results file
        command = command.replace(args.model_folder, "MODEL_FOLDER")
    store[args.key] = _harness.result("encoder_placement", command=command, **entry)
    _harness.write_results(args.out, store)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
