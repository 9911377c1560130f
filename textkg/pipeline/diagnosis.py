"""``textkg diagnose RUN``: diagnose a cohort's held-out patients with the run's model and the baselines.

The cohort is the run's dataset (a folder of ``textkg data simulate-patients``, or one laid out the
same way) and its unit list (the patients): :func:`cohort_view` takes the units out of the graph
(:func:`textkg.data.units.split_units`) and reads what each ranker of
:mod:`textkg.evaluation.diagnosis` may use:

* the candidates: every entity that is neither a unit nor a phenotype term (an entity of a public
  ``is_a`` statement); the *withheld* ones are those without a public ``has_phenotype`` statement;
* the held-out patients (the units of the ``test`` or ``valid`` statements): their ``has_phenotype``
  links are the query, their ``diagnosed_with`` links the truth;
* the public ontology (``is_a``) and the public annotations (``has_phenotype`` of the public graph);
* the training patients' diagnoses, for the popularity baseline only (private data).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import torch

from textkg.data.blp_format import load_blp_directory
from textkg.data.cohort import DIAGNOSED_WITH, HAS_PHENOTYPE, IS_A, PATIENTS_FILE
from textkg.data.graph import KnowledgeGraph
from textkg.data.known_links import NEW_IS_HEAD
from textkg.data.units import read_unit_entities, split_units
from textkg.devices import describe_device, resolve_device
from textkg.errors import ConfigError, DataError
from textkg.evaluation.diagnosis import (
    GROUPS,
    KS,
    DiagnosisTask,
    PhenotypeSimilarity,
    choose_combination,
    combine_with_similarity,
    diagnosis_metrics,
    model_scores,
    name_scores,
    popularity_scores,
)

#: the held-out patients a run can be asked to diagnose
SPLITS = ("test", "valid")
#: what each ranker reads, as the table says it
RANKERS = {
    "model": "this run's model; each patient folded in from its phenotypes (ERAvg)",
    "model + phenotype similarity": "the model's and the phenotype similarity's standardised scores added, the "
    "similarity's weight chosen on the validation patients (public annotations only: as private as the model)",
    "phenotype similarity": "Resnik best-match average over the public annotations (no training)",
    "popularity": "how often each disease was diagnosed in the training patients (reads them: not private)",
    "disease name tf-idf": "TF-IDF of the patient's phenotype names against the disease name (no training)",
}


@dataclass(frozen=True)
class CohortView:
    """A cohort as the rankers read it (module docstring); external ids throughout.

    Attributes:
        task: the held-out patients and the candidate diseases.
        parents: each phenotype term's public ``is_a`` parents.
        annotations: each disease's public phenotype annotations.
        popularity: each disease's number of diagnoses among the training patients (private).
        names: every public entity's name.
    """

    task: DiagnosisTask
    parents: dict[str, tuple[str, ...]]
    annotations: dict[str, tuple[str, ...]]
    popularity: dict[str, int]
    names: dict[str, str]


def cohort_view(kg: KnowledgeGraph, unit_ids, *, split: str = "test") -> CohortView:
    """The cohort ``kg`` (as loaded, the units among its entities) seen through its units ``unit_ids``.

    Raises:
        DataError: the graph lacks one of the relations, or no unit has statements in ``split``.
        ConfigError: an unknown ``split``.
    """
    if split not in SPLITS:
        raise ConfigError(f"unknown split {split!r}; choose one of {list(SPLITS)}", field="split")
    missing = [r for r in (IS_A, HAS_PHENOTYPE, DIAGNOSED_WITH) if r not in kg.relations]
    if missing:
        raise DataError(
            f"not a patient cohort: the graph has no {missing[0]!r} statements (textkg data simulate-patients)",
            file=kg.source or None,
            field="relation",
        )
    public, units = split_units(kg, unit_ids)
    rel = {r: i for i, r in enumerate(public.relations)}
    names = public.entities
    statements = torch.cat([t.reshape(-1, 3) for t in public.triples.values()]).tolist()
    parents: dict[str, list[str]] = {}
    annotations: dict[str, list[str]] = {}
    for h, r, t in statements:
        if r == rel[IS_A]:
            parents.setdefault(names[h], []).append(names[t])
            parents.setdefault(names[t], [])
        elif r == rel[HAS_PHENOTYPE]:
            annotations.setdefault(names[h], []).append(names[t])
    diseases = tuple(e for e in names if e not in parents)
    held = units[split]
    if not held.num_units:
        raise DataError(f"no patient has statements in the {split!r} set: nothing to diagnose", field="split")
    phenotypes: list[list[str]] = [[] for _ in held.units]
    truth: list[list[str]] = [[] for _ in held.units]
    for row, r, other, role in held.links.tolist():
        if role == NEW_IS_HEAD and r == rel[HAS_PHENOTYPE]:
            phenotypes[row].append(names[other])
        elif role == NEW_IS_HEAD and r == rel[DIAGNOSED_WITH]:
            truth[row].append(names[other])
    keep = [i for i, t in enumerate(truth) if t]  # a patient without a diagnosis has nothing to rank
    task = DiagnosisTask(
        diseases=diseases,
        withheld=frozenset(d for d in diseases if d not in annotations),
        phenotypes=tuple(tuple(sorted(phenotypes[i])) for i in keep),
        truth=tuple(tuple(sorted(truth[i])) for i in keep),
    )
    train = units["train"]
    counts = Counter(
        names[other] for _, r, other, role in train.links.tolist() if role == NEW_IS_HEAD and r == rel[DIAGNOSED_WITH]
    )
    return CohortView(
        task=task,
        parents={t: tuple(sorted(ps)) for t, ps in parents.items()},
        annotations={d: tuple(sorted(ts)) for d, ts in annotations.items()},
        popularity=dict(counts),
        names=dict(zip(public.entities, public.entity_names, strict=True)),
    )


def baseline_scores(view: CohortView) -> dict[str, torch.Tensor]:
    """The rankers that need no model, by their :data:`RANKERS` name."""
    task = view.task
    return {
        "phenotype similarity": PhenotypeSimilarity(view.parents, view.annotations).scores(task),
        "popularity": popularity_scores(task, view.popularity),
        "disease name tf-idf": name_scores(task, view.names),
    }


def diagnose_run(
    run_dir: str | Path, *, split: str = "test", units: str | Path | None = None, device: str = "auto"
) -> dict:
    """Rank every disease for each held-out patient of the run's cohort, with the run's model and the
    baselines (:data:`RANKERS`); the result has a ``table`` and a one-line ``reading``.

    ``units``: the unit list (default: the run's ``privacy.unit_entities``, else ``patients.txt`` in the
    dataset folder).

    Raises:
        ConfigError: not a run folder, its dataset is not a folder, no unit list, a model without the
            cohort's relations.
        DataError: the dataset is not a patient cohort.
    """
    from textkg.pipeline.prepared import prepare
    from textkg.pipeline.run_dir import open_run

    if split not in SPLITS:  # before the run is loaded
        raise ConfigError(f"unknown split {split!r}; choose one of {list(SPLITS)}", field="split")
    torch_device = resolve_device(device, field="device")
    run_dir = Path(run_dir)
    run = open_run(run_dir)
    cfg = run.config
    folder = Path(cfg.data.dataset)
    if not folder.is_dir():
        raise ConfigError(
            f"the run's dataset ({cfg.data.dataset!r}) is not a folder: textkg diagnose needs a patient cohort "
            "(textkg data simulate-patients)",
            file=run_dir / "config.json",
            field="data.dataset",
        )
    kg = load_blp_directory(folder, vocabulary="texts")  # every disease, whether or not a statement names it
    unit_file = _unit_file(units, getattr(cfg.privacy, "unit_entities", None), folder)
    unit_ids = read_unit_entities(unit_file, kg)
    view = cohort_view(kg, unit_ids, split=split)
    prep = prepare(cfg, run_dir, device=torch_device)
    scores = {"model": _model_scores(prep, run, view)}
    scores.update(baseline_scores(view))
    chosen = _combination(prep, run, kg, unit_ids, view, scores)
    if chosen is not None:
        scores["model + phenotype similarity"] = chosen.pop("scores")
    results = {name: diagnosis_metrics(s, view.task) for name, s in scores.items()}
    task = view.task
    return {
        "run": str(run_dir),
        "split": split,
        "device": describe_device(torch_device),
        "units": str(unit_file),
        "patients": task.num_patients,
        "diseases": {
            "all": len(task.diseases),
            "public": len(task.diseases) - len(task.withheld),
            "withheld": len(task.withheld),
        },
        "rankers": {name: {"reads": RANKERS[name], **results[name]} for name in scores},
        "combination": chosen,
        "table": diagnosis_table(results),
        "reading": reading(results),
    }


def _combination(prep, run, kg: KnowledgeGraph, unit_ids, view: CohortView, scores: dict) -> dict | None:
    """The model plus the phenotype similarity, its weight chosen on the validation patients
    (:func:`textkg.evaluation.diagnosis.choose_combination`): ``{"weight", "offset", "valid_mrr", "scores"}``, or
    ``None`` when the cohort has no validation patient."""
    try:
        valid = cohort_view(kg, unit_ids, split="valid")
    except DataError:
        return None
    similarity = PhenotypeSimilarity(valid.parents, valid.annotations)
    weight, offset, valid_mrr = choose_combination(
        _model_scores(prep, run, valid), similarity.scores(valid.task), valid.task
    )
    combined = combine_with_similarity(scores["model"], scores["phenotype similarity"], view.task, weight, offset)
    return {"weight": weight, "offset": offset, "valid_mrr": valid_mrr, "scores": combined}


def _unit_file(given, configured, folder: Path) -> Path:
    """The unit list: ``given`` (``--units``), else the run's ``privacy.unit_entities``, else the cohort's
    ``patients.txt``."""
    if given is not None:
        if not Path(given).is_file():
            raise ConfigError("unit list not found", file=given, field="units")
        return Path(given)
    if configured:
        return Path(configured)  # read_unit_entities names it if it is missing
    default = folder / PATIENTS_FILE
    if default.is_file():
        return default
    raise ConfigError(
        f"no unit list: the run has no privacy.unit_entities and {default} does not exist; "
        "give --units FILE (the patients, one id per line)",
        field="units",
    )


def _model_scores(prep, run, view: CohortView) -> torch.Tensor:
    """The run's model, its best weights loaded, scoring the held-out patients."""
    from textkg.training import checkpoint as ckpt

    ckpt.load_run_weights(prep.model, run.path)
    prep.model.eval()
    relations = {r: i for i, r in enumerate(prep.kg.relations)}
    for r in (HAS_PHENOTYPE, DIAGNOSED_WITH):
        if r not in relations:
            raise ConfigError(f"the run's model has no relation {r!r}: it was not trained on a patient cohort")
    scores = model_scores(
        prep.model,
        view.task,
        entity_index={e: i for i, e in enumerate(prep.kg.entities)},
        phenotype_relation=relations[HAS_PHENOTYPE],
        diagnosis_relation=relations[DIAGNOSED_WITH],
    )
    if not bool(torch.isfinite(scores).all()):  # a crafted or corrupt best_model.pt (inf or NaN weights)
        raise DataError("the run's model gives a score that is not finite: its weights are not usable", field="weights")
    return scores


