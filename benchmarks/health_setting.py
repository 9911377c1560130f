"""The health setting: the ontology public, the annotations confidential. Does DP on them pay?

Issue 27's question on the embedded graph, with issue 39's controls: ``is_a`` public, the annotation relations
confidential; per seed, every run after ``public-only`` starts from it (DPKGE, Han et al. 2022, Algorithm 1).
docs/privacy.md describes each row (control, DP, ceiling, relation popularity), its released and owner's
metrics, and the results; ``controls``, ``summary`` and ``targets`` (:func:`targets`) summarise the rows.

Usage::

    nice -n 10 python benchmarks/health_setting.py --dataset hpo-small --seeds 0,1,2 --epsilons 1,4 \\
        --runs runs/health --out benchmarks/results/health_setting_hpo_small.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import shlex
import statistics
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/: the shared harness
import _harness

CONFIDENTIAL = "has_phenotype,gene_has_phenotype,gene_associated_with_disease"
PRIVACY_KEYS = ("guarantee", "epsilon", "delta", "sample_rate", "private_size", "mode", "private_updates")
PUBLIC, CONTROL, CEILING, POPULARITY = (
    "public-only",
    "public-only continued",
    "non-private annotations (ceiling)",
    "relation popularity",
)
#: the ceiling's private step: no noise to speak of, a clipping bound no gradient reaches. It is labelled
#: ``simulation`` (no ε is claimed), and its ledger goes to the RDP accountant whatever the recipe names:
#: dp-accounting's PLD cannot discretise σ = 1e-9 (``ValueError: Maximum allowed size exceeded`` when the
#: full ``hpo`` ceiling with ``--private-args=--accountant pld`` wrote its privacy block, issue 39)
CEILING_FLAGS = (
    "--mechanism",
    "simulation",
    "--noise-multiplier",
    "1e-9",
    "--max-grad-norm",
    "1000",
    "--accountant",
    "rdp",
)


class Run(NamedTuple):
    """One ``textkg train`` of the benchmark: its row name, seed, folder and privacy flags."""

    name: str
    seed: int
    out: Path
    flags: tuple[str, ...]


def plan(args: argparse.Namespace, seed: int) -> list[Run]:
    """The runs of one seed, in the order they must train (every run after the first starts from it)."""
    public = args.runs / f"public-only-seed{seed}"
    warm = ("--init-from", str(public), *shlex.split(args.continued_args))
    size = ("--private-size", str(args.private_size))
    runs = [
        Run(PUBLIC, seed, public, ("--privacy", "public-only")),
        Run(CONTROL, seed, args.runs / f"public-only-continued-seed{seed}", ("--privacy", "public-only", *warm)),
    ]
    recipe = tuple(shlex.split(args.private_args))  # the private steps' recipe: DP rows and the ceiling alike
    # --private-updates: the DP rows only (the ceiling stays the model trained on everything without noise)
    updates, tag = (), ""
    if args.private_updates != "all":
        updates, tag = ("--private-updates", args.private_updates), f" {args.private_updates}"
    for eps in args.epsilons.split(","):
        flags = ("--privacy", "confidential", *size, "--target-epsilon", eps, *recipe, *updates, *warm)
        folder = f"confidential{tag.replace(' ', '-')}-eps{eps}-seed{seed}"
        runs.append(Run(f"confidential eps={eps}{tag}", seed, args.runs / folder, flags))
    if args.ceiling:
        flags = ("--privacy", "confidential", *size, *recipe, *CEILING_FLAGS, *warm)
        runs.append(Run(CEILING, seed, args.runs / f"non-private-annotations-seed{seed}", flags))
    return runs


def train(args: argparse.Namespace, run: Run) -> None:
    if (run.out / "metrics.json").is_file():  # done before: the JSON is rebuilt from the run directory
        return
    cmd = [sys.executable, "-m", "textkg", "train", "--dataset", args.dataset, "--split", "inductive"]
    cmd += ["--model", args.model, "--epochs", str(args.epochs), "--confidential-relations", args.confidential]
    cmd += [*shlex.split(args.train_args), "--seed", str(run.seed), *run.flags, "--out", str(run.out)]
    subprocess.run(cmd, check=True)


def _owner(private: dict, relation: str) -> dict:
    """The owner's test: every confidential statement at the new terms, ``relation``'s, and each relation's MRR."""
    owner = private["confidential_test"]
    by_relation = {f"mrr {k}": v["mrr"] for k, v in sorted(owner["subsets"].items()) if k.startswith("relation:")}
    return {
        "confidential_mrr": owner["mrr"],
        "has_phenotype_mrr": owner["subsets"].get(f"relation:{relation}", {}).get("mrr"),
        "has_phenotype_hits_at_10": owner["subsets"].get(f"relation:{relation}", {}).get("hits@10"),
        **by_relation,
    }


