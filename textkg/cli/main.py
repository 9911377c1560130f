"""``textkg`` command line: text-augmented, inductive knowledge-graph embeddings, with or without DP.

User errors (:class:`textkg.errors.TextKGError`) are printed as one line
``error: <file:line, field 'x': message>`` on stderr with exit status 2 — no
traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys

from textkg.cli import components, curation, diagnosis, federation, privacy, results, training
from textkg.errors import TextKGError

#: the command modules, one per topic; each has ``PARSERS`` (command → function adding its parser) and
#: ``HANDLERS`` ((command, sub-command) → function). A new command is one entry in each, plus its name below.
TOPICS = (components, training, results, diagnosis, curation, privacy, federation)
#: the order ``textkg --help`` and docs/cli.md list the commands in
COMMANDS = (
    "data",
    "train",
    "evaluate",
    "diagnose",
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


def plain(text: str) -> str:
    """Help text as a terminal shows it: a docstring's reST markup (double back-quotes around code, a
    ``:role:`` before a target) removed. Every description taken from a docstring goes through here."""
    return re.sub(r":[a-z]+:`~?([^`]*)`", r"\1", text).replace("``", "")


def build_parser() -> argparse.ArgumentParser:
    return _parsers()[0]


def _parsers() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """``(the textkg parser, each command's parser by name)``."""
    parser = argparse.ArgumentParser(prog="textkg", description=plain(__doc__.splitlines()[0]))
    parser.add_argument("--version", action="store_true", help="print the version")
    sub = parser.add_subparsers(dest="command")

    parsers = {name: add for topic in TOPICS for name, add in topic.PARSERS.items()}
    for name in COMMANDS:
        parsers[name](sub)
    return parser, sub.choices


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
    if handler is None:  # no command, or a group without its sub-command (textkg data): that parser's help
        parser, commands = _parsers()
        commands.get(args.command, parser).print_help(sys.stderr)
        return 2
    result = handler(args)
    code = 0
    if isinstance(result, tuple):  # (output, exit status): a check that ran and found a disagreement
        result, code = result
    if result is not None:
        _print_json(result)
    return code


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        try:
            return _main(argv)
        finally:
            sys.stdout.flush()  # a reader that closed the pipe shows here, not in the interpreter's last flush
    except BrokenPipeError:  # textkg models list | head -1
        return _closed_pipe()


def _closed_pipe() -> int:
    """The reader closed stdout's pipe: exit quietly, as the Python documentation advises (signal module,
    "Note on SIGPIPE"): stdout goes to devnull, so the interpreter's last flush raises nothing, and the exit
    status is a shell's for a process ended by SIGPIPE (128 + 13)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return 141


def _main(argv: list[str] | None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help (0), or a flag argparse refused (2: its message is already printed)
        return exc.code if isinstance(exc.code, int) else 2
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
