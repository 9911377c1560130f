"""``--privacy-unit entity``: a patient with all of their statements is the unit (issue 52).

What can fail: the unit entities must leave the graph (no row, no name, in a run and in a bundle);
a unit's vector must be the fold-in that ``link_estimates`` computes (the representation a user
computes for a new patient); a step must never use more than m statements of a unit; the clipping
must bound the WHOLE unit's gradient; the accountant must be the Sampled Gaussian one at the unit
rate q = B_u/N̄_u (Opacus as the oracle); two cohorts that differ by one whole patient must give
releases of the same files, keys, shapes and counts; bad settings must exit 2.
"""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path

import pytest
import torch
from unit_cohort import make_cohort, patient_ids

from textkg.cli.config_loading import build_run_config
from textkg.cli.main import build_parser, main
from textkg.data import load_blp_directory
from textkg.data.known_links import NEW_IS_HEAD, NEW_IS_TAIL
from textkg.data.units import UnitLinks, split_units, unit_entities_of
from textkg.errors import DataError
from textkg.models import get_preset
from textkg.models.known_links import LinkMethod, link_estimates, move_by_links
from textkg.pipeline.job import run
from textkg.pipeline.prepared import prepare
from textkg.privacy.clipping import per_example_norms
from textkg.privacy.dp_sgd import DPSGDStep
from textkg.privacy.randomness import SecretRandomness
from textkg.privacy.rdp import DEFAULT_ORDERS
from textkg.release import account_from, release
from textkg.training.config import DataConfig, PrivacyConfig, RunConfig, TrainConfig
from textkg.training.losses import make_loss
from textkg.training.unit_eval import unit_vectors
from textkg.training.unit_step import (
    bound_contributions,
    fold_in,
    link_vectors,
    per_unit_gradients,
    restrict_to_rows,
    sample_unit_batch,
    training_units,
    unit_batch,
    unit_losses,
    unit_plan,
)

N_DECLARED, B_UNITS, SIGMA, EPOCHS = 20, 5, 1.0, 3


def _flags(dataset: Path, *extra: str) -> list[str]:
    return [
        "train",
        "--dataset",
        str(dataset),
        "--split",
        "transductive",
        "--model",
        "transe",
        "--dim",
        "8",
        "--epochs",
        str(EPOCHS),
        "--batch-size",
        "16",
        "--seed",
        "0",
        "--privacy-unit",
        "entity",
        "--unit-entities",
        str(dataset / "patients.txt"),
        "--private-batch-size",
        str(B_UNITS),
        *extra,
    ]


DP = ("--privacy", "confidential", "--noise-multiplier", str(SIGMA), "--private-size", str(N_DECLARED))


def _train(dataset: Path, out: Path, *extra: str) -> dict:
    return run(build_run_config(build_parser().parse_args(_flags(dataset, *extra))), out, progress=False)


def _cfg(dataset: Path, *, model: str = "transe", mode: str = "confidential", **train) -> RunConfig:
    privacy = {"noise_multiplier": SIGMA, "private_size": N_DECLARED} if mode == "confidential" else {}
    return RunConfig(
        data=DataConfig(dataset=str(dataset), split="transductive"),
        model=dataclasses.replace(get_preset(model), dim=8),
        train=TrainConfig(**{"epochs": 1, "batch_size": 16, "num_negatives": 4, **train}),
        privacy=PrivacyConfig(
            mode=mode,
            unit="entity",
            unit_entities=str(dataset / "patients.txt"),
            batch_size=B_UNITS,
            **privacy,
        ),
        model_name=model,
    )


