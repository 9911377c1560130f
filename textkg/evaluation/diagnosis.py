"""Diagnosis of new patients from their phenotypes: rank every disease (issue 52, item 4).

A held-out patient arrives with its phenotype terms; each ranker scores every candidate disease,
and the true diagnosis is ranked among them: filtered (a patient's other true diagnoses are left out
of its ranking) with realistic ties (:func:`textkg.evaluation.ranking.realistic_ranks`, the rule of
every ranking in textkg: ``1 + greater + equal / 2``, the expected rank in a random order of the
tied). MRR, top 1 and top 10 are reported overall and separately for diagnoses of diseases with
public annotations and of diseases whose annotations were withheld (:func:`diagnosis_metrics`).

The rankers all take the same :class:`DiagnosisTask` and return ``(patients, diseases)`` scores:

* :func:`model_scores`: a trained model. The patient's vector is the ERAvg fold-in of its
  ``has_phenotype`` links (Albooyeh et al. 2020, arXiv:2004.13230v2: the mean over its links of
  :func:`textkg.models.known_links.link_estimates`, i.e. ``move_by_links`` with ``mix`` at prior 0,
  as a unit is represented in training), scored against every disease by the model's interaction
  for ``diagnosed_with``.
* :class:`PhenotypeSimilarity`: Resnik best-match average over the **public** annotations (the
  phenotype-similarity ranking of Köhler et al. 2009, AJHG 85:457, as ``pyhpo``'s
  ``HPOSet.similarity(kind, method="resnik", combine="BMA")`` computes it), with the information
  content counted from the public annotations only (pyhpo's own IC counts every HPO disease, the
  withheld ones included).
* :func:`popularity_scores`: how often each disease was diagnosed among the training patients
  (reads the private training diagnoses: **not private**).
* :func:`name_scores`: TF-IDF cosine between the patient's phenotype names and the disease's name
  (public texts only).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from textkg.data.cohort import ancestors_of
from textkg.data.known_links import NEW_IS_HEAD
from textkg.errors import DataError
from textkg.evaluation.metrics import rank_metrics
from textkg.evaluation.ranking import realistic_ranks
from textkg.models.known_links import LinkMethod, move_by_links

#: the cut-offs reported ("top 1", "top 10")
KS = (1, 10)
#: how a patient's links make its vector: ERAvg (the links' mean estimate; the patient has no text)
FOLD_IN = LinkMethod("mix", 0.0)
#: the groups a diagnosis is counted in
GROUPS = ("overall", "public", "withheld")


@dataclass(frozen=True)
class DiagnosisTask:
    """Held-out patients and the diseases ranked for each (external ids throughout).

    Attributes:
        diseases: every candidate disease, in column order.
        withheld: the diseases without public annotations.
        phenotypes: per patient, its phenotype terms.
        truth: per patient, its true diagnoses (at least one, each a candidate).
    """

    diseases: tuple[str, ...]
    withheld: frozenset[str]
    phenotypes: tuple[tuple[str, ...], ...]
    truth: tuple[tuple[str, ...], ...]

    def __post_init__(self) -> None:
        if len(self.phenotypes) != len(self.truth):
            raise DataError(f"{len(self.phenotypes)} patients' phenotypes but {len(self.truth)} patients' diagnoses")
        if len(set(self.diseases)) != len(self.diseases):
            raise DataError("a candidate disease is listed twice", field="diseases")
        known = set(self.diseases)
        for i, diagnoses in enumerate(self.truth):
            if not diagnoses:
                raise DataError(f"patient {i} has no diagnosis to rank", field="diagnosed_with")
            missing = [d for d in diagnoses if d not in known]
            if missing:
                raise DataError(f"patient {i}'s diagnosis {missing[0]!r} is not a candidate disease", field="diseases")

    @property
    def num_patients(self) -> int:
        return len(self.truth)


def diagnosis_ranks(scores: torch.Tensor, task: DiagnosisTask) -> tuple[torch.Tensor, torch.Tensor]:
    """``(ranks (m,), withheld (m,) bool)``: one filtered realistic rank per (patient, true diagnosis).

    Args:
        scores: ``(patients, diseases)`` scores, higher = more likely; no NaN.
        task: the patients and the candidates.
    """
    n, c = task.num_patients, len(task.diseases)
    if tuple(scores.shape) != (n, c):
        raise ValueError(f"expected ({n}, {c}) scores, got {tuple(scores.shape)}")
    if bool(torch.isnan(scores).any()):
        raise ValueError("a ranker gave a NaN score")
    column = {d: j for j, d in enumerate(task.diseases)}
    rows, targets, f_rows, f_cols, withheld = [], [], [], [], []
    for i, diagnoses in enumerate(task.truth):
        cols = sorted({column[d] for d in diagnoses})
        for target in cols:
            rows.append(i)
            targets.append(target)
            withheld.append(task.diseases[target] in task.withheld)
            k = len(rows) - 1
            others = [j for j in cols if j != target]
            f_rows += [k] * len(others)
            f_cols += others
    long = torch.long
    return (
        realistic_ranks(
            scores[torch.tensor(rows, dtype=long)],
            torch.tensor(targets, dtype=long),
            torch.tensor(f_rows, dtype=long),
            torch.tensor(f_cols, dtype=long),
        ),
        torch.tensor(withheld, dtype=torch.bool),
    )


def diagnosis_metrics(scores: torch.Tensor, task: DiagnosisTask) -> dict:
    """``{"overall" | "public" | "withheld": {"mrr", "hits@1", "hits@10", "diagnoses"}}`` (NaN when a group
    is empty)."""
    ranks, withheld = diagnosis_ranks(scores, task)
    groups = {"overall": torch.ones_like(withheld), "public": ~withheld, "withheld": withheld}
    out = {}
    for name, mask in groups.items():
        m = rank_metrics(ranks[mask], ks=KS)
        out[name] = {"mrr": m["mrr"], **{f"hits@{k}": m[f"hits@{k}"] for k in KS}, "diagnoses": m["num_triples"]}
    return out


def model_scores(
    model,
    task: DiagnosisTask,
    *,
    entity_index: Mapping[str, int],
    phenotype_relation: int,
    diagnosis_relation: int,
) -> torch.Tensor:
    """``(patients, diseases)``: the model's ``diagnosed_with`` scores of each patient folded in from its
    phenotypes (module docstring).

    Args:
        model: a :class:`textkg.models.KGEModel` in eval mode (not changed).
        task: the patients and candidates.
        entity_index: external id → the model's entity id. A phenotype the model lacks is not used; a
            disease it lacks scores the lowest finite float (it ties with the other such diseases).
        phenotype_relation, diagnosis_relation: the model's ids of ``has_phenotype`` and ``diagnosed_with``.
    """
    links = [
        (i, phenotype_relation, entity_index[t], NEW_IS_HEAD)
        for i, terms in enumerate(task.phenotypes)
        for t in terms
        if t in entity_index
    ]
    with torch.no_grad():
        matrix = model.entity_matrix().detach()
        base = matrix.new_zeros(task.num_patients, matrix.shape[1])
        table = torch.tensor(links, dtype=torch.long).reshape(-1, 4)
        patients = move_by_links(model, base, table, matrix, method=FOLD_IN)
        known = [j for j, d in enumerate(task.diseases) if d in entity_index]
        ids = torch.tensor([entity_index[task.diseases[j]] for j in known], dtype=torch.long, device=matrix.device)
        relation = model.relation_matrix().detach()[diagnosis_relation].expand(task.num_patients, -1)
        scores = model.interaction.score_tails(patients, relation, matrix[ids]).float().cpu()
    out = torch.full((task.num_patients, len(task.diseases)), torch.finfo(torch.float32).min)
    out[:, torch.tensor(known, dtype=torch.long)] = scores
    return out


def information_content(
    annotations: Mapping[str, Sequence[str]], ancestors: Mapping[str, frozenset[str]]
) -> dict[str, float]:
    """``{term: -ln(p)}``, ``p`` the share of the annotated diseases annotated with the term or a descendant
    (the true-path rule); a term no disease has gets 0, as pyhpo gives it (Robinson et al. 2008, AJHG
    83:610, the IC pyhpo computes)."""
    annotated = [d for d, terms in annotations.items() if terms]
    count: Counter[str] = Counter()
    for d in annotated:
        count.update(set().union(*(ancestors[t] for t in annotations[d])))
    total = len(annotated)
    return {t: -math.log(n / total) for t, n in count.items()}


def resnik_bma(
    query: Sequence[str], target: Sequence[str], ancestors: Mapping[str, frozenset[str]], ic: Mapping[str, float]
) -> float:
    """Resnik best-match average of two term sets, one pair at a time (the reference
    :class:`PhenotypeSimilarity` is tested against): ``sim(a, b)`` is the largest IC of a common ancestor
    (the terms themselves included; Resnik 1995), and BMA is ``(Σ_a max_b sim + Σ_b max_a sim) / (|A| + |B|)``
    (pyhpo's ``combine="BMA"``, Deng et al. 2015)."""
    a, b = sorted(set(query)), sorted(set(target))
    if not a or not b:
        return 0.0
    sim = np.array([[max((ic.get(x, 0.0) for x in ancestors[p] & ancestors[q]), default=0.0) for q in b] for p in a])
    return float((sim.max(1).sum() + sim.max(0).sum()) / (len(a) + len(b)))


class PhenotypeSimilarity:
    """Resnik best-match average of a patient's terms against each disease's public annotations.

    Args:
        parents: each phenotype term's ``is_a`` parents (the public ontology).
        annotations: each disease's public annotations; a disease with none (a withheld one) scores
            ``-1``, below every similarity (which is ``>= 0``), so all of them tie for the last places.
    """

    def __init__(self, parents: Mapping[str, Sequence[str]], annotations: Mapping[str, Sequence[str]]) -> None:
        self.parents = parents
        self.annotations = {d: tuple(sorted(set(ts))) for d, ts in annotations.items() if ts}
        terms = {t for ts in self.annotations.values() for t in ts}
        self.ancestors = dict(ancestors_of(parents, terms))
        self.ic = information_content(self.annotations, self.ancestors)
        # the distinct annotated terms (columns) and, per ancestor, the columns below it
        self.columns = sorted(terms)
        position = {t: j for j, t in enumerate(self.columns)}
        below: dict[str, list[int]] = {}
        for t in self.columns:
            for a in self.ancestors[t]:
                below.setdefault(a, []).append(position[t])
        self.below = {a: np.array(cols, dtype=np.int64) for a, cols in below.items()}
        self.position = position
        self._rows: dict[str, np.ndarray] = {}

    def term_row(self, term: str) -> np.ndarray:
        """``(columns,)``: Resnik similarity of ``term`` to every annotated term."""
        row = self._rows.get(term)
        if row is None:
            if term not in self.ancestors:
                self.ancestors.update(ancestors_of(self.parents, [term]))
            row = np.zeros(len(self.columns))
            for a in self.ancestors[term]:
                cols, ic = self.below.get(a), self.ic.get(a, 0.0)
                if cols is not None and ic > 0:
                    row[cols] = np.maximum(row[cols], ic)  # each column once per ancestor
            self._rows[term] = row
        return row

    def scores(self, task: DiagnosisTask) -> torch.Tensor:
        """``(patients, diseases)`` best-match averages; ``-1`` for a disease without public annotations."""
        public = [j for j, d in enumerate(task.diseases) if d in self.annotations]
        sizes = np.array([len(self.annotations[task.diseases[j]]) for j in public], dtype=np.int64)
        flat = np.array([self.position[t] for j in public for t in self.annotations[task.diseases[j]]], dtype=np.int64)
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]) if len(sizes) else np.zeros(0, dtype=np.int64)
        out = np.full((task.num_patients, len(task.diseases)), -1.0)
        for i, terms in enumerate(task.phenotypes if public else ()):
            query = sorted(set(terms))
            if not query:
                out[i, public] = 0.0
                continue
            x = np.stack([self.term_row(t) for t in query])[:, flat]  # (|query|, all annotations)
            best_per_query = np.maximum.reduceat(x, starts, axis=1).sum(0)  # Σ over query terms, per disease
            best_per_annotation = np.add.reduceat(x.max(0), starts)  # Σ over the disease's annotations
            out[i, public] = (best_per_query + best_per_annotation) / (len(query) + sizes)
        return torch.from_numpy(out)


