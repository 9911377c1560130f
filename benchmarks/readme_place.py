"""The README's ``textkg place`` example, recorded from a real run (issue 53).

Usage::

    python benchmarks/readme_place.py --run-dir runs/quickstart [--out benchmarks/results/readme_place.json]

Runs the README's command ``textkg place RUN --obo examples/new_hpo_terms.obo --out placed.tsv --top-k 3``
on a run of the README's main job (``textkg train --dataset hpo --split inductive --model fused-transe
--epochs 3``) as a child process, and records its wall time, its printed summary, each term's three
suggestions with their ``listed`` marks, and the run's own placement metrics (``test.placement*`` of its
``metrics.json``), so the README's example table can be checked against it
(``tests/test_docs_numbers.py``). After re-running the main job, run this again and copy the table.
"""

from __future__ import annotations

import argparse
import csv
import json
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


def run_place(run_dir: Path, out_tsv: Path) -> tuple[dict, float]:
    """The printed summary of ``textkg place`` on ``run_dir`` and its wall seconds."""
    argv = [sys.executable, "-m", "textkg.cli.main", "place", str(run_dir), "--obo", str(ROOT / TERMS)]
    start = time.perf_counter()
    proc = subprocess.run([*argv, "--out", str(out_tsv), "--top-k", str(TOP_K)], capture_output=True, text=True)
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run-dir", type=Path, required=True, help="a run of the README's main job")
    _harness.add_common_flags(parser, out="benchmarks/results/readme_place.json")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        summary, seconds = run_place(args.run_dir, Path(tmp) / "placed.tsv")
        with open(Path(tmp) / "placed.tsv", encoding="utf-8", newline="") as f:
            rows = list(csv.DictReader(f, delimiter="\t"))
    summary = {k: v for k, v in summary.items() if k != "out"}  # a temporary path
    record = _harness.result(
        "readme_place",
        command=_harness.command_line(argv, script="readme_place.py").replace(str(args.run_dir), "RUN"),
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
