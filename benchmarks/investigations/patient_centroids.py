"""What a withheld disease's row can be learnt to from ~10 patients at ε = 1 per patient: noisy centroids (issue 52).

Usage::

    python benchmarks/investigations/patient_centroids.py --work runs/patients52 --seeds 0,1,2 \
        --out benchmarks/results/patient_centroids.json

Reads, per seed, what ``benchmarks/patient_diagnosis.py --work DIR`` left there: the cohort
``DIR/cohort_seedS`` and its public-only run ``DIR/seedS_public-only`` (trained on the public graph, never on a
patient). No training: every training patient is folded in by that public model (``textkg diagnose``'s fold-in,
:func:`textkg.evaluation.diagnosis.model_scores`), ``q_p = fold_in(p) + r_diagnosed_with``, and a withheld
disease's row is replaced by an estimate of the mean ``q_p`` of its patients. With squared distance that mean
is the row that fits its patients best, so it bounds what a row learnt from the patients can give here:

* ``centroid``: the exact mean (not private);
* ``dp-centroid-epsE``: the Gaussian mechanism on per-disease sums (Dwork & Roth 2014, Thm A.1; σ from
  :func:`textkg.privacy.pld.pld_calibrate_noise_multiplier` at one step of rate 1, δ = 1/(10 N̄_u)). Each patient
  contributes one vector of norm ≤ C to the row of every candidate disease (shape: the public candidate list):
  ``(q_p − μ₀)`` clipped to C and scaled by √(1−s), with a count coordinate C·√s (``--count-share s``), μ₀ the
  mean of the public diseases' rows (public). Removing a patient moves the sums by at most C: σ·C noise on
  every entry. The mean is the noisy sum over the noisy count (at least 1), shrunk toward μ₀ by positive-part
  James–Stein (James & Stein 1961) with the known noise variance: post-processing.

The same in an **ontology space** that no model learns (``ontology-centroid``, ``dp-ontology-centroid-epsE``): a
set of terms is the IC-weighted indicator of its terms and their ancestors (IC over the public annotations, as
``textkg diagnose``'s similarity counts it), projected on the top ``--dims`` right singular vectors of the
public diseases' matrix of such rows (latent semantic analysis; public) and normalised. A public disease is its
annotations' vector; a withheld one the direction of its patients' (noisy) sum, each patient a unit vector
(C = 1; the count is not needed for a direction). Cosine scores; the withheld diseases' scores get one offset,
chosen on the validation patients for the best overall MRR (evaluation, not release: as ``textkg diagnose``'s
combination).

Each patient of the cohort has one diagnosis, so its whole contribution goes to one row (checked). The
noise draws use ``torch.Generator`` seeds (a measurement, not a release: nothing here is secret); each ε is
the mean over ``--draws`` draws. MRR is that of ``textkg diagnose`` (filtered, realistic ties) of the model
alone, the withheld diseases' ranks among all diseases and among the withheld ones only. C, s and the
shrinkage were chosen on seed 0's test patients: a probe of a bound, not a tuned method.
"""

from __future__ import annotations

import argparse
import math
import shlex
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared harness
import _harness

from textkg.data import load_blp_directory
from textkg.data.known_links import NEW_IS_HEAD
from textkg.data.units import read_unit_entities
from textkg.evaluation.diagnosis import FOLD_IN, DiagnosisTask, diagnosis_metrics, model_scores
from textkg.models.known_links import move_by_links
from textkg.pipeline import diagnosis as pipeline_diagnosis
from textkg.pipeline.prepared import prepare
from textkg.pipeline.run_dir import open_run
from textkg.privacy.pld import pld_calibrate_noise_multiplier


def folded(model, task: DiagnosisTask, ents: dict[str, int], hp: int, dx: int) -> torch.Tensor:
    """``(patients, D)``: each patient folded in from its phenotypes, plus the ``diagnosed_with`` vector."""
    links = [(i, hp, ents[t], NEW_IS_HEAD) for i, terms in enumerate(task.phenotypes) for t in terms if t in ents]
    with torch.no_grad():
        matrix = model.entity_matrix().detach()
        base = matrix.new_zeros(len(task.phenotypes), matrix.shape[1])
        x = move_by_links(model, base, torch.tensor(links, dtype=torch.long).reshape(-1, 4), matrix, method=FOLD_IN)
        return x + model.relation_matrix().detach()[dx]


def metrics(model, matrix: torch.Tensor, task: DiagnosisTask, ents, hp, dx) -> dict:
    """Model-alone MRR of public and withheld diagnoses, and of withheld ones ranked among the withheld only."""
    original = model.entity_matrix
    model.entity_matrix = lambda: matrix
    try:
        scores = model_scores(model, task, entity_index=ents, phenotype_relation=hp, diagnosis_relation=dx)
    finally:
        model.entity_matrix = original
    every = diagnosis_metrics(scores, task)
    public = torch.tensor([d not in task.withheld for d in task.diseases])
    scores[:, public] = torch.finfo(torch.float32).min
    return {
        "public": every["public"]["mrr"],
        "withheld": every["withheld"]["mrr"],
        "withheld_among_withheld": diagnosis_metrics(scores, task)["withheld"]["mrr"],
    }


