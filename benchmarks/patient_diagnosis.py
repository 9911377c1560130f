"""Issue 52: diagnose new patients of a simulated cohort under patient-level DP, beside its baselines.

Per seed: ``textkg data simulate-patients --seed S`` (plus ``--cohort-args``), then, on that cohort, one
``textkg train`` per variant and ``textkg diagnose`` of each run on the same held-out patients:

* ``public-only``: the patients left out (ε = 0), the model trained on the public graph only;
* ``ceiling``: ``--privacy none``, the patients trained by plain SGD (the same fold-in, no clipping, no noise);
* ``dp-epsE``: ``--privacy confidential`` at ``--target-epsilon E`` per patient (δ = 1/(10 N̄_u)), with
  ``--private-size`` the cohort's number of training patients rounded up to a thousand (a public round
  bound, as a hospital would declare it).

Every variant runs ``--privacy-unit entity --unit-entities COHORT/patients.txt --split transductive`` plus
``--train-args`` (the same for all). The rankers that need no model (phenotype similarity over the public
annotations, popularity, disease-name TF-IDF) come from the same ``diagnose`` output. ``--merge`` joins
per-seed files into one results file with the means over seeds.

    python benchmarks/patient_diagnosis.py --seeds 0 --out benchmarks/results/patient_diagnosis_seed0.json
    python benchmarks/patient_diagnosis.py --merge benchmarks/results/patient_diagnosis_seed*.json \\
        --out benchmarks/results/patient_diagnosis.json
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness

GROUPS = ("overall", "public", "withheld")
MODEL_RANKERS = ("model", "model + phenotype similarity")
BASELINES = ("phenotype similarity", "popularity", "disease name tf-idf")


def _run(argv: list[str]) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{shlex.join(argv)} failed ({done.returncode}):\n{done.stderr[-4000:]}")
    return done.stdout


def _cells(block: dict) -> dict:
    return {g: {k: block[g][k] for k in ("mrr", "hits@1", "hits@10", "diagnoses")} for g in GROUPS}


def one_seed(seed: int, args) -> list[dict]:
    work = Path(args.work)
    cohort = work / f"cohort_seed{seed}"
    if not cohort.exists():
        _run(
            [
                "textkg",
                "data",
                "simulate-patients",
                "--out",
                str(cohort),
                "--seed",
                str(seed),
                *shlex.split(args.cohort_args),
            ]
        )
    counts = json.loads((cohort / "cohort.json").read_text())["counts"]
    declared = 1000 * math.ceil(counts["train_patients"]["all"] / 1000)
    common = [
        *("--dataset", str(cohort), "--split", "transductive", "--seed", str(seed), "--no-progress"),
        *("--privacy-unit", "entity", "--unit-entities", str(cohort / "patients.txt")),
        *shlex.split(args.train_args),
    ]
    variants = {"public-only": ["--privacy", "public-only"], "ceiling": ["--privacy", "none"]}
    for eps in args.epsilons.split(","):
        variants[f"dp-eps{eps}"] = [
            *("--privacy", "confidential", "--private-size", str(declared), "--target-epsilon", eps),
            *shlex.split(args.private_args),
        ]
    rows, baselines = [], None
    for name, extra in variants.items():
        run = work / f"seed{seed}_{name}"
        start = time.perf_counter()
        if not (run / "metrics.json").exists():
            _run(["textkg", "train", *common, *extra, "--out", str(run)])
        seconds = time.perf_counter() - start
        out = json.loads(_run(["textkg", "diagnose", str(run)]))
        privacy = json.loads((run / "metrics.json").read_text()).get("privacy") or {}
        rows.append(
            {
                "seed": seed,
                "variant": name,
                "command": shlex.join(["textkg", "train", *common, *extra]),
                "train_seconds": round(seconds, 1),
                "guarantee": privacy.get("guarantee", "none"),
                "epsilon": privacy.get("epsilon"),
                "delta": privacy.get("delta"),
                "unit": privacy.get("unit"),
                "combination_weight": (out.get("combination") or {}).get("weight"),
                **{r: _cells(out["rankers"][r]) for r in MODEL_RANKERS if r in out["rankers"]},
            }
        )
        baselines = baselines or {r: _cells(out["rankers"][r]) for r in BASELINES}
    rows.append({"seed": seed, "variant": "no model", **(baselines or {})})
    return rows


def summarise(rows: list[dict]) -> dict:
    """``{variant: {ranker: {group: mean MRR over seeds}}}`` and the seeds it averages."""
    out: dict = {}
    for row in rows:
        for ranker in (*MODEL_RANKERS, *BASELINES):
            if ranker in row:
                cell = out.setdefault(row["variant"], {}).setdefault(ranker, {g: [] for g in GROUPS})
                for g in GROUPS:
                    cell[g].append(row[ranker][g]["mrr"])
    return {
        v: {r: {g: round(sum(x) / len(x), 4) for g, x in cells.items()} for r, cells in rankers.items()}
        for v, rankers in out.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    _harness.add_common_flags(parser, out="benchmarks/results/patient_diagnosis.json")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--epsilons", default="1,4,8")
    parser.add_argument("--work", default="runs/patients")
    parser.add_argument("--cohort-args", default="")
    parser.add_argument("--train-args", default="")
    parser.add_argument("--private-args", default="")
    parser.add_argument("--merge", nargs="*", default=None)
    args = parser.parse_args()
    if args.merge:
        rows = [row for path in args.merge for row in json.loads(Path(path).read_text())["rows"]]
    else:
        rows = [row for seed in args.seeds.split(",") for row in one_seed(int(seed), args)]
    seeds = sorted({row["seed"] for row in rows})
    _harness.write_results(args.out, _harness.result("patient_diagnosis", rows=rows, seeds=seeds, mean=summarise(rows)))


if __name__ == "__main__":
    main()
