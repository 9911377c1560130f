"""Real additions between two releases of an ontology other than HPO: does ``textkg place`` find their parents?

The ``cellxgene-ontology-guide`` wheel (PyPI; CC BY 4.0 / CC0 ontologies, read as data) ships releases of CL,
UBERON, MONDO, EFO, ... as zstd JSON (per term: label, description, synonyms, deprecation, ancestors with their
distance). The **older** release is written as OBO (``is_a`` = the distance-1 ancestors) and trained on with
default settings; the newer release's additions under old parents (at most ``--cap``, a seeded sample) are
placed once per method and by TF-IDF nearest term. Setup, metrics and results: docs/results/placement.md.

Usage (the wheel is fetched once with ``pip download --no-deps cellxgene-ontology-guide -d DIR``)::

    nice -n 10 python benchmarks/real_additions.py --wheel DIR/cellxgene_ontology_guide-*.whl \
        --ontology CL --old v2025-02-13 --new v2025-04-10 [--label "what differs from the earlier run"]

Each run is stored in ``--out`` under ``ONTOLOGY:OLD->NEW`` (`` [LABEL]`` with ``--label``) with its command.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness

#: Decompressed size limit of one release (bytes): the wheel is data, bounded like any input.
MAX_RELEASE_BYTES = 2 << 30
METHODS = ("auto", "model", "description-nn", "parent-of-nearest", "combined")


def read_release(wheel: Path, ontology: str, version: str) -> dict:
    """``{id: term}`` of one release in the wheel (zstd JSON; ``zstandard`` is a benchmark-only dependency)."""
    import zstandard

    name = f"cellxgene_ontology_guide/data/{ontology}-ontology-{version}.json.zst"
    with zipfile.ZipFile(wheel) as z:
        raw = z.read(name)
    return json.loads(zstandard.ZstdDecompressor().decompress(raw, max_output_size=MAX_RELEASE_BYTES))


def live_terms(release: dict, prefix: str) -> dict[str, dict]:
    """Non-deprecated, labelled terms of the ontology's own prefix, each with its direct parents among them."""
    live = {
        k: v
        for k, v in release.items()
        if k.startswith(prefix + ":") and not v.get("deprecated") and (v.get("label") or "").strip()
    }
    for v in live.values():
        v["parents"] = sorted(a for a, d in (v.get("ancestors") or {}).items() if d == 1 and a in live)
    return live