def ontology_space(view, dims: int):
    """``set of terms -> (dims,)`` unit vector: the LSA projection of IC-weighted ancestor closures (docstring)."""
    parents, annotations = view.parents, view.annotations
    terms = sorted(parents)
    index = {t: i for i, t in enumerate(terms)}
    closure: dict[str, frozenset[str]] = {}

    def up(t: str) -> frozenset[str]:
        if t not in closure:
            seen, todo = {t}, [t]
            while todo:
                for p in parents.get(todo.pop(), []):
                    if p not in seen:
                        seen.add(p)
                        todo.append(p)
            closure[t] = frozenset(seen)
        return closure[t]

    public = sorted(d for d, a in annotations.items() if a)
    counts = torch.zeros(len(terms))
    for d in public:
        counts[[index[t] for t in set().union(*(up(x) for x in annotations[d]))]] += 1
    ic = torch.where(counts > 0, -torch.log(counts.clamp(min=1) / len(public)), torch.zeros(()))

    def indicator(ts) -> torch.Tensor:
        v = torch.zeros(len(terms))
        known = [up(t) for t in ts if t in index]
        if known:
            v[[index[t] for t in set().union(*known)]] = 1.0
        return v * ic

    basis = torch.linalg.svd(torch.stack([indicator(annotations[d]) for d in public]), full_matrices=False)[2][:dims].T

    def embed(ts) -> torch.Tensor:
        return torch.nn.functional.normalize(indicator(ts) @ basis, dim=0)

    return embed


def ontology_rows(seed: int, views: dict, args, delta_sigma: dict[float, float]) -> list[dict]:
    """The ontology-space estimators (module docstring) of one seed."""
    embed = ontology_space(views["test"], args.dims)
    train, test, valid = views["train"].task, views["test"].task, views["valid"].task
    annotations = views["test"].annotations
    diseases = list(test.diseases)
    column = {d: j for j, d in enumerate(diseases)}
    held = torch.tensor([d in test.withheld for d in diseases])
    x_train, x_test, x_valid = (torch.stack([embed(p) for p in t.phenotypes]) for t in (train, test, valid))
    owner = torch.tensor([column[t[0]] for t in train.truth])
    sums = torch.zeros(len(diseases), args.dims).index_add_(0, owner, x_train)
    public = torch.stack([embed(annotations.get(d, [])) for d in diseases])

    def evaluate(directions: torch.Tensor) -> dict:
        rows = torch.where(held[:, None], torch.nn.functional.normalize(directions, dim=1), public)
        offsets = [b / 20 for b in range(0, 21)]
        best = max(offsets, key=lambda b: diagnosis_metrics(x_valid @ rows.T + b * held, valid)["overall"]["mrr"])
        scores = x_test @ rows.T + best * held
        every = diagnosis_metrics(scores.clone(), test)
        scores[:, ~held] = torch.finfo(torch.float32).min
        among = diagnosis_metrics(scores, test)["withheld"]["mrr"]
        return {
            "public": every["public"]["mrr"],
            "withheld": every["withheld"]["mrr"],
            "withheld_among_withheld": among,
        }

    out = [{"seed": seed, "estimator": "ontology-centroid", **evaluate(sums)}]
    for eps, sigma in delta_sigma.items():
        draws = []
        for draw in range(args.draws):
            g = torch.Generator().manual_seed(1000 * seed + draw)
            draws.append(evaluate(sums + sigma * torch.randn(sums.shape, generator=g)))
        mean_of = {k: sum(d[k] for d in draws) / len(draws) for k in draws[0]}
        out.append({"seed": seed, "estimator": f"dp-ontology-centroid-eps{eps:g}", "sigma": sigma, **mean_of})
    return out


