"""The privacy engine changed how a private step is built, not what it computes.

Reference values computed on b54adb0 (before :mod:`textkg.training.privacy_engine`) with
``python tests/training/privacy_pin_cases.py`` in a ``git archive b54adb0`` tree: each short private
run's final parameters and whole ``privacy`` block (a federation's: every holder's report) are
bit-identical.
"""

from __future__ import annotations

import pytest
from privacy_pin_cases import run_case

REFERENCE = {
    "dp-sgd": {
        "parameters": "01c30f4762b8ac99",
        "privacy": "d1a3bbc12ce4e432",
        "epsilon": 2.114471341247571,
        "noise_multiplier": 1.1,
        "steps": 24,
    },  # fmt: skip
    "pld-calibrated": {
        "parameters": "dfd5c3263c7b451a",
        "privacy": "b8d61709716836b2",
        "epsilon": 3.9991330300849586,
        "noise_multiplier": 0.81884765625,
        "steps": 12,
    },  # fmt: skip
    "simulation": {
        "parameters": "f9439c5b87508ad5",
        "privacy": "2539f8c1a8cd2fc5",
        "epsilon": None,
        "noise_multiplier": 1.1,
        "steps": 24,
    },  # fmt: skip
    "one-vs-all": {
        "parameters": "e7c83e7be46ef6ad",
        "privacy": "7429b646fcdc341b",
        "epsilon": 1.8857122448748527,
        "noise_multiplier": 1.0,
        "steps": 62,
    },  # fmt: skip
    # two federated holders: the final global model and every holder's report
    "federate": {
        "parameters": "d21c986db7cee2b2",
        "clients": "9d892a2f8dc84ab3",
        "epsilon": [6.425204702229604, 6.425204702229604],
    },  # fmt: skip
}


@pytest.mark.parametrize("case", sorted(REFERENCE))
def test_a_short_private_run_is_bit_identical_to_b54adb0(case, tmp_path):
    assert run_case(case, tmp_path / "run") == REFERENCE[case]
