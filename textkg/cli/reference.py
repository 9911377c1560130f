"""docs/cli.md, generated from the argparse parser: every command, flag, default and choice.

Regenerate after changing a flag (tests/cli/test_cli_reference.py fails until you do)::

    python -m textkg.cli.reference > docs/cli.md

The page is the parser read back, so it cannot drift from ``textkg COMMAND --help``; the
hand-written guide with worked examples is docs/usage.md.
"""

from __future__ import annotations

import argparse
import sys

#: the command that rewrites docs/cli.md (the test's failure message quotes it)
REGENERATE = "python -m textkg.cli.reference > docs/cli.md"

_HEAD = f"""# Command-line reference

<!-- Generated from the argparse parser by `{REGENERATE}`; do not edit by hand.
     tests/cli/test_cli_reference.py fails when this page and the parser differ. -->

Every `textkg` command with every flag, its default and its choices, read from the parser
itself (`textkg COMMAND --help` prints the same text). A flag that fills the run's config names
its key (`config train.epochs`) and the dataclass default; a `--model` preset may set its own,
and the config file and then the flags override it (`textkg/cli/config_loading.py`).
What the commands are for, with worked examples and the privacy flags explained:
[docs/usage.md](usage.md). What a privacy label means: [docs/privacy.md](privacy.md).
Back to the [README](../README.md).
"""


def _subcommands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ("textkg",)):
    """``(path, parser, help)`` of every leaf command, in the parser's order."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            for name, sub in action.choices.items():
                if any(isinstance(a, argparse._SubParsersAction) for a in sub._actions):
                    yield from _subcommands(sub, (*path, name))
                else:
                    yield (*path, name), sub, helps.get(name) or ""


def iter_flags(parser: argparse.ArgumentParser):
    """The actions of ``parser`` a user passes (not ``--help``, not sub-command choices)."""
    for action in parser._actions:
        if not isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            yield action


def leaf_commands(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser, str]]:
    """``("textkg data stats", parser, help)`` for every command a user runs."""
    return [(" ".join(path), sub, help_) for path, sub, help_ in _subcommands(parser)]


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("<", "&lt;").replace("\n", " ")


def _flag_name(action: argparse.Action) -> str:
    if not action.option_strings:
        return f"`{action.metavar or action.dest.upper()}`" + (" ..." if action.nargs in ("+", "*") else "")
    metavar = action.metavar or (None if action.choices else action.dest.upper())
    if action.nargs == 0 or not metavar:
        return ", ".join(f"`{s}`" for s in action.option_strings)
    return ", ".join(f"`{s} {metavar}`" for s in action.option_strings)


def _default(action: argparse.Action) -> str:
    if action.required or not action.option_strings:
        return "required"
    if action.default is None or action.default is False or action.default == argparse.SUPPRESS:
        return ""  # (not `in (None, False)`: a default of 0 equals False)
    return f"`{action.default}`"


def _anchor(command: str) -> str:
    return command.replace(" ", "-")


def render(parser: argparse.ArgumentParser | None = None) -> str:
    """The Markdown of docs/cli.md for ``parser`` (default: :func:`textkg.cli.main.build_parser`)."""
    if parser is None:
        from textkg.cli.main import build_parser

        parser = build_parser()
    commands = leaf_commands(parser)
    lines = [_HEAD, "## Commands", "", "| command | what it does |", "|---|---|"]
    lines += [f"| [`{name}`](#{_anchor(name)}) | {_cell(help_)} |" for name, _, help_ in commands]
    lines += ["", "Global flags: `textkg --version` prints the version; `textkg COMMAND --help` a command's flags.", ""]
    for name, sub, help_ in commands:
        lines += [f"## {name}", "", _cell(help_) + ("." if help_ and not help_.endswith(".") else ""), ""]
        if not list(iter_flags(sub)):
            lines += ["No flags.", ""]
            continue
        lines += ["| flag | meaning | default | choices |", "|---|---|---|---|"]
        for action in iter_flags(sub):
            choices = ", ".join(f"`{c}`" for c in action.choices) if action.choices else ""
            lines.append(f"| {_flag_name(action)} | {_cell(action.help or '')} | {_default(action)} | {choices} |")
        lines.append("")
    return "\n".join(lines)


def main() -> int:
    sys.stdout.write(render())
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