def _cell(block: dict) -> str:
    if block["diagnoses"] == 0:
        return "– | – | –"
    return f"{block['mrr']:.3f} | {100 * block['hits@1']:.0f} % | {100 * block['hits@10']:.0f} %"


def diagnosis_table(results: dict[str, dict]) -> list[str]:
    """Markdown rows: ranker, then MRR / top 1 / top 10 for each of :data:`GROUPS`."""
    head = " | ".join(f"{g} MRR | {g} top {KS[0]} | {g} top {KS[1]}" for g in GROUPS)
    lines = [f"| ranker | {head} |", "|---" + "|---:" * (3 * len(GROUPS)) + "|"]
    lines += [f"| {name} | " + " | ".join(_cell(r[g]) for g in GROUPS) + " |" for name, r in results.items()]
    return lines


def reading(results: dict[str, dict]) -> str:
    """One line: how the run's ranker (the combination when there is one, else the model) compares with the
    best ranker that needs no model, on each group of diseases."""
    ours = "model + phenotype similarity" if "model + phenotype similarity" in results else "model"
    parts = []
    for group in ("withheld", "public"):
        if ours not in results or results[ours][group]["diagnoses"] == 0:
            continue
        baselines = {n: r[group]["mrr"] for n, r in results.items() if not n.startswith("model")}
        best = max(baselines, key=lambda n: baselines[n])
        mine = results[ours][group]["mrr"]
        verdict = "above" if mine > baselines[best] else "not above"
        parts.append(
            f"{group} diseases: {ours} gives MRR {mine:.3f}, {verdict} the best ranker without a model "
            f"({best}, {baselines[best]:.3f})"
        )
    return "; ".join(parts) + "." if parts else "no diagnosis to compare."
