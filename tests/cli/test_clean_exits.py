"""Clean exits (issue 50, item 5): a reader that closes the pipe (``textkg models list | head -1``) ends
textkg quietly; a group without its sub-command (``textkg data``) prints that group's usage and exits 2;
every help text is plain text, without a docstring's reST markup."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import pytest

from textkg.cli.main import build_parser, main


def _parsers(parser: argparse.ArgumentParser, path: str = "textkg"):
    """``(path, parser)`` of the top level, every command and every group's sub-command."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, f"{path} {name}")


def _has_subcommands(parser: argparse.ArgumentParser) -> bool:
    return any(isinstance(a, argparse._SubParsersAction) for a in parser._actions)


GROUPS = [path.split()[1] for path, p in _parsers(build_parser()) if path != "textkg" and _has_subcommands(p)]


@pytest.mark.parametrize("argv", [["models", "list"], ["--help"]], ids=["models list", "--help"])
def test_a_closed_pipe_ends_quietly(argv):
    """stdout is a pipe whose reader is gone before textkg writes: no traceback, exit 141 (SIGPIPE's status),
    or 0 where argparse's help swallowed the error itself."""
    read, write = os.pipe()
    os.close(read)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "textkg", *argv], stdout=write, stderr=subprocess.PIPE, timeout=300, check=False
        )
    finally:
        os.close(write)
    err = proc.stderr.decode()
    assert "Traceback" not in err and "BrokenPipeError" not in err and "Exception ignored" not in err, err
    assert proc.returncode == (141 if argv == ["models", "list"] else proc.returncode) and proc.returncode in (0, 141)


def test_every_group_is_found():
    assert {"data", "models", "charlm", "encoders"} <= set(GROUPS)


@pytest.mark.parametrize("group", GROUPS)
def test_a_group_without_its_subcommand_prints_its_own_usage(group, capsys):
    capsys.readouterr()
    assert main([group]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"usage: textkg {group} ")
    assert "federate-app" not in captured.err  # not the top-level list of commands


def test_no_command_prints_the_top_level_usage(capsys):
    capsys.readouterr()
    assert main([]) == 2
    assert capsys.readouterr().err.startswith("usage: textkg [-h]")


def test_every_help_text_is_plain(monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    marked = [path for path, p in _parsers(build_parser()) if "``" in p.format_help() or ":mod:`" in p.format_help()]
    assert not marked
    assert build_parser().format_help().count("textkg command line: text-augmented") == 1


def test_plain_removes_rest_markup():
    from textkg.cli.main import plain

    assert plain("``textkg`` reads :mod:`textkg.place` and :class:`~textkg.predict.Predictor`") == (
        "textkg reads textkg.place and textkg.predict.Predictor"
    )
