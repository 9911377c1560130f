"""Training commands: ``train`` (one run), ``sweep`` (a privacy-utility grid), ``tune`` (a grid on validation).

* ``textkg train [--config FILE] [train flags] --out DIR`` (``--resume DIR``, ``--nproc N``)
* ``textkg sweep --privacy-modes none,full --noise-multipliers 0.5,1,2 --out DIR [train flags]``
* ``textkg tune --grid SECTION.KEY=V1,V2 [--grid ...] [--tune-epochs N] --out DIR [train flags]``
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

from textkg.cli.flags import add_train_flags, default_job_flags, number_flag
from textkg.errors import ConfigError
from textkg.training.config import RunConfig


def add_train(sub) -> None:
    """``textkg train``."""
    tr = sub.add_parser(
        "train",
        help="train and evaluate a model",
        description="Train and evaluate a model. Every flag has a default; with none, this is the README's main "
        f"job: textkg train {' '.join(default_job_flags())} (into {default_out(RunConfig())}). Each flag's help "
        "ends with its config key and default.",
    )
    add_train_flags(tr)
    tr.add_argument(
        "--nproc",
        type=number_flag("processes"),
        help="data-parallel training in N processes: runs this command under torchrun --standalone "
        "--nproc-per-node N; private runs keep one process's mechanism and ledger (docs/scaling.md)",
    )


def add_sweep(sub) -> None:
    """``textkg sweep``."""
    from textkg.audit.attacks import list_attacks

    sw = sub.add_parser("sweep", help="privacy-utility sweep over privacy modes and sigma / target epsilon")
    add_train_flags(sw)
    sw.add_argument("--privacy-modes", default="none,full", help="comma-separated privacy modes (default: none,full)")
    sw.add_argument("--noise-multipliers", help="comma-separated noise multipliers sigma")
    sw.add_argument("--target-epsilons", help="comma-separated target epsilons (sigma calibrated)")
    sw.add_argument(
        "--audit",
        metavar="ATTACK",
        choices=list_attacks(),
        help="audit every run with this attack (needs --audit-candidates)",
    )


def add_tune(sub) -> None:
    """``textkg tune``."""
    tu = sub.add_parser(
        "tune",
        help="choose hyperparameters on validation statements only (a grid; the test split is never ranked)",
    )
    add_train_flags(tu)
    tu.add_argument(
        "--grid",
        action="append",
        metavar="SECTION.KEY=V1,V2",
        help="values to try, e.g. train.lr=1e-3,5e-3 or model.structural_dropout=0,0.5 (repeat for a product)",
    )
    tu.add_argument("--tune-epochs", type=number_flag("epochs"), help="epochs per trial (default: the run's epochs)")
    tu.add_argument("--tune-max-minutes", type=number_flag("minutes"), help="time limit per trial (default: the run's)")


def train(args) -> dict | None:
    from textkg.distributed import launch, run_distributed, world_size_from_env
    from textkg.pipeline.job import run

    world = world_size_from_env()
    if getattr(args, "nproc", None) is not None and world == 1:  # textkg train --nproc N: start torchrun
        if not args.resume:  # a bad command line gets its clear error here, before torchrun starts
            from textkg.cli.config_loading import build_run_config
            from textkg.distributed import check_supported

            check_supported(build_run_config(args))
        code = launch(args.nproc, _without_nproc(args.argv))
        if code:
            raise ConfigError(f"torchrun exited with code {code} (the error is above)", field="nproc")
        return None
    if world > 1:
        run = run_distributed  # type: ignore[assignment]  # same signature; metrics on rank 0, None elsewhere

    if args.resume:
        from textkg.pipeline.run_dir import open_run

        run_dir = Path(args.resume)
        opened = open_run(run_dir, what="a started run to resume (was it started?)")
        if not (run_dir / "checkpoint.pt").is_file():
            raise ConfigError("cannot resume: no checkpoint.pt yet", file=run_dir)
        cfg = opened.config
        if args.device is not None:  # where to continue: the recorded device may be one this machine lacks
            cfg = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, device=args.device))
        metrics = run(cfg, run_dir, resume=True, progress=not args.no_progress)
        out = run_dir
        if metrics is None:  # a torchrun rank other than 0: rank 0 reports
            return None
    else:
        from textkg.cli.config_loading import build_run_config

        cfg = build_run_config(args)
        out = Path(args.out) if args.out else default_out(cfg)
        metrics = run(cfg, out, progress=not args.no_progress)
        if metrics is None:
            return None
    print(f"wrote {out / 'metrics.json'}", file=sys.stderr)
    summary = {}
    if metrics["test"].get("placement"):  # an ontology's new terms: where their parents rank
        from textkg.evaluation.placement.methods import placement_reading

        placement = {k: v for k, v in metrics["test"].items() if k.startswith("placement")}
        selection = placement.get("placement_selection")
        summary["placement"] = {
            "reading": placement_reading(placement),
            "chosen_on_validation": selection["chosen"] if selection else None,
            "model": placement["placement"],
            **({"combined": placement["placement_combined"]} if selection else {}),
            "baselines": placement.get("placement_baselines", {}),
            "next": f"textkg place {out} --obo NEW.obo --out placed.tsv (or --terms FILE.tsv: id, name, definition)",
        }
        summary["placement"].update(_placement_extras(placement))
        adaptation = metrics.get("encoder_adaptation") or {}
        if adaptation:  # which text encoder placed the terms (textkg.pipeline.adaptation)
            summary["placement"]["encoder"] = (
                f"MiniLM adapted to this ontology's is_a pairs ({adaptation['steps']} steps; --adapt-encoder 0: off)"
                if adaptation.get("steps")
                else f"not adapted to this ontology: {adaptation.get('why')}"
            )
    vote = metrics["test"].get("neighbour_vote")
    if vote and "combined" in vote:  # new entities: what their nearest known neighbours add to the model
        gain = vote["combined"]["mrr"] - metrics["test"]["mrr"]
        summary["new_entities"] = {
            "reading": f"test MRR {metrics['test']['mrr']:.3f} from the model alone; "
            f"{vote['combined']['mrr']:.3f} with the vote of each new entity's {vote['k']} nearest known "
            f"entities by description{_spread_words(vote)} (weight {vote['weight']:g}"
            f"{', spread ' + format(vote['spread_weight'], 'g') if vote.get('spread_weight') else ''}, chosen on "
            f"validation; {gain:+.3f}); {vote['vote_only']['mrr']:.3f} from that vote alone",
            "model": metrics["test"]["mrr"],
            "combined": vote["combined"]["mrr"],
            "vote_only": vote["vote_only"]["mrr"],
        }
    if metrics["train"].get("warning"):
        summary["warning"] = metrics["train"]["warning"]
    return {
        **summary,
        "out": str(out),
        "test": _headline(metrics["test"]),
        "valid": metrics["valid"],
        "privacy": metrics["privacy"],
    }


def default_out(cfg: RunConfig) -> Path:
    """``textkg train``'s run directory when ``--out`` is not given: ``runs/MODEL-DATASET-SPLIT``."""
    return Path("runs") / f"{cfg.model_name}-{Path(cfg.data.dataset).name}-{cfg.data.split}"


