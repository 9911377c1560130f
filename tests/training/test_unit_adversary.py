"""The adversary's review of the patient as the privacy unit (issue 52, commit e3480cf).

What it found, each a test here:

* a crafted run folder or bundle whose ``config.json`` gives ``privacy`` (or, in a bundle, ``data``) as
  something other than an object, or ``privacy.unit_entities`` as a number, an object, ``""`` or a string
  with a NUL byte, stopped ``evaluate``, ``predict``, ``diagnose`` and ``release`` with a Python traceback
  (``TypeError``/``ValueError``: exit 1), and ``release`` even wrote a bundle from such a run; a bad unit
  setting's message named the field but not the file. Now each exits 2 naming ``config.json`` and the field;
* filtering a held-out patient's other statements out of its ranking compared every hidden statement
  with every held-out statement: quadratic (80,000 held-out statements: 25 s on one thread, a 20 MB
  ``test.tsv``: hours). Now each hidden statement is compared with its own group only, with the same ranks;
* the neighbouring-cohorts test of ``test_unit_privacy.py`` kept the removed patient in ``patients.txt`` and
  ``entity2text.txt``, masked every float (ε and δ included), dropped ``RELEASE.json``'s file list and
  never compared ``MODEL_CARD.md``. The test here removes the patient entirely, makes the contribution
  bound m bite, and compares every released byte that is not a noisy float.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path

import pytest
import torch
from unit_cohort import make_cohort, patient_ids

from textkg.cli.main import main
from textkg.data import load_blp_directory
from textkg.data.known_links import NEW_IS_HEAD
from textkg.data.units import UnitLinks, unit_entities_of
from textkg.training.unit_eval import leave_one_out_ranks

BASE = ["--split", "transductive", "--model", "transe", "--dim", "4", "--batch-size", "16", "--seed", "0"]
UNIT = ["--privacy-unit", "entity", "--private-batch-size", "5"]
DP = ["--privacy", "confidential", "--noise-multiplier", "1.0", "--private-size", "20"]


def _train(data: Path, out: Path, *extra: str) -> None:
    argv = ["train", "--dataset", str(data), *BASE, *UNIT, "--unit-entities", str(data / "patients.txt"), *extra]
    assert main([*argv, "--out", str(out)]) == 0


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> tuple[Path, Path, Path]:
    """``(cohort, run, bundle)``: a patient-level DP run on the tiny cohort and its release."""
    base = tmp_path_factory.mktemp("unit-adversary")
    data = make_cohort(base / "cohort")
    _train(data, base / "run", *DP, "--epochs", "1")
    assert main(["release", str(base / "run"), "--out", str(base / "bundle")]) == 0
    return data, base / "run", base / "bundle"


# -- 1. a crafted config.json: exit 2 naming the file and the field, never a traceback ---------------
CRAFTED = [
    ("privacy", "abc"),  # dict("abc"): ValueError
    ("privacy", [1]),  # dict([1]): TypeError in a bundle
    ("data", [1]),
    ("privacy.unit_entities", 5),  # Path(5): TypeError
    ("privacy.unit_entities", {"a": 1}),
    ("privacy.unit_entities", "pat\x00ients.txt"),  # os.stat: ValueError (embedded null byte)
    ("privacy.unit_entities", ""),
    ("privacy.max_statements_per_unit", 10**12),  # refused before, without naming the file
    ("privacy.unit", "patient"),
]


def _craft(src: Path, dst: Path, field: str, value) -> Path:
    shutil.copytree(src, dst)
    config = json.loads((dst / "config.json").read_text())
    *parents, key = field.split(".")
    node = config
    for p in parents:
        node = node[p]
    node[key] = value
    (dst / "config.json").write_text(json.dumps(config))
    return dst


@pytest.mark.parametrize("kind", ["run", "bundle"])
@pytest.mark.parametrize(("field", "value"), CRAFTED, ids=[f"{f}={v!r}" for f, v in CRAFTED])
def test_a_crafted_unit_config_exits_2_naming_the_file_and_field(made, tmp_path, capsys, kind, field, value):
    data, run, bundle = made
    crafted = _craft(run if kind == "run" else bundle, tmp_path / kind, field, value)
    dataset = ["--dataset", str(data)] if kind == "bundle" else []
    commands = {
        "evaluate": ["evaluate", str(crafted)],
        "predict": ["predict", str(crafted), *dataset, "--name", "new patient", "--description", "x"],
        "diagnose": ["diagnose", str(crafted)],
        "release": ["release", str(crafted), "--out", str(tmp_path / "out")],
    }
    for name, argv in commands.items():
        code = main(argv)  # a TypeError or ValueError would propagate: the CLI prints a traceback for it
        err = capsys.readouterr().err
        assert code == 2, (name, err)
        assert "Traceback" not in err and str(crafted / "config.json") in err, (name, err)
        assert f"field '{field.split('.')[0]}" in err, (name, err)
    assert not (tmp_path / "out").exists()  # release wrote a bundle from a run with unit_entities: 5


def test_a_path_object_is_still_accepted_from_python(tmp_path):
    from textkg.training.config import PrivacyConfig

    cfg = PrivacyConfig(mode="none", unit="entity", unit_entities=tmp_path / "patients.txt")
    assert cfg.unit_entities == str(tmp_path / "patients.txt")


# -- 2. a large held-out cohort: the leave-one-out ranking is linear in its statements ----------------
def _ranks_by_comparing_all(model, links: UnitLinks) -> torch.Tensor:
    """e3480cf's filter: every hidden link compared with every held-out link (the reference)."""
    model.eval()
    matrix = model.entity_matrix()
    lk = links.links
    inter = model.interaction
    rel = model.relation_matrix()[lk[:, 1]]
    est = torch.where(
        (lk[:, 3] == NEW_IS_HEAD).unsqueeze(1),
        inter.head_from(rel, matrix[lk[:, 2]]),
        inter.tail_from(matrix[lk[:, 2]], rel),
    )
    total = torch.zeros(links.num_units, matrix.shape[1]).index_add_(0, lk[:, 0], est)
    counts = torch.bincount(lk[:, 0], minlength=links.num_units).to(matrix.dtype)
    own = lk
    rest = counts[own[:, 0]] - 1
    mean = (total[own[:, 0]] - est) / rest.clamp(min=1).unsqueeze(1)
    query = torch.where((rest > 0).unsqueeze(1), mean, torch.zeros_like(mean))
    head = own[:, 3] == NEW_IS_HEAD
    scores = torch.where(
        head.unsqueeze(1), inter.score_tails(query, rel, matrix), inter.score_heads(rel, query, matrix)
    )
    target = scores.gather(1, own[:, 2:3])
    same = (lk[:, 0][None] == own[:, :1]) & (lk[:, 1][None] == own[:, 1:2]) & (lk[:, 3][None] == own[:, 3:4])
    q, j = same.nonzero(as_tuple=True)
    known = torch.zeros_like(scores, dtype=torch.bool)
    known[q, lk[j, 2]] = True
    known.scatter_(1, own[:, 2:3], False)
    higher = ((scores > target) & ~known).sum(1)
    ties = ((scores == target) & ~known).sum(1) - 1
    return 1.0 + higher.double() + ties.clamp(min=0).double() / 2


