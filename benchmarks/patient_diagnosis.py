"""Issue 52: diagnose new patients of a simulated cohort under patient-level DP, beside its baselines.

Per seed: ``textkg data simulate-patients``, one ``textkg train`` per variant (``public-only``, ``ceiling``,
``dp-epsE``, ``dp-centroids-epsE``, ``dp-statement-epsE``) and ``textkg diagnose`` of each run;
docs/diagnosis.md ("Results") gives each variant's flags, the baselines and the table. ``--merge`` joins
per-seed files (means over seeds).

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

from textkg.data.cohort import CohortRecipe
from textkg.privacy.group import group_guarantee, record_budget_for_group

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
    record = json.loads((cohort / "cohort.json").read_text())
    declared = 1000 * math.ceil(record["counts"]["train_patients"]["all"] / 1000)
    patients = cohort / "patients.txt"
    common = [
        *("--dataset", str(cohort), "--split", "transductive", "--seed", str(seed), "--no-progress"),
        *shlex.split(args.train_args),
    ]
    units = ["--privacy-unit", "entity", "--unit-entities", str(patients)]
    if (cohort / "diseases.txt").exists():  # each patient ranks its diagnosis against the other diseases
        units += ["--unit-targets", "diagnosed_with", "--unit-candidates", str(cohort / "diseases.txt")]
    variants = {"public-only": [*units, "--privacy", "public-only"], "ceiling": [*units, "--privacy", "none"]}
    for eps in args.epsilons.split(","):
        variants[f"dp-eps{eps}"] = [  # patient-level DP-SGD (explicit: the default is the centroid release)
            *units,
            *("--privacy", "confidential", "--private-size", str(declared), "--target-epsilon", eps),
            *("--private-updates", "all"),
            *shlex.split(args.private_args),
        ]
        if (cohort / "diseases.txt").exists():  # one release of each withheld disease's mean patient
            variants[f"dp-centroids-eps{eps}"] = [
                *units,
                *("--privacy", "confidential", "--private-size", str(declared), "--target-epsilon", eps),
                *("--private-updates", "centroids"),
                *shlex.split(args.private_args),
            ]
    group = statement_budgets(record, patients, declared, args)
    targets = {}
    for eps, budget in group["budgets"].items():
        targets[f"dp-statement-eps{eps}"] = budget
        print(
            f"seed {seed}: per patient (ε = {eps}, δ = {budget['per_patient_delta']:.3g}) over k = {group['k']} "
            f"statements is per statement (ε = {budget['statement_epsilon']:.4g}, "
            f"δ = {budget['statement_delta']:.3g})",
            file=sys.stderr,
        )
        variants[f"dp-statement-eps{eps}"] = [
            *("--privacy-unit", "statement", "--unit-entities", str(patients), "--privacy", "confidential"),
            *("--private-size", str(group["declared_statements"])),
            *("--target-epsilon", repr(budget["statement_epsilon"]), "--delta", repr(budget["statement_delta"])),
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
                **per_patient(privacy, group["k"] if name in targets else None),
                **({"group_privacy_target": targets[name]} if name in targets else {}),
                "combination_weight": (out.get("combination") or {}).get("weight"),
                **{r: _cells(out["rankers"][r]) for r in MODEL_RANKERS if r in out["rankers"]},
            }
        )
        baselines = baselines or {r: _cells(out["rankers"][r]) for r in BASELINES}
    rows.append({"seed": seed, "variant": "no model", **(baselines or {})})
    return rows


def statement_budgets(record: dict, patients: Path, declared_patients: int, args) -> dict:
    """The statement-level runs' settings: k (the recipe's public bound on one patient's statements), the
    declared number of private statements, and per E of ``--statement-epsilons`` the per-statement (ε_s, δ_s)
    whose group guarantee over k statements is the patient-level target (E, 1/(10 N̄_u))."""
    k = record.get("max_statements_per_patient")
    if k is None:  # a cohort drawn before cohort.json recorded it: the same bound, from its recipe
        k = CohortRecipe(**record["recipe"]).max_statements_per_patient
    listed = set(patients.read_text(encoding="utf-8").split())
    train = (patients.parent / "train.tsv").read_text(encoding="utf-8").splitlines()
    statements = sum(1 for line in train if not listed.isdisjoint(line.split("\t")[::2]))
    delta_u = 1 / (10 * declared_patients)  # the patient-level runs' default δ
    epsilons = args.epsilons if args.statement_epsilons is None else args.statement_epsilons
    budgets = {}
    for eps in filter(None, epsilons.split(",")):
        eps_s, delta_s = record_budget_for_group(epsilon=float(eps), delta=delta_u, group_size=k)
        budgets[eps] = {
            "per_patient_epsilon": float(eps),
            "per_patient_delta": delta_u,
            "statement_epsilon": eps_s,
            "statement_delta": delta_s,
        }
    return {"k": k, "declared_statements": 1000 * math.ceil(statements / 1000), "budgets": budgets}


def per_patient(privacy: dict, k: int | None) -> dict:
    """A statement-level run's per-patient (ε, δ) by group privacy over ``k`` statements (of the ε it
    reached); a patient-level run's are its own ε and δ."""
    eps, delta = privacy.get("epsilon"), privacy.get("delta")
    if k is None:
        patient = privacy.get("unit") == "entity" and eps is not None
        return {"per_patient_epsilon": eps if patient else None, "per_patient_delta": delta if patient else None}
    block: dict = {"group_size": k, "statement_epsilon": eps, "statement_delta": delta}
    if eps is None or delta is None:
        return {**block, "per_patient_epsilon": None, "per_patient_delta": None}
    eps_u, delta_u = group_guarantee(epsilon=eps, delta=delta, group_size=k)
    return {**block, "per_patient_epsilon": eps_u, "per_patient_delta": delta_u}


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
    parser.add_argument(
        "--statement-epsilons",
        default=None,
        help="per-patient ε of the statement-level (group privacy) rows; default: --epsilons; '' for none",
    )
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
