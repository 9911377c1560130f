"""Forms of the placement re-ranker on one finished run: linear vs nonlinear, which training lists, stacking.

Usage::

    python benchmarks/rerank_forms.py RUN [--out benchmarks/results/rerank_forms.json] [--threads 1]

One feature pass per set of training lists, many forms (issue 37; the run fits one form):

* **lists**: training terms play new terms as :func:`~textkg.evaluation.placement.rerank.fit_reranker` plays
  them (a batch of terms left out of the candidates, the first stage's top ``k`` as hard negatives, the
  positives swapped in), each list kept to its first stage's top 100 so that ``k = 50`` and ``k = 100`` read
  the same pass. Three samples: ``sample`` (the default: 3,000 terms, batches of 64 in id order), ``all``
  (every training term with a parent) and ``siblings`` (about 3,000 terms in batches of whole sibling
  groups: every training child of a parent held out together, as real additions arrive, so their parent
  often has no child left);
* **columns**: ``default``, the run's default features with ``children`` counted over every training
  statement (as 2d07ab4 fitted them: a training term counts among its own parent's children, which a new
  term never is); ``children_out``, the same with the batch's own terms left out of each candidate's
  children (on validation and test terms it equals ``children``; ``PairFeatures(parent_edges=...)``, the
  default since); ``children_out+model``, plus the trained model's score standardised per term (stacking
  the first stage);
* **easy negatives**: some variants append :data:`EASY` seeded random candidates to each list (a form fitted
  on hard negatives only never sees the rest of the candidates it will score);
* **forms**, each fitted with the same ListNet loss (:func:`~textkg.evaluation.listwise.fit_listnet`;
  Cao et al. 2007, ICML, eq. 2): ``linear``; ``quadratic`` (linear in the features and their pairwise
  products); ``mlp`` (``w . x + v . tanh(U x + b)``, one hidden layer of 16, L-BFGS from a seeded start);
* each form's score is added to the combination the run chose without the re-ranker (``metrics.json``'s
  weights and vote) at each weight of :data:`~textkg.evaluation.placement.combination.ADDED_WEIGHT_VALUES`,
  or replaces it (``alone``: the stacking form); the weight is the one with the best validation MRR (0 wins
  a tie, as in the run) and test is reported at that weight. Test numbers choose nothing.

CPU seconds (``time.process_time``) of each list pass, each fit, the two ranking passes and the simplest
alternatives' test ranking (per 1,000 queries) are recorded.
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
from rerank_features import feature_scorers, placement_run

#: Hard negatives kept per list (``k = 50`` reads the first 50 of them).
TOP = 100
#: Random (easy) negatives kept per list, for the variants that add them.
EASY = 50
HIDDEN = 16


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path, help="a finished inductive run of a graph with is_a (the README run)")
    parser.add_argument("--label", default=None, help="a name for this record")
    parser.add_argument("--no-all", action="store_true", help="skip the every-training-term lists (the slow pass)")
    _harness.add_common_flags(parser, out="benchmarks/results/rerank_forms.json", threads=1)
    args = parser.parse_args(argv)
    _harness.set_threads(args.threads)
    before = _harness.load_average()
    rows = measure(args.run_dir, with_all=not args.no_all)
    after = _harness.load_average()
    record = _harness.result(
        "rerank_forms", label=args.label, load_average_before=before, load_average_after=after, **rows
    )
    _harness.write_results(args.out, record)
    print(_harness.dumps(record), end="")
    return 0


# ---------------------------------------------------------------- forms


def fit_mlp(x: torch.Tensor, y: torch.Tensor, *, steps: int, l2: float, seed: int, hidden: int = HIDDEN):
    """``s = w . x + v . tanh(U x + b)`` fitted with ListNet's multi-positive loss by L-BFGS from a seeded start."""
    from textkg.evaluation.listwise import minimise_listnet

    x = x.double()
    g = torch.Generator().manual_seed(seed)
    f = x.shape[2]
    u = (torch.randn(f, hidden, generator=g, dtype=torch.float64) / f**0.5).requires_grad_()
    b = torch.zeros(hidden, dtype=torch.float64, requires_grad=True)
    v = (torch.randn(hidden, generator=g, dtype=torch.float64) * 0.01).requires_grad_()
    w = torch.zeros(f, dtype=torch.float64, requires_grad=True)
    params = [w, u, b, v]
    final = minimise_listnet(
        params,
        lambda: x @ w + torch.tanh(x @ u + b) @ v,
        keep=None,
        positive=y.bool(),
        penalised=[w, u, v],
        l2=l2,
        steps=steps,
    )
    w_, u_, b_, v_ = (p.detach().float() for p in params)
    return (lambda z: z @ w_ + torch.tanh(z @ u_ + b_) @ v_), final


