"""Issue 51, item 8: every numeric flag of every command has its range checked in one place.

At 1a0007a ``--noise-multiplier 1e-320`` and ``1e300``, ``--orders 1e308`` (``train`` and ``account``)
and ``--temperature 1e-320`` crashed with a traceback, and ``account --orders 2-10000000`` ran for
minutes. Every numeric flag now takes a :class:`textkg.cli.flags.NumberFlag` from
:data:`textkg.cli.flags.NUMBERS` (``--orders``: :func:`textkg.cli.flags.rdp_orders`), so each of
these values exits 2 at once, naming the flag and its range, without a traceback.
"""

from __future__ import annotations

import argparse
import time

import pytest

import textkg.cli.main as cli

HOSTILE = ("nan", "inf", "-inf", "1e-320", "1e300")


def _parsers(parser: argparse.ArgumentParser, words: tuple[str, ...] = ()):
    yield words, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, (*words, name))


def _numeric_flags() -> list[tuple[tuple[str, ...], str, object]]:
    """``(command words, option, type)`` of every flag whose value is a number (or the RDP orders)."""
    out = []
    for words, parser in _parsers(cli.build_parser()):
        for action in parser._actions:
            # a NumberFlag (textkg.cli.flags) has a kind; --orders is textkg.cli.flags.rdp_orders
            numeric = action.type in (int, float) or hasattr(action.type, "kind") or action.dest == "orders"
            if numeric and action.option_strings:
                out.append((words, action.option_strings[-1], action.type))
    return out


FLAGS = _numeric_flags()
PARSER = cli.build_parser()


@pytest.fixture
def one_parser(monkeypatch):
    """``main`` with one parser built for the whole module (building one takes a third of a second)."""
    monkeypatch.setattr(cli, "build_parser", lambda: PARSER)


def _main(argv: list[str], capsys) -> tuple[object, str, float]:
    start = time.monotonic()
    try:
        code: object = cli.main(argv)
    except SystemExit as exc:  # argparse's exit
        code = exc.code
    except Exception as exc:  # a traceback: what the attack gave at 1a0007a
        code = repr(exc)
    return code, capsys.readouterr().err, time.monotonic() - start


def test_every_numeric_flag_declares_its_range():
    assert len(FLAGS) > 100
    bare = [f"textkg {' '.join(words)} {option}" for words, option, kind in FLAGS if kind in (int, float)]
    assert not bare, "numeric flags without a range (use textkg.cli.flags.number_flag): " + ", ".join(bare)
    orders = [(words, kind) for words, option, kind in FLAGS if option == "--orders"]
    assert {words for words, _ in orders} >= {("train",), ("account",), ("calibrate",)}
    assert all(getattr(kind, "__name__", "") == "rdp_orders" for _, kind in orders), orders


@pytest.mark.parametrize(
    "words, option", [pytest.param(w, o, id=" ".join((*w, o))) for w, o in sorted({(w, o) for w, o, _ in FLAGS})]
)
def test_a_hostile_number_exits_2_naming_the_flag(one_parser, capsys, words, option):
    for value in HOSTILE:
        code, err, seconds = _main([*words, f"{option}={value}"], capsys)  # "=": -inf is not an option
        assert code == 2, (value, code, err[-500:])
        assert f"argument {option}: " in err and "Traceback" not in err, (value, err[-500:])
        said = err.strip().splitlines()[-1]  # argparse's one error line: the flag, its range, the value
        assert "must be" in said or "at most" in said, (value, said)
        assert seconds < 5, (value, seconds)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["train", "--noise-multiplier", "1e-320"], "in [1e-09, 10000] (config privacy.noise_multiplier)"),
        (["train", "--noise-multiplier", "1e300"], "in [1e-09, 10000] (config privacy.noise_multiplier)"),
        (["train", "--temperature", "1e-320"], "in [0.001, 1000] (config train.temperature)"),
        (["train", "--orders", "1e308"], "at most 10000"),
        (["account", "--orders", "1e308"], "at most 10000"),
        (["account", "--orders", "2-10000000"], "at most 2000 orders"),
        (["account", "--orders", "2-64," * 40 + "2-10000000"], "at most 2000 orders"),
        (["account", "--noise-multiplier", "1e-320"], "in [1e-09, 10000]"),
        (["account", "--noise-multiplier", "1e300"], "in [1e-09, 10000]"),
        (["account", "--steps", "9" * 5000], "an integer in [1, 1e+09]"),
    ],
)
def test_the_flags_that_crashed_exit_2_at_once(capsys, argv, message):
    full = {
        "train": ["--dataset", "tests/fixtures/tiny_blp", "--model", "transe", "--no-progress", "--out", "unused"],
        "account": ["--sample-rate", "0.01", "--noise-multiplier", "1", "--steps", "10", "--delta", "1e-5"],
    }[argv[0]]
    code, err, seconds = _main([argv[0], *full, *argv[1:]], capsys)  # a whole command: the flag still stops it
    assert code == 2 and message in err and "Traceback" not in err, err[-500:]
    assert seconds < 5


def test_the_bounds_keep_what_the_commands_accept(capsys):
    """The edges of the ranges run: the accountant at sigma 1e-9 and 1e4, 1e9 steps, order 10000."""
    base = ["account", "--sample-rate", "0.01", "--delta", "1e-5"]
    for extra in (
        ["--noise-multiplier", "1e-9", "--steps", "1000000000"],
        ["--noise-multiplier", "10000", "--steps", "1"],
        ["--noise-multiplier", "1", "--steps", "10", "--orders", "1.5,10000"],
    ):
        code, err, seconds = _main([*base, *extra], capsys)
        assert code == 0, err
        assert seconds < 10
