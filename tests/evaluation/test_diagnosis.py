"""The diagnosis task of issue 52 (textkg.evaluation.diagnosis, textkg diagnose).

Oracles: ranks and metrics of hand-made scores (realistic ties, the other true diagnosis filtered);
a model whose vectors are known (the patient folded in as the mean of ``t - r``, scored by TransE);
Resnik's best-match average on a six-term ontology computed by hand, the vectorised ranker against the
pair-by-pair reference, and (slow) against ``pyhpo``'s own ``HPOSet.similarity`` on the HPO.
"""

from __future__ import annotations

import dataclasses
import json
import math
import shutil

import pytest
import torch

from textkg.cli.main import main
from textkg.data.cohort import CohortRecipe, ancestors_of, read_hpo_annotations, simulate_cohort, write_cohort
from textkg.errors import DataError
from textkg.evaluation.diagnosis import (
    COMBINATION_OFFSETS,
    COMBINATION_WEIGHTS,
    DiagnosisTask,
    PhenotypeSimilarity,
    choose_combination,
    combine_with_similarity,
    diagnosis_metrics,
    diagnosis_ranks,
    model_scores,
    name_scores,
    popularity_scores,
    resnik_bma,
)
from textkg.models.interactions import TransE


def _task(**kwargs) -> DiagnosisTask:
    base = {
        "diseases": ("A", "B", "C", "D"),
        "withheld": frozenset({"D"}),
        "phenotypes": (("x",), ("y",)),
        "truth": (("A",), ("B", "D")),
    }
    return DiagnosisTask(**{**base, **kwargs})


def test_ranks_are_realistic_and_leave_the_other_true_diagnosis_out():
    task = _task()
    scores = torch.tensor([[1.0, 2.0, 2.0, 0.0], [5.0, 3.0, 3.0, 3.0]])
    ranks, withheld = diagnosis_ranks(scores, task)
    # A: two diseases above it. B: A above, C ties (D is the patient's other diagnosis: filtered); D likewise
    assert ranks.tolist() == [3.0, 2.5, 2.5] and withheld.tolist() == [False, False, True]
    metrics = diagnosis_metrics(scores, task)
    assert metrics["overall"]["mrr"] == pytest.approx((1 / 3 + 0.4 + 0.4) / 3)
    assert metrics["public"]["mrr"] == pytest.approx((1 / 3 + 0.4) / 2) and metrics["public"]["diagnoses"] == 2
    assert metrics["withheld"] == {"mrr": 0.4, "hits@1": 0.0, "hits@10": 1.0, "diagnoses": 1}


def test_a_task_refuses_a_diagnosis_that_is_not_a_candidate_or_a_patient_without_one():
    with pytest.raises(DataError, match="not a candidate"):
        _task(truth=(("A",), ("E",)))
    with pytest.raises(DataError, match="no diagnosis"):
        _task(truth=(("A",), ()))
    with pytest.raises(ValueError, match="expected"):
        diagnosis_ranks(torch.zeros(2, 3), _task())


class _KnownModel:
    """Just what model_scores reads: TransE (L1), a fixed entity matrix and relation table."""

    normalize_entities = False

    def __init__(self) -> None:
        self.interaction = TransE(p=1)
        # entities: 0 h1, 1 h2, 2 dA, 3 dB; relations: 0 has_phenotype, 1 diagnosed_with
        self.entities = torch.tensor([[2.0, 0.0], [0.0, 2.0], [0.0, 0.0], [1.0, 1.0]])
        self.relations = torch.tensor([[1.0, 1.0], [0.5, 0.0]])

    def entity_matrix(self):
        return self.entities

    def relation_matrix(self):
        return self.relations