def quadratic(x: torch.Tensor) -> torch.Tensor:
    """``[x, x_i x_j for i <= j]`` along the last axis."""
    i, j = torch.triu_indices(x.shape[-1], x.shape[-1])
    return torch.cat([x, x[..., i] * x[..., j]], dim=-1)


def fit_form(form: str, x: torch.Tensor, y: torch.Tensor, *, steps: int, l2: float, seed: int):
    from textkg.evaluation.listwise import fit_listnet

    if form == "mlp":
        return fit_mlp(x, y, steps=2 * steps, l2=l2, seed=seed)
    expand = quadratic if form == "quadratic" else (lambda z: z)
    w, final = fit_listnet(expand(x), y, steps=steps, l2=l2)
    wt = torch.tensor(w, dtype=torch.float32)
    return (lambda z: expand(z) @ wt), final


# ---------------------------------------------------------------- lists


def collect(columns, first, edges, candidates, batches, *, seed: int):
    """Per training term: rows of its first stage's top :data:`TOP`, of its positives outside them and of
    :data:`EASY` seeded random candidates outside them (easy negatives)."""
    g = torch.Generator().manual_seed(seed)
    parents_of: dict[int, list[int]] = {}
    for c, p in edges.tolist():
        parents_of.setdefault(c, []).append(p)
    lists = []
    for batch in batches:
        needed = {p for t in batch.tolist() for p in parents_of[t]} & set(batch.tolist())
        cands = candidates[
            ~torch.isin(candidates, batch) | torch.isin(candidates, torch.tensor(sorted(needed), dtype=torch.long))
        ]
        column = {int(e): i for i, e in enumerate(cands.tolist())}
        with torch.no_grad():
            f = columns(batch, cands)  # (b, c, F)
            top = first(batch, cands).topk(min(TOP, len(cands)), dim=1).indices
        for row, term in enumerate(batch.tolist()):
            pos = [column[p] for p in parents_of[term] if p in column]
            if not pos or term in needed:
                continue
            listed = top[row].tolist()
            outside = [p for p in pos if p not in listed]
            index = torch.tensor(listed + outside)
            easy = torch.randperm(len(cands), generator=g)[: 2 * EASY + TOP + len(pos)]
            easy = easy[~torch.isin(easy, index)][:EASY]
            lists.append((f[row, index].clone(), torch.isin(index, torch.tensor(pos)), f[row, easy].clone()))
    return lists


def stack(lists, k: int, *, easy: bool = False):
    """``(n, k, F)`` features and ``(n, k)`` positives: the top ``k``, positives outside it swapped in last;
    with ``easy``, the :data:`EASY` random negatives appended (``(n, k + EASY, F)``)."""
    xs, ys = [], []
    for rows, pos, more in lists:
        out = [i for i in pos.nonzero().flatten().tolist() if i >= k]
        index = list(range(k - len(out))) + out
        xs.append(torch.cat([rows[index], more]) if easy else rows[index])
        ys.append(torch.cat([pos[index], torch.zeros(len(more), dtype=torch.bool)]) if easy else pos[index])
    return torch.stack(xs), torch.stack(ys)


def sibling_batches(edges: torch.Tensor, terms: torch.Tensor, *, num_terms: int, batch_size: int, seed: int):
    """Batches of whole sibling groups (a parent's training children together), about ``num_terms`` terms."""
    g = torch.Generator().manual_seed(seed)
    allowed = set(terms.tolist())
    children: dict[int, list[int]] = {}
    for c, p in edges.tolist():
        if c in allowed:
            children.setdefault(p, []).append(c)
    parents = sorted(children)
    order = torch.randperm(len(parents), generator=g).tolist()
    seen: set[int] = set()
    batches, current = [], []
    for i in order:
        group = [c for c in sorted(set(children[parents[i]])) if c not in seen][:batch_size]
        if not group:
            continue
        if len(current) + len(group) > batch_size:
            batches.append(torch.tensor(sorted(current)))
            current = []
        current += group
        seen.update(group)
        if len(seen) >= num_terms:
            break
    if current:
        batches.append(torch.tensor(sorted(current)))
    return batches


# ---------------------------------------------------------------- measure