def _random_links(n: int, units: int, entities: int, relations: int, seed: int) -> UnitLinks:
    g = torch.Generator().manual_seed(seed)
    rows = torch.stack(
        [
            torch.randint(units, (n,), generator=g),
            torch.randint(relations, (n,), generator=g),
            torch.randint(entities, (n,), generator=g),
            torch.randint(2, (n,), generator=g),
        ],
        dim=1,
    )
    rows = torch.unique(rows, dim=0)  # sorted by unit, as split_units gives them; no link twice
    return UnitLinks(units=tuple(f"u{i}" for i in range(units)), links=rows)


@torch.no_grad()
def test_held_out_units_are_ranked_in_linear_time_with_the_same_ranks(made):
    from textkg.pipeline.prepared import prepare
    from textkg.pipeline.run_dir import open_run

    _, run, _ = made
    prep = prepare(open_run(run).config, device=torch.device("cpu"))
    model = prep.model
    n_ent, n_rel = prep.kg.num_entities, prep.kg.num_relations
    for seed in range(3):  # groups of one unit, relation and direction with several links (filtered), units without
        links = _random_links(600, 40, n_ent, n_rel, seed)
        assert torch.equal(leave_one_out_ranks(model, links), _ranks_by_comparing_all(model, links))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:  # 100,000 held-out statements: e3480cf took about 40 s on one thread (80,000: 25 s), now under a second
        links = _random_links(100_000, 10_000, n_ent, n_rel, 7)
        start = time.process_time()
        ranks = leave_one_out_ranks(model, links)
        spent = time.process_time() - start
    finally:
        torch.set_num_threads(threads)
    assert len(ranks) == len(links.links) and spent < 10, spent


