"""Commands added by later work (audit, sweep, plot, account, calibrate, place, export); registered here to
keep main.py small (``place`` and ``export``: :mod:`textkg.cli.curation_commands`).

* ``textkg audit DIR [--attack score|loss|rank] [--out FILE]``
* ``textkg sweep --privacy-modes none,full --noise-multipliers 0.5,1,2 --out DIR [train flags]``
* ``textkg plot DIR [DIR ...] [--out DIR]``
* ``textkg release RUN --out DIR [--allow-simulation]``
* ``textkg tune --grid SECTION.KEY=V1,V2 [--grid ...] [--tune-epochs N] --out DIR [train flags]``
* ``textkg federate --partition random|relation|source|column --clients K --rounds R --local-epochs E
  [--engine inprocess|ray] [train flags]``
"""

from __future__ import annotations

import sys
from pathlib import Path

from textkg.errors import ConfigError


def add_parsers(sub) -> None:
    """Add the extra sub-commands' parsers."""
    from textkg.audit.attacks import list_attacks
    from textkg.cli.flags import _add_train_flags

    au = sub.add_parser("audit", help="membership-inference audit of a run trained with --audit-candidates")
    au.add_argument("run_dir", help="a finished run trained with --audit-candidates")
    au.add_argument("--attack", default="score", choices=list_attacks(), help="attack statistic (default: score)")
    au.add_argument(
        "--alpha", type=float, default=0.05, help="1 - confidence of the Clopper-Pearson intervals (default: 0.05)"
    )
    au.add_argument("--out", help="write the result here instead of RUN_DIR/audit.json")

    sw = sub.add_parser("sweep", help="privacy-utility sweep over privacy modes and sigma / target epsilon")
    _add_train_flags(sw)
    sw.add_argument("--privacy-modes", default="none,full", help="comma-separated privacy modes (default: none,full)")
    sw.add_argument("--noise-multipliers", help="comma-separated noise multipliers sigma")
    sw.add_argument("--target-epsilons", help="comma-separated target epsilons (sigma calibrated)")
    sw.add_argument(
        "--audit",
        metavar="ATTACK",
        choices=list_attacks(),
        help="audit every run with this attack (needs --audit-candidates)",
    )

    from textkg.cli import privacy_commands

    privacy_commands.add_parsers(sub)

    rel = sub.add_parser(
        "release",
        help="write only what the DP guarantee covers: weights, public config, "
        "privacy block, model card (docs/privacy.md)",
    )
    rel.add_argument("run_dir", help="a finished run directory")
    rel.add_argument("--out", required=True, help="new or empty directory for the bundle")
    rel.add_argument(
        "--allow-simulation",
        action="store_true",
        help="also release a run not labelled 'dp'; every file then says NOT DIFFERENTIALLY PRIVATE",
    )

    from textkg.cli import curation_commands

    curation_commands.add_parsers(sub)

    fe = sub.add_parser(
        "federate",
        help="federated training across data holders on Flower (FedAvg); record-level DP with train's --privacy flags",
    )
    _add_train_flags(fe)
    _add_federate_flags(fe)
    from textkg.federated.config import DEPRECATED_ENGINES, ENGINES  # no Flower import: works without it

    fe.add_argument(
        "--engine",
        default=None,
        choices=[*ENGINES, *DEPRECATED_ENGINES],
        help="inprocess: every holder in this process (default); ray: Flower's simulation engine, "
        "holders in Ray actors (pip install 'textkg[ray]'); simulation: the old name of ray (deprecated)",
    )
    from textkg.cli.cross_graph_commands import MODES

    fe.add_argument(
        "--mode",
        default="fedavg",
        choices=MODES,
        help="fedavg: one model over a shared vocabulary (default); cross-graph: each holder its own graph and "
        "model, improved through PSI-aligned entities under DP (docs/cross_graph.md)",
    )
    fe.add_argument("--holders", metavar="FILE", help="--mode cross-graph: each holder's dataset, preset and training")
    fe.add_argument(
        "--processes",
        action="store_true",
        help="--mode cross-graph: every holder in its own process (gRPC over mutual TLS on 127.0.0.1) instead of "
        "in this one",
    )

    fa = sub.add_parser(
        "federate-app",
        help="write a Flower App that runs `federate` on Flower's deployment engine "
        "(a SuperLink, one SuperNode per data holder); prints the commands",
    )
    _add_train_flags(fa)
    _add_federate_flags(fa)
    fa.add_argument("--app", required=True, help="new directory for the Flower App (pyproject.toml + settings)")

    tu = sub.add_parser(
        "tune",
        help="choose hyperparameters on validation statements only (a grid; the test split is never ranked)",
    )
    _add_train_flags(tu)
    tu.add_argument(
        "--grid",
        action="append",
        metavar="SECTION.KEY=V1,V2",
        help="values to try, e.g. train.lr=1e-3,5e-3 or model.structural_dropout=0,0.5 (repeat for a product)",
    )
    tu.add_argument("--tune-epochs", type=int, help="epochs per trial (default: the run's epochs)")
    tu.add_argument("--tune-max-minutes", type=float, help="time limit per trial (default: the run's)")

    pl = sub.add_parser("plot", help="PNG plots of run / sweep directories into DIR/plots/")
    pl.add_argument("run_dirs", nargs="+", metavar="DIR", help="run or sweep directories")
    pl.add_argument("--out", help="where the comparison plots of several DIRs go (default: the first DIR's plots/)")