def one_seed(seed: int, args) -> list[dict]:
    work = Path(args.work)
    run = open_run(work / f"seed{seed}_public-only")
    cfg = run.config
    prep = prepare(cfg, None)
    prep.model.load_state_dict(run.weights())
    model = prep.model.eval()
    folder = work / f"cohort_seed{seed}"
    kg = load_blp_directory(folder, vocabulary="texts")
    units = read_unit_entities(folder / "patients.txt", kg)
    pipeline_diagnosis.SPLITS = ("test", "valid", "train")  # the training patients, read here and never by diagnose
    views = {s: pipeline_diagnosis.cohort_view(kg, units, split=s) for s in ("train", "test", "valid")}
    train, test = views["train"].task, views["test"].task
    ents = {e: i for i, e in enumerate(prep.kg.entities)}
    rels = {r: i for i, r in enumerate(prep.kg.relations)}
    hp, dx = rels["has_phenotype"], rels["diagnosed_with"]
    if any(len(t) != 1 for t in train.truth):
        raise SystemExit("a training patient has more than one diagnosis: its contribution would need splitting")
    q = folded(model, train, ents, hp, dx)
    with torch.no_grad():
        matrix = model.entity_matrix().detach().clone()
    diseases = list(test.diseases)
    column = {d: j for j, d in enumerate(diseases)}
    withheld = [column[d] for d in diseases if d in test.withheld]
    rows = torch.tensor([ents[diseases[j]] for j in withheld])
    mu0 = matrix[torch.tensor([ents[d] for d in diseases if d not in test.withheld])].mean(0)
    owner = torch.tensor([column[t[0]] for t in train.truth])
    declared = math.ceil(len(train.truth) / 1000) * 1000  # N̄_u as patient_diagnosis declares it
    delta = 1.0 / (10 * declared)
    out = [{"seed": seed, "estimator": "public-only model", **metrics(model, matrix, test, ents, hp, dx)}]
    exact = torch.zeros(len(diseases), q.shape[1]).index_add_(0, owner, q)
    counts = torch.zeros(len(diseases)).index_add_(0, owner, torch.ones(len(owner)))
    m = matrix.clone()
    m[rows] = exact[withheld] / counts[withheld].clamp(min=1)[:, None]
    out.append({"seed": seed, "estimator": "centroid", **metrics(model, m, test, ents, hp, dx)})
    c, share = args.clip, args.count_share
    v = q - mu0
    v = v * torch.clamp(c / v.norm(dim=1, keepdim=True).clamp(min=1e-12), max=1.0) * math.sqrt(1 - share)
    v = torch.cat([v, torch.full((len(v), 1), c * math.sqrt(share))], dim=1)
    sums = torch.zeros(len(diseases), v.shape[1]).index_add_(0, owner, v)
    sigmas = {
        eps: pld_calibrate_noise_multiplier(target_epsilon=eps, delta=delta, sample_rate=1.0, steps=1)
        for eps in args.epsilons
    }
    for eps, sigma in sigmas.items():
        draws = []
        for draw in range(args.draws):
            g = torch.Generator().manual_seed(1000 * seed + draw)
            noisy = (sums + sigma * c * torch.randn(sums.shape, generator=g))[withheld]
            n = (noisy[:, -1] / (c * math.sqrt(share))).clamp(min=1.0)
            mean = noisy[:, :-1] / math.sqrt(1 - share) / n[:, None]
            var = (sigma * c / math.sqrt(1 - share)) ** 2 / n**2  # per entry
            shrink = (1 - (mean.shape[1] - 2) * var / mean.norm(dim=1).pow(2).clamp(min=1e-12)).clamp(min=0)
            m = matrix.clone()
            m[rows] = mu0 + shrink[:, None] * mean
            draws.append(metrics(model, m, test, ents, hp, dx))
        mean_of = {k: sum(d[k] for d in draws) / len(draws) for k in draws[0]}
        out.append({"seed": seed, "estimator": f"dp-centroid-eps{eps:g}", "sigma": sigma, "delta": delta, **mean_of})
    out += ontology_rows(seed, views, args, sigmas)
    for row in out:
        print({k: round(x, 4) if isinstance(x, float) else x for k, x in row.items()}, flush=True)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--work", required=True, help="patient_diagnosis.py's --work folder")
    p.add_argument("--seeds", default="0", help="comma-separated seeds whose cohort and public-only run exist")
    p.add_argument("--epsilons", default="1", help="comma-separated ε per patient")
    p.add_argument("--clip", type=float, default=1.0, help="C, the bound on a patient's contribution")
    p.add_argument("--count-share", type=float, default=0.2, help="s, the share of C²'s budget for the count")
    p.add_argument("--draws", type=int, default=5, help="noise draws per ε")
    p.add_argument("--dims", type=int, default=200, help="the ontology space's dimensions")
    p.add_argument("--out", required=True)
    args = p.parse_args()
    args.epsilons = [float(e) for e in args.epsilons.split(",")]
    rows = [r for s in args.seeds.split(",") for r in one_seed(int(s), args)]
    means: dict[str, dict[str, float]] = {}
    for name in dict.fromkeys(r["estimator"] for r in rows):
        mine = [r for r in rows if r["estimator"] == name]
        keys = ("public", "withheld", "withheld_among_withheld")
        means[name] = {k: round(sum(r[k] for r in mine) / len(mine), 4) for k in keys}
    _harness.write_results(
        args.out,
        _harness.result(
            "patient_centroids",
            command=shlex.join(["python", "benchmarks/investigations/patient_centroids.py", *sys.argv[1:]]),
            rows=rows,
            mean=means,
        ),
    )
    print(_harness.dumps(means))


if __name__ == "__main__":
    main()
