"""``textkg data simulate-patients``: the simulated cohort of issue 52 (textkg.data.cohort).

The cohort is drawn as Köhler et al. 2009 draw patients (a few of a disease's annotations, some made
imprecise, noise added); these tests replay the recipe on the drawn patients, check that the withheld
diseases' annotations are missing from the public graph only, that a seed gives the same bytes, and
that nonsense flags exit 2 before anything is written.
"""

from __future__ import annotations

import json
import math

import pytest

from textkg.cli.main import main
from textkg.data.blp_format import load_blp_directory
from textkg.data.cohort import (
    DIAGNOSED_WITH,
    HAS_PHENOTYPE,
    IS_A,
    ROOTS,
    CohortRecipe,
    ancestors_of,
    read_hpo_annotations,
    simulate_cohort,
    write_cohort,
)
from textkg.data.io import read_triples
from textkg.data.units import read_unit_entities, split_units
from textkg.errors import ConfigError

SMALL = {"diseases": 12, "train_patients": 60, "valid_patients": 10, "test_patients": 12}
FLAGS = ["--diseases", "12", "--patients", "60", "--valid-patients", "10", "--test-patients", "12"]


@pytest.fixture(scope="module")
def hpo():
    return read_hpo_annotations()


@pytest.fixture(scope="module")
def cohort_dir(hpo, tmp_path_factory):
    out = tmp_path_factory.mktemp("cohort") / "cohort"
    return write_cohort(simulate_cohort(CohortRecipe(seed=3, **SMALL), hpo), out)