def _add_federate_flags(fe) -> None:
    """``federate``'s own flags (beside train's), shared with ``federate-app``."""
    from textkg.federated.partition import SCHEMES

    fe.add_argument(
        "--clients", type=int, default=None, help="data holders K (random, relation; source and column set their own)"
    )
    fe.add_argument(
        "--partition", default="random", choices=SCHEMES, help="who holds which statement (default: random)"
    )
    fe.add_argument("--partition-file", help="column partition: TSV head, relation, tail, client per statement")
    fe.add_argument(
        "--aggregation",
        default="fedavg",
        choices=("fedavg", "row"),
        help="fedavg: Flower's FedAvg over whole tensors (default); row: a table row is averaged over "
        "the holders that changed it (FKGE; measured no better on hpo-small: docs/results/federated.md)",
    )
    fe.add_argument(
        "--client-target-epsilon",
        type=float,
        default=None,
        help="client-level DP-FedAvg: calibrate the server's noise so that R rounds give this epsilon "
        "about one whole data holder",
    )
    fe.add_argument(
        "--client-noise-multiplier",
        type=float,
        default=None,
        help="client-level DP-FedAvg with this sigma (instead of --client-target-epsilon)",
    )
    fe.add_argument(
        "--client-clip",
        type=float,
        default=1.0,
        help="client-level DP: L2 bound C of each holder's whole update (default: 1.0)",
    )
    fe.add_argument("--client-delta", type=float, default=1e-5, help="client-level DP: delta (default: 1e-5)")
    fe.add_argument(
        "--upload-top-k",
        type=int,
        default=None,
        metavar="K",
        help="each holder uploads only the K structural-table rows that moved most in the round (and every "
        "other tensor whole); a row is averaged over the holders that uploaded it. Under --privacy it is "
        "post-processing of the DP output (no extra epsilon); without it nothing is claimed (default: all rows)",
    )
    fe.add_argument(
        "--noise-decay",
        type=float,
        default=None,
        metavar="GAMMA",
        help="record-level DP: sigma is sigma_0 * GAMMA^r in round r, sigma_0 calibrated so that all rounds "
        "meet --target-epsilon (default: a constant sigma)",
    )
    fe.add_argument("--rounds", type=int, default=3, help="federated rounds R (default: 3)")
    fe.add_argument(
        "--local-epochs",
        type=int,
        default=1,
        help="epochs each holder trains per round E (default: 1); replaces --epochs with R x E",
    )


