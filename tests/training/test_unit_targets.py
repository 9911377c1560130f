"""``--unit-targets`` and ``--unit-candidates``: what a patient is trained to predict, and against what.

What can fail: a link of a relation that is not a target must still fold its unit in but add no loss; a
unit with no target link must give a zero gradient; the corruptions of a target must come from the listed
candidates only; an unknown relation, a bad candidate list or the flags without ``--privacy-unit
entity`` must exit 2 naming the field (or the file and line) and write nothing; the settings must
survive ``config.json``.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch
from unit_cohort import DISEASES, make_cohort

from textkg.cli.config_loading import build_run_config
from textkg.cli.main import build_parser, main
from textkg.models import get_preset
from textkg.pipeline.job import unit_training
from textkg.pipeline.prepared import prepare
from textkg.training.config import DataConfig, PrivacyConfig, RunConfig, TrainConfig
from textkg.training.losses import make_loss
from textkg.training.unit_step import (
    fold_in,
    link_vectors,
    per_unit_gradients,
    training_units,
    unit_batch,
    unit_losses,
    unit_plan,
)


def _cfg(dataset: Path, *, mode: str = "none", **privacy) -> RunConfig:
    return RunConfig(
        data=DataConfig(dataset=str(dataset), split="transductive"),
        model=dataclasses.replace(get_preset("transe"), dim=8),
        train=TrainConfig(epochs=1, batch_size=16, num_negatives=4),
        privacy=PrivacyConfig(
            mode=mode, unit="entity", unit_entities=str(dataset / "patients.txt"), batch_size=5, **privacy
        ),
        model_name="transe",
    )


def _diseases_file(dataset: Path) -> Path:
    path = dataset / "diseases.txt"
    path.write_text("".join(d + "\n" for d in DISEASES), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def cohort(tmp_path_factory):
    data = make_cohort(tmp_path_factory.mktemp("cohort") / "c", n=40)
    _diseases_file(data)
    return data


def _batch(prep, units, rows=None, pool=None):
    rows = torch.arange(min(6, units.num_units)) if rows is None else rows
    return unit_batch(
        units,
        rows,
        max_statements=16,
        num_negatives=4,
        entity_pool=prep.split.train_entities if pool is None else pool,
        generator=torch.Generator().manual_seed(3),
    )


def test_only_target_links_carry_loss_and_every_link_folds_in(cohort):
    cfg = _cfg(cohort, unit_targets=("diagnosed_with",))
    prep = prepare(cfg)
    diag = prep.kg.relations.index("diagnosed_with")
    units = training_units(prep.units["train"], prep.split.train_entities, prep.kg.num_entities)
    assert units.targets == (diag,)
    batch = _batch(prep, units)
    assert torch.equal(batch.targets, batch.mask & (batch.relations == diag))
    assert bool((batch.mask & ~batch.targets).any())  # phenotype links: fold-in only
    model, loss_fn = prep.model, make_loss(cfg.train)
    inputs = (batch.relations, batch.others, batch.roles, batch.mask, batch.negatives, batch.targets)
    got = unit_losses(model, inputs, model.gather(unit_plan(model, batch, None)), loss_fn)
    # the oracle: every link's loss with the unit folded in from ALL its other links, summed over targets
    every = dataclasses.replace(batch, targets=batch.mask)
    plan = model.gather(unit_plan(model, every, None))
    ends = torch.cat([every.others.unsqueeze(-1), every.negatives], dim=-1)
    ent = model.entity_matrix()[ends]
    r = plan["relation"]
    unit = fold_in(model, link_vectors(model, r, ent[..., 0, :], every.roles), every.mask)
    inter = model.interaction
    head = every.roles == 0
    assert bool(head.all())  # a patient is the head of each of its statements
    pos = inter.score(unit, r, ent[..., 0, :])
    neg = inter.score(unit.unsqueeze(-2), r.unsqueeze(-2), ent[..., 1:, :])
    per_link = loss_fn(torch.cat([pos.unsqueeze(-1), neg], dim=-1))
    want = (per_link * batch.targets.float()).sum(-1)
    torch.testing.assert_close(got, want)
    # the fold-in reads the non-target links: removing one changes the target's loss
    fewer = dataclasses.replace(batch, mask=batch.mask & (batch.relations == diag))
    inputs_fewer = (fewer.relations, fewer.others, fewer.roles, fewer.mask, fewer.negatives, fewer.targets)
    alone = unit_losses(model, inputs_fewer, model.gather(unit_plan(model, fewer, None)), loss_fn)
    assert not torch.allclose(alone, got)


def test_a_unit_without_a_target_link_has_a_zero_gradient(cohort):
    prep = prepare(_cfg(cohort, unit_targets=("is_a",)))  # no patient has an is_a statement
    units = training_units(prep.units["train"], prep.split.train_entities, prep.kg.num_entities)
    batch = _batch(prep, units)
    assert not bool(batch.targets.any())
    dense, rows = per_unit_gradients(prep.model, batch, make_loss(prep_cfg_train()), None)
    for _, g in rows.values():
        assert float(g.abs().sum()) == 0.0
    for g in dense.values():
        assert float(g.abs().sum()) == 0.0


def prep_cfg_train() -> TrainConfig:
    return TrainConfig(epochs=1, batch_size=16, num_negatives=4)


def test_corruptions_come_from_the_candidates_only(cohort):
    cfg = _cfg(cohort, unit_targets=("diagnosed_with",), unit_candidates=str(cohort / "diseases.txt"))
    prep = prepare(cfg)
    want = sorted(prep.kg.entities.index(d) for d in DISEASES)
    assert sorted(prep.unit_candidates.tolist()) == want
    ceiling = unit_training(prep, cfg, make_loss(cfg.train))
    assert sorted(ceiling.entity_pool.tolist()) == want
    units = training_units(prep.units["train"], prep.split.train_entities, prep.kg.num_entities)
    batch = _batch(prep, units, pool=ceiling.entity_pool)
    assert set(batch.negatives.flatten().tolist()) <= set(want)
    # without the list: the whole public vocabulary, phenotype terms included
    plain = prepare(_cfg(cohort))
    assert torch.equal(plain.unit_candidates, plain.split.train_entities)


def test_the_settings_survive_config_json(cohort, tmp_path):
    cfg = _cfg(cohort, unit_targets=("diagnosed_with",), unit_candidates=str(cohort / "diseases.txt"))
    back = RunConfig.from_dict(json.loads(json.dumps(cfg.to_dict())))
    assert back.privacy.unit_targets == ("diagnosed_with",)
    assert back.privacy.unit_candidates == str(cohort / "diseases.txt")
    args = build_parser().parse_args(
        ["train", "--dataset", str(cohort), "--split", "transductive", "--privacy-unit", "entity"]
        + ["--unit-entities", str(cohort / "patients.txt"), "--unit-targets", "diagnosed_with,has_phenotype"]
    )
    assert build_run_config(args).privacy.unit_targets == ("diagnosed_with", "has_phenotype")


BASE = ["--split", "transductive", "--model", "transe", "--dim", "8", "--epochs", "1"]


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        (["--privacy-unit", "entity", "--unit-targets", "no_such_relation"], "privacy.unit_targets"),
        (["--privacy-unit", "entity", "--unit-candidates", "BAD"], "bad.txt:2"),
        (["--privacy-unit", "entity", "--unit-candidates", "MISSING"], "missing.txt: file not found"),
        (["--privacy-unit", "entity", "--unit-candidates", "PHENOTYPES"], "patients.txt:1, field 'id': candidate"),
        (["--privacy", "confidential", "--unit-targets", "diagnosed_with"], "privacy.unit_targets"),
        (["--privacy", "confidential", "--unit-candidates", "GOOD"], "privacy.unit_candidates"),
    ],
)
def test_bad_unit_objective_settings_exit_2_and_write_nothing(cohort, tmp_path, capsys, extra, field):
    bad = tmp_path / "bad.txt"
    bad.write_text(f"{DISEASES[0]}\nNOT_AN_ENTITY\n", encoding="utf-8")
    files = {
        "BAD": str(bad),
        "MISSING": str(tmp_path / "missing.txt"),
        "GOOD": str(cohort / "diseases.txt"),
        "PHENOTYPES": str(cohort / "patients.txt"),  # the units left the graph: not candidates
    }
    extra = [files.get(x, x) for x in extra]
    if "--privacy-unit" in extra:
        extra += ["--unit-entities", str(cohort / "patients.txt")]
    else:
        extra += ["--confidential-relations", "diagnosed_with", "--noise-multiplier", "1", "--private-size", "50"]
    out = tmp_path / "run"
    code = main(["train", "--dataset", str(cohort), *BASE, *extra, "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2
    assert "Traceback" not in err and field in err
    assert not out.exists()
