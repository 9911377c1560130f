"""``--private-updates centroids``: one Gaussian release of each private-only candidate's mean patient (issue 52).

What can fail: a private-only candidate's row must be the centre plus the mean of its patients' clipped, centred
fold-ins (recomputed here from the data files), and no other row may move; one whole patient, however many
targets it has, must move the pre-noise sums by at most ``C`` and reach at most ``m`` candidates; two cohorts
that differ by one whole patient must give run folders with the same files, keys, public fields and public
rows, and no patient may be an entity of the release; the block's ε must be what ``textkg account``, Opacus
and dp-accounting compute for one Gaussian step at rate 1; settings the mechanism cannot honour must exit 2
before anything is written; the record of spent releases must refuse what textkg did not write and compose
a resumed run's second draw.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import random
from pathlib import Path

import pytest
import torch

from textkg.cli.main import main
from textkg.errors import ConfigError
from textkg.models import get_preset
from textkg.pipeline.job import unit_training
from textkg.pipeline.prepared import prepare
from textkg.privacy.randomness import SecretRandomness
from textkg.privacy.rdp import DEFAULT_ORDERS
from textkg.release import account_from
from textkg.training import unit_centroids
from textkg.training.config import DataConfig, PrivacyConfig, RunConfig, TrainConfig
from textkg.training.losses import make_loss
from textkg.training.unit_centroids import (
    CENTROID_RECORD,
    COUNT_SHARE,
    MAX_RECORD_ENTRIES,
    CentroidRelease,
    bound_targets,
    candidate_sums,
    noisy_means,
    read_record,
    unit_targets,
)

# -- a tiny cohort with withheld diseases -------------------------------------------------------------------
PHENOTYPES = [f"HP:{i:03d}" for i in range(16)]
PUBLIC = [f"D:{i:02d}" for i in range(4)]  # annotated in the public graph
WITHHELD = ["D:04", "D:05"]  # known only from the patients: private-only candidates
DISEASES = PUBLIC + WITHHELD
N_PATIENTS, N_TRAIN, DECLARED = 40, 28, 40
SOLE = "P000"  # the only training patient of D:05 (the neighbouring cohort drops it)


def _patients() -> list[str]:
    return [f"P{i:03d}" for i in range(N_PATIENTS)]


def make_cohort(root: Path, *, drop: str | None = None) -> Path:
    """BLP files: public phenotype annotations of :data:`PUBLIC` and an ``is_a`` tree (the public graph); 28
    training, 6 validation and 6 test patients, each ``diagnosed_with`` one disease (every fourth training
    patient two) and ``has_phenotype`` some of its phenotypes. ``drop``: leave out that patient's statements
    (one whole unit removed; the unit list, the candidate list and every text stay the same)."""
    rnd = random.Random(0)
    root.mkdir(parents=True, exist_ok=True)
    notes = {d: rnd.sample(PHENOTYPES, 4) for d in DISEASES}
    public = [(d, "has_phenotype", p) for d in PUBLIC for p in notes[d]]
    public += [(PHENOTYPES[i], "is_a", PHENOTYPES[i // 2]) for i in range(1, len(PHENOTYPES))]
    sets: dict[str, list] = {"train": list(public), "dev": [], "test": []}
    for k, p in enumerate(_patients()):
        if p == SOLE:
            diag = ["D:05"]
        elif k < N_TRAIN:
            diag = [rnd.choice([*PUBLIC, "D:04"])]
            if k % 4 == 1:
                diag.append(rnd.choice([d for d in [*PUBLIC, "D:04"] if d != diag[0]]))
        else:
            diag = [rnd.choice(DISEASES)]
        terms = sorted({h for d in diag for h in rnd.sample(notes[d], rnd.randint(1, 3))})
        if p == drop:
            continue
        which = "train" if k < N_TRAIN else ("dev" if k < N_TRAIN + 6 else "test")
        sets[which] += [(p, "diagnosed_with", d) for d in diag] + [(p, "has_phenotype", h) for h in terms]
    for name, rows in sets.items():
        (root / f"{name}.tsv").write_text("".join(f"{h}\t{r}\t{t}\n" for h, r, t in rows), encoding="utf-8")
    names = [*PHENOTYPES, *DISEASES, *_patients()]
    (root / "entity2text.txt").write_text("".join(f"{e}\tentity {e}\n" for e in names), encoding="utf-8")
    (root / "relation2text.txt").write_text(
        "has_phenotype\thas phenotype\ndiagnosed_with\tdiagnosed with\nis_a\tis a\n", encoding="utf-8"
    )
    (root / "patients.txt").write_text("".join(p + "\n" for p in _patients()), encoding="utf-8")
    (root / "diseases.txt").write_text("".join(d + "\n" for d in DISEASES), encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def cohorts(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("centroids")
    return {"a": make_cohort(root / "a" / "cohort"), "b": make_cohort(root / "b" / "cohort", drop=SOLE)}


def _cfg(data: Path, **privacy) -> RunConfig:
    settings = {
        "mode": "confidential",
        "unit": "entity",
        "unit_entities": str(data / "patients.txt"),
        "unit_targets": ("diagnosed_with",),
        "unit_candidates": str(data / "diseases.txt"),
        "private_size": DECLARED,
        "private_updates": "centroids",
        "noise_multiplier": 1e-9,
        "reproducible_noise": 0,
    }
    return RunConfig(
        data=DataConfig(dataset=str(data), split="transductive"),
        model=dataclasses.replace(get_preset("transe"), dim=8),
        train=TrainConfig(epochs=1, batch_size=16, num_negatives=4),
        privacy=PrivacyConfig(**(settings | privacy)),
        model_name="transe",
    )


def _release(data: Path, **privacy):
    cfg = _cfg(data, **privacy)
    prep = prepare(cfg)
    release = unit_training(prep, cfg, make_loss(cfg.train))
    assert isinstance(release, CentroidRelease)
    return prep, release


# -- 1. the oracle ----------------------------------------------------------------------------------------------
def _read(path: Path) -> list[tuple[str, str, str]]:
    return [tuple(line.split("\t")) for line in path.read_text(encoding="utf-8").splitlines()]  # type: ignore[misc]


def test_a_tiny_noise_release_is_the_centre_plus_the_mean_clipped_patient(cohorts, monkeypatch):
    data = cohorts["a"]
    prep, release = _release(data)
    model = prep.model
    ent = {name: i for i, name in enumerate(prep.kg.entities)}
    rel = {name: i for i, name in enumerate(prep.kg.relations)}
    with torch.no_grad():
        matrix = model.entity_matrix().double().clone()
        relations = model.relation_matrix().double().clone()
        state = {k: v.clone() for k, v in model.state_dict().items()}
    table_before = state["structural.weight"]
    r_pheno, r_diag = relations[rel["has_phenotype"]], relations[rel["diagnosed_with"]]

    def where(terms: list[str]) -> torch.Tensor:  # TransE: the head that points at t by has_phenotype
        if not terms:
            return r_diag.clone()  # no other link: the fold-in keeps the zero vector
        return torch.stack([matrix[ent[t]] - r_pheno for t in terms]).mean(0) + r_diag

    train = _read(data / "train.tsv")
    # the centre and C: the public diseases folded in from their own public annotations
    q_public = torch.stack([where([t for h, r, t in train if h == d and r == "has_phenotype"]) for d in PUBLIC])
    centre = q_public.mean(0)
    distances = sorted((q_public - centre).norm(dim=1).tolist())
    clip = distances[(len(distances) - 1) // 2]  # torch's median: the lower of the two middle values
    # each training patient: its fold-in, clipped and centred, shared among its diagnoses
    patients: dict[str, dict[str, list[str]]] = {}
    for h, r, t in train:
        if h.startswith("P"):
            patients.setdefault(h, {"diagnosed_with": [], "has_phenotype": []})[r].append(t)
    clipped = 0
    sums = {d: torch.zeros_like(centre) for d in WITHHELD}
    counts = dict.fromkeys(WITHHELD, 0.0)
    for links in patients.values():
        v = where(links["has_phenotype"]) - centre
        clipped += float(v.norm()) > clip
        v = v * min(1.0, clip / float(v.norm()))
        k = len(links["diagnosed_with"])
        for d in links["diagnosed_with"]:
            if d in WITHHELD:
                sums[d] += v / math.sqrt(k)
                counts[d] += 1 / math.sqrt(k)
    assert 0 < clipped < len(patients)  # the oracle sees clipped and unclipped patients
    assert counts["D:05"] == 1.0 and counts["D:04"] > 1  # one patient; several, some with two diagnoses

    seen = {}
    real = unit_centroids.noisy_means

    def spy(noisy, **kw):
        seen["out"] = real(noisy, **kw)
        return seen["out"]

    monkeypatch.setattr(unit_centroids, "noisy_means", spy)
    release.apply(model)
    assert release.clip == pytest.approx(clip, rel=1e-5) and release.rows_set == len(WITHHELD)  # float32 fold-in
    _, count, shrink = seen["out"]
    torch.testing.assert_close(count, torch.tensor([counts[d] for d in WITHHELD], dtype=torch.float64))
    assert float((shrink - 1).abs().max()) < 1e-6  # James-Stein factor ~1 at a tiny sigma
    with torch.no_grad():
        after = model.entity_matrix().double()
    for d in WITHHELD:
        want = centre + sums[d] / counts[d]
        torch.testing.assert_close(after[ent[d]], want, atol=1e-5 * (1 + float(want.abs().max())), rtol=0)
    # nothing else moved: the public candidates, the phenotypes, the unseen row, every other parameter
    rows = model.structural.struct_index[torch.tensor([ent[d] for d in WITHHELD])]
    keep = torch.ones(len(table_before), dtype=torch.bool)
    keep[rows] = False
    assert torch.equal(model.structural.weight.detach()[keep], table_before[keep])
    assert not torch.equal(model.structural.weight.detach()[rows], table_before[rows])
    assert all(torch.equal(v, state[k]) for k, v in model.state_dict().items() if k != "structural.weight")


# -- 2. the sensitivity -------------------------------------------------------------------------------------------
TARGET, OTHER_REL, M = 0, 1, 3


def _random_units(g: torch.Generator, *, units: int, candidates: int, entities: int) -> torch.Tensor:
    """``(n, 4)`` sorted links: each unit 1..m+2 target links to distinct candidates (one repeated now and
    then, as a loader that let a repeated statement through would give), a target link to a non-candidate,
    and non-target links (which must add nothing)."""
    rows = []
    for u in range(units):
        k = int(torch.randint(1, M + 3, (1,), generator=g))
        chosen = torch.randperm(candidates, generator=g)[:k].tolist()
        if u % 5 == 0:
            chosen.append(chosen[0])
        rows += [(u, TARGET, c, 0) for c in chosen]
        rows += [(u, TARGET, int(torch.randint(candidates, entities, (1,), generator=g)), 0)]
        rows += [(u, OTHER_REL, int(torch.randint(0, entities, (1,), generator=g)), 0)]
        rows += [(u, TARGET, int(torch.randint(0, candidates, (1,), generator=g)), 1)]  # the unit as tail
    return torch.tensor(sorted(rows), dtype=torch.long)


@pytest.mark.parametrize("seed", range(4))
def test_one_whole_unit_moves_the_sums_by_at_most_c_and_reaches_at_most_m_candidates(seed):
    g = torch.Generator().manual_seed(seed)
    units, candidates, entities, dim, clip = 30, 9, 14, 6, 0.7
    links = _random_units(g, units=units, candidates=candidates, entities=entities)
    position = torch.full((entities,), -1, dtype=torch.long)
    position[:candidates] = torch.arange(candidates)
    q = torch.randn(units, dim, generator=g, dtype=torch.float64) * torch.rand(units, 1, generator=g) * 3 * clip
    centre = torch.randn(dim, generator=g, dtype=torch.float64) * 0.1
    targets = unit_targets(links, position, TARGET)
    named = {(u, c) for u, r, c, role in links.tolist() if r == TARGET and role == 0 and c < candidates}
    assert sorted(named) == sorted(map(tuple, targets[:, [0, 2]].tolist()))  # each (unit, candidate) once
    # the secret uniforms are i.i.d., one per target link: a neighbour keeps the others' draws (a coupling)
    uniform = SecretRandomness.from_seed(seed).uniform(len(targets), step=0, purpose="bounding")

    def sums(drop: int) -> torch.Tensor:
        others = targets[:, 0] != drop
        kept = bound_targets(targets[others], M, uniform[others])
        return candidate_sums(q, centre=centre, clip=clip, targets=kept, position=position, candidates=candidates)

    full = sums(-1)
    worst = 0.0
    for u in range(units):
        diff = full - sums(u)
        norm = float(diff.norm())  # Frobenius: the whole unit, count coordinate included
        v = float((q[u] - centre).norm())
        assert norm <= clip * (1 + 1e-12)
        assert norm**2 == pytest.approx((1 - COUNT_SHARE) * min(v, clip) ** 2 + COUNT_SHARE * clip**2, rel=1e-9)
        reached = int((diff.abs().sum(1) > 0).sum())
        assert reached == min(M, sum(1 for w, _ in named if w == u)) <= M
        worst = max(worst, norm)
    assert worst == pytest.approx(clip, rel=1e-9)  # the bound is attained: the test is not vacuous
    assert bool((torch.bincount(targets[:, 0], minlength=units) > M).any())  # some unit was cut to m


def test_the_release_keeps_m_of_a_units_targets_chosen_by_the_secret_randomness(cohorts, monkeypatch):
    """m = 1: a patient with two diagnoses adds to one of them only, drawn from the secret ``bounding``
    stream (two keys choose differently for some patient), and every patient keeps one."""
    seen = []
    real = unit_centroids.candidate_sums
    monkeypatch.setattr(unit_centroids, "candidate_sums", lambda q, **kw: seen.append(kw["targets"]) or real(q, **kw))
    for key in range(4):
        prep, release = _release(cohorts["a"], max_statements_per_unit=1, reproducible_noise=key)
        release.apply(prep.model)
    units = release.units
    diag = prep.kg.relations.index("diagnosed_with")
    two = [u for u in range(units.num_units) if int((units.of(u)[:, 1] == diag).sum()) == 2]
    assert two
    for kept in seen:
        assert torch.equal(torch.bincount(kept[:, 0], minlength=units.num_units), torch.ones(units.num_units).long())
        for u, _, c, _ in kept.tolist():
            assert c in units.of(u)[units.of(u)[:, 1] == diag, 2].tolist()
    choices = {tuple(kept[torch.isin(kept[:, 0], torch.tensor(two)), 2].tolist()) for kept in seen}
    assert len(choices) > 1


def test_the_post_processing_divides_by_the_noisy_count_and_shrinks_with_a_lower_error():
    """Of noisy sums of 5 patients: the count is the last coordinate over sqrt(s) C (at least 1), and the
    James-Stein factor in [0, 1] lowers the mean's squared error below the plain noisy mean's (dimension 8)."""
    g = torch.Generator().manual_seed(0)
    clip, sigma, dim, n, draws = 0.5, 1.0, 8, 5, 4000
    mean = torch.randn(dim, generator=g, dtype=torch.float64) * 0.1
    true = torch.cat([math.sqrt(1 - COUNT_SHARE) * n * mean, torch.tensor([math.sqrt(COUNT_SHARE) * clip * n])])
    noisy = true + sigma * clip * torch.randn(draws, dim + 1, generator=g, dtype=torch.float64)
    got, count, shrink = noisy_means(noisy, clip=clip, sigma=sigma)
    want_count = (noisy[:, -1] / (math.sqrt(COUNT_SHARE) * clip)).clamp(min=1.0)
    assert torch.equal(count, want_count) and bool((count == 1).any())  # some counts fell below 1
    plain = noisy[:, :-1] / math.sqrt(1 - COUNT_SHARE) / count[:, None]
    assert bool(((shrink >= 0) & (shrink <= 1)).all()) and bool((shrink < 1).all())
    torch.testing.assert_close(got, shrink[:, None] * plain)
    assert float((got - mean).pow(2).sum(1).mean()) < 0.9 * float((plain - mean).pow(2).sum(1).mean())
    # no noise: the mean itself, unshrunk
    exact, one, factor = noisy_means(true[None], clip=clip, sigma=0.0)
    torch.testing.assert_close(exact[0], mean)
    torch.testing.assert_close(one, torch.tensor([5.0], dtype=torch.float64))
    assert float(factor) == 1.0


# -- 3. neighbouring cohorts through the CLI ------------------------------------------------------------------
def _train_flags(data: Path, out: Path, *extra: str) -> list[str]:
    return [
        "train",
        "--dataset",
        str(data),
        "--split",
        "transductive",
        "--model",
        "transe",
        "--dim",
        "8",
        "--epochs",
        "1",
        "--batch-size",
        "16",
        "--seed",
        "0",
        "--privacy",
        "confidential",
        "--privacy-unit",
        "entity",
        "--unit-entities",
        str(data / "patients.txt"),
        "--unit-targets",
        "diagnosed_with",
        "--unit-candidates",
        str(data / "diseases.txt"),
        "--private-updates",
        "centroids",
        *extra,
        "--out",
        str(out),
    ]


@pytest.fixture(scope="module")
def runs(cohorts) -> dict[str, Path]:
    out = {}
    for side, data in cohorts.items():
        out[side] = data.parent / "run"
        assert main(_train_flags(data, out[side], "--target-epsilon", "1", "--private-size", str(DECLARED))) == 0
    return out


def _structure(obj):
    """The JSON document with every float replaced by its type: what may not differ between neighbours."""
    if isinstance(obj, dict):
        return {k: _structure(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_structure(v) for v in obj]
    return "float" if isinstance(obj, float) else obj


def _json(run: Path, name: str) -> dict:
    text = (run / name).read_text(encoding="utf-8")
    return json.loads(text.replace(str(run.parent / "cohort"), "DATA"))


def test_neighbouring_cohorts_give_the_same_files_keys_public_fields_and_public_rows(runs):
    a, b = runs["a"], runs["b"]
    assert sorted(p.name for p in a.iterdir()) == sorted(p.name for p in b.iterdir())
    assert CENTROID_RECORD in {p.name for p in a.iterdir()}
    ma, mb = _json(a, "metrics.json"), _json(b, "metrics.json")
    assert _structure(ma) == _structure(mb)
    pa, pb = ma["privacy"], mb["privacy"]
    assert pa["private_updates"] == "centroids" and pa["guarantee"] == "dp"
    assert pa["rows_set"] == pb["rows_set"] == len(WITHHELD)
    assert pa["num_private_units"] is None and pa["num_private_triples"] is None
    assert pa["private_size"] == DECLARED
    # every field is a function of public inputs: equal, floats included (one process, the same code path)
    assert pa == pb
    text = json.dumps(pa)
    assert "DATA" not in text and not any(p in text for p in _patients())
    assert _json(a, "graph.json") == _json(b, "graph.json")
    ra, rb = _json(a, CENTROID_RECORD), _json(b, CENTROID_RECORD)
    for r, run in ((ra, a), (rb, b)):  # the released weights' own hash: a function of what is released
        assert r.pop("applied") == hashlib.sha256((run / "best_model.pt").read_bytes()).hexdigest()
    assert ra == rb
    graph = _json(a, "graph.json")
    assert not set(graph["entities"]) & set(_patients())
    # the weights: no patient row; only the private-only candidates' rows may differ
    wa, wb = (torch.load(r / "best_model.pt", weights_only=True) for r in (a, b))
    assert wa.keys() == wb.keys()
    assert all(wa[k].shape == wb[k].shape for k in wa)
    assert wa["structural.weight"].shape[0] == len(graph["entities"]) + 1
    ids = [graph["entities"].index(d) for d in WITHHELD]
    rows = wa["structural.struct_index"][ids]
    keep = torch.ones(len(wa["structural.weight"]), dtype=torch.bool)
    keep[rows] = False
    assert torch.equal(wa["structural.weight"][keep], wb["structural.weight"][keep])
    assert not torch.equal(wa["structural.weight"][rows], wb["structural.weight"][rows])  # fresh noise
    for k in wa:
        if k != "structural.weight":
            assert torch.equal(wa[k], wb[k]), k
    for run in (a, b):
        for path in run.iterdir():
            if path.name != "private_metrics.json":  # the data owner's file, never released
                raw = path.read_bytes()
                assert not any(p.encode() in raw for p in _patients()), path.name


def test_a_centroid_run_can_be_released_as_a_bundle(runs, tmp_path):
    from textkg.release import release

    release(runs["a"], tmp_path / "bundle")
    assert account_from(tmp_path / "bundle")["agree"]
    card = (tmp_path / "bundle" / "MODEL_CARD.md").read_text(encoding="utf-8")
    assert "One Gaussian release" in card and "DP-SGD" not in card  # the card names the mechanism it ran


# -- 4. the accounting -----------------------------------------------------------------------------------------------
def test_the_epsilon_is_one_gaussian_step_as_account_opacus_and_dp_accounting_compute(runs, capsys):
    from dp_accounting import GaussianDpEvent
    from dp_accounting.pld import pld_privacy_accountant
    from opacus.accountants.analysis.rdp import compute_rdp, get_privacy_spent

    block = json.loads((runs["a"] / "metrics.json").read_text(encoding="utf-8"))["privacy"]
    sigma, delta = block["noise_multiplier"], block["delta"]
    assert block["ledger"] == [{"sample_rate": 1.0, "noise_multiplier": sigma, "steps": 1}]
    assert delta == pytest.approx(1 / (10 * DECLARED))
    checked = account_from(runs["a"])
    assert checked["agree"] and checked["checked"] == 3
    assert main(["account", "--from", str(runs["a"])]) == 0
    capsys.readouterr()
    orders = list(DEFAULT_ORDERS)
    rdp = compute_rdp(q=1.0, noise_multiplier=sigma, steps=1, orders=orders)
    # q = 1: the Gaussian mechanism's RDP, alpha / (2 sigma^2) (Mironov 2017, arXiv:1702.07476v3, Prop. 7)
    assert [float(x) for x in rdp] == pytest.approx([a / (2 * sigma**2) for a in orders], rel=1e-9)
    assert block["epsilon_rdp"] == pytest.approx(float(get_privacy_spent(orders=orders, rdp=rdp, delta=delta)[0]))
    assert block["epsilon"] == block["epsilon_rdp"]  # the run's accountant
    pld = pld_privacy_accountant.PLDAccountant()
    pld.compose(GaussianDpEvent(sigma))
    assert block["epsilon_pld"] == pytest.approx(pld.get_epsilon(delta), rel=1e-3)
    assert block["epsilon_pld"] < block["epsilon_rdp"]
    # calibrated to the target: at most 1, and not far below (sigma is the smallest on the calibration grid)
    assert 0.99 < block["epsilon"] <= block["target_epsilon"] == 1.0


def test_the_pld_accountant_calibrates_its_own_sigma_to_the_target(cohorts):
    _, rdp = _release(cohorts["a"], noise_multiplier=None, reproducible_noise=None, target_epsilon=1.0)
    _, pld = _release(
        cohorts["a"], noise_multiplier=None, reproducible_noise=None, target_epsilon=1.0, accountant="pld"
    )
    assert pld.sigma < rdp.sigma  # the tighter accountant needs less noise for the same claim
    assert 0.99 < pld.claim.epsilon([(1.0, pld.sigma, 1)], delta=pld.delta) <= 1.0


# -- 5. settings the mechanism cannot honour ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("drop", "extra", "config", "field"),
    [
        (
            {"--privacy-unit", "--unit-entities", "--unit-targets", "--unit-candidates"},
            ["--privacy-unit", "statement", "--confidential-relations", "diagnosed_with"],
            None,
            "privacy.private_updates",
        ),
        ({"--unit-targets"}, ["--unit-targets", "diagnosed_with,has_phenotype"], None, "privacy.private_updates"),
        ({"--unit-candidates"}, [], None, "privacy.private_updates"),
        ({"--privacy"}, ["--privacy", "none"], None, "privacy.private_updates"),
        ({"--privacy"}, ["--privacy", "public-only"], None, "privacy.private_updates"),
        ({"--model"}, ["--model", "distmult"], None, "model.interaction"),
        (set(), [], {"structural_buckets": 8}, "model.structural_buckets"),
        (set(), [], {"normalize_entities": True}, "'model'"),
    ],
    ids=["statement", "two-targets", "no-candidates", "none", "public-only", "distmult", "buckets", "normalize"],
)
def test_bad_settings_exit_2_naming_the_field_and_write_nothing(cohorts, tmp_path, capsys, drop, extra, config, field):
    data, out = cohorts["a"], tmp_path / "run"
    flags = _train_flags(data, out, "--noise-multiplier", "1", "--private-size", str(DECLARED))
    kept = []
    skip = False
    for arg in flags:  # leave out the flags in `drop` with their values
        if skip:
            skip = False
        elif arg in drop:
            skip = True
        else:
            kept.append(arg)
    kept[-2:-2] = extra
    if config is not None:
        path = tmp_path / "model.json"
        path.write_text(json.dumps({"model": config}), encoding="utf-8")
        kept[-2:-2] = ["--config", str(path)]
    code = main(kept)
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err and field in err, err
    assert not out.exists()


# -- 6. the record of spent releases -------------------------------------------------------------------------------
def _write(path: Path, ledger) -> Path:
    path.write_text(json.dumps({"ledger": ledger}), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "make",
    [
        lambda p: p.write_text("{not json", encoding="utf-8"),
        lambda p: p.write_bytes(b"\xff\xfe"),
        lambda p: p.write_text("[]", encoding="utf-8"),
        lambda p: _write(p, {"a": 1}),
        lambda p: _write(p, [[1.0, 2.0]]),
        lambda p: _write(p, [[1.0, -2.0, 1]]),
        lambda p: _write(p, [[1.0, 0.0, 1]]),
        lambda p: p.write_text('{"ledger": [[1.0, NaN, 1]]}', encoding="utf-8"),
        lambda p: p.write_text('{"ledger": [[1.0, Infinity, 1]]}', encoding="utf-8"),
        lambda p: _write(p, [[True, 2.0, 1]]),
        lambda p: _write(p, [[0.5, 2.0, 1]]),
        lambda p: _write(p, [[1.0, 2.0, 2]]),
        lambda p: _write(p, [[1.0, "2", 1]]),
        lambda p: _write(p, [[1.0, 2.0, 1]] * (MAX_RECORD_ENTRIES + 1)),
        lambda p: p.write_text('{"ledger": []}' + " " * (1 << 16), encoding="utf-8"),
        lambda p: _write(p, [[1.0, 3.0, 1]]),
        lambda p: p.write_text('{"ledger": [[1.0, 1' + "0" * 400 + ", 1]]}", encoding="utf-8"),
        lambda p: p.write_text('{"ledger": ' + "[" * 50000 + "]" * 50000 + "}", encoding="utf-8"),
        lambda p: p.symlink_to(_write(p.with_name("real.json"), [[1.0, 2.0, 1]])),
        lambda p: p.symlink_to(p.with_name("nowhere.json")),
        lambda p: p.mkdir(),
    ],
    ids=[
        "not-json",
        "not-utf8",
        "not-an-object",
        "ledger-not-a-list",
        "short-entry",
        "negative-sigma",
        "zero-sigma",
        "nan-sigma",
        "infinite-sigma",
        "bool",
        "sample-rate",
        "steps",
        "string",
        "too-many",
        "over-64-kib",
        "another-sigma",
        "huge-integer",
        "deep-nesting",
        "symlink",
        "dangling-symlink",
        "directory",
    ],
)
def test_a_record_textkg_did_not_write_is_refused_naming_the_file_and_field(tmp_path, make):
    # the run's own sigma is 2.0: an entry with any other (3.0, a 400-digit integer) is not this run's release
    path = tmp_path / CENTROID_RECORD
    make(path)
    with pytest.raises(ConfigError) as info:
        read_record(path, 2.0)
    assert str(path) in str(info.value) and "ledger" in str(info.value)


def test_a_good_record_reads_back_and_an_absent_one_is_empty(tmp_path):
    path = tmp_path / CENTROID_RECORD
    assert read_record(path, 2.5)["ledger"] == []
    _write(path, [[1.0, 2.5, 1], [1, 2.5, 1]])
    assert read_record(path, 2.5) == {"ledger": [(1.0, 2.5, 1)] * 2, "applied": None, "clip": None, "rows_set": 0}


def test_a_resumed_release_composes_with_the_draw_recorded_before_the_crash(cohorts, tmp_path, monkeypatch):
    record = tmp_path / CENTROID_RECORD
    prep, first = _release(cohorts["a"], noise_multiplier=2.0, reproducible_noise=None)
    with monkeypatch.context() as patch:  # crash while drawing the noise: the budget is already spent
        patch.setattr(first.randomness, "normal", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("crash")))
        before = prep.model.structural.weight.detach().clone()
        with pytest.raises(RuntimeError, match="crash"):
            first.apply(prep.model, record=record)
        assert torch.equal(prep.model.structural.weight.detach(), before)  # nothing set
    assert read_record(record, 2.0)["ledger"] == [(1.0, 2.0, 1)]
    one = first.report()["epsilon"]
    prep, resumed = _release(cohorts["a"], noise_multiplier=2.0, reproducible_noise=None)  # a new process
    resumed.apply(prep.model, record=record)
    assert read_record(record, 2.0)["ledger"] == [(1.0, 2.0, 1)] * 2
    report = resumed.report()
    assert report["steps"] == 2 and len(report["ledger"]) == 2
    assert report["epsilon"] > one
    assert report["epsilon"] == pytest.approx(resumed.claim.epsilon([(1.0, 2.0, 1)] * 2, delta=resumed.delta))


# -- the default: private_updates auto -------------------------------------------------------------------------------
def test_auto_is_the_centroid_release_for_patient_diagnosis_and_dp_sgd_elsewhere(cohorts, tmp_path):
    """``private_updates`` defaults to ``auto``: a patient-level run that ranks one target relation against a
    candidate list with private-only candidates, on a TransE model, gets the centroid release (it beat DP-SGD
    five-fold on the simulated cohort); any other run keeps DP-SGD (``all``). The run folder records the choice."""
    assert RunConfig().privacy.private_updates == "all"  # not a unit run
    diagnosis = dict(
        mode="confidential",
        unit="entity",
        unit_entities="p.txt",
        unit_targets=("diagnosed_with",),
        unit_candidates="d.txt",
        target_epsilon=1.0,
        private_size=DECLARED,
    )
    assert RunConfig(model_name="transe", privacy=PrivacyConfig(**diagnosis)).privacy.private_updates == "auto"
    for other in (
        RunConfig(model_name="distmult", privacy=PrivacyConfig(**diagnosis)),  # the release cannot set its rows
        RunConfig(model_name="transe", privacy=PrivacyConfig(**{**diagnosis, "unit_targets": ()})),
        RunConfig(model_name="transe", privacy=PrivacyConfig(**{**diagnosis, "batch_size": 8})),
    ):
        assert other.privacy.private_updates == "all"
    flags = _train_flags(cohorts["a"], tmp_path / "run", "--target-epsilon", "1", "--private-size", str(DECLARED))
    at = flags.index("--private-updates")
    del flags[at : at + 2]  # the default
    assert main(flags) == 0
    stored = json.loads((tmp_path / "run" / "config.json").read_text(encoding="utf-8"))
    block = json.loads((tmp_path / "run" / "metrics.json").read_text(encoding="utf-8"))["privacy"]
    assert stored["privacy"]["private_updates"] == block["private_updates"] == "centroids"
    assert block["ledger"] == [{"sample_rate": 1.0, "noise_multiplier": block["noise_multiplier"], "steps": 1}]
