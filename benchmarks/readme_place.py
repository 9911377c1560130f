"""The README's ``textkg place`` example, recorded from a real run (issue 53).

Usage::

    python benchmarks/readme_place.py --run-dir runs/quickstart [--out benchmarks/results/readme_place.json]

Runs the README's command ``textkg place RUN --obo examples/new_hpo_terms.obo --out placed.tsv --top-k 3``
on a run of the README's main job (``textkg train --dataset hpo --split inductive --model fused-transe
--epochs 3``) as a child process, and records its wall time, its printed summary, each term's three
suggestions with their ``listed`` marks, and the run's own placement metrics (``test.placement*`` of its
``metrics.json``), so the README's example table can be checked against it
(``tests/test_docs_numbers.py``). After re-running the main job, run this again and copy the table.

``--terms N`` (issue 54) times ``place`` on N new terms at once instead: N of the run's held-out test terms
with a parent in its training graph (a seeded draw; their names and definitions only, no ``is_a`` line), from
a copy of the feature cache without their texts, so they are encoded as a curator's new terms would be.
It records wall and CPU seconds, the child's peak RSS, and the filtered ranks of their true parents among
its top 10 suggestions (default ``--out``: ``benchmarks/results/place_N_terms.json``). docs/results/placement.md.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/: the shared harness
import _harness

ROOT = _harness.ROOT
TERMS = "examples/new_hpo_terms.obo"
TOP_K = 3
README_TRAIN = "textkg train --dataset hpo --split inductive --model fused-transe --epochs 3 --out RUN"
README_PLACE = f"textkg place RUN --obo {TERMS} --out placed.tsv --top-k {TOP_K}"
MANY_TOP_K = 10  # --terms N: the suggestions per term among which its true parents are ranked


def run_place(
    run_dir: Path, out_tsv: Path, obo: Path = ROOT / TERMS, top_k: int = TOP_K, env=None
) -> tuple[dict, float]:
    """The printed summary of ``textkg place`` on ``run_dir`` and its wall seconds."""
    argv = [sys.executable, "-m", "textkg.cli.main", "place", str(run_dir), "--obo", str(obo)]
    start = time.perf_counter()
    proc = subprocess.run(
        [*argv, "--out", str(out_tsv), "--top-k", str(top_k)], capture_output=True, text=True, env=env
    )
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"textkg place exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout), seconds


def listed_parents(run_dir: Path) -> dict[str, list[dict[str, str]]]:
    """``term id -> [{"id", "name"}]``: the ``is_a`` lines of the example file, named from the run's graph."""
    from textkg.place import read_terms_obo

    graph = json.loads((run_dir / "graph.json").read_text(encoding="utf-8"))
    names = dict(zip(graph["entities"], graph["entity_names"], strict=True))
    return {t.id: [{"id": p, "name": names.get(p, "")} for p in t.listed_parents] for t in read_terms_obo(ROOT / TERMS)}


def terms(rows: list[dict[str, str]], parents: dict[str, list[dict[str, str]]]) -> list[dict]:
    """One record per term, in the file's order: its suggestions (rank, id, name, listed) and listed parents."""
    out: dict[str, dict] = {}
    for row in rows:
        term = out.setdefault(
            row["term"], {"id": row["term"], "name": row["term_name"], "suggestions": [], "listed_parents": []}
        )
        term["suggestions"].append(
            {"rank": int(row["rank"]), "parent": row["parent"], "name": row["parent_name"], "listed": row["listed"]}
        )
    for term_id, term in out.items():
        term["listed_parents"] = parents.get(term_id, [])
    return list(out.values())


def placement_of(run_dir: Path) -> dict:
    """The run's test placement MRRs and the method its validation chose."""
    from textkg.pipeline.run_dir import read_run_json

    test = read_run_json(run_dir / "metrics.json")["test"]
    return {
        "chosen": (test.get("placement_selection") or {}).get("chosen"),
        "combined": test["placement_combined"]["mrr"],
        "combined-without-rerank": (test.get("placement_combined_without_rerank") or {}).get("mrr"),
        "model": test["placement"]["mrr"],
        "parent-of-nearest": test["placement_baselines"]["parent-of-nearest"]["mrr"],
    }


