"""Where a run's first suggestion goes wrong: one level too general, too specific, or elsewhere (issue 54).

Usage::

    python benchmarks/investigations/placement_errors.py --run-dir RUN [--terms N] [--out FILE]

Places the run's held-out test terms (those with a parent in its training graph; ``--terms N``: a seeded draw
of N, 0 = all) with ``textkg place``'s own scorer (:class:`textkg.place.Placer`, names and definitions as
``benchmarks/readme_place.py`` writes them), with the run's parent support
(:mod:`textkg.evaluation.placement.parent_support`) and with its weight set to 0, and sorts each term's first
suggestion: a true parent; an ancestor of one (too general); a descendant of one (too specific); a sibling of
one; another term under a common non-root ancestor; elsewhere. Output: the share of terms of each kind, for
both, and the script's command and machine (default ``--out``: ``benchmarks/results/placement_errors.json``).
docs/results/placement.md, "Parent support".
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared harness
import _harness
from readme_place import held_out_terms

KINDS = (
    "a true parent",
    "an ancestor of a true parent (too general)",
    "a descendant of a true parent (too specific)",
    "a sibling of a true parent",
    "under a common non-root ancestor",
    "elsewhere",
)


def closure(start: set[str], step: dict[str, set[str]]) -> set[str]:
    """Every term reachable from ``start`` by ``step`` (``start`` itself not included unless reached)."""
    seen: set[str] = set()
    todo = [n for s in start for n in step.get(s, ())]
    while todo:
        x = todo.pop()
        if x not in seen:
            seen.add(x)
            todo.extend(step.get(x, ()))
    return seen


def kind(first: str, parents: set[str], up: dict[str, set[str]], down: dict[str, set[str]]) -> str:
    """Which of :data:`KINDS` a first suggestion is, for a term with true ``parents``."""
    if first in parents:
        return KINDS[0]
    above = closure(parents, up)
    if first in above:
        return KINDS[1]
    if first in closure(parents, down):
        return KINDS[2]
    if any(first in down.get(g, ()) for p in parents for g in up.get(p, ())):
        return KINDS[3]
    roots = {a for a in above if not up.get(a)}
    if (closure({first}, up) & above) - roots:
        return KINDS[4]
    return KINDS[5]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run-dir", type=Path, required=True)
    parser.add_argument("--terms", type=int, default=0, help="a seeded draw of this many held-out terms; 0 = all")
    _harness.add_common_flags(parser, out="benchmarks/results/placement_errors.json", seed=0, threads=2)
    args = parser.parse_args(argv)
    _harness.set_threads(args.threads)
    from textkg.place import NewTerm, Placer

    placer = Placer(args.run_dir)
    kg = placer.predictor.kg
    _, available = held_out_terms(args.run_dir, 1, args.seed)
    drawn, _ = held_out_terms(args.run_dir, args.terms or available, args.seed)
    up: dict[str, set[str]] = {}
    down: dict[str, set[str]] = {}
    for child, parent in placer.parent_edges.tolist():
        up.setdefault(kg.entities[child], set()).add(kg.entities[parent])
        down.setdefault(kg.entities[parent], set()).add(kg.entities[child])
    terms = [NewTerm(i, t["label"], t["description"]) for i, t in drawn.items()]
    support = (placer.selection or {}).get("combined", {}).get("parent_support") or {}
    weight = support.get("weight", 0.0)
    out = {}
    for label, w in (("with parent support", weight), ("without parent support", 0.0)):
        if support:
            support["weight"] = w
        firsts = {r["term"]: r["parent"] for r in placer.place(terms, top_k=1, evidence=0)}
        counts = Counter(kind(firsts[i], set(t["true_parents"]), up, down) for i, t in drawn.items())
        out[label] = {k: counts[k] / len(drawn) for k in KINDS}
    result = _harness.result(
        "placement_errors",
        command=shlex.join(
            ["python", "benchmarks/investigations/placement_errors.py", *(sys.argv[1:] if argv is None else argv)]
        ),
        method=placer.method,
        parent_support_weight=weight,
        terms=len(drawn),
        first_suggestion=out,
    )
    _harness.write_results(args.out, result)
    print(_harness.dumps(result), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
