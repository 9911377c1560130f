"""``benchmarks/collect_private_table.py``: every private row that starts from a public model names its control.

Issue 39: a DP run started from a public-only model trains public steps as well as private ones, so its
gain over that model may be the public steps'. Its control is the public-only model continued for the same
epochs from the same model; a row without one says so ("no control: claim withdrawn").
"""

from __future__ import annotations

import json
from pathlib import Path

from bench_module import load_benchmark

ROOT = Path(__file__).resolve().parents[2]


def _row(run: str, mode: str | None, mrr: float, *, source: str | None = None, epochs: int = 1) -> dict:
    privacy = None if mode is None else {"mode": mode, "initialised_from": None}
    if source is not None:
        privacy["initialised_from"] = {"run": "runs/u", "privacy_mode": "public-only", "best_model_sha256": source}
    test = {"mrr": mrr, "hits@1": 0.0, "hits@3": 0.0, "hits@10": 0.0}
    return {
        "run": run,
        "privacy": privacy,
        "train": {"epochs": epochs, "steps": 10, "seconds": 60.0, "stopped": None},
        "test": test,
        "test_answer_seen": {"mrr": mrr},
        "test_answer_unseen": {"mrr": mrr},
    }


def test_the_control_is_the_public_model_continued_from_the_same_model_for_the_same_epochs():
    m = load_benchmark("collect_private_table.py", "collect_private_table_bench")
    rows = [
        _row("u", "public-only", 0.150),
        _row("dp-warm", "confidential", 0.170, source="abc"),
        _row("u-continued-2ep", "public-only", 0.160, source="abc", epochs=2),  # other epochs: not its control
        _row("u-continued", "public-only", 0.165, source="abc"),
        _row("dp-other-source", "confidential", 0.170, source="def"),
        _row("dp-cold", "full", 0.120),
    ]
    control = m.controls(rows)
    assert set(control) == {"dp-warm", "dp-other-source"}  # cold-started and public rows need none
    assert control["dp-warm"]["control"] == "u-continued"
    assert abs(control["dp-warm"]["mrr_minus_control"] - 0.005) < 1e-12
    assert control["dp-other-source"] == {"control": None, "mrr_minus_control": None}
    table = m.markdown(rows).splitlines()
    cells = {line.split("|")[1].strip(" `"): line.split("|")[-2].strip() for line in table[2:]}
    assert cells["dp-warm"] == "`u-continued` (+0.0050)"
    assert cells["dp-other-source"] == m.NO_CONTROL == "no control: claim withdrawn"
    assert cells["dp-cold"] == "—"


def test_the_committed_fb15k237_warm_rows_say_they_have_no_control():
    """The one-epoch DPKGE rows of docs/results/privacy_utility.md started from the U-only model, and the
    U-only model continued for their public steps was never run: the JSON and the page say so."""
    m = load_benchmark("collect_private_table.py", "collect_private_table_bench")
    record = json.loads((ROOT / "benchmarks" / "results" / "fb15k237_privacy_utility.json").read_text())
    warm = {r["run"] for r in record["rows"] if (r["privacy"] or {}).get("initialised_from")}
    assert warm == {"cpu-private-conf05-eps1-warm", "cpu-private-conf05-eps4-warm"}
    assert record["controls"] == m.controls(record["rows"])
    page = (ROOT / "docs" / "results" / "privacy_utility.md").read_text(encoding="utf-8")
    table = page.split("<!-- private-table -->\n")[1].split("\n<!-- /private-table -->")[0]
    assert table == m.markdown(record["rows"])
    for run in warm:
        assert f"| `{run}` |" in table and record["controls"][run]["control"] is None