def popularity_scores(task: DiagnosisTask, counts: Mapping[str, int]) -> torch.Tensor:
    """``(patients, diseases)``: each disease's number of training diagnoses, the same for every patient."""
    row = torch.tensor([float(counts.get(d, 0)) for d in task.diseases], dtype=torch.float64)
    return row.expand(task.num_patients, -1).clone()


def _tokens(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def name_scores(task: DiagnosisTask, names: Mapping[str, str]) -> torch.Tensor:
    """``(patients, diseases)``: TF-IDF cosine of the patient's phenotype names (one document) and each
    disease's name. The IDF is ``ln((1 + D) / (1 + df)) + 1`` over the ``D`` disease names (scikit-learn's
    smoothed IDF); words no disease name has are ignored."""
    docs = [_tokens(names.get(d, "")) for d in task.diseases]
    vocab = {w: k for k, w in enumerate(sorted({w for doc in docs for w in doc}))}
    df = np.zeros(len(vocab))
    for doc in docs:
        df[[vocab[w] for w in set(doc)]] += 1
    idf = np.log((1 + len(docs)) / (1 + df)) + 1
    disease = _tfidf([Counter(doc) for doc in docs], vocab, idf)
    queries = [Counter(w for t in terms for w in _tokens(names.get(t, ""))) for terms in task.phenotypes]
    return torch.from_numpy(_tfidf(queries, vocab, idf) @ disease.T)


def _tfidf(counts: list[Counter], vocab: Mapping[str, int], idf: np.ndarray) -> np.ndarray:
    """``(len(counts), |vocab|)`` L2-normalised TF-IDF rows (a row without a known word stays 0)."""
    out = np.zeros((len(counts), len(vocab)))
    for i, c in enumerate(counts):
        for w, n in c.items():
            if w in vocab:
                out[i, vocab[w]] = n * idf[vocab[w]]
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.where(norms > 0, norms, 1.0)


#: weights of the phenotype similarity added to the model's standardised scores, tried on the validation
#: patients (:func:`choose_combination`); 0 is the model alone
COMBINATION_WEIGHTS = (0.0, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0)
#: offsets added to the withheld diseases' combined scores, in units of ``1 + weight`` standard deviations,
#: tried with each weight (:func:`choose_combination`). A withheld disease's row is trained from the
#: patients alone, under DP with noise on every entry: noise moves a row away from every patient, so a
#: distance-based model scores all withheld diseases below the public ones while still ordering them
#: among themselves (on seed 0's default cohort, DP at ε = 1: withheld MRR 0.147 among the withheld
#: diseases, 0.011 among all). The offset re-levels the two groups; 0 leaves them as the model put them.
#: Negative offsets lower them: a model whose withheld rows are its patients' mean (``--private-updates
#: centroids``) puts them nearer every patient than the public rows, so public patients need them lowered
#: (3 seeds of the default cohort, public diseases with the similarity: 0.654 with offsets ≥ 0 only, below the
#: similarity alone at 0.668; docs/diagnosis.md).
COMBINATION_OFFSETS = (-3.0, -2.0, -1.5, -1.0, -0.75, -0.5, -0.25, 0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0)


def _standardise(scores: torch.Tensor, columns: torch.Tensor) -> torch.Tensor:
    """Each row minus its mean over ``columns``, divided by its standard deviation there (1 where that is 0)."""
    part = scores[:, columns].double()
    mean = part.mean(dim=1, keepdim=True)
    std = part.std(dim=1, unbiased=False, keepdim=True).clamp_min(1e-12)
    return (scores.double() - mean) / std


def combine_with_similarity(
    model: torch.Tensor, similarity: torch.Tensor, task: DiagnosisTask, weight: float, offset: float = 0.0
) -> torch.Tensor:
    """``z(model) + weight · z(similarity)``, per patient: the model's scores standardised over every disease,
    the phenotype similarity standardised over the diseases with public annotations; on the withheld ones,
    which it cannot score, the model's standardised score stands in for it, and ``offset · (1 + weight)`` is
    added to them (:data:`COMBINATION_OFFSETS`). Both inputs are ``(patients, diseases)``; a disease the model
    lacks keeps the lowest score. The similarity reads public annotations only, so the sum is as private as
    the model.
    """
    public = torch.tensor([d not in task.withheld for d in task.diseases], dtype=torch.bool)
    known = model > torch.finfo(torch.float32).min
    if not bool(known.any()):
        return model
    row_min = model.masked_fill(~known, float("inf")).min(dim=1, keepdim=True).values
    z_model = _standardise(torch.where(known, model, row_min), torch.arange(len(task.diseases)))
    z_model = z_model.masked_fill(~known, -1e30)
    lift = torch.where(public | ~known, 0.0, offset * (1.0 + weight)).double()
    if weight == 0.0 or not bool(public.any()):
        return (z_model + lift).float()
    # a withheld disease has no annotation to compare with: the model's own standardised score stands in for
    # its similarity. Chosen over 0 (the similarity's mean) on the default cohort's validation patients, with a
    # non-private TransE: validation MRR 0.611 against 0.573, and on test the withheld diseases' MRR 0.175
    # against 0.016 at the weight each chose (2); docs/diagnosis.md
    z_sim = torch.where(public, _standardise(similarity, public.nonzero().squeeze(1)), z_model)
    return (z_model + weight * z_sim + lift).float()


def choose_combination(model: torch.Tensor, similarity: torch.Tensor, task: DiagnosisTask) -> tuple[float, float, dict]:
    """The weight of :data:`COMBINATION_WEIGHTS` and the offset of :data:`COMBINATION_OFFSETS` whose combination
    gives the best overall MRR on ``task`` (the validation patients; ties go to the smaller weight, then the
    offset nearest 0), and ``{"weight/offset": MRR}``."""
    grid = [(w, b) for w in COMBINATION_WEIGHTS for b in COMBINATION_OFFSETS]
    mrr = {
        (w, b): diagnosis_metrics(combine_with_similarity(model, similarity, task, w, b), task)["overall"]["mrr"]
        for w, b in grid
    }
    weight, offset = max(grid, key=lambda wb: (mrr[wb], -wb[0], -abs(wb[1]), wb[1]))
    return weight, offset, {f"{w:g}/{b:g}": m for (w, b), m in mrr.items()}
