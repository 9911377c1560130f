"""The health setting: the ontology public, the annotations confidential. Does DP on them pay?

Issue 27's question on the embedded graph. ``is_a`` is public; ``has_phenotype``,
``gene_has_phenotype`` and ``gene_associated_with_disease`` are confidential. For each seed:

1. ``public-only`` (U-only, the simplest alternative): trains on ``is_a`` alone, never reads an annotation;
2. ``confidential`` at each ε: DP-SGD on the annotations, started from run 1 (DPKGE's recipe).

Each row reports what a user asks:

* the released test: new terms' ``is_a`` MRR and their placement (model alone, combined);
* the owner's test (``private_metrics.json``, never released): the confidential statements at the
  new terms, overall and ``has_phenotype`` alone.

Usage::

    python benchmarks/health_setting.py --dataset hpo-small --seeds 0,1,2 --epsilons 1,4 \\
        --runs runs/health --out benchmarks/results/health_setting_hpo_small.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/: the shared harness
import _harness

CONFIDENTIAL = "has_phenotype,gene_has_phenotype,gene_associated_with_disease"
PRIVACY_KEYS = ("guarantee", "epsilon", "delta", "sample_rate", "private_size", "mode")


def machine_info() -> dict:
    """The shared machine record (:func:`_harness.machine`), with this script's older load key."""
    record = _harness.machine()
    record["load_average_at_end"] = record["load_average"]
    return record


def train(args: argparse.Namespace, out: Path, *flags: str) -> None:
    if (out / "metrics.json").is_file():  # done before: the JSON is rebuilt from the run directory
        return
    cmd = [sys.executable, "-m", "textkg", "train", "--dataset", args.dataset, "--split", "inductive"]
    cmd += ["--model", args.model, "--epochs", str(args.epochs), "--confidential-relations", CONFIDENTIAL]
    cmd += [*flags, "--out", str(out)]
    subprocess.run(cmd, check=True)


def row(name: str, seed: int, run_dir: Path) -> dict:
    metrics = json.loads((run_dir / "metrics.json").read_text())
    private = json.loads((run_dir / "private_metrics.json").read_text())
    owner = private["confidential_test"]
    popular = private.get("confidential_test_baselines", {}).get("relation-popularity")
    test = metrics["test"]
    placement = test.get("placement", {})
    combined = test.get("placement_combined", {})
    privacy = metrics["privacy"]
    return {
        "run": name,
        "seed": seed,
        "run_dir": str(run_dir),
        "released": {
            "test_is_a_mrr_new_terms": test["mrr"],
            "placement_model_mrr": placement.get("mrr"),
            "placement_combined_mrr": combined.get("mrr"),
        },
        "owner_only": {
            "confidential_mrr": owner["mrr"],
            "has_phenotype_mrr": owner["subsets"].get("relation:has_phenotype", {}).get("mrr"),
            "has_phenotype_hits_at_10": owner["subsets"].get("relation:has_phenotype", {}).get("hits@10"),
            # the same statements ranked by how often a candidate fills the slot in training (no model)
            "popularity_has_phenotype_mrr": None
            if popular is None
            else popular["subsets"].get("relation:has_phenotype", {}).get("mrr"),
        },
        "privacy": {k: privacy.get(k) for k in PRIVACY_KEYS},
    }


def summary(rows: list[dict]) -> dict:
    out: dict = {}
    for name in dict.fromkeys(r["run"] for r in rows):
        mine = [r for r in rows if r["run"] == name]
        block = {}
        for part in ("released", "owner_only"):
            for key in mine[0][part]:
                values = [r[part][key] for r in mine if r[part][key] is not None]
                if values:
                    sd = statistics.stdev(values) if len(values) > 1 else 0.0
                    block[key] = {"mean": statistics.fmean(values), "sd": sd, "n": len(values)}
        out[name] = block
    return out


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dataset", default="hpo-small")
    p.add_argument("--model", default="fused-transe")
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--epsilons", default="1,4")
    p.add_argument("--private-size", type=int, default=20000, help="the declared public size of the annotations")
    p.add_argument("--runs", type=Path, required=True, help="run directories go here (reused when finished)")
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    rows = []
    for seed in (int(s) for s in args.seeds.split(",")):
        public = args.runs / f"public-only-seed{seed}"
        train(args, public, "--seed", str(seed), "--privacy", "public-only")
        rows.append(row("public-only", seed, public))
        for eps in args.epsilons.split(","):
            run_dir = args.runs / f"confidential-eps{eps}-seed{seed}"
            train(
                args,
                run_dir,
                "--seed",
                str(seed),
                "--privacy",
                "confidential",
                "--private-size",
                str(args.private_size),
                "--target-epsilon",
                eps,
                "--init-from",
                str(public),
            )
            rows.append(row(f"confidential eps={eps}", seed, run_dir))
    result = {
        "question": "the health setting on "
        + args.dataset
        + ": is_a public, the annotations confidential; does DP on the annotations beat public-only?",
        "commands": [" ".join(["python", "benchmarks/health_setting.py", *(argv or sys.argv[1:])])],
        "note": "released: metrics.json (is_a of new terms, placement); owner_only: private_metrics.json "
        "confidential_test (the annotations at the new terms, never released)",
        "machine": machine_info(),
        "date": datetime.date.today().isoformat(),
        "rows": rows,
        "summary": summary(rows),
    }
    _harness.write_results(args.out, result)
    return result


if __name__ == "__main__":
    main()