def _files(folder):
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_the_command_and_the_api_give_the_same_bytes_for_a_seed_and_other_bytes_for_another(hpo, tmp_path, capsys):
    assert main(["data", "simulate-patients", "--out", str(tmp_path / "cli"), "--seed", "3", *FLAGS]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["counts"]["train_patients"]["all"] == 60
    again = write_cohort(simulate_cohort(CohortRecipe(seed=3, **SMALL), hpo), tmp_path / "api")
    other = write_cohort(simulate_cohort(CohortRecipe(seed=4, **SMALL), hpo), tmp_path / "other")
    assert _files(tmp_path / "cli") == _files(again)
    assert _files(other)["train.tsv"] != _files(again)["train.tsv"]
    record = json.loads((again / "cohort.json").read_text())
    assert record["seed"] == 3 and record["recipe"]["diseases"] == 12
    assert record["command"].startswith("textkg data simulate-patients --seed 3 --diseases 12 --patients 60")
    assert "Köhler" in record["recipe_source"]
    assert not any(p.name.startswith(".") for p in tmp_path.iterdir())  # no temporary folder left behind


def test_withheld_diseases_have_annotations_in_patients_only(cohort_dir):
    record = json.loads((cohort_dir / "cohort.json").read_text())
    withheld, diseases = set(record["withheld_diseases"]), set(record["diseases"])
    assert len(withheld) == round(0.3 * 12) and withheld < diseases
    train = read_triples(cohort_dir / "train.tsv")[0]
    patients = set(read_unit_entities(cohort_dir / "patients.txt", load_blp_directory(cohort_dir, vocabulary="texts")))
    public = [t for t in train if t[0] not in patients]
    annotated = {h for h, r, _ in public if r == HAS_PHENOTYPE}
    assert annotated == diseases - withheld  # the public diseases keep their annotations; the withheld lose them
    rows = [t for name in ("train.tsv", "dev.tsv", "test.tsv") for t in read_triples(cohort_dir / name)[0]]
    diagnosed = {h: t for h, r, t in rows if r == DIAGNOSED_WITH}
    shown = {h for h, r, _ in rows if r == HAS_PHENOTYPE and h in patients}
    assert set(diagnosed) == patients == shown  # every patient has a diagnosis and phenotypes
    assert withheld & set(diagnosed.values())  # and patients do carry the withheld diseases' phenotypes


def test_the_folder_is_a_dataset_whose_units_are_the_patients(cohort_dir):
    kg = load_blp_directory(cohort_dir, vocabulary="texts", description="long")
    assert set(kg.relations) == {IS_A, HAS_PHENOTYPE, DIAGNOSED_WITH}
    units = read_unit_entities(cohort_dir / "patients.txt", kg)
    public_entities = (cohort_dir / "public-entities.txt").read_text().split()
    assert set(units).isdisjoint(public_entities) and set(units) | set(public_entities) == set(kg.entities)
    names = dict(zip(kg.entities, kg.entity_names, strict=True))
    descriptions = dict(zip(kg.entities, kg.entity_descriptions, strict=True))
    assert {names[u] for u in units} == {"patient"}  # a patient's name is private: never written
    public, by_set = split_units(kg, units)
    assert by_set["train"].num_units == 60 and by_set["valid"].num_units == 10 and by_set["test"].num_units == 12
    assert all(not len(t) for name, t in public.triples.items() if name != "train")  # valid/test: patients only
    terms = [e for e in public_entities if e.startswith("HP:")]
    assert all(descriptions[t].startswith(names[t]) for t in terms)  # "name: definition", as the hpo dataset
    assert any(descriptions[t] != names[t] for t in terms)


def _recipe_check(cohort, hpo, *, exact: bool) -> None:
    """Replay the recipe: the disease terms come from the disease's annotations (exactly, without
    imprecision; else as themselves or proper non-root ancestors), the noise terms relate to none of them
    nor to each other, and there are floor(noise × n) of them."""
    r = cohort.recipe
    ancestors = ancestors_of(hpo.parents, {t for ts in hpo.annotations.values() for t in ts})
    for patients in cohort.patients.values():
        for p in patients:
            annotations = set(hpo.annotations[p.disease])
            above = set().union(*(ancestors[a] for a in annotations))
            assert 1 <= len(p.disease_terms) <= r.max_terms and len(set(p.disease_terms)) == len(p.disease_terms)
            if exact:
                assert r.min_terms <= len(p.disease_terms) and set(p.disease_terms) <= annotations
            for t in p.disease_terms:
                assert t in above and t not in ROOTS  # an annotation or an ancestor of one, never a root
            assert len(p.noise_terms) == math.floor(r.noise * len(p.disease_terms))
            for k, n in enumerate(p.noise_terms):
                assert n not in above and not (ancestors_of(hpo.parents, [n])[n] & annotations) and n not in ROOTS
                for m in p.noise_terms[:k]:
                    assert m not in ancestors_of(hpo.parents, [n])[n] and n not in ancestors_of(hpo.parents, [m])[m]


def test_patients_follow_the_recipe_without_imprecision(hpo):
    cohort = simulate_cohort(CohortRecipe(seed=1, imprecision=0.0, **SMALL), hpo)
    _recipe_check(cohort, hpo, exact=True)


def test_imprecise_terms_are_ancestors_of_an_annotation(hpo):
    cohort = simulate_cohort(CohortRecipe(seed=2, imprecision=1.0, noise=1.0, **SMALL), hpo)
    _recipe_check(cohort, hpo, exact=False)
    replaced = [
        t for ps in cohort.patients.values() for p in ps for t in p.disease_terms if t not in hpo.annotations[p.disease]
    ]
    assert replaced  # with imprecision 1, terms were moved up (those with a non-root ancestor)


@pytest.mark.parametrize(
    "flags",
    [
        ["--min-terms", "5", "--max-terms", "3"],
        ["--withheld-fraction", "1"],
        ["--noise", "-0.5"],
        ["--imprecision", "1.5"],
        ["--diseases", "0"],
        ["--patients", "2000000"],
        ["--min-annotations", "2"],
        ["--popularity-exponent", "nan"],
        ["--seed", "-1"],
    ],
)
def test_nonsense_flags_exit_2_and_write_nothing(tmp_path, capsys, flags):
    out = tmp_path / "cohort"
    assert main(["data", "simulate-patients", "--out", str(out), *flags]) == 2
    assert "Traceback" not in capsys.readouterr().err
    assert not out.exists() and not list(tmp_path.iterdir())


def test_more_diseases_than_the_hpo_has_is_refused_naming_the_flag(hpo):
    with pytest.raises(ConfigError, match="only .* OMIM diseases") as info:
        simulate_cohort(CohortRecipe(diseases=100_000), hpo)
    assert info.value.field == "diseases"


def test_an_existing_folder_or_a_missing_parent_exits_2(tmp_path, capsys):
    (tmp_path / "taken").mkdir()
    assert main(["data", "simulate-patients", "--out", str(tmp_path / "taken")]) == 2
    assert main(["data", "simulate-patients", "--out", str(tmp_path / "no" / "cohort")]) == 2
    err = capsys.readouterr().err
    assert "exists" in err and "parent" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("recipe", "bound"),
    [
        ({}, 8 + 4 + 1),  # the defaults: 8 disease terms, floor(0.5 × 8) = 4 noise terms, 1 diagnosis
        ({"max_terms": 5, "noise": 0.3}, 5 + 1 + 1),  # floor(0.3 × 5) = 1
        ({"min_terms": 2, "max_terms": 3, "noise": 1.0}, 3 + 3 + 1),
    ],
)
def test_cohort_json_records_the_public_bound_on_a_patient_s_statements(hpo, tmp_path, recipe, bound):
    """k of group privacy for a statement-level run: a bound from the recipe alone that no patient exceeds."""
    cohort = simulate_cohort(CohortRecipe(seed=1, **{**SMALL, **recipe}), hpo)
    folder = write_cohort(cohort, tmp_path / "cohort")
    assert json.loads((folder / "cohort.json").read_text())["max_statements_per_patient"] == bound
    rows = [t for name in ("train.tsv", "dev.tsv", "test.tsv") for t in read_triples(folder / name)[0]]
    per_patient: dict[str, int] = {}
    for h, _, _ in rows:
        if h.startswith("patient:"):
            per_patient[h] = per_patient.get(h, 0) + 1
    assert len(per_patient) == sum(len(p) for p in cohort.patients.values())
    assert max(per_patient.values()) <= bound