def audit(args) -> dict:
    from textkg.audit import AUDIT_RESULT, run_audit, write_audit

    if not 0 < args.alpha < 1:
        raise ConfigError("must be in (0, 1)", field="alpha")
    from textkg.pipeline.run_dir import open_run

    run_dir = Path(args.run_dir)
    open_run(run_dir)
    result = run_audit(run_dir, attack=args.attack, alpha=args.alpha)
    out = write_audit(result, Path(args.out) if args.out else run_dir / AUDIT_RESULT)
    print(f"wrote {out}", file=sys.stderr)
    return {"out": str(out), **result.summary()}


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


def plot(args) -> dict:
    from textkg.report import write_comparison_plots, write_run_plots

    dirs = [Path(d) for d in args.run_dirs]
    for d in dirs:
        if not d.is_dir():
            raise ConfigError("no such directory", file=d)
    written = {str(d): [str(p) for p in write_run_plots(d)] for d in dirs}
    if len(dirs) > 1:
        out = Path(args.out) if args.out else dirs[0] / "plots"
        written["comparison"] = [str(p) for p in write_comparison_plots(dirs, out)]
    if not any(written.values()):
        raise ConfigError("nothing to plot: no metrics.json, audit.json or sweep.json", file=dirs[0])
    return {"plots": written}


from textkg.cli.curation_commands import HANDLERS as _CURATION_HANDLERS  # noqa: E402
from textkg.cli.privacy_commands import HANDLERS as _PRIVACY_HANDLERS  # noqa: E402


def release(args) -> dict:
    from textkg.release import release as write_release

    manifest = write_release(args.run_dir, args.out, allow_simulation=args.allow_simulation)
    print(f"wrote {args.out}", file=sys.stderr)
    return {
        "out": str(args.out),
        "label": manifest.get("label", manifest["guarantee"]),
        "epsilon": manifest["epsilon"],
        "delta": manifest["delta"],
        "files": sorted(manifest["files"]),
    }


def _federated_config(args):
    """The :class:`~textkg.federated.runner.FederatedConfig` of ``federate``'s flags."""
    from textkg.federated.runner import FederatedConfig

    default_k = 3 if args.partition in ("random", "relation", "files") else None  # source and column set their own
    return FederatedConfig(
        partition=args.partition,
        clients=args.clients if args.clients is not None else default_k,
        rounds=args.rounds,
        local_epochs=args.local_epochs,
        partition_file=args.partition_file,
        aggregation=args.aggregation,
        client_noise_multiplier=args.client_noise_multiplier,
        client_target_epsilon=args.client_target_epsilon,
        client_clip=args.client_clip,
        client_delta=args.client_delta,
        engine=getattr(args, "engine", None) or "inprocess",  # federate-app has no --engine
        upload_top_k=args.upload_top_k,
        noise_decay=args.noise_decay,
    )


