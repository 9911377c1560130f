"""``textkg`` command line: text-augmented, inductive knowledge-graph embeddings, with or without DP.

User errors (:class:`textkg.errors.TextKGError`) are printed as one line
``error: <file:line, field 'x': message>`` on stderr with exit status 2 — no
traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from textkg.cli import components, curation, federation, privacy, results, training
from textkg.errors import TextKGError

#: the command modules, one per topic; each has ``PARSERS`` (command → function adding its parser) and
#: ``HANDLERS`` ((command, sub-command) → function). A new command is one entry in each, plus its name below.
TOPICS = (components, training, results, curation, privacy, federation)
#: the order ``textkg --help`` and docs/cli.md list the commands in
COMMANDS = (
    "data",
    "train",
    "evaluate",
    "predict",
    "models",
    "charlm",
    "encoders",
    "audit",
    "sweep",
    "account",
    "calibrate",
    "release",
    "place",
    "export",
    "federate",
    "federate-app",
    "tune",
    "plot",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="textkg", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="store_true", help="print the version")
    sub = parser.add_subparsers(dest="command")

    parsers = {name: add for topic in TOPICS for name, add in topic.PARSERS.items()}
    for name in COMMANDS:
        parsers[name](sub)
    return parser


def _print_json(obj) -> None:
    from textkg.training.checkpoint import strict_json

    json.dump(strict_json(obj), sys.stdout, indent=2, allow_nan=False)
    sys.stdout.write("\n")


def dispatch(args) -> int:
    if args.version:
        from textkg._version import __version__

        print(__version__)
        return 0
    handlers = {key: handler for topic in TOPICS for key, handler in topic.HANDLERS.items()}
    sub = getattr(args, f"{args.command}_command", None) if args.command else None
    handler = handlers.get((args.command, sub))
    if handler is None:
        build_parser().print_help(sys.stderr)
        return 2
    result = handler(args)
    if result is not None:
        _print_json(result)
    return 0


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    args = build_parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # textkg train --nproc re-runs it under torchrun
    try:
        return dispatch(args)
    except TextKGError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