def draw_terms(kg, true_parents: dict[int, frozenset[int]], n: int, seed: int) -> dict[str, dict]:
    """``n`` of the terms ``true_parents`` keys, drawn with ``seed``, as ``real_additions.write_obo`` writes them
    (``label``; ``description``: the definition of ``kg``'s ``"name: definition"``, else none, since a term
    without one is described by its parents; no ``parents``), with their ``true_parents`` ids."""
    pool = sorted(true_parents)
    if not 0 < n <= len(pool):
        raise SystemExit(f"--terms {n}: the run holds out {len(pool)} test terms with a parent in its training graph")
    drawn = {}
    for e in sorted(random.Random(seed).sample(pool, n)):
        name, text = kg.entity_names[e], kg.entity_descriptions[e]
        definition = text.removeprefix(f"{name}: ") if text.startswith(f"{name}: ") else ""
        parents = sorted(kg.entities[p] for p in true_parents[e])
        drawn[kg.entities[e]] = {"label": name, "description": definition, "parents": [], "true_parents": parents}
    return drawn


def held_out_terms(run_dir: Path, n: int, seed: int) -> tuple[dict[str, dict], int]:
    """:func:`draw_terms` over the run's test placement queries (its split, rebuilt as ``place`` rebuilds it)."""
    from textkg.evaluation.placement.methods import placement_queries
    from textkg.pipeline.prepared import load_graph_and_split
    from textkg.pipeline.run_dir import open_run

    kg, split = load_graph_and_split(open_run(run_dir).config)
    queries = placement_queries(kg, split, which="test")
    true_parents = queries.true_parents if queries is not None else {}
    return draw_terms(kg, dict(true_parents), n, seed), len(true_parents)


def cache_without(texts: set[str], into: Path) -> Path:
    """The textkg cache mirrored into ``into`` by links, less the feature rows of ``texts`` (written, filtered);
    nothing under the real cache is written (``views/``, derived data, is left out)."""
    import numpy as np

    from textkg.encoders.base import default_cache_dir
    from textkg.encoders.cache import text_key

    root, drop = default_cache_dir(), {text_key(t) for t in texts}
    for entry in root.iterdir():
        if entry.name != "features":
            (into / entry.name).parent.mkdir(parents=True, exist_ok=True)
            (into / entry.name).symlink_to(entry)
    for keys_file in sorted(root.glob("features/*/*.keys.npy")):
        mirror = into / keys_file.parent.relative_to(root)
        if not mirror.is_dir():
            mirror.mkdir(parents=True)
            (mirror / "identity.txt").symlink_to(keys_file.parent / "identity.txt")
        vec_file = keys_file.with_name(keys_file.name.replace(".keys.npy", ".vec.npy"))
        keys = np.load(keys_file)
        keep = np.array([k.tobytes() not in drop for k in keys], dtype=bool)
        if keep.all():
            (mirror / keys_file.name).symlink_to(keys_file)
            (mirror / vec_file.name).symlink_to(vec_file)
        else:
            np.save(mirror / vec_file.name, np.load(vec_file, mmap_mode="r")[keep])
            np.save(mirror / keys_file.name, keys[keep])
    return into


