"""``textkg federate --mode cross-graph --holders FILE --out DIR [--processes] [--resume DIR]``."""

from __future__ import annotations

import sys
from pathlib import Path

from textkg.errors import ConfigError

#: ``federate``'s modes: FedAvg over one shared vocabulary (Flower), or FKGE across different graphs.
MODES = ("fedavg", "cross-graph")


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
