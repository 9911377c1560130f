"""Every ``textkg`` parser read back: its ``--help`` text and each flag's parsing behaviour.

``python tests/cli/help_snapshot.py > tests/cli/snapshots/help.json`` wrote the snapshot from the
parser of b54adb0, before the command modules were regrouped by topic (issue 40, item 3);
tests/cli/test_help_snapshot.py compares the parser of today against it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def _parsers(parser: argparse.ArgumentParser, path: str = "textkg"):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, f"{path} {name}")


def _flag(action: argparse.Action) -> dict:
    kind = type(action).__name__
    return {
        "option_strings": list(action.option_strings),
        "dest": action.dest,
        "action": kind,
        "type": getattr(action.type, "__name__", None if action.type is None else repr(action.type)),
        "default": repr(action.default),
        "const": repr(action.const),
        "choices": None if action.choices is None or kind == "_SubParsersAction" else [str(c) for c in action.choices],
        "nargs": repr(action.nargs),
        "required": action.required,
        "metavar": repr(action.metavar),
    }


def snapshot() -> dict:
    """``{"textkg train": {"help": ..., "flags": [...]}, ...}`` for the top level, every group and command."""
    from textkg.cli.main import build_parser

    os.environ["COLUMNS"] = "100"  # argparse wraps to the terminal's width
    return {
        path: {"help": p.format_help(), "flags": [_flag(a) for a in p._actions]} for path, p in _parsers(build_parser())
    }


if __name__ == "__main__":  # pragma: no cover
    json.dump(
        {"python": f"{sys.version_info[0]}.{sys.version_info[1]}", "parsers": snapshot()},
        sys.stdout,
        indent=1,
        sort_keys=True,
    )
    sys.stdout.write("\n")
