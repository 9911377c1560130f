"""``--private-updates centroids`` played by an adversary: the run folder, the settings and the bundle (issue 52).

What can fail: a ``centroid_release.json`` that textkg did not write (an entry whose σ does not fit in a float,
is 1e-300 or 1e300, or is not this run's σ; JSON nested past Python's recursion limit) must be refused, naming
the file, before any noise is drawn and without a traceback, and must not make the report hang for minutes in
the PLD accountant; one unit whose fold-in is not finite must not turn a released row into NaN (a NaN row would
say the unit is there); a resumed run whose release already finished must not draw (and spend) again;
settings the accountant cannot honour and candidate lists the release cannot use must exit 2 before the
model is trained or a file written, and a run at a large ε must finish with its report; the bundle must
describe this mechanism, not DP-SGD, and carry no local path. Sound and pinned here: the noise comes from
the secret source (never torch's generator), one draw of shape ``(candidates, D + 1)``, after the record
says it is spent; a candidate list naming a patient is refused before anything is written.
"""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path

import pytest
import torch

from textkg.cli.main import main
from textkg.errors import ConfigError
from textkg.models import get_preset
from textkg.pipeline.job import unit_training
from textkg.pipeline.prepared import prepare
from textkg.training.config import DataConfig, PrivacyConfig, RunConfig, TrainConfig
from textkg.training.losses import make_loss
from textkg.training.unit_centroids import (
    CENTROID_RECORD,
    MAX_RECORD_ENTRIES,
    CentroidRelease,
    candidate_sums,
    noisy_means,
)

# -- a tiny cohort: 4 diseases annotated in the public graph, 2 known only from the patients -----------------
PHENOTYPES = [f"HP:{i:03d}" for i in range(16)]
PUBLIC = [f"D:{i:02d}" for i in range(4)]
WITHHELD = ["D:04", "D:05"]  # private-only candidates: no public statement reaches them
DISEASES = PUBLIC + WITHHELD
PATIENTS = [f"P{i:03d}" for i in range(36)]
N_TRAIN, DECLARED = 24, 24
#: candidate lists: the release needs at least two public candidates (the centre and C) and a private-only one
LISTS = {"diseases": DISEASES, "withheld": WITHHELD, "public": PUBLIC, "one-public": ["D:00", *WITHHELD]}


