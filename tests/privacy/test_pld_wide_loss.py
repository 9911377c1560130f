"""The PLD accountant at a σ too small to discretise: a clear error before training, never a traceback after it.

dp-accounting's PLD raises ``ValueError: Maximum allowed size exceeded`` at σ = 1e-9 (the privacy loss
spans more buckets than it can hold). Found by the health setting's ceiling row: ``textkg train
--mechanism simulation --noise-multiplier 1e-9 --accountant pld`` trained, then died writing its
privacy block.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from textkg.cli.main import main
from textkg.errors import PrivacyError
from textkg.privacy.claims import get_claim
from textkg.privacy.pld import pld_calibrate_noise_multiplier, pld_max_steps

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiny_blp"


def test_the_claim_names_the_field_instead_of_dp_accountings_value_error():
    with pytest.raises(PrivacyError, match="cannot discretise") as info:
        get_claim("pld").epsilon([(0.5, 1e-9, 4)], delta=1e-5)
    assert info.value.field == "privacy.accountant"


def test_calibration_and_max_steps_treat_a_too_wide_loss_as_over_budget():
    # bisection may probe tiny σ: there ε is infinite, never a crash
    sigma = pld_calibrate_noise_multiplier(target_epsilon=1.0, delta=1e-5, sample_rate=0.01, steps=10)
    assert 0.1 < sigma < 10.0
    assert pld_max_steps(target_epsilon=1.0, delta=1e-5, sample_rate=0.5, noise_multiplier=1e-9, limit=8) == 0


def test_train_with_pld_at_a_tiny_sigma_exits_2_before_any_step(tmp_path, capsys):
    data = tmp_path / "d"
    shutil.copytree(FIXTURE, data)
    out = tmp_path / "run"
    argv = ["train", "--dataset", str(data), "--description", "short", "--model", "transe", "--dim", "8"]
    argv += ["--epochs", "1", "--batch-size", "32", "--seed", "0", "--split", "inductive", "--no-progress"]
    argv += ["--privacy", "confidential", "--confidential-relations", "/r/likes", "--private-size", "256"]
    argv += ["--mechanism", "simulation", "--noise-multiplier", "1e-9", "--accountant", "pld"]
    assert main(argv + ["--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "privacy.accountant" in err and "cannot discretise" in err and "Traceback" not in err
    assert not (out / "best_model.pt").exists() and not (out / "metrics.json").exists()