# -- the units leave the graph ------------------------------------------------------------------------
def test_split_units_takes_the_units_out_and_keeps_every_statement(tmp_path):
    data = make_cohort(tmp_path / "cohort")
    kg = load_blp_directory(data, vocabulary="texts")
    public, units = unit_entities_of(kg, data / "patients.txt")
    assert not any(e.startswith("P") for e in public.entities)
    assert public.num_entities == kg.num_entities - len(patient_ids(30))
    assert units["train"].units and units["valid"].units and units["test"].units
    assert not set(units["train"].units) & set(units["test"].units)
    for name, original in kg.triples.items():
        # the public statements and the units' links, written back as statements, are the set as read
        unit_ids = torch.tensor([public.num_entities + patient_ids(30).index(u) for u in units[name].units])
        names = [*public.entities, *patient_ids(30)]
        back = {
            tuple(names[i] if k != 1 else kg.relations[i] for k, i in enumerate(t))
            for t in public.triples[name].tolist()
        }
        back |= {
            (names[h], kg.relations[r], names[t])
            for h, r, t in units[name].triples(unit_ids if len(unit_ids) else torch.zeros(0, dtype=torch.long)).tolist()
        }
        read = {(kg.entities[h], kg.relations[r], kg.entities[t]) for h, r, t in original.tolist()}
        assert back == read


def test_unit_list_errors_name_the_file_and_line(tmp_path):
    data = make_cohort(tmp_path / "cohort")
    kg = load_blp_directory(data, vocabulary="texts")
    bad = tmp_path / "units.txt"
    bad.write_text("P000\nP999\n")
    with pytest.raises(DataError, match="P999") as err:
        unit_entities_of(kg, bad)
    assert err.value.line == 2 and err.value.file == str(bad)
    bad.write_text("P000\nP000\n")
    with pytest.raises(DataError, match="twice"):
        unit_entities_of(kg, bad)


def test_a_statement_of_two_units_and_a_unit_in_two_sets_are_refused(tmp_path):
    data = make_cohort(tmp_path / "cohort")
    with open(data / "train.tsv", "a") as fh:
        fh.write("P000\tdiagnosed_with\tP001\n")
    kg = load_blp_directory(data, vocabulary="texts")
    with pytest.raises(DataError, match="two unit entities"):
        split_units(kg, patient_ids(30))
    data = make_cohort(tmp_path / "cohort2")
    with open(data / "test.tsv", "a") as fh:
        fh.write("P000\thas_phenotype\tHP:003\n")  # P000 is a training patient
    kg = load_blp_directory(data, vocabulary="texts")
    with pytest.raises(DataError, match="'train' and the 'test' sets"):
        split_units(kg, patient_ids(30))


# -- the fold-in -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("normalize", [False, True])
def test_the_fold_in_is_the_mean_of_link_estimates(tmp_path, normalize):
    data = make_cohort(tmp_path / "cohort")
    prep = prepare(_cfg(data), device=torch.device("cpu"))
    model = prep.model.eval()
    model.normalize_entities = normalize
    test = prep.units["test"]
    matrix = model.entity_matrix().detach()
    got = unit_vectors(model, test, matrix)
    for i in range(test.num_units):
        lk = test.of(i)
        mean = link_estimates(model, lk[:, 1], matrix[lk[:, 2]], lk[:, 3]).mean(0)
        mean = torch.nn.functional.normalize(mean, dim=-1) if normalize else mean
        torch.testing.assert_close(got[i], mean)
    # the same as known_links' ERAvg ("mix" at prior 0) from a zero base: what a user computes for a new patient
    base = torch.zeros(test.num_units, matrix.shape[1])
    torch.testing.assert_close(got, move_by_links(model, base, test.links, matrix, method=LinkMethod("mix", 0.0)))
    # the training-time target of link t is folded in from the unit's other links
    for i in range(test.num_units):
        lk = test.of(i)
        rel = model.relation_matrix().detach()[lk[:, 1]]
        est = link_vectors(model, rel, matrix[lk[:, 2]], lk[:, 3])
        loo = fold_in(model, est, torch.ones(len(lk), dtype=torch.bool))
        for t in range(len(lk)):
            rest = UnitLinks(units=("u",), links=torch.cat([lk[:t], lk[t + 1 :]]).clone())
            rest.links[:, 0] = 0
            want = unit_vectors(model, rest, matrix)[0] if len(lk) > 1 else torch.zeros(matrix.shape[1])
            torch.testing.assert_close(loo[t], want)


