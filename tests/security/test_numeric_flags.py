"""Issue 36, item 11: numeric flags that would overflow or exhaust memory exit 2 up front.

On 7add106 ``--sample-rate 1e-320`` raised OverflowError (``round(inf)`` in
``training/private_training.py``) and ``--private-size 1000000000000`` raised MemoryError (a
step plan of 3e10 entries), both with a traceback and exit 1; NaN and infinite values passed the
``value <= 0`` checks. Each case here is refused before any data is read, with the flag named.
"""

from __future__ import annotations

import pytest

from textkg.cli.main import main as _main

BASE = ["train", "--dataset", "tests/fixtures/does-not-exist", "--model", "transe", "--no-progress"]


def main(argv: list[str]) -> int | str | None:
    """The CLI's exit status: a flag out of its range (issue 51) stops argparse itself, with status 2."""
    try:
        return _main(argv)
    except SystemExit as exc:
        return exc.code


@pytest.mark.parametrize(
    "flags, field",
    [
        (["--privacy", "full", "--sample-rate", "1e-320", "--noise-multiplier", "1"], "privacy.sample_rate"),
        (["--privacy", "full", "--private-size", "1000000000000", "--noise-multiplier", "1"], "privacy.private_size"),
        (["--privacy", "full", "--private-size", "100", "--noise-multiplier", "nan"], "privacy.noise_multiplier"),
        (["--privacy", "full", "--private-size", "100", "--noise-multiplier", "inf"], "privacy.noise_multiplier"),
        (["--privacy", "full", "--private-size", "100", "--target-epsilon", "nan"], "privacy.target_epsilon"),
        (["--lr", "nan"], "train.lr"),
        (["--epochs", "1000000000000"], "train.epochs"),
        (["--dim", "1000000000"], "model.dim"),
        (["--max-minutes", "nan"], "train.max_minutes"),
    ],
)
def test_train_refuses_before_reading_anything(tmp_path, capsys, flags, field):
    out = tmp_path / "run"
    code = main([*BASE, *flags, "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and field in err and "Traceback" not in err
    assert "does-not-exist" not in err  # refused before the dataset is looked at
    assert not out.exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["account", "--noise-multiplier", "1", "--steps", "10", "--delta", "1e-5", "--sample-rate", "1e-320"],
        ["calibrate", "--target-epsilon", "1", "--steps", "10", "--delta", "1e-5", "--sample-rate", "1e-320"],
    ],
)
def test_account_and_calibrate_refuse_a_subnormal_rate(capsys, argv):
    assert main(argv) == 2
    assert "sample-rate" in capsys.readouterr().err