def test_model_scores_fold_each_patient_in_from_its_phenotypes():
    task = DiagnosisTask(
        diseases=("dA", "dB", "dC"),  # dC: a disease the model lacks
        withheld=frozenset(),
        phenotypes=(("h1", "h2"), ("h1", "unknown")),
        truth=(("dA",), ("dB",)),
    )
    index = {"h1": 0, "h2": 1, "dA": 2, "dB": 3}
    scores = model_scores(_KnownModel(), task, entity_index=index, phenotype_relation=0, diagnosis_relation=1)
    # patient 0: mean of (h1 - r, h2 - r) = (0, 0); patient 1: h1 - r = (1, -1) (the unknown term unused)
    # score(p, dA) = -|p + (0.5, 0) - dA|_1, score(p, dB) = -|p + (0.5, 0) - dB|_1
    expected = torch.tensor([[-0.5, -1.5], [-2.5, -2.5]])
    assert torch.allclose(scores[:, :2], expected)
    assert bool((scores[:, 2] == torch.finfo(torch.float32).min).all())
    assert diagnosis_ranks(scores, task)[0].tolist() == [1.0, 1.5]  # dA and dB tie for patient 1


# A six-term ontology: R above A and B; A above A1 and A2; B above B1. D4 has no public annotation.
PARENTS = {"R": (), "A": ("R",), "B": ("R",), "A1": ("A",), "A2": ("A",), "B1": ("B",)}
ANNOTATIONS = {"D1": ("A1",), "D2": ("A2", "B1"), "D3": ("B1",)}


def test_resnik_best_match_average_matches_a_hand_computation():
    sim = PhenotypeSimilarity(PARENTS, ANNOTATIONS)
    ln3, ln15 = math.log(3), math.log(1.5)
    # IC over the three annotated diseases: R 0; A (D1, D2) and B, B1 (D2, D3) ln 1.5; A1, A2 ln 3
    assert sim.ic == pytest.approx({"R": 0.0, "A": ln15, "B": ln15, "A1": ln3, "A2": ln3, "B1": ln15})
    task = DiagnosisTask(
        diseases=("D1", "D2", "D3", "D4"),
        withheld=frozenset({"D4"}),
        phenotypes=(("A1", "B"), ()),
        truth=(("D1",), ("D4",)),
    )
    scores = sim.scores(task)
    # {A1, B} vs {A1}: rows (ln3, 0), column ln3 -> 2 ln3 / 3; vs {A2, B1}: every best match is ln 1.5;
    # vs {B1}: rows (0, ln1.5), column ln1.5 -> 2 ln1.5 / 3; D4 has no public annotation: -1, below all
    assert scores[0].tolist() == pytest.approx([2 * ln3 / 3, ln15, 2 * ln15 / 3, -1.0])
    assert scores[1].tolist() == [0.0, 0.0, 0.0, -1.0]  # no phenotype: no similarity
    ancestors = ancestors_of(PARENTS, PARENTS)
    for j, d in enumerate(task.diseases[:3]):
        assert resnik_bma(("A1", "B"), ANNOTATIONS[d], ancestors, sim.ic) == pytest.approx(scores[0, j].item())


def test_popularity_and_disease_names():
    task = DiagnosisTask(
        diseases=("D1", "D2", "D3"),
        withheld=frozenset(),
        phenotypes=(("p1",), ("p2",)),
        truth=(("D1",), ("D3",)),
    )
    assert popularity_scores(task, {"D1": 3, "D3": 1}).tolist() == [[3.0, 0.0, 1.0]] * 2
    names = {"D1": "Marfan syndrome", "D2": "Cystic fibrosis", "D3": "Retinal dystrophy", "p1": "Marfan habitus"}
    names["p2"] = "Dystrophy of the retina"
    scores = name_scores(task, names)
    assert scores.argmax(1).tolist() == [0, 2] and scores[0, 1] == 0.0