# -- contribution bounding --------------------------------------------------------------------------------
@pytest.mark.parametrize("m", [1, 3, 16])
def test_contribution_bounding_never_lets_a_unit_exceed_m(m):
    rnd = random.Random(m)
    for trial in range(20):
        sizes = [rnd.randint(1, 40) for _ in range(rnd.randint(1, 12))]
        rows = [
            (u, rnd.randrange(5), rnd.randrange(100), rnd.choice((NEW_IS_HEAD, NEW_IS_TAIL)))
            for u, k in enumerate(sizes)
            for _ in range(k)
        ]
        links = UnitLinks(units=tuple(f"u{i}" for i in range(len(sizes))), links=torch.tensor(rows))
        sample = torch.tensor(sorted(rnd.sample(range(len(sizes)), rnd.randint(0, len(sizes)))), dtype=torch.long)
        uniform = torch.rand(int(links.counts()[sample].sum()), generator=torch.Generator().manual_seed(trial))
        kept, slot = bound_contributions(links, sample, max_statements=m, uniform=uniform)
        per_unit = torch.bincount(kept[:, 0], minlength=len(sample))
        assert per_unit.tolist() == [min(sizes[u], m) for u in sample.tolist()]
        assert not len(slot) or int(slot.max()) < m
        for position, u in enumerate(sample.tolist()):  # the kept links are the unit's own, each at most once
            own = [tuple(r[1:]) for r in rows if r[0] == u]
            got = [tuple(r[1:]) for r in kept[kept[:, 0] == position].tolist()]
            assert all(own.count(g) >= got.count(g) for g in got)
        batch = unit_batch(
            links,
            sample,
            max_statements=m,
            num_negatives=2,
            entity_pool=torch.arange(100),
            generator=torch.Generator().manual_seed(0),
            uniform=uniform,
        )
        assert batch.mask.sum(1).le(m).all() and batch.mask.shape[0] == len(sample)


def test_a_large_unit_gets_a_secret_random_subset():
    links = UnitLinks(units=("u",), links=torch.tensor([(0, 0, j, NEW_IS_HEAD) for j in range(50)]))
    kept = set()
    for step in range(20):  # different steps of one secret stream keep different subsets
        batch = sample_unit_batch(
            links,
            sample_rate=1.0,
            max_statements=5,
            num_negatives=1,
            entity_pool=torch.arange(50),
            generator=torch.Generator().manual_seed(0),
            randomness=SecretRandomness(),
            step=step,
        )
        assert int(batch.mask.sum()) == 5
        kept.add(tuple(sorted(batch.others[batch.mask].tolist())))
    assert len(kept) > 1


# -- the gradient of a whole unit --------------------------------------------------------------------------
def _clipped_alone(dense, row_grads, tables, i: int, clip: float) -> dict:
    """Unit ``i``'s gradient alone through DP-SGD with no noise: its clipped contribution."""
    step = DPSGDStep(
        noise_multiplier=0.0,
        max_grad_norm=clip,
        expected_batch_size=1.0,
        accountant=None,
        sample_rate=1.0,
        generator=None,
    )
    return step(
        {k: v[i : i + 1] for k, v in dense.items()},
        {k: (idx[i : i + 1], g[i : i + 1]) for k, (idx, g) in row_grads.items()},
        {k: t.shape[0] for k, t in tables.items()},
    )


