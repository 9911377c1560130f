"""``benchmarks/health_setting.py`` on a tiny graph: every DP row has its control beside it.

The control (issue 39) is the public-only model continued for the same public steps, with the same
schedule and seed, from the same model as the DP run. Without it a DP row that starts from a
public-only model is compared with a model that trained fewer public steps.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest
from bench_module import load_benchmark

from textkg.cli.main import main

pytestmark = pytest.mark.slow  # four tiny training runs (~20 s of CPU)

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "tiny_blp"


def _module():
    return load_benchmark("health_setting.py", "health_setting_bench")


def _in_process(cmd, check):
    """The script's ``python -m textkg train ...`` with the same argv in this process: no new interpreter
    to import torch and transformers again for each run (issue 38)."""
    assert cmd[:3] == [sys.executable, "-m", "textkg"], cmd
    code = main(cmd[3:])
    if check and code:
        raise subprocess.CalledProcessError(code, cmd)


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("health")
    data = tmp / "d"
    shutil.copytree(FIXTURE, data)  # no ind-*.tsv: the inductive split is generated, the owner's test exists
    argv = ["--dataset", str(data), "--model", "transe", "--epochs", "1", "--seeds", "0", "--epsilons", "4"]
    argv += ["--confidential", "/r/likes", "--relation", "/r/likes", "--private-size", "256"]
    argv += ["--train-args", "--description short --dim 8 --batch-size 32", "--runs", str(tmp / "runs")]
    out = tmp / "health.json"
    bench = _module()
    bench.subprocess = types.SimpleNamespace(run=_in_process)  # this module's copy of the script only
    bench.main([*argv, "--out", str(out)])
    return json.loads(out.read_text())  # strict JSON: json.loads would read NaN, the harness refuses it


def test_every_row_a_user_compares_is_there(result):
    names = [r["run"] for r in result["rows"]]
    assert names == [
        "public-only",
        "public-only continued",
        "confidential eps=4",
        "non-private annotations (ceiling)",
        "relation popularity",
    ]


def test_the_control_continues_the_same_model_for_the_same_public_steps_without_an_annotation(result):
    rows = {r["run"]: r for r in result["rows"]}
    public, control, dp = rows["public-only"], rows["public-only continued"], rows["confidential eps=4"]
    assert control["initialised_from"] == dp["initialised_from"] == public["run_dir"]
    assert control["epochs"] == dp["epochs"] == public["epochs"]
    assert control["privacy"]["mode"] == "public-only" and control["privacy"]["epsilon"] == 0.0
    assert dp["privacy"]["mode"] == "confidential" and 0 < dp["privacy"]["epsilon"] <= 4
    for name in ("public-only continued", "confidential eps=4"):  # the same config but for the privacy block
        cfg = json.loads((Path(rows[name]["run_dir"]) / "config.json").read_text())
        assert cfg["train"]["seed"] == 0 and cfg["train"]["epochs"] == 1
        assert cfg["train"]["init_from"] == public["run_dir"]


def test_each_dp_row_is_set_beside_its_control(result):
    rows = {r["run"]: r for r in result["rows"]}
    [beside] = result["controls"]
    assert beside["run"] == "confidential eps=4" and beside["control"] == rows["public-only continued"]["run_dir"]
    dp, control = rows["confidential eps=4"], rows["public-only continued"]
    for part in ("released", "owner_only"):
        for key, value in beside["minus_control"][part].items():
            assert value == pytest.approx(dp[part][key] - control[part][key])
    assert "has_phenotype_mrr" in beside["minus_control"]["owner_only"]  # here: the /r/likes statements
    assert dp["owner_only"]["mrr relation:/r/likes"] == dp["owner_only"]["has_phenotype_mrr"]


def test_the_ceiling_trains_the_annotations_without_privacy_and_popularity_needs_no_model(result):
    rows = {r["run"]: r for r in result["rows"]}
    ceiling = rows["non-private annotations (ceiling)"]
    assert ceiling["privacy"]["guarantee"] == "simulation" and ceiling["privacy"]["epsilon"] is None
    popular = rows["relation popularity"]
    assert popular["released"] == {} and 0 < popular["owner_only"]["has_phenotype_mrr"] <= 1
    assert set(result["summary"]) == set(rows)


def test_a_dp_row_without_its_control_is_refused():
    module = _module()
    dp = {"run": "confidential eps=1", "seed": 3, "initialised_from": "a", "released": {}, "owner_only": {}}
    control = {**dp, "run": "public-only continued", "seed": 4, "run_dir": "c"}
    with pytest.raises(ValueError, match="no 'public-only continued' row of its seed"):
        module.controls([dp, control])
    with pytest.raises(ValueError, match="start from different models"):
        module.controls([dp, {**control, "seed": 3, "initialised_from": "b"}])


def _row(name: str, seed: int, valid: float | None, placement: float) -> dict:
    return {
        "run": name,
        "seed": seed,
        "released": {"placement_combined_mrr": placement, "test_is_a_mrr_new_terms": placement / 2},
        "public_validation": {"placement_combined_mrr": valid},
    }


def test_the_placement_is_the_dp_models_only_where_it_wins_on_public_validation():
    """Oracle by hand: seed 0 DP wins validation (its test placement is reported), seed 1 ties and seed 2
    loses (the control's placement is reported, so the row equals the control)."""
    module = _module()
    rows = [
        _row("public-only continued", 0, 0.60, 0.50),
        _row("confidential eps=1", 0, 0.62, 0.45),
        _row("public-only continued", 1, 0.60, 0.50),
        _row("confidential eps=1", 1, 0.60, 0.70),
        _row("public-only continued", 2, 0.60, 0.50),
        _row("confidential eps=1", 2, None, 0.70),
    ]
    chosen = module.placement_choice(rows)
    assert [c["chosen"] for c in chosen] == ["confidential eps=1", "public-only continued", "public-only continued"]
    assert chosen[0]["released"]["placement_combined_mrr"] == 0.45
    assert chosen[0]["minus_control"]["placement_combined_mrr"] == pytest.approx(-0.05)
    assert (
        chosen[1]["minus_control"]
        == chosen[2]["minus_control"]
        == {
            "placement_combined_mrr": 0.0,
            "test_is_a_mrr_new_terms": 0.0,
        }
    )
    assert {c["run"] for c in chosen} == {"confidential eps=1, placement chosen on validation"}


def _planned(tmp_path, epsilons: str, *flags: str) -> dict:
    """The runs ``health_setting.py`` plans for seed 0 with ``flags``, by name."""
    module = _module()
    args = module.parse_args(
        ["--runs", str(tmp_path), "--out", str(tmp_path / "o.json"), "--epsilons", epsilons, *flags]
    )
    return {r.name: r for r in module.plan(args, 0)}


def test_the_recipe_flags_reach_the_rows_they_name(tmp_path):
    runs = _planned(
        tmp_path, "1", "--private-args=--private-batch-size 4096 --max-grad-norm 0.5", "--continued-args=--eval-every 5"
    )
    for name in ("confidential eps=1", "non-private annotations (ceiling)"):
        flags = " ".join(runs[name].flags)
        assert "--private-batch-size 4096 --max-grad-norm 0.5" in flags
    for name in ("public-only", "public-only continued"):
        assert "--private-batch-size" not in runs[name].flags
    # every run continued from public-only (the control too) takes the same schedule flags; public-only does not
    assert "--eval-every" not in runs["public-only"].flags
    for name in ("public-only continued", "confidential eps=1", "non-private annotations (ceiling)"):
        assert " ".join(runs[name].flags).count("--eval-every 5") == 1
    # the ceiling's own clipping bound comes after the recipe's, so no gradient is clipped
    ceiling = runs["non-private annotations (ceiling)"].flags
    assert ceiling.index("1000") > ceiling.index("0.5")


def test_private_updates_reach_the_dp_rows_only_and_name_them(tmp_path):
    """``--private-updates private-rows`` (issue 39): the DP rows get the flag, a name and folders of their
    own; the ceiling stays the model trained on everything, and the control never reads an annotation."""
    runs = _planned(tmp_path, "1,4", "--private-updates", "private-rows")
    for eps in ("1", "4"):
        dp = runs[f"confidential eps={eps} private-rows"]
        assert " ".join(dp.flags).count("--private-updates private-rows") == 1
        assert dp.out == tmp_path / f"confidential-private-rows-eps{eps}-seed0"
    for name in ("public-only", "public-only continued", "non-private annotations (ceiling)"):
        assert "--private-updates" not in runs[name].flags
    module = _module()
    default = module.plan(module.parse_args(["--runs", str(tmp_path), "--out", str(tmp_path / "o.json")]), 0)
    assert [r.name for r in default][2] == "confidential eps=1" and "--private-updates" not in default[2].flags


def test_the_ceiling_takes_the_rdp_accountant_after_a_pld_recipe(tmp_path):
    """A PLD recipe reaches the DP rows; the ceiling (σ = 1e-9, labelled simulation) names RDP after it, since
    dp-accounting's PLD fails on σ = 1e-9 (the full hpo ceiling crashed writing its privacy block)."""
    module = _module()
    args = module.parse_args(
        ["--runs", str(tmp_path), "--out", str(tmp_path / "o.json"), "--private-args=--accountant pld"]
    )
    runs = {r.name: r for r in module.plan(args, 0)}
    assert " ".join(runs["confidential eps=1"].flags).count("--accountant pld") == 1
    ceiling = runs["non-private annotations (ceiling)"].flags
    last = len(ceiling) - 1 - ceiling[::-1].index("--accountant")
    assert ceiling[last + 1] == "rdp" and last > ceiling.index("pld")


def test_every_model_row_carries_its_test_and_privacy_blocks(result):
    """Issue 39's "each row with its privacy and test blocks": the released test block's headline numbers
    (read from the run's metrics.json) beside the privacy block."""
    for r in result["rows"]:
        if r["run"] == "relation popularity":
            assert r["privacy"] is None and "test" not in r
            continue
        metrics = json.loads((Path(r["run_dir"]) / "metrics.json").read_text())
        assert r["test"]["mrr"] == metrics["test"]["mrr"] == r["released"]["test_is_a_mrr_new_terms"]
        assert r["test"]["num_triples"] == metrics["test"]["num_triples"] > 0
        assert r["privacy"]["mode"] == metrics["privacy"]["mode"]
    assert set(result["targets"]) == {"confidential eps=4"}


def test_the_targets_are_read_on_the_means_met_or_missed():
    """Oracle by hand: DP 0.012 against popularity 0.005 (2.4x: met), ceiling 0.030 (40 %: missed), control
    0.004 (+0.008: met); released placement 0.60 against the control's 0.61 (−0.01: missed), chosen on
    validation 0.61 (0: met)."""
    module = _module()
    rows: dict = {}
    for name, key, value in (
        ("confidential eps=1", "has_phenotype_mrr", 0.012),
        ("confidential eps=1", "placement_combined_mrr", 0.60),
        ("relation popularity", "has_phenotype_mrr", 0.005),
        ("non-private annotations (ceiling)", "has_phenotype_mrr", 0.030),
        ("public-only continued", "has_phenotype_mrr", 0.004),
        ("public-only continued", "placement_combined_mrr", 0.61),
    ):
        rows.setdefault(name, {})[key] = {"mean": value, "sd": 0.0, "n": 3}
    chosen = {"confidential eps=1, placement chosen on validation": {"placement_combined_mrr": {"mean": 0.61}}}
    block = module.targets(rows, chosen)["confidential eps=1"]
    got = {k: (v["value"], v["met"]) for k, v in block.items() if k != "seeds"}
    assert got == {
        "has_phenotype >= 2x relation popularity": (pytest.approx(2.4), True),
        "has_phenotype >= 50 % of the non-private ceiling": (pytest.approx(0.4), False),
        "has_phenotype above public-only continued": (pytest.approx(0.008), True),
        "released placement (combined) not below public-only continued": (pytest.approx(-0.01), False),
        "released placement chosen on validation not below public-only continued": (pytest.approx(0.0), True),
    }
    assert block["seeds"] == 3
    # no ceiling row: that target is not measured (None), never met by default
    del rows["non-private annotations (ceiling)"]
    missing = module.targets(rows)["confidential eps=1"]["has_phenotype >= 50 % of the non-private ceiling"]
    assert missing["value"] is None and missing["met"] is None


def test_merge_keeps_one_row_per_run_and_seed_and_refuses_a_disagreement(result, tmp_path):
    """Seeds run on separate cores are merged into one table: one row per (run, seed), the controls and
    means recomputed; the same run in two files with different numbers is refused (not averaged)."""
    bench = _module()
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.write_text(json.dumps(result))
    other = json.loads(json.dumps(result))
    for r in other["rows"]:
        r["seed"] = 1
    second.write_text(json.dumps({**other, "rows": other["rows"] + result["rows"]}))  # seed 0 again, equal
    out = tmp_path / "merged.json"
    merged = bench.main(["--merge", str(first), str(second), "--out", str(out)])
    n = len(result["rows"])
    assert len(merged["rows"]) == 2 * n and [r["seed"] for r in merged["rows"]] == [0] * n + [1] * n
    assert len(merged["controls"]) == 2 * len(result["controls"])
    assert all(block["n"] == 2 for block in merged["summary"]["public-only"].values())
    assert merged["commands"][: len(result["commands"])] == result["commands"]
    changed = json.loads(json.dumps(result))
    changed["rows"][0]["released"] = {k: 0.5 for k in changed["rows"][0]["released"]}
    second.write_text(json.dumps(changed))
    with pytest.raises(SystemExit, match="differs"):
        bench.main(["--merge", str(first), str(second), "--out", str(out)])


def test_a_dp_row_on_fewer_seeds_is_read_against_the_control_on_those_seeds():
    """A DP row merged from fewer seeds than its control (an eps run on seeds 1-2 only) is compared with the
    control's mean over seeds 1-2, not over all three (a mean over other seeds can turn a loss on every
    seed into a gain)."""
    bench = _module()

    def r(run, seed, place, owner=0.01):
        return {
            "run": run,
            "seed": seed,
            "released": {"placement_combined_mrr": place},
            "owner_only": {"has_phenotype_mrr": owner},
        }

    rows = [
        r("public-only continued", 0, 0.50),
        r("public-only continued", 1, 0.62),
        r("public-only continued", 2, 0.62),
    ]
    rows += [r("confidential eps=8", 1, 0.61), r("confidential eps=8", 2, 0.61)]  # below the control on both
    block = bench.targets_on_shared_seeds(rows, [])["confidential eps=8"]
    got = block["released placement (combined) not below public-only continued"]
    assert got["met"] is False and abs(got["value"] + 0.01) < 1e-12 and block["seeds"] == 2
