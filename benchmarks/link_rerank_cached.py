"""The link re-ranker's feature sets on cached first-stage lists: score the run once, re-rank many times.

Usage::

    # 1. the first stage's top-100 lists of the validation subset and the test split (the slow part, once)
    OMP_NUM_THREADS=1 python benchmarks/link_rerank_cached.py cache RUN_DIR LISTS.pt \\
        --first-stage-from benchmarks/results/link_rerank.json
    # 2. features, the cross-fitted choice of feature set and weight, the test split with and without
    OMP_NUM_THREADS=1 python benchmarks/link_rerank_cached.py rerank LISTS.pt --top-k 50 --label NAME \\
        [--out benchmarks/results/link_rerank.json]

``cache`` runs the first stage the run chose (the model + the description neighbour vote at the weights
an earlier ``benchmarks/link_rerank.py`` row of the same run recorded, ``--first-stage-from``) over the
seeded validation subset the post-run report fits on (:data:`textkg.pipeline.link_rerank.MAX_FIT_TRIPLES`)
and over the test split, with the same filter and candidates as ``test.link_rerank``, and saves each query's
top 100 candidate ids, scores, votes, target position and filtered rank (a local file for this script only:
it holds tensors, lists, dicts and numbers only and is read back with ``weights_only=True``). ``rerank`` then builds
:class:`textkg.evaluation.link_rerank.LinkFeatures` from the run's statements, texts and vote, and calls the
same :func:`~textkg.evaluation.link_rerank.choose_rerank_sets` as the report, on the first ``--top-k``
columns: the row is what ``test.link_rerank`` reports, without reloading the model for every try.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/: the shared harness
import _harness

#: Candidates cached per query (``rerank --top-k`` reads a prefix).
CACHED = 100


def cache(run: Path, out: Path, first_stage_from: Path) -> None:
    import torch

    from textkg.data import candidate_entities
    from textkg.evaluation.link_rerank import first_stage
    from textkg.evaluation.ranking import filtered_targets, realistic_ranks
    from textkg.pipeline.link_rerank import MAX_FIT_TRIPLES, public_statements
    from textkg.pipeline.prepared import prepare, seeded_subset
    from textkg.pipeline.report import neighbour_vote_of
    from textkg.pipeline.run_dir import open_run
    from textkg.training import checkpoint as ckpt

    rows = [r for r in json.loads(first_stage_from.read_text())["rows"] if r.get("run") == run.name]
    choice = rows[0]["first_stage_choice"]
    weights = (float(choice["weight"]), float(choice["spread_weight"]))
    cfg = open_run(run).config
    prep = prepare(cfg, run)
    prep.model.load_state_dict(ckpt.load_weights(run))
    prep.model.eval()
    vote = neighbour_vote_of(prep)
    res: dict = {
        "run": run.name,
        "first_stage_choice": choice,
        "features": vote.features,
        "train": public_statements(prep),
        "seen": prep.split.train_entities,
        "texts": list(prep.kg.entity_descriptions),
        "relation_texts": list(prep.kg.relation_texts),
    }
    valid = seeded_subset(prep.split.valid, MAX_FIT_TRIPLES, cfg.train.seed)
    for which, triples in (("valid", valid), ("test", prep.split.test)):
        candidates = candidate_entities(prep.kg, prep.split, which, cfg.train.candidates)
        column = torch.full((vote.num_entities,), -1, dtype=torch.long)
        column[candidates] = torch.arange(len(candidates))
        k = min(CACHED, len(candidates))
        parts = []
        clock = time.process_time()
        with torch.no_grad():
            for direction in ("head", "tail"):
                for start in range(0, len(triples), 256):
                    h, r, t = triples[start : start + 256].unbind(1)
                    rows_, cols, query, targets = filtered_targets(
                        torch.stack([h, r, t], 1), direction, prep.filter_index, column,
                        exclude_query=cfg.train.exclude_query,
                    )  # fmt: skip
                    first, v = first_stage(prep.model, vote, weights, query, r, candidates, direction)
                    base = realistic_ranks(first, targets, rows_, cols)
                    top = first.index_put((rows_, cols), torch.tensor(float("-inf"))).topk(k, dim=1)
                    hit = top.indices == targets[:, None]
                    target = torch.where(hit.any(1), hit.float().argmax(1), torch.full_like(targets, -1))
                    parts.append(
                        {
                            "cand": candidates[top.indices],
                            "first": top.values,
                            "vote": v.gather(1, top.indices),
                            "mask": top.values > float("-inf"),
                            "target": target,
                            "base": base,
                            "query": query,
                            "rel": r,
                            "dir": torch.full((len(r),), 0 if direction == "head" else 1),
                        }
                    )
        res[which] = {f: torch.cat([p[f] for p in parts]) for f in parts[0]}
        res[which + "_cpu_seconds"] = time.process_time() - clock
        print(which, len(res[which]["base"]), "queries,", round(res[which + "_cpu_seconds"], 1), "CPU s", flush=True)
    torch.save(res, out)


def _lists(feats, d: dict, k: int):
    """:class:`~textkg.evaluation.link_rerank.Lists` of the cached queries ``d`` (batches within one direction)."""
    import torch

    from textkg.evaluation.link_rerank import Lists

    n, heads = len(d["base"]), int((d["dir"] == 0).sum())
    starts = [*range(0, heads, 256), *range(heads, n, 256)]
    out = []
    for s, e in zip(starts, [*starts[1:], n], strict=True):
        e = min(e, heads) if s < heads else e
        sl = slice(s, e)
        direction = "head" if int(d["dir"][s]) == 0 else "tail"
        q, cand = d["query"][sl], d["cand"][sl, :k]
        x = feats(feats.entity_query_rows(q), d["rel"][sl], direction, cand, d["first"][sl, :k], d["vote"][sl, :k])
        target = d["target"][sl]
        out.append(Lists(x, d["mask"][sl, :k], torch.where(target < k, target, -1), d["base"][sl], q))
    fields = ("x", "mask", "target", "base", "query")
    return Lists(**{f: torch.cat([getattr(p, f) for p in out]) for f in fields})


def rerank(path: Path, *, top_k: int, feature_sets: tuple[str, ...]) -> dict:
    import torch

    from textkg.evaluation import link_rerank as lr
    from textkg.evaluation.neighbour_vote import NeighbourVote
    from textkg.pipeline.link_rerank import _block

    c = torch.load(path, weights_only=True)  # tensors, lists, dicts and numbers only: nothing is unpickled
    vote = NeighbourVote(c["features"], c["train"], c["seen"], num_relations=len(c["relation_texts"]))
    clock = time.process_time()
    feats = lr.LinkFeatures(c["train"], seen=c["seen"], texts=c["texts"], relation_texts=c["relation_texts"], vote=vote)
    build = time.process_time() - clock
    clock = time.process_time()
    valid = _lists(feats, c["valid"], top_k)
    valid_features = time.process_time() - clock
    clock = time.process_time()
    test = _lists(feats, c["test"], top_k)
    test_features = time.process_time() - clock
    config = lr.LinkRerankConfig(top_k=top_k, feature_sets=feature_sets)
    clock = time.process_time()
    reranker, by_set = lr.choose_rerank_sets(valid, config)
    choose = time.process_time() - clock
    each = {}
    for form, name in config.candidates():
        key = lr.candidate_key(form, name)
        mrr = by_set[key]
        weight = max(mrr, key=lambda w: (mrr[w], -w))
        scores = (reranker if reranker.key == key else lr.fit_candidate(valid, config, form, name)).score(test.x)
        each[key] = {"weight": weight, "valid_mrr": mrr[weight], "test": _block(test.ranks_by(scores, weight))}
    per_1000 = 1000.0 / len(test.base)
    return {
        "run": c["run"],
        "first_stage_choice": c["first_stage_choice"],
        "top_k": top_k,
        "first_stage_recall": {"valid": valid.recall(), "test": test.recall()},
        "link_rerank": {
            **reranker.to_dict(),
            "used": reranker.weight > 0,
            "valid_mrr_by_feature_set": {n: {f"{w:g}": v for w, v in m.items()} for n, m in by_set.items()},
            "without": _block(test.base),
            "with": _block(test.ranks_by(reranker.score(test.x), reranker.weight)),
            "by_feature_set": each,
        },
        "cpu_seconds": {
            "first_stage_cache_valid": c["valid_cpu_seconds"],
            "first_stage_test_per_1000_queries": c["test_cpu_seconds"] * per_1000,
            "features_build": build,
            "fit_features_valid": valid_features,
            "choose_and_fit": choose,
            "test_features_per_1000_queries": test_features * per_1000,
        },
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="step", required=True)
    c = sub.add_parser("cache")
    c.add_argument("run", type=Path)
    c.add_argument("lists", type=Path)
    c.add_argument("--first-stage-from", type=Path, default=Path("benchmarks/results/link_rerank.json"))
    c.add_argument("--threads", type=int, default=1)
    r = sub.add_parser("rerank")
    r.add_argument("lists", type=Path)
    r.add_argument("--top-k", type=int, default=50, choices=range(1, CACHED + 1), metavar=f"1..{CACHED}")
    r.add_argument("--feature-sets", default=None, help="comma-separated FEATURE_SETS names (default: all)")
    r.add_argument("--label", required=True, help="the row's name in --out")
    _harness.add_common_flags(r, out="benchmarks/results/link_rerank.json", threads=1)
    args = p.parse_args()
    _harness.set_threads(args.threads)
    if args.step == "cache":
        cache(args.run, args.lists, args.first_stage_from)
        return
    from textkg.evaluation.link_rerank import FEATURE_SETS

    sets = tuple(args.feature_sets.split(",")) if args.feature_sets else tuple(FEATURE_SETS)
    row = {"label": args.label, **rerank(args.lists, top_k=args.top_k, feature_sets=sets)}
    previous = json.loads(args.out.read_text()) if args.out.is_file() else {}
    rows = {x.get("label", x["run"]): x for x in previous.get("rows", [])}
    rows[args.label] = {**row, "command": _harness.command_line(script="link_rerank_cached.py")}
    record = {k: v for k, v in previous.items() if k not in (*_harness.SCHEMA_KEYS, "rows")}
    _harness.write_results(args.out, _harness.result("link_rerank", **record, rows=list(rows.values())))
    lr_ = row["link_rerank"]
    print(
        f"{args.label}: first stage {lr_['without']['mrr']:.4f}; "
        f"re-ranked ({lr_['form']} on {lr_['feature_set']}, weight "
        f"{lr_['weight']:g}) {lr_['with']['mrr']:.4f}; "
        + "; ".join(f"{n} {e['test']['mrr']:.4f}" for n, e in lr_["by_feature_set"].items())
    )


if __name__ == "__main__":
    main()