# -- 4. neighbouring cohorts, one whole patient apart: every released byte but the noisy floats --------
EXPECTED_FILES = {
    "best_model.safetensors",
    "graph.json",
    "config.json",
    "metrics.json",
    "privacy.json",
    "MODEL_CARD.md",
    "RELEASE.json",
}
#: values chosen on the (public) validation patients from the noisy model, as the floats are noisy
NOISY = {"best_epoch"}


def _masked(obj):
    """The JSON document with every float, and every choice made from the noisy model, replaced by a mark."""
    if isinstance(obj, dict):
        return {k: "noisy" if k in NOISY else _masked(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_masked(v) for v in obj]
    return "float" if isinstance(obj, float) else obj


def _card(text: str) -> list[str]:
    """The model card with the numbers of its metric lines (test MRR, held-out units) masked."""
    return [re.sub(r"\d+\.\d+", "#", line) if "MRR" in line else line for line in text.splitlines()]


def _remove_patient(src: Path, dst: Path, patient: str) -> Path:
    """``src`` without ``patient`` at all: its statements, its line in the unit list and its text."""
    shutil.copytree(src, dst)
    for name in ("train.tsv", "dev.tsv", "test.tsv", "patients.txt", "entity2text.txt"):
        lines = (dst / name).read_text(encoding="utf-8").splitlines(keepends=True)
        (dst / name).write_text("".join(x for x in lines if x.split("\t")[0].strip() != patient), encoding="utf-8")
    return dst


def test_neighbouring_cohorts_one_whole_patient_apart_release_the_same_bytes_but_noisy_floats(tmp_path):
    from safetensors import safe_open

    m = 2
    full = make_cohort(tmp_path / "a" / "cohort", max_links=5)
    kg = load_blp_directory(full, vocabulary="texts")
    _, units = unit_entities_of(kg, full / "patients.txt")
    train = units["train"]
    counts = train.counts()
    big = [u for u, k in zip(train.units, counts.tolist(), strict=True) if k > m]
    assert big, "the cohort needs a training patient with more than m statements"
    patient = big[0]  # a training unit the contribution bound m cuts
    without = _remove_patient(full, tmp_path / "b" / "cohort", patient)
    assert patient not in (without / "patients.txt").read_text() and patient in (full / "patients.txt").read_text()
    bundles = []
    for side, data in (("a", full), ("b", without)):
        _train(data, tmp_path / side / "run", *DP, "--epochs", "2", "--max-statements-per-unit", str(m))
        assert main(["release", str(tmp_path / side / "run"), "--out", str(tmp_path / side / "bundle")]) == 0
        bundles.append(tmp_path / side / "bundle")
    a, b = bundles
    files = {p.relative_to(a).as_posix() for p in a.rglob("*")}
    assert files == EXPECTED_FILES == {p.relative_to(b).as_posix() for p in b.rglob("*")}
    for name in ("privacy.json", "config.json", "graph.json"):  # no noisy value in them: byte for byte
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    privacy = json.loads((a / "privacy.json").read_text())["privacy"]
    assert privacy["guarantee"] == "dp" and privacy["unit"] == "entity" and privacy["max_statements_per_unit"] == m
    ma, mb = (json.loads((d / "metrics.json").read_text()) for d in (a, b))
    assert ma["privacy"] == mb["privacy"] == privacy  # epsilon, delta, q: public, so equal, not merely floats
    assert _masked(ma) == _masked(mb)
    assert _masked({**ma, "extra": 1}) != _masked(ma)  # the comparison sees a count that differs
    assert _card((a / "MODEL_CARD.md").read_text()) == _card((b / "MODEL_CARD.md").read_text())
    ra, rb = (json.loads((d / "RELEASE.json").read_text()) for d in (a, b))
    assert set(ra.pop("files")) == set(rb.pop("files")) == EXPECTED_FILES - {"RELEASE.json"}
    assert ra == rb
    differ = False
    with safe_open(a / "best_model.safetensors", "pt") as fa, safe_open(b / "best_model.safetensors", "pt") as fb:
        assert set(fa.keys()) == set(fb.keys())
        for key in fa.keys():
            ta, tb = fa.get_tensor(key), fb.get_tensor(key)
            assert ta.shape == tb.shape and ta.dtype == tb.dtype, key
            differ = differ or not torch.equal(ta, tb)
    assert differ  # two trainings with their own secret noise: the floats are not vacuously equal
    for name in EXPECTED_FILES:
        raw = (a / name).read_bytes()
        assert not any(p.encode() in raw for p in patient_ids(30)), name  # no patient named in any file
