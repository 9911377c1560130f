"""``benchmarks/patient_diagnosis.py``'s statement-level rows (issue 52): statement-level DP at the
per-statement (ε_s, δ_s) that gives the patient-level target by group privacy over the cohort's public
bound k on one patient's statements. What can fail: k must come from ``cohort.json`` (or, for a cohort
drawn before it was recorded, from its recipe), the budget must invert group privacy exactly, the declared
size must count the statements that mention a patient, and a row must report the per-patient (ε, δ) of
the ε_s the run reached."""

from __future__ import annotations

import argparse
import math

import pytest
from bench_module import load_benchmark

from textkg.privacy.group import group_guarantee


@pytest.fixture(scope="module")
def bench():
    return load_benchmark("patient_diagnosis.py", "patient_diagnosis_bench")


def _cohort(tmp_path, n_statements: int):
    (tmp_path / "patients.txt").write_text("patient:1\npatient:2\n")
    rows = ["HP:1\tis_a\tHP:2", "OMIM:1\thas_phenotype\tHP:1"]
    rows += [f"patient:{1 + i % 2}\thas_phenotype\tHP:{i}" for i in range(n_statements)]
    (tmp_path / "train.tsv").write_text("\n".join(rows) + "\n")
    return tmp_path / "patients.txt"


@pytest.mark.parametrize(
    ("record", "k"),
    [
        ({"max_statements_per_patient": 13, "recipe": {"max_terms": 99}}, 13),  # the recorded bound is used
        ({"recipe": {"max_terms": 6, "noise": 0.5}}, 6 + 3 + 1),  # an older cohort.json: from its recipe
    ],
)
def test_the_statement_budgets_give_the_patient_level_target(bench, tmp_path, record, k):
    patients = _cohort(tmp_path, 1001)
    args = argparse.Namespace(epsilons="1,4", statement_epsilons=None)
    group = bench.statement_budgets(record, patients, 3000, args)
    assert group["k"] == k and group["declared_statements"] == 2000  # 1,001 patient statements, rounded up
    assert set(group["budgets"]) == {"1", "4"}
    for eps, budget in group["budgets"].items():
        assert budget["statement_epsilon"] == pytest.approx(float(eps) / k, rel=1e-12)
        delta_u = 1 / 30_000  # the patient-level runs' default 1/(10 N̄_u)
        assert budget["statement_delta"] == pytest.approx(delta_u / (k * math.exp((k - 1) * float(eps) / k)))
        back = group_guarantee(epsilon=budget["statement_epsilon"], delta=budget["statement_delta"], group_size=k)
        assert back == pytest.approx((float(eps), delta_u), rel=1e-12)
    only = bench.statement_budgets(record, patients, 3000, argparse.Namespace(epsilons="1,4", statement_epsilons="8"))
    assert set(only["budgets"]) == {"8"}
    none = bench.statement_budgets(record, patients, 3000, argparse.Namespace(epsilons="1", statement_epsilons=""))
    assert none["budgets"] == {}


def test_a_row_reports_the_per_patient_guarantee_of_the_epsilon_reached(bench):
    row = bench.per_patient({"epsilon": 0.07, "delta": 3e-6, "unit": "confidential-statement"}, 13)
    assert row["group_size"] == 13 and row["statement_epsilon"] == 0.07
    assert row["per_patient_epsilon"] == pytest.approx(13 * 0.07)
    assert row["per_patient_delta"] == pytest.approx(13 * math.exp(12 * 0.07) * 3e-6)
    assert bench.per_patient({"epsilon": 1.0, "delta": 1e-4, "unit": "entity"}, None) == {
        "per_patient_epsilon": 1.0,
        "per_patient_delta": 1e-4,
    }
    assert bench.per_patient({"guarantee": "none"}, None)["per_patient_epsilon"] is None
