"""``textkg release`` recomputes a bundle's ε from its ledger with textkg's own RDP analysis; Opacus's,
which release used to call at run time, is kept here as the reference (issue 40, Dependencies)."""

from __future__ import annotations

import numpy as np
import pytest
from opacus.accountants.analysis.rdp import compute_rdp, get_privacy_spent

from textkg.errors import ConfigError
from textkg.privacy.rdp import DEFAULT_ORDERS
from textkg.release import recompute_epsilon

LEDGERS = [
    [{"sample_rate": 0.04, "noise_multiplier": 1.5, "steps": 2250}],
    [
        {"sample_rate": 0.01, "noise_multiplier": 0.8, "steps": 300},
        {"sample_rate": 0.02, "noise_multiplier": 1.1, "steps": 120},
        {"sample_rate": 0.5, "noise_multiplier": 4.0, "steps": 3},
    ],
    [{"sample_rate": 1.0, "noise_multiplier": 2.0, "steps": 10}],
]


def _opacus(ledger, orders, delta):
    rdp = sum(
        np.asarray(
            compute_rdp(q=e["sample_rate"], noise_multiplier=e["noise_multiplier"], steps=e["steps"], orders=orders)
        )
        for e in ledger
    )
    return float(get_privacy_spent(orders=orders, rdp=rdp, delta=delta)[0])


@pytest.mark.parametrize("ledger", LEDGERS)
@pytest.mark.parametrize("orders", [list(DEFAULT_ORDERS), list(range(2, 65))])
def test_recomputed_epsilon_equals_opacus(ledger, orders):
    block = {"orders": orders, "ledger": ledger, "delta": 1e-5, "epsilon": None}
    assert recompute_epsilon(block) == pytest.approx(_opacus(ledger, orders, 1e-5), rel=1e-6)


@pytest.mark.parametrize(
    "change",
    [{"delta": 2.0}, {"orders": [0.5, 2.0]}, {"ledger": [{"sample_rate": 0.1}]}, {"orders": ["x"]}],
)
def test_a_malformed_ledger_is_a_user_error(change):
    block = {"orders": [2.0, 4.0], "ledger": LEDGERS[0], "delta": 1e-5, "epsilon": 1.0, **change}
    with pytest.raises(ConfigError, match="malformed privacy block") as err:
        recompute_epsilon(block)
    assert err.value.field.startswith(f"privacy.{next(iter(change))}")
