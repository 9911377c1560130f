"""Fused vs description-only vs structure-only, and the fusion alternatives, on ``hpo`` (or ``hpo-small``).

Usage::

    OMP_NUM_THREADS=1 python benchmarks/hpo_ablations.py [--dataset hpo] [--split inductive]
        [--epochs 3] [--seed 0] [--runs-dir runs/ablate] [--out benchmarks/results/hpo_ablations.json]
        [--only fused,text,structural,gated,fused-no-dropout] [--collect-only]

Trains the variants below (by default all five) one after the other with
``textkg train`` (same data, split, epochs, seed and training settings), each
into ``RUNS_DIR/<dataset>-<split>/<variant>``:

* ``fused``: preset ``fused-transe`` — TransE (L1) over ``w_s · structure +
  w_x · description``, MiniLM mean-pooled frozen features, structural dropout 0.3.
* ``text`` (description-only): the same preset with ``--fusion text
  --structural-dropout 0`` (same encoder, projection and interaction, no
  structural table).
* ``structural`` (structure-only): preset ``transe`` (TransE L1; unseen
  entities share one learned row).
* ``gated``: preset ``gated-transe`` — the fusion alternative: a per-entity
  gate ``g = σ(W x + b)`` computed from the description, ``g · s + (1 − g) · x``,
  structural dropout 0.3.
* ``fused-no-dropout``: ``fused-transe`` with ``--structural-dropout 0``:
  what structural dropout is worth. The learned unseen row is kept, but in a
  fully inductive split no training triple touches an unseen entity, so the
  row stays at its initial value.

A variant whose run directory already holds ``metrics.json`` is not
retrained (delete the directory to redo it); ``--collect-only`` trains
nothing. The test metrics of each run — overall, ``answer_seen``,
``answer_unseen``, ``relation:is_a``, ``head_unseen``, ``both_seen``, each
subset also per direction (``head``/``tail``; ``num_triples`` there counts
that direction's queries) — its learned fusion weights, the exact command and
its wall time are merged into ``--out`` under the key ``"<dataset>/<split>"``
(other keys are kept).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))  # the shared harness
import _harness  # noqa: E402

DEFAULT_OUT = ROOT / "benchmarks" / "results" / "hpo_ablations.json"

#: variant → the flags that select its model (everything else is shared).
VARIANTS = {
    "fused": ["--model", "fused-transe"],
    "text": ["--model", "fused-transe", "--fusion", "text", "--structural-dropout", "0"],
    "structural": ["--model", "transe"],
    "gated": ["--model", "gated-transe"],
    "fused-no-dropout": ["--model", "fused-transe", "--structural-dropout", "0"],
}

#: Test subsets copied into the results (when the run reports them).
SUBSETS = ("answer_seen", "answer_unseen", "relation:is_a", "head_unseen", "both_seen")

KEYS = ("mrr", "hits@1", "hits@3", "hits@10", "num_triples")


def command(variant: str, args: argparse.Namespace, run_dir: Path) -> list[str]:
    """The ``textkg train`` command line of one variant."""
    return [
        "textkg",
        "train",
        "--dataset",
        args.dataset,
        "--split",
        args.split,
        *VARIANTS[variant],
        "--epochs",
        str(args.epochs),
        "--seed",
        str(args.seed),
        "--out",
        str(run_dir),
        "--no-progress",
    ]


def train(cmd: list[str]) -> float:
    """Run ``cmd`` (``textkg`` from this interpreter's environment); returns wall seconds."""
    exe = Path(sys.executable).with_name("textkg")
    argv = [str(exe) if exe.exists() else cmd[0], *cmd[1:]]
    started = time.perf_counter()
    subprocess.run(argv, check=True, cwd=ROOT)
    return time.perf_counter() - started


def summarise(metrics: dict) -> dict:
    """The numbers this benchmark reports from one run's ``metrics.json``."""
    test = metrics["test"]
    subsets = test.get("subsets") or {}
    out = {"test": {k: test[k] for k in KEYS}}
    for name in SUBSETS:
        if name in subsets:
            sub = subsets[name]
            out["test"][name] = {
                **{k: sub[k] for k in KEYS},
                **{side: {k: sub[side][k] for k in KEYS} for side in ("head", "tail")},
            }
    out["valid_mrr"] = (metrics.get("valid") or {}).get("mrr")
    out["fusion"] = metrics["model"]["fusion"]
    out["fusion_weights"] = metrics["model"].get("fusion_weights")
    out["num_parameters"] = metrics["model"]["num_parameters"]
    out["train_seconds"] = metrics["train"]["seconds"]
    out["best_epoch"] = metrics["train"]["best_epoch"]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="hpo")
    parser.add_argument("--split", default="inductive", choices=("inductive", "transductive"))
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--runs-dir", type=Path, default=ROOT / "runs" / "ablate")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--only", default=",".join(VARIANTS), help="comma-separated variants")
    parser.add_argument("--collect-only", action="store_true", help="train nothing; read finished runs")
    args = parser.parse_args(argv)
    variants = [v for v in args.only.split(",") if v]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown variant(s) {', '.join(unknown)}; choose from {', '.join(VARIANTS)}")

    key = f"{args.dataset}/{args.split}"
    results = json.loads(args.out.read_text()) if args.out.exists() else {}
    entry = results.get(key, {"runs": {}})
    for variant in variants:
        run_dir = args.runs_dir / f"{args.dataset}-{args.split}" / variant
        cmd = command(variant, args, run_dir.relative_to(ROOT) if run_dir.is_relative_to(ROOT) else run_dir)
        metrics_path = run_dir / "metrics.json"
        wall = None
        if not metrics_path.exists():
            if args.collect_only:
                print(f"{variant}: no {metrics_path}, skipped", file=sys.stderr)
                continue
            print("+", shlex.join(cmd), file=sys.stderr, flush=True)
            wall = train(cmd)
        previous = entry["runs"].get(variant, {})
        entry["runs"][variant] = {
            "command": shlex.join(cmd),
            "run_dir": str(cmd[cmd.index("--out") + 1]),
            "wall_seconds": wall if wall is not None else previous.get("wall_seconds"),
            **summarise(json.loads(metrics_path.read_text())),
        }
    entry.update(
        {
            "dataset": args.dataset,
            "split": args.split,
            "epochs": args.epochs,
            "seed": args.seed,
            "machine": {  # the harness's record, with this file's own keys
                **_harness.machine(),
                "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
                "loadavg_after": os.getloadavg(),
            },
        }
    )
    results[key] = entry
    _harness.write_results(args.out, results, indent=2)  # one entry per setting, kept keyed as before
    print(json.dumps({v: r["test"] for v, r in entry["runs"].items()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
