"""scripts/rebuild_docs_outputs.py labels recorded runs as the current rules do (issue 41: the published
hpo frontier showed as `dp` runs whose command now gets `simulation`)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _script():
    spec = importlib.util.spec_from_file_location("rebuild_docs_outputs", ROOT / "scripts" / "rebuild_docs_outputs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_block_that_released_the_exact_count_is_a_simulation_today():
    label_today = _script().label_today
    assert label_today({"guarantee": "dp", "num_private_triples": 457308}) == "simulation"
    assert label_today({"guarantee": "dp", "num_private_triples": None}) == "dp"
    assert label_today({"guarantee": "simulation", "num_private_triples": None}) == "simulation"
    assert label_today(None) is None


def test_the_published_hpo_frontier_is_drawn_as_simulation():
    script = _script()
    rows = script.frontier_rows(script.DEFAULT_SWEEP)
    private = [r for r in rows if r["mode"] in ("full", "confidential")]
    assert len(private) == 4 and {r["guarantee"] for r in private} == {"simulation"}
    assert [r["guarantee"] for r in rows if r["mode"] == "none"] == [None]
