"""Holder state files of the simulation engine (textkg.federated.checkpointing): written atomically, the
last two rounds kept (checkpoint.pt is at most one round behind a holder), a missing one a ConfigError."""

from __future__ import annotations

import pytest

from textkg.errors import ConfigError
from textkg.federated.checkpointing import holder_state_path, load_holder_state, save_holder_state


def test_a_holder_keeps_its_last_two_rounds(tmp_path):
    for r in range(1, 5):
        save_holder_state(tmp_path, "OMIM", r, f"state {r}".encode())
    assert sorted(p.name for p in (tmp_path / "OMIM").iterdir()) == ["holder-round-3.pt", "holder-round-4.pt"]
    assert load_holder_state(tmp_path, "OMIM", 3) == b"state 3"
    assert holder_state_path(tmp_path, "OMIM", 4).read_bytes() == b"state 4"


def test_a_missing_round_names_the_holder_and_the_file(tmp_path):
    save_holder_state(tmp_path, "ORPHA", 1, b"x")
    with pytest.raises(ConfigError, match="'ORPHA' has no state of round 2") as err:
        load_holder_state(tmp_path, "ORPHA", 2)
    assert "holder-round-2.pt" in str(err.value)