def row(run: Run, relation: str = "has_phenotype") -> dict:
    """A run's row: the released test (``metrics.json``), the owner's (``private_metrics.json``), privacy."""
    from textkg.pipeline.run_dir import read_run_json

    metrics = read_run_json(run.out / "metrics.json")
    private = read_run_json(run.out / "private_metrics.json")
    test = metrics["test"]
    privacy = metrics["privacy"]
    return {
        "run": run.name,
        "seed": run.seed,
        "run_dir": str(run.out),
        "initialised_from": (metrics["train"].get("initialised_from") or {}).get("run"),
        "epochs": metrics["train"]["epochs"],
        "test": _test_block(test),
        "released": {
            "test_is_a_mrr_new_terms": test["mrr"],
            "placement_model_mrr": test.get("placement", {}).get("mrr"),
            "placement_combined_mrr": test.get("placement_combined", {}).get("mrr"),
        },
        "owner_only": _owner(private, relation),
        "public_validation": {"placement_combined_mrr": _valid_placement(test)},
        "privacy": {k: privacy.get(k) for k in PRIVACY_KEYS},
    }


#: the headline numbers of ``metrics.json``'s test block that a row carries (``test``)
TEST_KEYS = ("mrr", "hits@1", "hits@10", "num_triples")


def _test_block(test: dict) -> dict:
    """``metrics.json`` → ``test``: the ranking's headline numbers and the placement blocks' (no subsets)."""
    out: dict = {k: test.get(k) for k in TEST_KEYS}
    for block in ("placement", "placement_combined"):
        if isinstance(test.get(block), dict):
            out[block] = {k: test[block].get(k) for k in (*TEST_KEYS[:3], "num_queries")}
    return out


def _valid_placement(test: dict) -> float | None:
    """The combined placement's MRR on the public validation terms (what the run chose its scorer on)."""
    return ((test.get("placement_selection") or {}).get("valid") or {}).get("combined", {}).get("mrr")


def popularity_row(run: Run, relation: str = "has_phenotype") -> dict:
    """The owner's test ranked by relation popularity (no model; read from ``run``'s baselines)."""
    from textkg.pipeline.run_dir import read_run_json

    private = read_run_json(run.out / "private_metrics.json")
    popular = private["confidential_test_baselines"]["relation-popularity"]
    return {
        "run": POPULARITY,
        "seed": run.seed,
        "run_dir": str(run.out),
        "released": {},
        "owner_only": _owner({"confidential_test": popular}, relation),
        "privacy": None,
    }


def controls(rows: list[dict]) -> list[dict]:
    """Every DP row beside its control (``public-only continued``, same seed), and the differences.

    Raises:
        ValueError: a DP row has no control of its seed (the comparison would be with a model that
            trained fewer public steps).
    """
    control = {r["seed"]: r for r in rows if r["run"] == CONTROL}
    out = []
    for r in rows:
        if not r["run"].startswith("confidential"):
            continue
        if r["seed"] not in control:
            raise ValueError(f"{r['run']} (seed {r['seed']}) has no '{CONTROL}' row of its seed")
        c = control[r["seed"]]
        if r["initialised_from"] != c["initialised_from"]:
            raise ValueError(f"{r['run']} (seed {r['seed']}) and its control start from different models")
        delta = {
            part: {k: r[part][k] - c[part][k] for k in r[part] if r[part][k] is not None and c[part][k] is not None}
            for part in ("released", "owner_only")
        }
        out.append({"run": r["run"], "seed": r["seed"], "control": c["run_dir"], "minus_control": delta})
    return out