def _placement_extras(placement: dict) -> dict:
    """The summary's names-only reading and what an inductive run cannot propose (issue 37)."""
    from textkg.evaluation.placement.methods import placement_reading

    out: dict = {}
    names = placement.get("placement_names_only")
    if names and names.get("placement_selection"):
        reading = placement_reading(names).replace("New terms:", "New terms read from their names alone:", 1)
        out["names_only"] = {
            "reading": reading,
            "chosen_on_validation": names["placement_selection"]["chosen"],
            "combined": names["placement_combined"],
            "baselines": names.get("placement_baselines", {}),
        }
    held = placement.get("placement_held_out_terms")
    if held:
        out["held_out_terms"] = (
            f"{held:,} held-out (validation and test) terms are not in the training graph, so textkg place "
            "never proposes them as parents; to place real additions, train on the whole release "
            "(--split transductive)"
        )
    return out


def _spread_words(vote: dict) -> str:
    """How the vote reached new answers, when validation chose the spread."""
    if not vote.get("spread_weight"):
        return ""
    return f", spread to candidates described like their answers ({vote.get('spread_k', '?')} nearest each)"


def _without_nproc(argv: list[str]) -> list[str]:
    """``argv`` minus ``--nproc N`` / ``--nproc=N``."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == "--nproc":
            skip = True
        elif not a.startswith("--nproc="):
            out.append(a)
    return out


def _headline(m: dict) -> dict:
    return {k: m[k] for k in ("mrr", "mr", "hits@1", "hits@3", "hits@10", "num_triples") if k in m}


def _floats(text: str | None, field: str) -> list[float]:
    if not text:
        return []
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(f"expected comma-separated numbers, got {text!r}", field=field) from None


def sweep(args) -> dict:
    from textkg.cli.config_loading import build_run_config
    from textkg.sweep import SWEEP_FILE, make_grid, run_sweep

    for flag in ("privacy", "noise_multiplier", "target_epsilon", "resume"):
        if getattr(args, flag, None) is not None:
            plural = {
                "privacy": "--privacy-modes",
                "noise_multiplier": "--noise-multipliers",
                "target_epsilon": "--target-epsilons",
            }.get(flag)
            hint = f"; use {plural}" if plural else "; re-run the sweep with the same --out to resume it"
            raise ConfigError(f"--{flag.replace('_', '-')} is set by the sweep grid{hint}", field=flag)
    if not args.out:
        raise ConfigError("give the sweep directory with --out DIR", field="out")
    grid = make_grid(
        [m.strip() for m in args.privacy_modes.split(",") if m.strip()],
        noise_multipliers=_floats(args.noise_multipliers, "noise_multipliers"),
        target_epsilons=_floats(args.target_epsilons, "target_epsilons"),
    )
    base = build_run_config(args)
    rows = run_sweep(base, grid, Path(args.out), audit_attack=args.audit, progress=not args.no_progress)
    out = Path(args.out) / SWEEP_FILE
    print(f"wrote {out}", file=sys.stderr)
    return {"out": str(out), "rows": rows}


def tune(args) -> dict:
    from textkg.cli.config_loading import build_run_config
    from textkg.tune import BEST_CONFIG, parse_grid, run_tune

    if args.resume:
        raise ConfigError("tune resumes by itself: run it again with the same --out", field="resume")
    grid = parse_grid(args.grid or [])
    cfg = build_run_config(args)
    out = Path(args.out) if args.out else Path("runs") / f"tune-{cfg.model_name}-{Path(cfg.data.dataset).name}"
    record = run_tune(
        cfg,
        grid,
        out,
        tune_epochs=args.tune_epochs,
        tune_max_minutes=args.tune_max_minutes,
        progress=not args.no_progress,
    )
    print(f"wrote {out / 'tune.json'} and {out / BEST_CONFIG}", file=sys.stderr)
    best = record["best"]
    return {
        "out": str(out),
        "best": best,
        "reading": f"best of {len(record['rows'])} settings by validation MRR: {best['name']} "
        f"(valid MRR {best['valid_mrr']:.4f}); the test split was not used",
        "rows": [{"name": r["name"], "valid_mrr": r["valid"]["mrr"], "seconds": r["seconds"]} for r in record["rows"]],
        "next": f"textkg train --config {out / BEST_CONFIG} --out RUN",
    }


PARSERS = {"train": add_train, "sweep": add_sweep, "tune": add_tune}
HANDLERS: dict = {("train", None): train, ("sweep", None): sweep, ("tune", None): tune}