@pytest.mark.parametrize("model_name", ["transe", "fused-transe"])  # one batched backward; vmap over dense weights
def test_a_units_gradient_is_exact_and_clipped_as_a_whole(tmp_path, model_name):
    data = make_cohort(tmp_path / "cohort", max_links=5)
    cfg = _cfg(data, model=model_name)
    if model_name == "fused-transe":
        cfg = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, encoder="glove-bow", encoder_kwargs={}))
    prep = prepare(cfg, device=torch.device("cpu"))
    model = prep.model.train()
    loss_fn = make_loss(cfg.train)
    units = training_units(prep.units["train"], prep.split.train_entities, prep.kg.num_entities)
    rows = torch.arange(4)
    batch = unit_batch(
        units,
        rows,
        max_statements=16,
        num_negatives=4,
        entity_pool=prep.split.train_entities,
        generator=torch.Generator().manual_seed(1),
    )
    assert batch.mask.sum(1).gt(1).any()  # some unit has several statements
    dense, row_grads = per_unit_gradients(model, batch, loss_fn, None)
    tables, dense_params = model.tables(), model.dense_parameters()
    for i in range(len(rows)):  # unit i's gradient is that of ITS summed loss, over every parameter it reads
        one = dataclasses.replace(
            batch, **{f.name: getattr(batch, f.name)[i : i + 1] for f in dataclasses.fields(batch)}
        )
        model.zero_grad(set_to_none=True)
        inputs = (one.relations, one.others, one.roles, one.mask, one.negatives, one.targets)
        unit_losses(model, inputs, model.gather(unit_plan(model, one, None)), loss_fn).sum().backward()
        for name, table in tables.items():
            idx, g = row_grads[name]
            got = torch.zeros_like(table).index_add_(0, idx[i], g[i])
            want = table.grad if table.grad is not None else torch.zeros_like(table)
            torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-4)
        for name, p in dense_params.items():
            torch.testing.assert_close(
                dense[name][i], p.grad if p.grad is not None else torch.zeros_like(p), atol=1e-5, rtol=1e-4
            )
    norms = per_example_norms(dense, row_grads)
    clip = float(norms.min()) / 10  # every unit is clipped
    for i in range(len(rows)):  # one unit alone, no noise: its released contribution has norm C, not k·C
        out = _clipped_alone(dense, row_grads, tables, i, clip)
        total = torch.sqrt(sum(v.double().square().sum() for v in out.values()))
        assert float(total) <= clip * (1 + 1e-4)
        assert float(total) >= clip * (1 - 1e-3)


def test_private_rows_clip_a_unit_on_the_rows_the_step_updates_only(tmp_path):
    """--private-updates private-rows: a unit's gradient is restricted to the rows the step may change before
    it is clipped; nothing outside them is kept, and the restricted contribution still has norm at most C."""
    data = make_cohort(tmp_path / "cohort", max_links=5)
    cfg = _cfg(data)
    prep = prepare(cfg, device=torch.device("cpu"))
    model = prep.model.train()
    units = training_units(prep.units["train"], prep.split.train_entities, prep.kg.num_entities)
    batch = unit_batch(
        units,
        torch.arange(4),
        max_statements=16,
        num_negatives=4,
        entity_pool=prep.split.train_entities,
        generator=torch.Generator().manual_seed(1),
    )
    dense, row_grads = per_unit_gradients(model, batch, make_loss(cfg.train), None)
    tables = model.tables()
    masks = {"entity": torch.zeros(tables["entity"].shape[0], dtype=torch.bool)}
    masks["entity"][::2] = True  # every other row; no relation row
    kept_dense, kept_rows = restrict_to_rows(dense, row_grads, {k: m.unsqueeze(1) for k, m in masks.items()})
    assert all(float(g.abs().max()) == 0.0 for g in kept_dense.values())
    assert float(kept_rows["relation"][1].abs().max()) == 0.0
    idx, g = kept_rows["entity"]
    assert float(g[~masks["entity"][idx]].abs().max()) == 0.0
    torch.testing.assert_close(g[masks["entity"][idx]], row_grads["entity"][1][masks["entity"][idx]])
    norms = per_example_norms(kept_dense, kept_rows)
    assert bool((norms < per_example_norms(dense, row_grads)).all())  # the clip is spent on less
    clip = float(norms.max()) / 4
    out = _clipped_alone(kept_dense, kept_rows, tables, 0, clip)
    assert float(torch.sqrt(sum(v.double().square().sum() for v in out.values()))) <= clip * (1 + 1e-4)
    assert float(out["entity"][~masks["entity"]].abs().max()) == 0.0


# -- the accountant, the release and neighbouring cohorts ------------------------------------------------
#: fields that are functions of the noisy model (chosen on validation), as the floats are
NOISY = {"best_epoch"}


def _structure(obj, path="$"):
    """The JSON document with every float (and every choice made from the noisy model) replaced by its type:
    what may not differ between neighbours."""
    if isinstance(obj, dict):
        return {k: "noisy" if k in NOISY else _structure(v, f"{path}.{k}") for k, v in obj.items()}
    if isinstance(obj, list):
        return [_structure(v, f"{path}[{i}]") for i, v in enumerate(obj)]
    if isinstance(obj, float):
        return "float"
    return obj