def test_the_combination_adds_the_similarity_on_public_diseases_and_the_model_on_withheld_ones():
    task = _task()  # D is withheld
    model = torch.tensor([[1.0, 2.0, 3.0, 4.0], [4.0, 3.0, 2.0, 1.0]])
    similarity = torch.tensor([[3.0, 0.0, 0.0, -1.0], [0.0, 3.0, 0.0, -1.0]])
    alone = combine_with_similarity(model, similarity, task, 0.0)
    assert torch.equal(alone.argsort(dim=1), model.argsort(dim=1))  # weight 0: the model's order
    z = (model - model.mean(1, keepdim=True)) / model.std(1, unbiased=False, keepdim=True)
    pub = similarity[:, :3]
    z_sim = (pub - pub.mean(1, keepdim=True)) / pub.std(1, unbiased=False, keepdim=True)
    both = combine_with_similarity(model, similarity, task, 2.0)
    torch.testing.assert_close(both[:, :3], z[:, :3] + 2.0 * z_sim)
    torch.testing.assert_close(both[:, 3], 3.0 * z[:, 3])  # withheld: the model stands in for the similarity
    # the similarity puts patient 0's true disease A first, the model last: a large weight wins on these patients
    weight, offset, mrr = choose_combination(model, similarity, task)
    grid = [(w, b) for w in COMBINATION_WEIGHTS for b in COMBINATION_OFFSETS]
    assert (weight, offset) == max(grid, key=lambda wb: (mrr[f"{wb[0]:g}/{wb[1]:g}"], -wb[0], -abs(wb[1]), wb[1]))
    assert mrr["0/0"] < mrr[f"{weight:g}/{offset:g}"]


def test_the_offset_lifts_the_withheld_diseases_only():
    task = _task()  # D is withheld
    model = torch.tensor([[1.0, 2.0, 3.0, 4.0], [4.0, 3.0, 2.0, 1.0]])
    similarity = torch.tensor([[3.0, 0.0, 0.0, -1.0], [0.0, 3.0, 0.0, -1.0]])
    for weight in (0.0, 2.0):
        base = combine_with_similarity(model, similarity, task, weight)
        lifted = combine_with_similarity(model, similarity, task, weight, 0.5)
        torch.testing.assert_close(lifted[:, :3], base[:, :3])
        torch.testing.assert_close(lifted[:, 3], base[:, 3] + 0.5 * (1.0 + weight))
    # patient 1 of withheld D: the model ranks D last; only a lift puts it first, and validation picks one
    task_d = dataclasses.replace(task, phenotypes=task.phenotypes[:1], truth=(("D",),))
    weight, offset, _ = choose_combination(model[1:], similarity[1:], task_d)
    assert offset > 0


def test_a_negative_offset_lowers_withheld_rows_that_sit_nearer_every_patient():
    # --private-updates centroids: the withheld D is its patients' mean, nearer every patient than any public row,
    # so the model ranks D first even for a patient of public A; only an offset below 0 lets the similarity
    # (which ranks A first) win, and validation picks one (on the old grid, offsets >= 0 only, A stayed second)
    task = dataclasses.replace(_task(), phenotypes=_task().phenotypes[:1], truth=(("A",),))
    model = torch.tensor([[0.0, 0.0, 0.0, 100.0]])
    similarity = torch.tensor([[3.0, 1.0, 0.0, 0.0]])
    weight, offset, mrr = choose_combination(model, similarity, task)
    assert offset < 0 and mrr[f"{weight:g}/{offset:g}"] == 1.0
    assert max(m for key, m in mrr.items() if float(key.split("/")[1]) >= 0) < 1.0


@pytest.fixture(scope="module")
def hpo():
    return read_hpo_annotations()


@pytest.fixture(scope="module")
def cohort_run(hpo, tmp_path_factory):
    """A tiny simulated cohort and a one-epoch TransE run on it."""
    root = tmp_path_factory.mktemp("diagnosis")
    recipe = CohortRecipe(seed=5, diseases=8, train_patients=60, valid_patients=8, test_patients=16)
    data = write_cohort(simulate_cohort(recipe, hpo), root / "cohort")
    run = root / "run"
    args = ["train", "--dataset", str(data), "--split", "transductive", "--model", "transe", "--dim", "16"]
    assert main([*args, "--epochs", "1", "--no-progress", "--out", str(run)]) == 0
    return data, run