def placement_choice(rows: list[dict]) -> list[dict]:
    """Each DP row's released placement when the user places with the DP model only where it wins on
    public validation, and with the control otherwise (a tie keeps the control).

    The choice reads the two runs' validation placement MRR, computed on public statements only, so it
    is post-processing of the DP run and of the public control: the DP run's guarantee holds for it.
    The row reports the chosen model's test placement, beside the control's.
    """
    control = {r["seed"]: r for r in rows if r["run"] == CONTROL}
    out = []
    for r in rows:
        if not r["run"].startswith("confidential") or r["seed"] not in control:
            continue
        c = control[r["seed"]]
        dp_valid, control_valid = (
            r["public_validation"]["placement_combined_mrr"],
            c["public_validation"]["placement_combined_mrr"],
        )
        use_dp = dp_valid is not None and control_valid is not None and dp_valid > control_valid
        chosen = r if use_dp else c
        out.append(
            {
                "run": r["run"] + ", placement chosen on validation",
                "seed": r["seed"],
                "chosen": r["run"] if use_dp else CONTROL,
                "valid_placement_combined_mrr": {"dp": dp_valid, "control": control_valid},
                "released": dict(chosen["released"]),
                "minus_control": {
                    k: v - c["released"][k]
                    for k, v in chosen["released"].items()
                    if v is not None and c["released"][k] is not None
                },
            }
        )
    return out


#: issue 39's targets for a DP row: (the target, what is compared, the bound it must reach)
TARGETS = (
    ("has_phenotype >= 2x relation popularity", "ratio to popularity", 2.0),
    ("has_phenotype >= 50 % of the non-private ceiling", "ratio to ceiling", 0.5),
    ("has_phenotype above public-only continued", "minus control", 0.0),
    ("released placement (combined) not below public-only continued", "placement minus control", 0.0),
)


def targets(summary_rows: dict, chosen: dict | None = None) -> dict:
    """Issue 39's targets for every DP row, read on the seeds' means (``summary``'s blocks).

    A target is met when the value reaches its bound: the ratios and the released placement's
    difference at or above it, the owner's difference with the control strictly above 0. ``chosen``:
    ``summary`` of the placement chosen on validation, whose released placement is stated beside the
    DP model's own. A row whose comparison row is missing (no ceiling, say) gets ``None``, never a guess.
    """
    chosen = chosen or {}

    def mean(name: str, key: str, block: dict | None = None) -> float | None:
        return ((block if block is not None else summary_rows).get(name) or {}).get(key, {}).get("mean")

    out = {}
    for name in summary_rows:
        if not name.startswith("confidential"):
            continue
        dp, ceiling, popular = (mean(n, "has_phenotype_mrr") for n in (name, CEILING, POPULARITY))
        control = mean(CONTROL, "has_phenotype_mrr")
        place, place_control = mean(name, "placement_combined_mrr"), mean(CONTROL, "placement_combined_mrr")
        values = (
            None if dp is None or not popular else dp / popular,
            None if dp is None or not ceiling else dp / ceiling,
            None if dp is None or control is None else dp - control,
            None if place is None or place_control is None else place - place_control,
        )
        block = {}
        for (target, reading, bound), value in zip(TARGETS, values, strict=True):
            met = None if value is None else (value > bound if reading == "minus control" else value >= bound)
            block[target] = {"reading": reading, "value": value, "bound": bound, "met": met}
        picked = mean(name + ", placement chosen on validation", "placement_combined_mrr", chosen)
        if picked is not None and place_control is not None:
            block["released placement chosen on validation not below public-only continued"] = {
                "reading": "placement minus control",
                "value": picked - place_control,
                "bound": 0.0,
                "met": picked - place_control >= 0.0,
            }
        block["seeds"] = (summary_rows[name].get("has_phenotype_mrr") or {}).get("n")
        out[name] = block
    return out


def targets_on_shared_seeds(rows: list[dict], choice: list[dict]) -> dict:
    """:func:`targets` of each DP row read on its own seeds only: the control, the ceiling and popularity
    averaged over the seeds the DP row has (a row run on fewer seeds, e.g. merged from separate files, is
    never compared with means over other seeds)."""
    out = {}
    for name in dict.fromkeys(r["run"] for r in rows if r["run"].startswith("confidential")):
        seeds = {r["seed"] for r in rows if r["run"] == name}
        mine = [r for r in rows if r["seed"] in seeds]
        out[name] = targets(summary(mine), summary([r for r in choice if r["seed"] in seeds]))[name]
    return out