def place_many(run_dir: Path, n: int, seed: int) -> dict:
    """``textkg place`` on ``n`` held-out test terms (module docstring): its cost and how it ranks their parents."""
    import real_additions  # benchmarks/: the OBO writer and the filtered ranks of real additions

    from textkg.place import NewTerm

    drawn, pool = held_out_terms(run_dir, n, seed)
    texts = {x for k, t in drawn.items() for x in (t["label"], NewTerm(k, t["label"], t["description"]).description)}
    with tempfile.TemporaryDirectory() as tmp:
        obo, placed = Path(tmp) / "terms.obo", Path(tmp) / "placed.tsv"
        real_additions.write_obo(drawn, obo)
        env = {**os.environ, "TEXTKG_CACHE_DIR": str(cache_without(texts, Path(tmp) / "cache"))}
        summary, seconds = run_place(run_dir, placed, obo, MANY_TOP_K, env)
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)  # place is this process's only child
        with open(placed, encoding="utf-8", newline="") as f:
            rows = list(csv.DictReader(f, delimiter="\t"))
    order: dict[str, list[str]] = {}
    for row in rows:  # best first
        order.setdefault(row["term"], []).append(row["parent"])
    gold = {k: t["true_parents"] for k, t in drawn.items()}

    defined = {k for k in gold if drawn[k]["description"]}

    def ranked(keys) -> dict:  # MRR, hits@1, hits@10 and the number of (term, true parent) pairs of these terms
        ranks = real_additions.ranks_of(order, {k: gold[k] for k in keys})
        return {k: round(v, 4) for k, v in real_additions.summarise(ranks).items()} if ranks else {}

    return {
        "train_command": README_TRAIN,
        "place_command": f"textkg place RUN --obo TERMS.obo --out placed.tsv --top-k {MANY_TOP_K}",
        "terms": n,
        "seed": seed,
        "drawn_from_test_terms_with_a_training_parent": pool,
        "terms_without_definition": n - len(defined),
        "feature_cache": "the textkg cache without the drawn terms' names and descriptions: place encodes them",
        "seconds": round(seconds, 1),
        "seconds_per_1000_terms": round(1000 * seconds / n, 1),
        "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 1),
        "peak_rss_gib": round(usage.ru_maxrss * 1024 / 2**30, 2),
        "placement": {
            "measured": f"filtered rank of each (term, true parent) pair among the term's top {MANY_TOP_K} "
            "suggestions, 0 beyond them (other true parents removed first, as the run's metrics do)",
            **ranked(gold),
            "with_definition": ranked(defined),
            "without_definition": ranked(set(gold) - defined),
            "first_suggestion_is_a_true_parent": round(sum(order.get(k, [""])[0] in g for k, g in gold.items()) / n, 4),
        },
        "run_placement_test_mrr": placement_of(run_dir),
        "summary": {k: v for k, v in summary.items() if k != "out"},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run-dir", type=Path, required=True, help="a run of the README's main job")
    parser.add_argument("--terms", type=int, default=0, help="place this many held-out test terms at once instead")
    _harness.add_common_flags(parser, out="benchmarks/results/readme_place.json", seed=0)
    args = parser.parse_args(argv)
    command = _harness.command_line(argv, script="readme_place.py").replace(str(args.run_dir), "RUN")
    if args.terms:
        out = (
            args.out
            if args.out != parser.get_default("out")
            else ROOT / f"benchmarks/results/place_{args.terms}_terms.json"
        )
        start = {"load_average_at_start": _harness.load_average()}  # the machine is shared: how busy it was
        record = _harness.result(
            "readme_place", command=command, machine_extra=start, **place_many(args.run_dir, args.terms, args.seed)
        )
        print(f"wrote {_harness.write_results(out, record)}", file=sys.stderr)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        summary, seconds = run_place(args.run_dir, Path(tmp) / "placed.tsv")
        with open(Path(tmp) / "placed.tsv", encoding="utf-8", newline="") as f:
            rows = list(csv.DictReader(f, delimiter="\t"))
    summary = {k: v for k, v in summary.items() if k != "out"}  # a temporary path
    record = _harness.result(
        "readme_place",
        command=command,
        train_command=README_TRAIN,
        place_command=README_PLACE,
        seconds=round(seconds, 1),
        run_placement_test_mrr=placement_of(args.run_dir),
        summary=summary,
        terms=terms(rows, listed_parents(args.run_dir)),
    )
    print(f"wrote {_harness.write_results(args.out, record)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