def make_cohort(root: Path) -> Path:
    """BLP files: public annotations of :data:`PUBLIC` and an ``is_a`` tree; 24 training, 6 validation and 6
    test patients, each ``diagnosed_with`` one disease (every third two) and ``has_phenotype`` some of its
    phenotypes; ``patients.txt`` and one file per list of :data:`LISTS`."""
    rnd = random.Random(1)
    root.mkdir(parents=True, exist_ok=True)
    notes = {d: rnd.sample(PHENOTYPES, 4) for d in DISEASES}
    public = [(d, "has_phenotype", p) for d in PUBLIC for p in notes[d]]
    public += [(PHENOTYPES[i], "is_a", PHENOTYPES[i // 2]) for i in range(1, len(PHENOTYPES))]
    sets: dict[str, list] = {"train": list(public), "dev": [], "test": []}
    for k, p in enumerate(PATIENTS):
        diag = rnd.sample(DISEASES, 1 + (k % 3 == 0))
        terms = sorted({h for d in diag for h in rnd.sample(notes[d], rnd.randint(1, 3))})
        which = "train" if k < N_TRAIN else ("dev" if k < N_TRAIN + 6 else "test")
        sets[which] += [(p, "diagnosed_with", d) for d in diag] + [(p, "has_phenotype", h) for h in terms]
    for name, rows in sets.items():
        (root / f"{name}.tsv").write_text("".join(f"{h}\t{r}\t{t}\n" for h, r, t in rows), encoding="utf-8")
    names = [*PHENOTYPES, *DISEASES, *PATIENTS]
    (root / "entity2text.txt").write_text("".join(f"{e}\tentity {e}\n" for e in names), encoding="utf-8")
    (root / "relation2text.txt").write_text(
        "has_phenotype\thas phenotype\ndiagnosed_with\tdiagnosed with\nis_a\tis a\n", encoding="utf-8"
    )
    (root / "patients.txt").write_text("".join(p + "\n" for p in PATIENTS), encoding="utf-8")
    for name, items in LISTS.items():
        (root / f"{name}.txt").write_text("".join(d + "\n" for d in items), encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def cohort(tmp_path_factory) -> Path:
    return make_cohort(tmp_path_factory.mktemp("centroid-adversary") / "cohort")


def _flags(data: Path, out: Path, *extra: str, candidates: str = "diseases") -> list[str]:
    return [
        *("train", "--dataset", str(data), "--split", "transductive", "--model", "transe", "--dim", "8"),
        *("--epochs", "1", "--privacy", "confidential", "--private-updates", "centroids", "--no-progress"),
        *("--privacy-unit", "entity", "--unit-entities", str(data / "patients.txt")),
        *("--unit-targets", "diagnosed_with", "--unit-candidates", str(data / f"{candidates}.txt")),
        *extra,
        *("--out", str(out)),
    ]


def _privacy(run: Path) -> dict:
    return json.loads((run / "metrics.json").read_text(encoding="utf-8"))["privacy"]


@pytest.fixture(scope="module")
def finished(cohort, tmp_path_factory) -> Path:
    """A finished centroid run at ε = 1 (the record, the weights and the metrics of one draw)."""
    out = tmp_path_factory.mktemp("finished") / "run"
    assert main(_flags(cohort, out, "--target-epsilon", "1", "--private-size", str(DECLARED))) == 0
    return out


def _release(data: Path, **privacy) -> tuple:
    settings = {
        "mode": "confidential",
        "unit": "entity",
        "unit_entities": str(data / "patients.txt"),
        "unit_targets": ("diagnosed_with",),
        "unit_candidates": str(data / "diseases.txt"),
        "private_size": DECLARED,
        "private_updates": "centroids",
        "noise_multiplier": 2.0,
    }
    cfg = RunConfig(
        data=DataConfig(dataset=str(data), split="transductive"),
        model=dataclasses.replace(get_preset("transe"), dim=8),
        train=TrainConfig(epochs=1, batch_size=16, num_negatives=4),
        privacy=PrivacyConfig(**(settings | privacy)),
        model_name="transe",
    )
    prep = prepare(cfg)
    release = unit_training(prep, cfg, make_loss(cfg.train))
    assert isinstance(release, CentroidRelease)
    return prep, release


# -- 1. the record of spent releases, crafted ------------------------------------------------------------------------
CRAFTED = {
    # json reads a 401-digit number as an int; math.isfinite(int) raises OverflowError
    "sigma-beyond-float": '{"ledger": [[1.0, 1' + "0" * 400 + ", 1]]}",
    "sigma-1e-300": '{"ledger": [[1.0, 1e-300, 1]]}',  # the RDP claim divides by sigma^2 = 0: ZeroDivisionError
    "sigma-1e300": '{"ledger": [[1.0, 1e300, 1]]}',  # sigma^2 overflows: OverflowError
    "nested": '{"ledger": ' + "[" * 50_000 + "]" * 50_000 + "}",  # 100 kB under the 1 MiB cap: RecursionError
}


@pytest.mark.parametrize("text", CRAFTED.values(), ids=CRAFTED.keys())
def test_a_crafted_record_is_refused_naming_the_file_before_any_draw(cohort, tmp_path, text):
    prep, release = _release(cohort)
    record = tmp_path / CENTROID_RECORD
    record.write_text(text, encoding="utf-8")
    before = prep.model.structural.weight.detach().clone()
    with pytest.raises(ConfigError) as info:
        release.apply(prep.model, record=record)
        release.report()
    assert str(record) in str(info.value) and "ledger" in str(info.value)
    assert record.read_text(encoding="utf-8") == text  # nothing spent, nothing rewritten
    assert torch.equal(prep.model.structural.weight.detach(), before)


def test_a_record_entry_with_another_sigma_than_the_runs_is_refused(cohort, tmp_path):
    prep, release = _release(cohort)
    record = tmp_path / CENTROID_RECORD
    record.write_text(json.dumps({"ledger": [[1.0, 0.3, 1]] * MAX_RECORD_ENTRIES}), encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        release.apply(prep.model, record=record)
    assert str(record) in str(info.value)


def test_a_crafted_record_on_resume_exits_2_and_leaves_the_weights(finished, tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    for path in finished.iterdir():
        (run / path.name).write_bytes(path.read_bytes())
    (run / "metrics.json").unlink()  # a crash while evaluating
    (run / CENTROID_RECORD).write_text(CRAFTED["sigma-beyond-float"], encoding="utf-8")
    weights = (run / "best_model.pt").read_bytes()
    capsys.readouterr()
    code = main(["train", "--resume", str(run), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and CENTROID_RECORD in err, err
    assert (run / "best_model.pt").read_bytes() == weights
    assert not (run / "metrics.json").exists()


# -- 2. resuming a finished release -----------------------------------------------------------------------------------
def test_resuming_a_finished_release_does_not_draw_again(finished, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    for path in finished.iterdir():
        (run / path.name).write_bytes(path.read_bytes())
    weights, block = (run / "best_model.pt").read_bytes(), _privacy(run)
    assert main(["train", "--resume", str(run), "--no-progress"]) == 0
    again = _privacy(run)
    assert again["ledger"] == block["ledger"] and len(again["ledger"]) == 1
    assert again["epsilon"] == block["epsilon"] <= again["target_epsilon"]
    assert (run / "best_model.pt").read_bytes() == weights


# -- 3. a unit whose fold-in is not finite ----------------------------------------------------------------------------
def test_a_unit_with_a_non_finite_fold_in_adds_a_finite_contribution_of_norm_at_most_c():
    dim, clip, candidates = 4, 0.5, 3
    q = torch.randn(3, dim, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    q[1, 0] = float("inf")  # e.g. a public row that only this unit reaches
    targets = torch.tensor([[0, 0, 0, 0], [1, 0, 1, 0], [2, 0, 2, 0]])
    position = torch.arange(candidates)
    centre = torch.zeros(dim, dtype=torch.float64)
    sums = candidate_sums(q, centre=centre, clip=clip, targets=targets, position=position, candidates=candidates)
    assert bool(torch.isfinite(sums).all())
    assert float(sums[1].norm()) <= clip * (1 + 1e-12)


# -- 4. post-processing in one or two dimensions ----------------------------------------------------------------------
@pytest.mark.parametrize("dim", [1, 2])
def test_the_shrinkage_never_moves_a_row_away_from_the_centre(dim):
    noisy = torch.tensor([[1e-3] * dim + [0.5]], dtype=torch.float64)  # a small mean, a count of about 1
    mean, _, shrink = noisy_means(noisy, clip=1.0, sigma=1.0)
    assert bool((shrink <= 1).all()) and bool(torch.isfinite(mean).all())


# -- 5. settings and candidate lists the release cannot honour -----------------------------------------------------
@pytest.mark.parametrize(
    ("extra", "config", "field"),
    [
        (["--accountant", "pld", "--noise-multiplier", "0.2"], None, "privacy.accountant"),
        (["--accountant", "pld", "--target-epsilon", "1e-6", "--delta", "1e-6"], None, "privacy.target_epsilon"),
        ([], {"noise_multiplier": 1e160}, "privacy.noise_multiplier"),
        ([], {"noise_multiplier": 1e-12}, "privacy.noise_multiplier"),
    ],
    ids=["pld-sigma-0.2", "pld-epsilon-1e-6", "config-sigma-1e160", "config-sigma-1e-12"],
)
def test_settings_the_accountant_cannot_honour_exit_2_before_anything_is_written(
    cohort, tmp_path, capsys, extra, config, field
):
    out = tmp_path / "run"
    flags = _flags(cohort, out, *extra, "--private-size", str(DECLARED))
    if config is not None:
        path = tmp_path / "privacy.json"
        path.write_text(json.dumps({"privacy": config}), encoding="utf-8")
        flags[-2:-2] = ["--config", str(path)]
    code = main(flags)
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and field in err, err
    assert not out.exists()


def test_a_run_at_a_large_epsilon_finishes_with_its_report(cohort, tmp_path):
    out = tmp_path / "run"
    assert main(_flags(cohort, out, "--target-epsilon", "20", "--private-size", str(DECLARED))) == 0
    block = _privacy(out)
    assert block["guarantee"] == "dp" and block["epsilon"] <= 20
    assert block["noise_multiplier"] < 0.3  # below what the PLD accountant discretises
    assert block["epsilon_pld"] is None or block["epsilon_pld"] <= block["epsilon"]


@pytest.mark.parametrize("candidates", ["withheld", "public", "one-public"])
def test_a_candidate_list_the_release_cannot_use_exits_2_before_anything_is_written(
    cohort, tmp_path, capsys, candidates
):
    out = tmp_path / "run"
    code = main(_flags(cohort, out, "--noise-multiplier", "2", "--private-size", str(DECLARED), candidates=candidates))
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and "privacy.unit_candidates" in err, err
    assert not out.exists()


def test_a_sampling_rate_is_refused_by_a_release_that_does_not_sample(cohort, tmp_path, capsys):
    out = tmp_path / "run"
    code = main(_flags(cohort, out, "--noise-multiplier", "2", "--sample-rate", "0.5"))
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and "privacy.sample_rate" in err, err
    assert not out.exists()


def test_a_candidate_list_naming_a_patient_is_refused_before_anything_is_written(cohort, tmp_path, capsys):
    listed = tmp_path / "with_patient.txt"
    listed.write_text(f"D:00\nD:01\nD:04\n{PATIENTS[0]}\n", encoding="utf-8")
    out = tmp_path / "run"
    flags = _flags(cohort, out, "--noise-multiplier", "2", "--private-size", str(DECLARED))
    flags[flags.index("--unit-candidates") + 1] = str(listed)
    code = main(flags)
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and "with_patient.txt" in err and PATIENTS[0] in err, err
    assert not out.exists()


# -- 6. the noise ------------------------------------------------------------------------------------------------------
def test_the_noise_is_one_secret_draw_on_every_entry_after_the_record_spends_it(cohort, tmp_path, monkeypatch):
    prep, release = _release(cohort)
    assert release.randomness.secure
    record = tmp_path / CENTROID_RECORD
    draws: list[dict] = []
    secret = release.randomness.normal

    def normal(shapes, **kwargs):
        draws.append({"shapes": dict(shapes), **kwargs, "spent": json.loads(record.read_text(encoding="utf-8"))})
        return secret(shapes, **kwargs)

    def refused(*args, **kwargs):
        raise AssertionError("torch's generator drew randomness in the release")

    monkeypatch.setattr(release.randomness, "normal", normal)
    for name in ("randn", "normal", "rand", "randint", "randperm"):
        monkeypatch.setattr(torch, name, refused)
    monkeypatch.setattr(torch.Tensor, "normal_", refused)
    release.apply(prep.model, record=record)
    monkeypatch.undo()
    dim = prep.model.structural.weight.shape[1]
    assert len(draws) == 1
    assert draws[0]["shapes"] == {"sums": (len(DISEASES), dim + 1)}  # every candidate, the count coordinate too
    assert draws[0]["purpose"] == "noise"
    assert draws[0]["spent"]["ledger"] == [[1.0, 2.0, 1]] and draws[0]["spent"]["applied"] is None  # before the draw
    assert release.report()["rows_set"] == len(WITHHELD)


# -- 7. the bundle ----------------------------------------------------------------------------------------------------
def test_the_bundle_describes_the_release_and_carries_no_local_path(finished, cohort, tmp_path, capsys):
    bundle = tmp_path / "bundle"
    code = main(["release", str(finished), "--out", str(bundle)])
    err = capsys.readouterr().err
    assert code == 0, err
    card = (bundle / "MODEL_CARD.md").read_text(encoding="utf-8")
    assert "DP-SGD" not in card and "Poisson" not in card and "gradient" not in card
    assert main(["account", "--from", str(bundle)]) == 0
    for path in bundle.rglob("*"):
        if path.is_file():
            assert str(cohort).encode() not in path.read_bytes(), path.name