def test_neighbouring_cohorts_differ_only_in_noisy_floats_and_no_patient_is_released(tmp_path):
    from opacus.accountants.analysis.rdp import compute_rdp, get_privacy_spent
    from safetensors import safe_open

    full = make_cohort(tmp_path / "a" / "cohort")
    without = make_cohort(tmp_path / "b" / "cohort", drop="P005")  # one whole training patient removed
    bundles = []
    for side, data in (("a", full), ("b", without)):
        metrics = _train(data, tmp_path / side / "run", *DP)
        privacy = metrics["privacy"]
        assert privacy["guarantee"] == "dp" and privacy["unit"] == "entity"
        assert privacy["max_statements_per_unit"] == 16 and privacy["num_private_units"] is None
        q, steps = B_UNITS / N_DECLARED, EPOCHS * round(N_DECLARED / B_UNITS)
        assert privacy["ledger"] == [{"sample_rate": q, "noise_multiplier": SIGMA, "steps": steps}]
        assert privacy["delta"] == pytest.approx(1 / (10 * N_DECLARED))
        orders = list(DEFAULT_ORDERS)
        oracle = get_privacy_spent(
            orders=orders,
            rdp=compute_rdp(q=q, noise_multiplier=SIGMA, steps=steps, orders=orders),
            delta=privacy["delta"],
        )[0]
        assert privacy["epsilon"] == pytest.approx(float(oracle), rel=1e-6)
        graph = json.loads((tmp_path / side / "run" / "graph.json").read_text())
        assert not any(e.startswith("P") for e in graph["entities"])
        release(tmp_path / side / "run", tmp_path / side / "bundle")
        bundles.append(tmp_path / side / "bundle")
        checked = account_from(tmp_path / side / "bundle")
        assert checked["agree"] and checked["blocks"][0]["unit"] == "entity"
    a, b = bundles
    files = sorted(p.relative_to(a).as_posix() for p in a.rglob("*"))
    assert files == sorted(p.relative_to(b).as_posix() for p in b.rglob("*"))
    for name in files:
        raw = (a / name).read_bytes()
        assert not any(p.encode() in raw for p in patient_ids(30)), name  # no patient named anywhere
        assert b"/a/" not in raw  # nor the local path of the unit list
        if name.endswith(".json"):
            da, db = (json.loads((d / name).read_text()) for d in (a, b))
            if name == "RELEASE.json":  # the hashes of files whose noisy floats differ
                da.pop("sha256", None), db.pop("sha256", None)
                da.pop("files", None), db.pop("files", None)
            assert _structure(da) == _structure(db), name
        elif name.endswith(".safetensors"):
            with safe_open(a / name, "pt") as fa, safe_open(b / name, "pt") as fb:
                assert set(fa.keys()) == set(fb.keys())
                assert all(fa.get_tensor(k).shape == fb.get_tensor(k).shape for k in fa.keys())
    assert json.loads((a / "config.json").read_text())["privacy"]["unit_entities"] == "patients.txt"


def test_the_references_public_only_reads_no_unit_and_none_trains_them(tmp_path):
    full = make_cohort(tmp_path / "a" / "cohort")
    without = make_cohort(tmp_path / "b" / "cohort", drop="P005")
    ma = _train(full, tmp_path / "pa", "--privacy", "public-only")
    mb = _train(without, tmp_path / "pb", "--privacy", "public-only")
    assert ma["privacy"]["epsilon"] == 0.0 and ma["privacy"]["unit"] == "entity"
    wa, wb = (torch.load(tmp_path / r / "best_model.pt", weights_only=True) for r in ("pa", "pb"))
    assert all(torch.equal(wa[k], wb[k]) for k in wa)  # the units are never read: bit-identical
    assert ma["privacy"] == mb["privacy"] and ma["test"]["units"] == mb["test"]["units"]
    ceiling = _train(full, tmp_path / "c", "--privacy", "none")
    assert ceiling["privacy"] is None and ceiling["train"]["units"]["unit"] == "entity"
    wc = torch.load(tmp_path / "c" / "best_model.pt", weights_only=True)
    assert not torch.equal(wc["relation_embeddings"], wa["relation_embeddings"])
    assert wc["structural.weight"].shape == wa["structural.weight"].shape  # the same public vocabulary
    assert 0.0 < ceiling["test"]["units"]["mrr"] <= 1.0 and ceiling["test"]["units"]["num_links"] > 0
    # with a declared number of units, the ceiling takes the private run's round(N̄/B) unit steps per epoch
    declared = _train(full, tmp_path / "c40", "--privacy", "none", "--private-size", "40")
    assert declared["train"]["steps"] - ceiling["train"]["steps"] == EPOCHS * (
        round(40 / B_UNITS) - round(21 / B_UNITS)
    )