def federate(args) -> dict:
    from textkg.cli.config_loading import build_run_config

    if getattr(args, "mode", "fedavg") == "cross-graph":
        from textkg.cli.cross_graph_commands import federate_cross_graph

        return federate_cross_graph(args)
    if getattr(args, "holders", None):
        raise ConfigError("--holders is for --mode cross-graph", field="holders")
    from textkg.federated.engines import federate as run_federation

    try:
        import flwr  # noqa: F401
    except ImportError:
        raise ConfigError(
            "federated training runs on Flower, which is not installed: pip install 'textkg[federated]'",
            field="federate",
        ) from None
    from textkg.federated.config import DEPRECATED_ENGINES, resume_settings

    if args.engine in DEPRECATED_ENGINES:
        new = DEPRECATED_ENGINES[args.engine]
        print(f"notice: --engine {args.engine} is now called --engine {new}; the old name will go", file=sys.stderr)
        args.engine = new
    if args.resume:  # every setting comes from the run directory, the engine too
        out = Path(args.resume)
        cfg, fed = resume_settings(out)
        if args.engine is not None and args.engine != fed.engine:
            raise ConfigError(
                f"this federation ran on --engine {fed.engine}; resume it there (leave --engine out)", field="engine"
            )
    if (fed.engine if args.resume else args.engine) == "ray":
        from textkg.federated.simulation import require_ray

        require_ray()
    if not args.resume:
        fed = _federated_config(args)
        cfg = build_run_config(args)
        out = Path(args.out) if args.out else Path("runs") / f"federated-{Path(cfg.data.dataset).name}-{args.partition}"
    metrics = run_federation(cfg, fed, out, resume=bool(args.resume), progress=not args.no_progress)
    print(f"wrote {out / 'metrics.json'}", file=sys.stderr)
    test = metrics["test"]
    return {
        "out": str(out),
        "test": {k: test[k] for k in ("mrr", "hits@1", "hits@3", "hits@10", "num_triples") if k in test},
        "rounds": metrics["rounds"],
        "federated": metrics["federated"],
        "privacy": metrics["privacy"],
        "clients": [
            {"name": c["name"], "test_mrr_on_own_share": None if c.get("test") is None else c["test"]["mrr"]}
            if "num_statements" not in c
            # client-level DP: names (and the public test block) only
            else {
                "name": c["name"],
                "num_statements": c["num_statements"],
                "epsilon": None if c["privacy"] is None else c["privacy"].get("epsilon"),
                "test_mrr_on_own_share": None if c.get("test") is None else c["test"]["mrr"],
            }
            for c in metrics["clients"]
        ],
    }


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


def federate_app(args) -> dict:
    """Write a Flower App for the deployment engine, and the commands that run it."""
    import dataclasses
    import shlex

    from textkg.cli.config_loading import build_run_config
    from textkg.federated.config import holder_names

    try:
        from textkg.federated.app import write_app
    except ImportError:
        raise ConfigError(
            "the deployment engine runs on Flower, which is not installed: pip install 'textkg[federated]'",
            field="federate-app",
        ) from None
    if args.resume:
        raise ConfigError("a deployed federation cannot be resumed (the holders' states live on their nodes)")
    if not args.out:
        raise ConfigError("give the server's output directory with --out DIR", field="out")
    fed = _federated_config(args)
    cfg = build_run_config(args)
    if fed.partition_file:  # every process reads it: an absolute path
        fed = dataclasses.replace(fed, partition_file=str(Path(fed.partition_file).resolve()))
    written = write_app(Path(args.app), cfg, fed, Path(args.out))
    holders = holder_names(fed)
    app = shlex.quote(written["app"])
    # the files partition: each node names its own holder file, which no other process sees
    data_file = ' data-file="/path/to/this-holders-statements.tsv"' if fed.partition == "files" else ""
    link = "flower-superlink --insecure --disable-runtime-dependency-installation    # 127.0.0.1:8000"
    nodes = (
        [
            f"flower-supernode --insecure --superlink 127.0.0.1:8000 --port {9094 + k} "
            f"--node-config 'partition-id={k} num-partitions={len(holders)}{data_file}'    # {name}"
            for k, name in enumerate(holders)
        ]
        if holders
        else ["flower-supernode ... --node-config 'partition-id=k num-partitions=K'    # one per holder"]
    )
    print(f"wrote {written['app']}", file=sys.stderr)
    return {
        **written,
        "holders": holders,
        "commands": [
            link,
            *nodes,
            '# ~/.flwr/config.toml (or $FLWR_HOME/config.toml): [superlink.textkg] address = "127.0.0.1:8000", '
            "insecure = true",
            f"flwr run {app} textkg --stream",
        ],
    }


HANDLERS: dict = {
    ("tune", None): tune,
    ("federate", None): federate,
    ("federate-app", None): federate_app,
    **_PRIVACY_HANDLERS,
    ("release", None): release,
    **_CURATION_HANDLERS,
    ("audit", None): audit,
    ("sweep", None): sweep,
    ("plot", None): plot,
}