def summary(rows: list[dict]) -> dict:
    out: dict = {}
    for name in dict.fromkeys(r["run"] for r in rows):
        mine = [r for r in rows if r["run"] == name]
        block = {}
        for part in ("released", "owner_only"):
            for key in mine[0].get(part, {}):
                values = [r[part][key] for r in mine if r[part][key] is not None]
                if values:
                    sd = statistics.stdev(values) if len(values) > 1 else 0.0
                    block[key] = {"mean": statistics.fmean(values), "sd": sd, "n": len(values)}
        out[name] = block
    return out


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dataset", default="hpo-small")
    p.add_argument("--model", default="fused-transe")
    p.add_argument("--epochs", type=int, default=5, help="of run 1, and of every run continued from it")
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--epsilons", default="1,4")
    p.add_argument("--confidential", default=CONFIDENTIAL, help="the confidential relations (comma-separated)")
    p.add_argument("--relation", default="has_phenotype", help="the owner's relation of interest")
    p.add_argument("--private-size", type=int, default=20000, help="the declared public size of the annotations")
    p.add_argument("--no-ceiling", dest="ceiling", action="store_false", help="leave the non-private ceiling out")
    p.add_argument("--train-args", default="", help="more flags for every textkg train (e.g. '--dim 8')")
    p.add_argument(
        "--continued-args",
        default="",
        help="more flags for every run continued from public-only (the control, the DP rows, the ceiling), "
        "e.g. '--eval-every 5': the model after every step, not the epoch the is_a validation liked best",
    )
    p.add_argument(
        "--private-args",
        default="",
        help="flags of the private steps' recipe, for the DP rows and the ceiling alike "
        "(e.g. '--private-batch-size 4096')",
    )
    p.add_argument(
        "--private-updates",
        choices=("all", "private-rows"),
        default="all",
        help="what the DP rows' private steps update (textkg train --private-updates); rows other than 'all' "
        "are named 'confidential eps=E <value>' and get folders of their own; the ceiling keeps 'all'",
    )
    p.add_argument("--runs", type=Path, help="run directories go here (reused when finished)")
    p.add_argument(
        "--merge",
        type=Path,
        nargs="+",
        help="instead of training: the rows of these result files (e.g. one per seed, run on separate cores), "
        "one per (run, seed), the first file's where two have the same; controls, summary and targets recomputed",
    )
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    if args.runs is None and not args.merge:
        p.error("--runs is required unless --merge")
    return args


def merge(files: list[Path]) -> tuple[list[dict], list[str], list[str]]:
    """``(rows, commands, dates)`` of earlier result files: one row per ``(run, seed)``, the first seen, and
    the rows that do not repeat are checked to agree where two files ran the same run (a determinism check)."""
    rows: dict[tuple[str, int], dict] = {}
    commands: list[str] = []
    dates: list[str] = []
    for file in files:
        result = json.loads(file.read_text(encoding="utf-8"))
        commands += result["commands"]
        dates.append(result["date"])
        for r in result["rows"]:
            key = (r["run"], r["seed"])
            if key in rows and rows[key].get("released") != r.get("released"):
                raise SystemExit(f"{file}: {key} differs from an earlier file's row with the same run and seed")
            rows.setdefault(key, r)
    order = {name: i for i, name in enumerate(dict.fromkeys(r["run"] for r in rows.values()))}
    return sorted(rows.values(), key=lambda r: (r["seed"], order[r["run"]])), commands, dates


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    rows = []
    commands = [" ".join(["python", "benchmarks/health_setting.py", *(argv or sys.argv[1:])])]
    dates = [datetime.date.today().isoformat()]
    if args.merge:
        rows, merged, dates = merge(args.merge)
        commands = merged + commands
    for seed in () if args.merge else (int(s) for s in args.seeds.split(",")):
        runs = plan(args, seed)
        for run in runs:
            train(args, run)
            rows.append(row(run, args.relation))
        rows.append(popularity_row(runs[0], args.relation))
    result = {
        "question": "the health setting on "
        + args.dataset
        + ": is_a public, the annotations confidential; does DP on the annotations beat public-only "
        "continued for the same public steps?",
        "commands": commands,
        "note": "released: metrics.json (is_a of new terms, placement); owner_only: private_metrics.json "
        "confidential_test (the annotations at the new terms, never released). Every run but public-only "
        "starts from public-only and trains --epochs more epochs; 'public-only continued' is the control "
        "of every DP row (controls).",
        "machine": _harness.machine(load_at_end_key=True),
        "date": max(dates),
        "rows": rows,
        "controls": controls(rows),
        "placement_chosen_on_validation": (choice := placement_choice(rows)),
        "summary": summary(rows),
        "summary_placement_chosen_on_validation": summary(choice),
        "targets": targets_on_shared_seeds(rows, choice),
    }
    _harness.write_results(args.out, result)
    return result


if __name__ == "__main__":
    main()