def test_an_undeclared_number_of_units_is_a_simulation(tmp_path):
    data = make_cohort(tmp_path / "cohort")
    metrics = _train(data, tmp_path / "r", "--privacy", "confidential", "--noise-multiplier", "1.0", "--epochs", "1")
    privacy = metrics["privacy"]
    assert privacy["guarantee"] == "simulation" and privacy["epsilon"] is None
    assert any("number of units" in r for r in privacy["not_dp_because"])
    assert privacy["num_private_units"] == 21  # the exact count, only where it is the reason for the label


# -- bad settings ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (("--privacy", "confidential", "--noise-multiplier", "1", "--privacy-unit", "entity"), "--unit-entities"),
        (  # at statement level --unit-entities marks confidential statements: not with --privacy full
            ("--privacy", "full", "--noise-multiplier", "1", "--unit-entities", "{list}"),
            "--privacy-unit entity",
        ),
        (
            ("--privacy", "full", "--noise-multiplier", "1", "--privacy-unit", "entity", "--unit-entities", "{list}"),
            "not full",
        ),
        (
            (
                "--privacy",
                "confidential",
                "--noise-multiplier",
                "1",
                "--privacy-unit",
                "entity",
                "--unit-entities",
                "{list}",
                "--confidential-relations",
                "is_a",
            ),
            "cannot be combined",
        ),
        (
            (
                "--privacy",
                "confidential",
                "--noise-multiplier",
                "1",
                "--privacy-unit",
                "entity",
                "--unit-entities",
                "{list}",
                "--negatives",
                "all",
                "--loss",
                "softmax",
            ),
            "1-vs-all",
        ),
        (
            (
                "--privacy",
                "confidential",
                "--noise-multiplier",
                "1",
                "--privacy-unit",
                "entity",
                "--unit-entities",
                "{list}",
                "--mechanism",
                "simulation",
            ),
            "dp-sgd",
        ),
        (("--privacy", "none", "--privacy-unit", "entity", "--unit-entities", "{bad}"), "bad.txt:2"),
        (
            (
                "--privacy",
                "none",
                "--privacy-unit",
                "entity",
                "--unit-entities",
                "{list}",
                "--max-statements-per-unit",
                "0",
            ),
            "max-statements",
        ),
    ],
)
def test_bad_unit_settings_exit_2(tmp_path, capsys, flags, words):
    data = make_cohort(tmp_path / "cohort")
    (tmp_path / "bad.txt").write_text("P000\nnobody\n")
    given = [f.format(list=data / "patients.txt", bad=tmp_path / "bad.txt") for f in flags]
    argv = [
        "train",
        "--dataset",
        str(data),
        "--split",
        "transductive",
        "--model",
        "transe",
        *given,
        "--out",
        str(tmp_path / "o"),
    ]
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own range check
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2, err
    assert words in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("command", [("federate",), ("train", "--nproc", "2")])
def test_federation_and_data_parallel_refuse_the_unit(tmp_path, capsys, command):
    data = make_cohort(tmp_path / "cohort")
    argv = [*command, "--dataset", str(data), "--split", "transductive", "--model", "transe", "--privacy", "none"]
    argv += ["--privacy-unit", "entity", "--unit-entities", str(data / "patients.txt"), "--out", str(tmp_path / "o")]
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and "--privacy-unit entity is not supported" in err, err
    assert not (tmp_path / "o").exists()
