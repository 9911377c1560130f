"""Federation commands: ``federate`` (FedAvg on Flower, or ``--mode cross-graph``) and ``federate-app``.

* ``textkg federate --partition random|relation|source|column|files --clients K --rounds R --local-epochs E
  [--engine inprocess|ray] [train flags]``
* ``textkg federate --mode cross-graph --holders FILE --out DIR [--processes] [--resume DIR]``
* ``textkg federate-app --app DIR --out DIR [federate flags]``: a Flower App for the deployment engine
"""

from __future__ import annotations

import sys
from pathlib import Path

from textkg.cli.flags import add_train_flags, number_flag
from textkg.errors import ConfigError

#: ``federate``'s modes: FedAvg over one shared vocabulary (Flower), or FKGE across different graphs.
MODES = ("fedavg", "cross-graph")


def add_federate(sub) -> None:
    """``textkg federate``."""
    fe = sub.add_parser(
        "federate",
        help="federated training across data holders on Flower (FedAvg); record-level DP with train's --privacy flags",
    )
    add_train_flags(fe)
    _add_federate_flags(fe)
    from textkg.federated.config import DEPRECATED_ENGINES, ENGINES  # no Flower import: works without it

    fe.add_argument(
        "--engine",
        default=None,
        choices=[*ENGINES, *DEPRECATED_ENGINES],
        help="inprocess: every holder in this process (default); ray: Flower's simulation engine, "
        "holders in Ray actors (pip install 'textkg[ray]'); simulation: the old name of ray (deprecated)",
    )
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


def add_federate_app(sub) -> None:
    """``textkg federate-app``."""
    fa = sub.add_parser(
        "federate-app",
        help="write a Flower App that runs `federate` on Flower's deployment engine "
        "(a SuperLink, one SuperNode per data holder); prints the commands",
    )
    add_train_flags(fa)
    _add_federate_flags(fa)
    fa.add_argument("--app", required=True, help="new directory for the Flower App (pyproject.toml + settings)")


def _add_federate_flags(fe) -> None:
    """``federate``'s own flags (beside train's), shared with ``federate-app``."""
    from textkg.federated.partition import SCHEMES

    fe.add_argument(
        "--clients",
        type=number_flag("clients"),
        default=None,
        help="data holders K (random, relation; source and column set their own)",
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
        type=number_flag("epsilon"),
        default=None,
        help="client-level DP-FedAvg: calibrate the server's noise so that R rounds give this epsilon "
        "about one whole data holder",
    )
    fe.add_argument(
        "--client-noise-multiplier",
        type=number_flag("sigma"),
        default=None,
        help="client-level DP-FedAvg with this sigma (instead of --client-target-epsilon)",
    )
    fe.add_argument(
        "--client-clip",
        type=number_flag("clip"),
        default=1.0,
        help="client-level DP: L2 bound C of each holder's whole update (default: 1.0)",
    )
    fe.add_argument(
        "--client-delta", type=number_flag("delta"), default=1e-5, help="client-level DP: delta (default: 1e-5)"
    )
    fe.add_argument(
        "--upload-top-k",
        type=number_flag("items"),
        default=None,
        metavar="K",
        help="each holder uploads only the K structural-table rows that moved most in the round (and every "
        "other tensor whole); a row is averaged over the holders that uploaded it. Under --privacy it is "
        "post-processing of the DP output (no extra epsilon); without it nothing is claimed (default: all rows)",
    )
    fe.add_argument(
        "--noise-decay",
        type=number_flag("noise_decay"),
        default=None,
        metavar="GAMMA",
        help="record-level DP: sigma is sigma_0 * GAMMA^r in round r, sigma_0 calibrated so that all rounds "
        "meet --target-epsilon (default: a constant sigma)",
    )
    fe.add_argument("--rounds", type=number_flag("rounds"), default=3, help="federated rounds R (default: 3)")
    fe.add_argument(
        "--local-epochs",
        type=number_flag("epochs"),
        default=1,
        help="epochs each holder trains per round E (default: 1); replaces --epochs with R x E",
    )


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