def subsample(old: dict[str, dict], keep: set[str], *, max_terms: int, seed: int) -> dict[str, dict]:
    """At most about ``max_terms`` terms of ``old`` for a CPU budget: ``keep`` (the additions' parents) and a
    seeded sample of the rest, closed under ancestors (every kept term keeps its path to the root, and its
    direct parents among the kept terms are its direct parents in the full release)."""
    import random

    if len(old) <= max_terms:
        return old
    rest = sorted(set(old) - keep)
    chosen = set(keep) | set(random.Random(seed).sample(rest, max(0, max_terms - len(keep)) // 2))
    closed = set(chosen)
    for tid in chosen:
        closed.update(a for a in (old[tid].get("ancestors") or {}) if a in old)
    return {k: {**v, "parents": [p for p in v["parents"] if p in closed]} for k, v in old.items() if k in closed}


def _quote(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")


def _unquoted(text: str) -> str:
    """A name on one line, with ``\\``, ``!`` (a comment) and ``{``/``}`` (qualifiers) escaped (OBO 1.4)."""
    return "".join("\\" + c if c in "\\!{}" else c for c in " ".join(text.split()))


def write_obo(terms: dict[str, dict], path: Path) -> None:
    """An OBO 1.4 file of ``terms`` (id, name, def, synonyms, is_a)."""
    lines = ["format-version: 1.4", "ontology: release", ""]
    for tid, t in sorted(terms.items()):
        lines += ["[Term]", f"id: {tid}", f"name: {_unquoted(t['label'])}"]
        if (t.get("description") or "").strip():
            lines.append(f'def: "{_quote(t["description"].strip())}" []')
        for s in dict.fromkeys(t.get("synonyms") or []):
            if s.strip():
                lines.append(f'synonym: "{_quote(s.strip())}" EXACT []')
        lines += [f"is_a: {p}" for p in t["parents"]]
        lines.append("")
    path.write_text("\n".join(lines), encoding="utf-8")


def additions(old: dict[str, dict], new: dict[str, dict], *, cap: int, seed: int) -> list[tuple[str, dict, list[str]]]:
    """``(id, term, true parents in old)`` of terms new in ``new`` with at least one parent in ``old``."""
    import random

    found = []
    for tid, t in sorted(new.items()):
        if tid in old:
            continue
        gold = [p for p in t["parents"] if p in old]
        if gold:
            found.append((tid, t, gold))
    random.Random(seed).shuffle(found)
    return sorted(found[:cap], key=lambda x: x[0])


def run_key(ontology: str, old: str, new: str, *, label: str = "") -> str:
    """The key of one run in the results file: ``ONTOLOGY:OLD->NEW``, then `` [LABEL]`` when a label is given."""
    key = f"{ontology}:{old}->{new}"
    return f"{key} [{label.strip()}]" if label.strip() else key


def recorded_argv(argv: list[str], wheel: Path) -> list[str]:
    """``argv`` with the wheel named by its file name only: a results file holds no machine paths."""
    return [a.replace(str(wheel), wheel.name) for a in argv]


def ranks_of(order: dict[str, list[str]], gold: dict[str, list[str]]) -> list[float]:
    """Filtered rank of each (term, true parent) pair in each term's ranked list (inf beyond the list)."""
    out = []
    for term, parents in gold.items():
        ranked = order.get(term, [])
        for p in parents:
            others = set(parents) - {p}
            kept = [c for c in ranked if c not in others]
            out.append(float(kept.index(p) + 1) if p in kept else float("inf"))
    return out


def summarise(ranks: list[float]) -> dict:
    n = len(ranks)
    return {
        "mrr": sum(1 / r for r in ranks) / n,
        "hits@1": sum(r <= 1 for r in ranks) / n,
        "hits@10": sum(r <= 10 for r in ranks) / n,
        "num_pairs": n,
    }


def tfidf_order(placer, terms, top_k: int) -> dict[str, list[str]]:
    """TF-IDF nearest term over the placer's candidates: the candidates ranked by TF-IDF cosine to each new term."""
    import torch

    from textkg.evaluation.placement.text import tfidf_scorer

    kg = placer.predictor.kg
    texts = list(kg.entity_descriptions) + [t.description for t in terms]
    score = tfidf_scorer(texts, placer.predictor.prepared.split.train_entities)
    ids = torch.arange(kg.num_entities, kg.num_entities + len(terms))
    top = score(ids, placer.candidates).topk(min(top_k, len(placer.candidates)), dim=1).indices
    names = [kg.entities[int(c)] for c in placer.candidates.tolist()]
    return {t.id: [names[c] for c in row] for t, row in zip(terms, top.tolist(), strict=True)}


def train_env(environ: dict[str, str], threads: int | None) -> dict[str, str]:
    """The ``textkg train`` run's environment: ``environ`` without the ``OMP_NUM_THREADS`` that ``--threads`` (the
    placement's threads) put there, so that training runs as the README job does (torch's own choice), or with
    ``threads`` where given. Until 2026-12-07 the train run inherited ``--threads`` (1 by default), and its
    ``train_seconds`` were one-thread times."""
    env = {k: v for k, v in environ.items() if k != "OMP_NUM_THREADS"}
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    return env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--wheel", type=Path, required=True)
    parser.add_argument("--ontology", default="CL")
    parser.add_argument("--old", required=True, help="older release version, e.g. v2025-02-13")
    parser.add_argument("--new", required=True, help="newer release version")
    parser.add_argument("--cap", type=int, default=400, help="at most this many new terms (a seeded sample)")
    parser.add_argument("--top-k", type=int, default=100)
    parser.add_argument(
        "--max-terms",
        type=int,
        default=0,
        help="subsample the older release to about this many terms (half sampled, then closed under ancestors; "
        "the additions' parents always kept); 0 = all",
    )
    parser.add_argument("--work", type=Path, default=Path("runs/real_additions"))
    parser.add_argument("--train-args", default="", help="extra textkg train flags (default: none)")
    parser.add_argument(
        "--obo-only",
        action="store_true",
        help="write the older release as WORK/ONTOLOGY-OLD/old.obo, print its path and stop (the input of a "
        "timing run: docs/results/placement.md)",
    )
    parser.add_argument(
        "--train-threads",
        type=int,
        default=None,
        help="OMP threads of the textkg train run (default: torch's own choice, as the README job runs; --threads "
        "sets the placement's)",
    )
    parser.add_argument(
        "--label",
        default="",
        help="appended to the run's key as ' [LABEL]' so that a re-run sits beside the earlier one (default: none)",
    )
    _harness.add_common_flags(parser, out="benchmarks/results/real_additions.json", seed=0, threads=1)
    args = parser.parse_args()
    _harness.set_threads(args.threads)
    from textkg.pipeline.run_dir import read_run_json
    from textkg.place import NewTerm, Placer

    key = run_key(args.ontology, args.old, args.new, label=args.label)
    old = live_terms(read_release(args.wheel, args.ontology, args.old), args.ontology)
    new = live_terms(read_release(args.wheel, args.ontology, args.new), args.ontology)
    added = additions(old, new, cap=args.cap, seed=args.seed)
    full_size = len(old)
    if args.max_terms:
        old = subsample(old, {p for _, _, g in added for p in g}, max_terms=args.max_terms, seed=args.seed)
    work = args.work / f"{args.ontology}-{args.old}"
    work.mkdir(parents=True, exist_ok=True)
    obo = work / "old.obo"
    write_obo(old, obo)
    if args.obo_only:
        print(obo)
        return
    run = work / "run"
    started = time.perf_counter()
    if not (run / "metrics.json").is_file():
        cmd = ["textkg", "train", "--dataset", str(obo), "--split", "inductive", "--model", "fused-transe"]
        cmd += [*args.train_args.split(), "--seed", str(args.seed), "--no-progress", "--out", str(run)]
        subprocess.run(cmd, check=True, env=train_env(os.environ, args.train_threads))
    train_seconds = time.perf_counter() - started
    terms = [
        NewTerm(tid, t["label"], (t.get("description") or "").strip(), list(t.get("synonyms") or []))
        for tid, t, _ in added
    ]
    gold = {tid: g for tid, _, g in added}
    rows: dict[str, dict] = {}
    placer = None
    for method in METHODS:
        try:
            placer = Placer(run, method=method)
        except Exception as exc:  # e.g. the run chose no combination: say so in the row
            rows[method] = {"skipped": str(exc)}
            continue
        t0, c0 = time.perf_counter(), time.process_time()
        placed = placer.place(terms, top_k=args.top_k, evidence=0)
        order: dict[str, list[str]] = {}
        for r in placed:
            order.setdefault(r["term"], []).append(r["parent"])
        rows[method if method != "auto" else f"auto ({placer.method})"] = {
            **summarise(ranks_of(order, gold)),
            "wall_seconds_per_1000_terms": 1000 * (time.perf_counter() - t0) / len(terms),
            "cpu_seconds_per_1000_terms": 1000 * (time.process_time() - c0) / len(terms),
        }
    assert placer is not None
    support = (placer.selection or {}).get("combined", {}).get("parent_support") or {}
    if support.get("weight"):  # the default without its last stage (docs/results/placement.md, "Parent support")
        placer.method = "combined"
        weight, support["weight"] = support["weight"], 0.0
        placed = placer.place(terms, top_k=args.top_k, evidence=0)
        order = {}
        for r in placed:
            order.setdefault(r["term"], []).append(r["parent"])
        rows["combined without parent support"] = summarise(ranks_of(order, gold))
        support["weight"] = weight  # the re-ranker's row below keeps it
    weights = placer.selection["combined"]["weights"] if placer.selection else {}
    if weights.get("rerank", 0) > 0 and not any(w > 0 for c, w in weights.items() if c != "rerank"):
        # validation gave the re-ranker all the weight: the combination without it is the report's own tuning,
        # whose weights the run does not keep (its test block has placement_combined_without_rerank)
        rows["combined without the re-ranker"] = {"skipped": "validation gave the re-ranker all the weight"}
    elif weights.get("rerank", 0) > 0:  # the simplest alternative
        placer.method = "combined"
        weights["rerank"] = 0.0
        placed = placer.place(terms, top_k=args.top_k, evidence=0)
        order = {}
        for r in placed:
            order.setdefault(r["term"], []).append(r["parent"])
        rows["combined without the re-ranker"] = summarise(ranks_of(order, gold))
    c0 = time.process_time()
    rows["tfidf-nn"] = summarise(ranks_of(tfidf_order(placer, terms, args.top_k), gold))
    rows["tfidf-nn"]["cpu_seconds_per_1000_terms"] = 1000 * (time.process_time() - c0) / len(terms)
    metrics = read_run_json(run / "metrics.json")
    held = set(placer.predictor.kg.entities) - placer.training_ids()
    pairs = [(t, p) for t, g in gold.items() for p in g]
    payload = {
        "key": key,
        "old_terms": len(old),
        "old_terms_before_subsampling": full_size,
        "valid_holdout": metrics.get("valid_holdout"),
        "train_epochs_steps": [metrics["train"][k] for k in ("epochs", "steps")],
        "new_terms_under_existing_parents": len(added),
        "without_definition": sum(1 for t in terms if not t.definition),
        "pairs": len(pairs),
        "unreachable_pairs_parent_held_out": sum(1 for _, p in pairs if p in held),
        "terms_whose_parents_are_all_held_out": sum(1 for g in gold.values() if set(g) <= held),
        "parent_was_a_leaf": sum(1 for _, p in pairs if not any(p in t["parents"] for t in old.values())),
        "train_seconds": train_seconds,
        "train_threads": args.train_threads or "torch's default",
        "train": metrics["train"].get("warning"),
        "methods": rows,
    }
    command = _harness.command_line(recorded_argv(sys.argv[1:], args.wheel), script="real_additions.py")
    payload.update(command=command, machine=_harness.machine())
    print(json.dumps(payload, indent=1))
    previous = json.loads(args.out.read_text()) if args.out.is_file() else {}
    kept = {k: v for k, v in previous.items() if k not in _harness.SCHEMA_KEYS and k != "runs"}  # e.g. the file's note
    runs = {**previous.get("runs", {}), key: payload}
    _harness.write_results(args.out, _harness.result("real_additions", command=command, **kept, runs=runs))


if __name__ == "__main__":
    main()
