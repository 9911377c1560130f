"""Relation-dependent forms of the link re-ranker, on cached first-stage lists (issue 37; measured, not shipped).

Usage::

    OMP_NUM_THREADS=1 python benchmarks/link_rerank_forms.py LISTS.pt [--top-k 50] --label NAME \\
        [--out benchmarks/results/link_rerank_forms.json]

``LISTS.pt`` is a cache of ``benchmarks/link_rerank_cached.py cache`` (the first stage's top-100 lists of the
validation subset and the test split). The shipped re-ranker (:mod:`textkg.evaluation.link_rerank`) has one
weight per feature for every relation. FB15k-237's 237 relations differ: "gender" has two answers, "film
release region" hundreds, so a feature's worth may depend on the relation. The forms tried here let each
feature's weight vary with the relation, from public training statements only:

* ``all``: the shipped ``all`` feature set, refitted here (the reference: it matches the run's own report);
* ``all x card`` / ``x fanout`` / ``x card,fanout`` / ``x card,fanout,size``: each feature also multiplied by
  standardised statistics of the query's ``(relation, direction)``: ``card`` = log(1 + distinct answers),
  ``fanout`` = log(statements / distinct query entities), ``size`` = log(1 + statements) (a linear model whose
  weights are linear in the relation's statistics: a varying-coefficient model, Hastie & Tibshirani 1993,
  "Varying-coefficient models", JRSS B 55(4));
* ``all + group8``: one weight vector per group of (direction × quartile of ``card``), beside the shared one;
* ``all x card,fanout,size + group8``: both.

Every form is fitted listwise (ListNet) on the validation lists and its weight chosen by the same 2-fold
cross-fitting over validation query entities as the shipped one; the test MRR is at that weight.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/: the shared harness
import _harness

#: (form name, relation statistics multiplied in, with the 8 group weight vectors)
FORMS = (
    ("all", (), False),
    ("all x card", (0,), False),
    ("all x fanout", (1,), False),
    ("all x card,fanout", (0, 1), False),
    ("all x card,fanout,size", (0, 1, 2), False),
    ("all + group8", (), True),
    ("all x card,fanout,size + group8", (0, 1, 2), True),
)


def relation_statistics(train, num_relations: int):
    """``(R, 2, 3)`` standardised ``card``, ``fanout``, ``size`` of each relation in each direction (0: the answer
    is the head, 1: the tail), from the training statements."""
    import torch

    out = torch.zeros(num_relations, 2, 3)
    h, r, t = train.unbind(1)
    for d, (answer, query) in enumerate(((h, t), (t, h))):
        for rel in range(num_relations):
            m = r == rel
            n = int(m.sum())
            if n:
                answers, queries = len(torch.unique(answer[m])), len(torch.unique(query[m]))
                out[rel, d] = torch.tensor([math.log1p(answers), math.log(n / queries), math.log1p(n)])
    flat = out.view(-1, 3)
    return (out - flat.mean(0)) / (flat.std(0) + 1e-9)


def design(lists, stats, rel, direction, which: tuple[int, ...], groups: bool, cuts):
    """The form's ``(n, K, F')`` features: the shipped ones, times each statistic in ``which``, and per group."""
    import torch

    z = stats[rel, direction]
    parts = [lists.x] + [lists.x * z[:, j][:, None, None] for j in which]
    if groups:
        g = direction * 4 + torch.bucketize(z[:, 0].contiguous(), cuts)
        one_hot = torch.nn.functional.one_hot(g, 8).float()
        parts.append((lists.x[:, :, None, :] * one_hot[:, None, :, None]).flatten(2))
    return torch.cat(parts, 2)


def fit(x, lists, steps: int = 100, l2: float = 1e-3):
    import torch

    from textkg.evaluation.listwise import fit_listnet

    idx = torch.nonzero(lists.target >= 0).squeeze(1)
    y = torch.zeros(lists.mask.shape, dtype=torch.bool)
    y[idx, lists.target[idx]] = True
    w, _ = fit_listnet(x[idx], y[idx], steps=steps, l2=l2, mask=lists.mask[idx])
    return torch.tensor(w, dtype=torch.float64)


def ranks(x, lists, w, weight: float):
    """:meth:`textkg.evaluation.link_rerank.Lists.ranks` for a design ``x`` wider than the shipped features."""
    import torch

    if not weight:
        return lists.base.clone()
    s = x[..., 0].double() + weight * (x.double() @ w)
    s = s.masked_fill(~lists.mask, float("-inf"))
    t = s.gather(1, lists.target.clamp_min(0)[:, None])
    greater, equal = (s > t).sum(1), (s == t).sum(1) - 1
    return torch.where(lists.target >= 0, 1.0 + greater.double() + equal.double() / 2, lists.base)


def measure(path: Path, top_k: int) -> dict:
    import link_rerank_cached as cached
    import torch

    from textkg.evaluation import link_rerank as lr
    from textkg.evaluation.neighbour_vote import NeighbourVote
    from textkg.pipeline.link_rerank import _block

    c = torch.load(path, weights_only=True)  # tensors, lists, dicts and numbers only: nothing is unpickled
    num_relations = len(c["relation_texts"])
    vote = NeighbourVote(c["features"], c["train"], c["seen"], num_relations=num_relations)
    feats = lr.LinkFeatures(c["train"], seen=c["seen"], texts=c["texts"], relation_texts=c["relation_texts"], vote=vote)
    clock = time.process_time()
    valid, test = cached._lists(feats, c["valid"], top_k), cached._lists(feats, c["test"], top_k)
    features_cpu = time.process_time() - clock
    stats = relation_statistics(c["train"], num_relations)
    cuts = torch.quantile(stats[..., 0].flatten(), torch.tensor([0.25, 0.5, 0.75]))
    entities = torch.unique(valid.query)
    fold_of = torch.zeros(int(entities.max()) + 1, dtype=torch.long)
    order = torch.randperm(len(entities), generator=torch.Generator().manual_seed(0))
    fold_of[entities[order]] = torch.arange(len(entities)) % 2
    fold = fold_of[valid.query]
    rows = []
    for name, which, groups in FORMS:
        clock = time.process_time()
        xv = design(valid, stats, c["valid"]["rel"], c["valid"]["dir"], which, groups, cuts)
        xt = design(test, stats, c["test"]["rel"], c["test"]["dir"], which, groups, cuts)
        oof = {w: torch.empty(len(fold), dtype=torch.float64) for w in lr.DEFAULT_RERANK_WEIGHTS}
        for f in range(2):
            held = fold == f
            w_f = fit(xv[~held], valid.subset(~held))
            for weight in oof:
                oof[weight][held] = ranks(xv[held], valid.subset(held), w_f, weight)
        by_weight = {w: float(r.reciprocal().mean()) for w, r in oof.items()}
        best = max(by_weight, key=lambda w: (by_weight[w], -w))
        test_ranks = ranks(xt, test, fit(xv, valid), best)
        rows.append(
            {
                "form": name,
                "columns": int(xv.shape[2]),
                "weight": best,
                "valid_out_of_fold_mrr": by_weight[best],
                "test": _block(test_ranks),
                "cpu_seconds": time.process_time() - clock,
            }
        )
        print(f"{name}: weight {best:g}, valid {by_weight[best]:.4f}, test {rows[-1]['test']['mrr']:.4f}", flush=True)
    return {
        "run": c["run"],
        "top_k": top_k,
        "first_stage": _block(test.base),
        "first_stage_recall": {"valid": valid.recall(), "test": test.recall()},
        "features_cpu_seconds": features_cpu,
        "forms": rows,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("lists", type=Path)
    p.add_argument("--top-k", type=int, default=50, choices=range(1, 101), metavar="1..100")
    p.add_argument("--label", required=True, help="the row's name in --out")
    _harness.add_common_flags(p, out="benchmarks/results/link_rerank_forms.json", threads=1)
    args = p.parse_args()
    _harness.set_threads(args.threads)
    import json

    row = {"label": args.label, **measure(args.lists, args.top_k)}
    row.update(command=_harness.command_line(script="link_rerank_forms.py"), machine=_harness.machine())
    previous = json.loads(args.out.read_text()) if args.out.is_file() else {}
    rows = {r["label"]: r for r in previous.get("rows", [])}
    rows[args.label] = row
    _harness.write_results(args.out, _harness.result("link_rerank_forms", rows=list(rows.values())))


if __name__ == "__main__":
    main()