def test_diagnose_prints_one_table_of_the_model_and_the_baselines(cohort_run, capsys):
    data, run = cohort_run
    capsys.readouterr()
    assert main(["diagnose", str(run)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert list(out["rankers"]) == [
        "model",
        "phenotype similarity",
        "popularity",
        "disease name tf-idf",
        "model + phenotype similarity",
    ]
    combination = out["combination"]
    assert combination["weight"] in COMBINATION_WEIGHTS and combination["offset"] in COMBINATION_OFFSETS
    chosen = f"{combination['weight']:g}/{combination['offset']:g}"
    assert combination["valid_mrr"][chosen] == max(combination["valid_mrr"].values())
    n_withheld = len(json.loads((data / "cohort.json").read_text())["withheld_diseases"])
    assert out["diseases"] == {"all": 8, "public": 8 - n_withheld, "withheld": n_withheld} and n_withheld == 2
    assert out["patients"] == 16 and len(out["table"]) == 2 + 5 and out["reading"].endswith(".")
    for block in out["rankers"].values():
        assert block["overall"]["diagnoses"] == 16
        assert block["public"]["diagnoses"] + block["withheld"]["diagnoses"] == 16
    # phenotype similarity puts every withheld disease below the public ones, tied: the average rank
    withheld = out["rankers"]["phenotype similarity"]["withheld"]
    assert withheld["diagnoses"] > 0 and withheld["hits@1"] == 0.0
    assert withheld["mrr"] == pytest.approx(1 / (8 - n_withheld + 1 + (n_withheld - 1) / 2))


def test_diagnose_refuses_bad_input_with_exit_2(cohort_run, tmp_path, capsys):
    data, run = cohort_run
    assert main(["diagnose", str(tmp_path / "none")]) == 2
    assert main(["diagnose", str(run), "--units", str(tmp_path / "missing.txt")]) == 2
    assert main(["diagnose", str(run), "--patients", "train"]) == 2
    other = tmp_path / "other"
    shutil.copytree(run, other)
    config = json.loads((other / "config.json").read_text())
    (other / "config.json").write_text(json.dumps({**config, "textkg_version": "999.0.0"}))
    assert main(["diagnose", str(other)]) == 2  # another major version: refused before anything is read
    units = tmp_path / "units.txt"
    units.write_text("HP:0000001\n")  # a unit list that leaves no patient to diagnose
    assert main(["diagnose", str(run), "--units", str(units)]) == 2
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.slow
def test_phenotype_similarity_equals_pyhpo_with_the_same_information_content(hpo):
    """pyhpo's HPOSet.similarity(kind, method="resnik", combine="BMA") with our IC set as a custom kind."""
    from pyhpo import HPOSet, Ontology

    recipe = CohortRecipe(seed=7, diseases=20, train_patients=5, valid_patients=1, test_patients=4)
    cohort = simulate_cohort(recipe, hpo)
    annotations = {d: hpo.annotations[d] for d in cohort.diseases if d not in cohort.withheld}
    sim = PhenotypeSimilarity(cohort.parents, annotations)
    task = DiagnosisTask(
        diseases=cohort.diseases,
        withheld=frozenset(cohort.withheld),
        phenotypes=tuple(p.phenotypes for p in cohort.patients["test"]),
        truth=tuple((p.disease,) for p in cohort.patients["test"]),
    )
    scores = sim.scores(task)
    Ontology()
    for term in Ontology:
        term.information_content.set_custom("textkg_public", sim.ic.get(term.id, 0.0))
    for i, phenotypes in enumerate(task.phenotypes):
        query = HPOSet.from_queries(list(phenotypes))
        for j, d in enumerate(task.diseases):
            if d in annotations:
                ref = query.similarity(
                    HPOSet.from_queries(list(annotations[d])), kind="textkg_public", method="resnik", combine="BMA"
                )
                assert scores[i, j].item() == pytest.approx(ref, rel=1e-12, abs=1e-12)


def test_a_run_whose_weights_give_infinite_scores_exits_2(cohort_run, tmp_path, capsys):
    """A crafted ``best_model.pt`` (an infinite entry) must be one clear error, not a traceback from the ranking."""
    from textkg.training import checkpoint as ckpt

    _, run = cohort_run
    crafted = tmp_path / "run"
    shutil.copytree(run, crafted)
    state = ckpt.load_weights(crafted)
    name = next(k for k, v in state.items() if v.is_floating_point() and v.dim() == 2 and v.shape[0] > 4)
    state[name] = state[name].clone().fill_(float("inf"))
    ckpt.atomic_torch_save(crafted / ckpt.BEST_MODEL, state)
    capsys.readouterr()
    assert main(["diagnose", str(crafted)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "not finite" in err