def measure(run_dir: Path, *, with_all: bool = True) -> dict:
    import textkg.evaluation.placement.rerank as rr
    from textkg.evaluation.placement.combination import (
        ADDED_WEIGHT_VALUES,
        VoteConfig,
        combined_scorer,
        neighbour_vote_scorer,
    )
    from textkg.evaluation.placement.evaluate import RERANK_FIRST_STAGE
    from textkg.evaluation.placement.grid import weighting_ranks
    from textkg.evaluation.placement.methods import STANDARDISE, model_scorer, parent_of_nearest_scorer, rank_placement
    from textkg.evaluation.placement.text import tfidf_scorer
    from textkg.evaluation.scoring import standardise

    run = placement_run(run_dir)
    cfg, prep, kg, features, edges = run.cfg, run.prep, run.kg, run.features, run.edges
    test, valid, texts, fit_on = run.test, run.valid, run.texts, run.fit_on
    config = rr.RerankConfig(seed=cfg.train.seed)
    extra = config.extra
    description, vote = run.description, run.vote
    model = model_scorer(prep.model, test.relation)
    cpu: dict = {}
    with torch.no_grad():
        start = time.process_time()
        pair = rr.PairFeatures(feature_scorers(run, extra), rr.hierarchy_priors(edges, kg.num_entities), extra)
        cpu["build_features"] = round(time.process_time() - start, 1)
    child, parent = edges.long().T
    counts = torch.bincount(parent, minlength=kg.num_entities).double()
    names_all = (*pair.names, "model", "children_out")
    kids = names_all.index("children")

    def columns(terms: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        f = pair(terms, candidates)
        m = standardise(model(terms, candidates), **STANDARDISE).float()
        mine = torch.isin(child, terms)  # the batch's own terms left out of their parents' children
        left = (counts - torch.bincount(parent[mine], minlength=kg.num_entities).double())[candidates].log1p()
        left = ((left - left.mean()) / left.std(unbiased=False).clamp_min(1e-6)).float()
        return torch.cat([f, m[..., None], left.expand(len(terms), -1)[..., None]], dim=2)

    first = combined_scorer({"description": description, "vote": vote}, RERANK_FIRST_STAGE)
    fit_candidates = max(test.groups, key=len)
    is_cand = torch.zeros(kg.num_entities, dtype=torch.bool)
    is_cand[fit_candidates] = True
    fit_edges = edges[is_cand[edges[:, 0]] & is_cand[edges[:, 1]]]
    terms = torch.unique(fit_edges[:, 0])
    g = torch.Generator().manual_seed(config.seed)
    sample = torch.sort(terms[torch.randperm(len(terms), generator=g)[: config.num_terms]]).values
    samples = {
        "sample": list(sample.split(config.batch_size)),
        "siblings": sibling_batches(
            fit_edges, terms, num_terms=config.num_terms, batch_size=config.batch_size, seed=config.seed
        ),
    }
    if with_all:
        samples["all"] = list(terms.split(config.batch_size))
    lists = {}
    for name, batches in samples.items():
        start = time.process_time()
        lists[name] = collect(columns, first, fit_edges, fit_candidates, batches, seed=config.seed)
        cpu[f"lists_{name}"] = round(time.process_time() - start, 1)
    lists["sample+siblings"] = lists["sample"] + lists["siblings"]

    base_cols = [i for i, n in enumerate(names_all) if n in pair.names]
    out_cols = [i if i != kids else names_all.index("children_out") for i in base_cols]
    stack_cols = [*out_cols, names_all.index("model")]
    col_sets = {"default": base_cols, "children_out": out_cols, "children_out+model": stack_cols}
    variants = [  # (lists, k, columns, form, easy negatives added)
        ("sample", 50, "default", "linear", False),
        ("sample", 50, "default", "quadratic", False),
        ("sample", 50, "default", "mlp", False),
        ("sample", 100, "default", "linear", False),
        ("sample", 50, "children_out", "linear", False),
        ("sample", 100, "children_out", "linear", False),
        ("sample", 50, "children_out", "linear", True),
        ("sample", 50, "children_out", "quadratic", False),
        ("sample", 50, "children_out", "quadratic", True),
        ("sample", 50, "children_out", "mlp", False),
        ("sample", 50, "children_out", "mlp", True),
        ("sample", 50, "children_out+model", "linear", False),
        ("sample", 50, "children_out+model", "mlp", False),
        ("siblings", 50, "default", "linear", False),
        ("siblings", 50, "children_out", "linear", False),
        ("sample+siblings", 50, "children_out", "linear", False),
    ]
    if with_all:
        variants += [
            ("all", 50, "default", "linear", False),
            ("all", 100, "default", "linear", False),
            ("all", 50, "children_out", "linear", False),
            ("all", 50, "children_out", "quadratic", False),
            ("all", 50, "children_out", "mlp", True),
        ]
    fits = []
    for which, k, cols, form, easy in variants:
        x, y = stack(lists[which], k, easy=easy)
        index = torch.tensor(col_sets[cols])
        start = time.process_time()
        score, loss = fit_form(form, x[..., index], y, steps=config.steps, l2=config.l2, seed=config.seed)
        fits.append(
            {
                "lists": which,
                "top_k": k,
                "columns": cols,
                "form": form,
                "easy_negatives": EASY if easy else 0,
                "num_lists": len(x),
                "train_loss": round(loss, 4),
                "fit_cpu_s": round(time.process_time() - start, 1),
                "score": score,
                "index": index,
            }
        )
    memo: dict[tuple, torch.Tensor] = {}

    def once(t: torch.Tensor, c: torch.Tensor) -> torch.Tensor:  # every form reads one feature pass
        key = (tuple(t.tolist()), c.data_ptr(), len(c))
        if key not in memo:
            memo.clear()
            memo[key] = columns(t, c)
        return memo[key]

    chosen = json.loads((run_dir / "metrics.json").read_text())["test"]["placement_selection"]["combined"]
    base = {k: float(v) for k, v in chosen["weights"].items() if k != "rerank"}
    components = {
        "model": model,
        "description": description,
        "vote": neighbour_vote_scorer(features, edges, vote=VoteConfig(**chosen["vote"])),
    }

    def standardised(score):
        return lambda t, c: standardise(score(t, c), **STANDARDISE).float()

    def formed(fit):
        return lambda t, c: fit["score"](once(t, c)[..., fit["index"]])

    comps = [standardised(s) for s in components.values()] + [standardised(formed(f)) for f in fits]
    weightings, labels = [[base.get(k, 0.0) for k in components] + [0.0] * len(fits)], [(None, 0.0)]
    for i in range(len(fits)):
        for value in (*ADDED_WEIGHT_VALUES[1:], "alone"):
            w = [0.0] * len(comps) if value == "alone" else [base.get(k, 0.0) for k in components] + [0.0] * len(fits)
            w[len(components) + i] = 1.0 if value == "alone" else float(value)
            weightings.append(w)
            labels.append((i, value))
    results, rank_cpu = {}, {}
    for name, queries in (("valid", valid), ("test", test)):
        start = time.process_time()
        with torch.no_grad():
            ranks = weighting_ranks(comps, weightings, queries, num_entities=kg.num_entities)
        rank_cpu[name] = round(time.process_time() - start, 1)
        results[name] = [(float((1 / r).mean()), float((r <= 10).double().mean())) for r in ranks]
    cpu["rank"] = rank_cpu
    rows = []
    for i, fit in enumerate(fits):
        mine = [0] + [gi for gi, (e, _) in enumerate(labels) if e == i and labels[gi][1] != "alone"]
        best = max(mine, key=lambda gi: (results["valid"][gi][0], -mine.index(gi)))
        alone = next(gi for gi, (e, v) in enumerate(labels) if e == i and v == "alone")
        rows.append(
            {
                **{k: v for k, v in fit.items() if k not in ("score", "index")},
                "rerank_weight": labels[best][1],
                "valid_mrr": round(results["valid"][best][0], 4),
                "test_mrr": round(results["test"][best][0], 4),
                "test_top10": round(results["test"][best][1], 4),
                "valid_mrr_alone": round(results["valid"][alone][0], 4),
                "test_mrr_alone": round(results["test"][alone][0], 4),
                "test_top10_alone": round(results["test"][alone][1], 4),
            }
        )
    simplest = {
        "description-nn": description,
        "parent-of-nearest": parent_of_nearest_scorer(features, edges),
        "tfidf-nn": tfidf_scorer(texts, fit_on),
        "combination without the re-ranker": combined_scorer(components, base),
    }
    alternatives = {}
    for name, scorer in simplest.items():
        start = time.process_time()
        with torch.no_grad():
            m = rank_placement(scorer, test, num_entities=kg.num_entities, with_close=False)
        spent = time.process_time() - start
        alternatives[name] = {
            "test_mrr": round(m.mrr, 4),
            "test_top10": round(m.to_dict()["hits@10"], 4),
            "cpu_s_per_1000_queries": round(1000 * spent / test.num_queries, 2),
        }
    start = time.process_time()
    with torch.no_grad():
        for lo in range(0, test.num_queries, 256):
            once(test.terms[lo : lo + 256], test.groups[0])
    alternatives["re-ranker feature pass (all columns)"] = {
        "cpu_s_per_1000_queries": round(1000 * (time.process_time() - start) / test.num_queries, 2)
    }
    return {
        "run_dir": run_dir.name,
        "combination_without_rerank": {
            "weights": base,
            "vote": chosen["vote"],
            "valid_mrr": round(results["valid"][0][0], 4),
            "test_mrr": round(results["test"][0][0], 4),
            "test_top10": round(results["test"][0][1], 4),
        },
        "columns": list(names_all),
        "cpu_s": cpu,
        "simplest_alternatives_test": alternatives,
        "rows": rows,
    }


if __name__ == "__main__":
    raise SystemExit(main())
