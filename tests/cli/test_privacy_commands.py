"""``textkg account`` / ``textkg calibrate`` against reference values and each other."""

from __future__ import annotations

import json

import pytest

from textkg.cli.main import main

pytestmark = pytest.mark.portability  # rerun by .ci/run under another thread count and ISA


def _run(argv, capsys):
    try:
        code = main(argv)
    except SystemExit as exc:  # a flag out of its range stops argparse (textkg.cli.flags.NUMBERS): exit 2
        code = exc.code
    out, err = capsys.readouterr()
    return code, (json.loads(out) if code == 0 else None), err


def test_account_matches_opacus_reference(capsys):
    # Opacus's own test value: sigma 1.5, q 0.04, 2250 steps, delta 1e-5 (RDP accountant, CKS conversion)
    code, out, _ = _run(
        ["account", "--sample-rate", "0.04", "--noise-multiplier", "1.5", "--steps", "2250", "--delta", "1e-5"], capsys
    )
    assert code == 0
    assert out["epsilon"] == pytest.approx(7.32911117143, rel=1e-9)
    assert 1 < out["alpha"] < 1024


def test_seed_integer_grid_is_never_tighter(capsys):
    args = ["account", "--sample-rate", "0.0019", "--noise-multiplier", "1.0", "--steps", "7973", "--delta", "1e-5"]
    _, default, _ = _run(args, capsys)
    _, integer, _ = _run([*args, "--orders", "2-64"], capsys)
    assert integer["orders"] == {"min": 2.0, "max": 64.0, "count": 63}
    assert float(integer["alpha"]).is_integer()
    # the default grid contains 2..63; it can only do as well or better
    assert default["epsilon"] <= integer["epsilon"] + 1e-12


def test_calibrate_never_overshoots_and_round_trips(capsys):
    code, cal, _ = _run(
        ["calibrate", "--target-epsilon", "1.0", "--delta", "1e-6", "--sample-rate", "0.002", "--steps", "1000"], capsys
    )
    assert code == 0 and cal["epsilon"] <= 1.0
    _, acc, _ = _run(
        [
            "account",
            "--sample-rate",
            "0.002",
            "--noise-multiplier",
            str(cal["noise_multiplier"]),
            "--steps",
            "1000",
            "--delta",
            "1e-6",
        ],
        capsys,
    )
    assert acc["epsilon"] == pytest.approx(cal["epsilon"], rel=1e-12)
    # a slightly smaller sigma would overshoot: the answer is tight
    _, lower, _ = _run(
        [
            "account",
            "--sample-rate",
            "0.002",
            "--noise-multiplier",
            str(cal["noise_multiplier"] * 0.999),
            "--steps",
            "1000",
            "--delta",
            "1e-6",
        ],
        capsys,
    )
    assert lower["epsilon"] > 1.0


@pytest.mark.parametrize(
    "argv, field",
    [
        (
            ["account", "--sample-rate", "1.5", "--noise-multiplier", "1", "--steps", "3", "--delta", "1e-5"],
            "sample-rate",
        ),
        (
            ["account", "--sample-rate", "0.1", "--noise-multiplier", "0", "--steps", "3", "--delta", "1e-5"],
            "noise-multiplier",
        ),
        (["account", "--sample-rate", "0.1", "--noise-multiplier", "1", "--steps", "0", "--delta", "1e-5"], "steps"),
        (["account", "--sample-rate", "0.1", "--noise-multiplier", "1", "--steps", "3", "--delta", "1"], "delta"),
        (
            [
                "account",
                "--sample-rate",
                "0.1",
                "--noise-multiplier",
                "1",
                "--steps",
                "3",
                "--delta",
                "1e-5",
                "--orders",
                "1-4",
            ],
            "orders",
        ),
        (
            ["calibrate", "--target-epsilon", "-1", "--delta", "1e-5", "--sample-rate", "0.1", "--steps", "3"],
            "target-epsilon",
        ),
    ],
)
def test_bad_numbers_are_user_errors(argv, field, capsys):
    code, _, err = _run(argv, capsys)
    assert code == 2
    # the range is checked where the flag is parsed (textkg.cli.flags.NUMBERS, issue 51)
    assert f"argument --{field}: " in err and "Traceback" not in err


def test_unreachable_target_is_a_user_error(capsys):
    code, _, err = _run(
        ["calibrate", "--target-epsilon", "1e-6", "--delta", "1e-5", "--sample-rate", "1.0", "--steps", "100000"],
        capsys,
    )
    assert code == 2 and "unreachable" in err