def federate_app(args) -> dict:
    """Write a Flower App for the deployment engine, and the commands that run it."""
    import dataclasses
    import shlex

    from textkg.cli.config_loading import build_run_config
    from textkg.federated.config import holder_names

    try:
        from textkg.federated.app import node_config_line, write_app
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
    # each node's own settings file and state folder (the server's messages name neither); the files
    # partition: each node also names its own holder file, which no other process sees
    link = "flower-superlink --insecure --disable-runtime-dependency-installation    # 127.0.0.1:8000"
    states = Path(written["out"]).with_name(Path(written["out"]).name + "-holders")
    nodes = (
        [
            f"flower-supernode --insecure --superlink 127.0.0.1:8000 --port {9094 + k} --node-config "
            + shlex.quote(
                node_config_line(
                    k,
                    len(holders),
                    settings=Path(written["settings"]).resolve(),  # the holder's own copy on its machine
                    state_dir=states / name,
                    data_file=fed.partition == "files",
                )
            )
            + f"    # {name}"
            for k, name in enumerate(holders)
        ]
        if holders
        else [
            'flower-supernode ... --node-config \'partition-id=k num-partitions=K settings="..." '
            + 'state-dir="..."\'    # one per holder'
        ]
    )
    print(f"wrote {written['app']}", file=sys.stderr)
    return {
        **written,
        "holders": holders,
        "commands": [
            link,
            *nodes,
            "# a SuperNode runs the ClientApp the submitted app names (Flower 1.42 cannot pin a local app): "
            "connect holders only to a SuperLink whose submitters they trust (docs/security.md)",
            '# ~/.flwr/config.toml (or $FLWR_HOME/config.toml): [superlink.textkg] address = "127.0.0.1:8000", '
            "insecure = true",
            f"flwr run {app} textkg --stream",
        ],
    }


def refuse_train_flags(args) -> None:
    """Each holder's settings come from the holders file: a train flag on the command line is an error."""
    from textkg.cli.config_loading import FLAG_FIELDS, MODEL_FLAGS

    for dest in [*FLAG_FIELDS, *MODEL_FLAGS, "model", "config"]:
        if getattr(args, dest, None) is not None:
            flag = "--" + dest.replace("_", "-")
            raise ConfigError(
                f"with --mode cross-graph every holder's settings come from --holders; {flag} is not used",
                field=dest,
            )


def federate_cross_graph(args) -> dict:
    """Run (or resume) a cross-graph federation from the CLI; returns the summary printed as JSON."""
    from textkg.federated.cross_graph.config import load_holders, resume_holders
    from textkg.federated.cross_graph.runner import run_cross_graph

    refuse_train_flags(args)
    if getattr(args, "engine", None) not in (None, "inprocess"):
        raise ConfigError(
            "--mode cross-graph runs in process, or with --processes on gRPC (mutual TLS)", field="engine"
        )
    if args.resume:
        out = Path(args.resume)
        config = resume_holders(out)
    else:
        if not args.holders:
            raise ConfigError("--mode cross-graph needs --holders FILE", field="holders")
        config = load_holders(args.holders)
        out = Path(args.out) if args.out else Path("runs") / f"cross-graph-{Path(args.holders).stem}"
    if getattr(args, "processes", False):
        from textkg.federated.cross_graph.distributed import run_cross_graph_processes

        summary = run_cross_graph_processes(config, out, resume=bool(args.resume))
    else:
        summary = run_cross_graph(config, out, resume=bool(args.resume), progress=not args.no_progress)
    print(f"wrote {out / 'metrics.json'}", file=sys.stderr)
    return {"out": str(out), **summary}


PARSERS = {"federate": add_federate, "federate-app": add_federate_app}
HANDLERS: dict = {("federate", None): federate, ("federate-app", None): federate_app}
