"""``--private-updates private-rows``: a private step moves only the rows no public statement reads.

Issue 39's health setting: the noise of the private steps on the parameters the public ``is_a`` steps
also train (the text projection, the fusion weights, the phenotype rows) cost the released placement.
Under ``private-rows`` the same noised gradient is masked to the private-only rows (post-processing of
public inputs: the same ε) and applied by an optimizer of its own.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
import torch

from textkg.cli.config_loading import build_run_config
from textkg.cli.main import build_parser, main
from textkg.errors import ConfigError
from textkg.pipeline.job import build_trainer, prepare, run
from textkg.training import trainer as trainer_module
from textkg.training.config import PrivacyConfig
from textkg.training.private_rows import private_only_masks

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiny_blp"
CONFIDENTIAL = "/r/likes"
#: entities whose public statements the test data drops: they appear in confidential statements only
PRIVATE_ONLY = {f"/e/{i}" for i in range(30, 40)}


@pytest.fixture
def data(tmp_path) -> Path:
    """The tiny fixture with every public training statement of /e/30../e/39 left out."""
    out = tmp_path / "d"
    shutil.copytree(FIXTURE, out)
    lines = (out / "train.tsv").read_text().splitlines()
    kept = [
        line
        for line in lines
        if line.split("\t")[1] == CONFIDENTIAL or not PRIVATE_ONLY & {line.split("\t")[0], line.split("\t")[2]}
    ]
    (out / "train.tsv").write_text("\n".join(kept) + "\n")
    return out


def _config(data: Path, *extra: str):
    args = build_parser().parse_args(
        ["train", "--dataset", str(data), "--description", "short", "--model", "transe", "--dim", "8"]
        + ["--split", "transductive", "--epochs", "2", "--batch-size", "16", "--lr", "0.05", "--seed", "0"]
        + ["--privacy", "confidential", "--confidential-relations", CONFIDENTIAL, "--private-size", "64"]
        + ["--noise-multiplier", "1.5", "--reproducible-noise", "3", *extra]
    )
    return build_run_config(args)


def _trainer(data: Path, tmp_path: Path, *extra: str, weight_decay: float = 0.0):
    cfg = _config(data, *extra)
    cfg = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, weight_decay=weight_decay))
    prep = prepare(cfg)
    trainer, _, _ = build_trainer(prep, cfg, tmp_path / "out")
    return trainer, prep


def _public_reach(trainer) -> dict[str, torch.Tensor]:
    """``{parameter name: bool mask}`` of every entry public training can reach (everything but private-only rows)."""
    masks = private_only_masks(trainer.model, trainer.public)
    tables = {id(p): name for name, p in trainer.model.tables().items()}
    out = {}
    for name, p in trainer.model.named_parameters():
        table = tables.get(id(p))
        reach = torch.ones_like(p, dtype=torch.bool)
        if table in masks:
            reach[masks[table]] = False
        out[name] = reach
    return out


def test_the_mask_is_the_rows_of_entities_and_relations_without_a_public_statement(data, tmp_path):
    trainer, prep = _trainer(data, tmp_path, "--private-updates", "private-rows")
    masks = private_only_masks(trainer.model, trainer.public)
    entities, relations = list(prep.kg.entities), list(prep.kg.relations)
    struct = trainer.model.structural
    public = trainer.public
    named = {entities[int(e)] for e in torch.cat([public[:, 0], public[:, 2]]).unique()}
    expected = {
        e for i, e in enumerate(entities) if int(struct.struct_index[i]) != struct.unseen_row and e not in named
    }
    rows = set(masks["entity"].nonzero().squeeze(1).tolist())
    assert rows == {int(struct.struct_index[entities.index(e)]) for e in expected}
    # the test data has private-only entities, and only those (/e/unused: a row, and no statement at all)
    assert PRIVATE_ONLY & expected and expected <= PRIVATE_ONLY | {"/e/unused"}
    assert not masks["entity"][struct.unseen_row]  # the unseen row: public steps read it
    assert masks["relation"].tolist() == [r == CONFIDENTIAL for r in relations]
    assert trainer.private_rows is not None and trainer.private_rows.counts() == {
        "entity": len(expected),
        "relation": 1,
    }


@pytest.mark.parametrize("weight_decay", [0.0, 0.01])
def test_private_steps_leave_every_public_entry_bit_identical_and_move_the_private_rows(data, tmp_path, weight_decay):
    trainer, _ = _trainer(data, tmp_path, "--private-updates", "private-rows", weight_decay=weight_decay)
    trainer._public_step(torch.arange(16))  # the public optimizer has state to keep
    public_state = _clone(trainer.optimizer.state_dict())
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    reach = _public_reach(trainer)
    for _ in range(3):
        assert trainer._private_step()
    moved = False
    for name, p in trainer.model.named_parameters():
        assert torch.equal(p.detach()[reach[name]], before[name][reach[name]]), name  # bit for bit
        if (~reach[name]).any():
            changed = (p.detach() != before[name])[~reach[name]].view(-1, p.shape[-1]).any(dim=1)
            assert changed.all(), name  # every private-only row moved
            moved = True
    assert moved
    _assert_same(trainer.optimizer.state_dict(), public_state)  # the public optimizer never saw a private step


def test_the_private_optimizer_follows_the_learning_rate_schedule(data, tmp_path):
    trainer, _ = _trainer(data, tmp_path, "--private-updates", "private-rows", "--lr-schedule", "cosine")
    private = trainer.private_rows.optimizer
    total = trainer.config.train.epochs * (trainer.plan.public_steps + trainer.plan.private_steps)
    for step in (0, total // 3, total - 1):
        trainer._set_learning_rate(step)
        public_lrs = {group["lr"] for group in trainer.optimizer.param_groups}
        assert len(public_lrs) == 1 and [group["lr"] for group in private.param_groups] == [public_lrs.pop()]
    assert private.param_groups[0]["lr"] < 0.05  # the schedule moved it


def test_under_all_the_private_step_moves_public_entries_too(data, tmp_path):
    """The check above is not vacuous: the default (``all``) moves what ``private-rows`` keeps."""
    trainer, _ = _trainer(data, tmp_path)
    assert trainer.private_rows is None
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    reach = _public_reach(trainer)
    assert trainer._private_step()
    assert any(not torch.equal(p.detach()[reach[n]], before[n][reach[n]]) for n, p in trainer.model.named_parameters())


def test_the_noised_sum_is_the_same_under_both_settings(data, tmp_path):
    """Masking is post-processing: the private step draws the same gradient, only its use differs."""
    grads = {}
    for setting in ("all", "private-rows"):
        trainer, _ = _trainer(data, tmp_path / setting, "--private-updates", setting)
        trainer.optimizer.zero_grad(set_to_none=True)
        trainer.private.step(trainer.model)
        grads[setting] = {n: p.grad.clone() for n, p in trainer.model.named_parameters() if p.grad is not None}
    assert grads["all"].keys() == grads["private-rows"].keys()
    assert all(torch.equal(grads["all"][n], grads["private-rows"][n]) for n in grads["all"])


def test_the_privacy_block_and_epsilon_are_those_of_all(data, tmp_path):
    blocks = {}
    for setting in ("all", "private-rows"):
        cfg = _config(data, "--private-updates", setting)
        cfg = _secret(cfg)
        run(cfg, tmp_path / setting, progress=False)
        blocks[setting] = json.loads((tmp_path / setting / "metrics.json").read_text())["privacy"]
    assert blocks["all"]["private_updates"] == "all" and blocks["private-rows"]["private_updates"] == "private-rows"
    assert blocks["private-rows"]["guarantee"] == "dp" and blocks["private-rows"]["epsilon"] > 0
    for block in blocks.values():
        block.pop("private_updates")
        block["randomness"] = None  # each run's secret key is its own
    assert blocks["all"] == blocks["private-rows"]


def _secret(cfg):
    """``cfg`` with a secret key (not ``--reproducible-noise``), so the block is labelled ``dp``."""
    return dataclasses.replace(cfg, privacy=dataclasses.replace(cfg.privacy, reproducible_noise=None))


def test_a_crash_and_resume_gives_the_uninterrupted_weights(data, tmp_path, monkeypatch):
    """The private optimizer's moments live in the checkpoint: a run that dies after a mid-epoch
    checkpoint and resumes ends with the uninterrupted run's weights, bit for bit."""
    cfg = _config(data, "--private-updates", "private-rows", "--checkpoint-every", "3")
    run(cfg, tmp_path / "whole", progress=False)
    original = trainer_module.Trainer._private_step
    taken = [0]

    def crashing(self):
        taken[0] += 1
        if taken[0] == 6:  # after the checkpoint of step 3 or later, with private steps since it
            raise KeyboardInterrupt("crash")
        return original(self)

    monkeypatch.setattr(trainer_module.Trainer, "_private_step", crashing)
    with pytest.raises(KeyboardInterrupt):
        run(cfg, tmp_path / "killed", progress=False)
    monkeypatch.setattr(trainer_module.Trainer, "_private_step", original)
    saved = torch.load(tmp_path / "killed" / "checkpoint.pt", weights_only=False)
    assert saved["private_optimizer"]["optimizer"]["state"]  # the private moments were checkpointed
    run(cfg, tmp_path / "killed", resume=True, progress=False)
    # the last weights (the checkpoint's; best_model.pt may be an epoch before the crash)
    whole, resumed = (
        torch.load(tmp_path / d / "checkpoint.pt", weights_only=False)["model"] for d in ("whole", "killed")
    )
    assert whole.keys() == resumed.keys() and all(torch.equal(whole[k], resumed[k]) for k in whole)
    a, b = (json.loads((tmp_path / d / "metrics.json").read_text())["privacy"] for d in ("whole", "killed"))
    assert a["ledger"] == b["ledger"] and a["epsilon_if_secret"] == b["epsilon_if_secret"]


def test_a_bad_value_names_the_field(data, tmp_path, capsys):
    with pytest.raises(ConfigError) as err:
        PrivacyConfig(mode="confidential", confidential_relations=("r",), target_epsilon=1.0, private_updates="some")
    assert err.value.field == "privacy.private_updates"
    with pytest.raises(ConfigError) as err:  # no public statements decide the rows: refused, never ignored
        PrivacyConfig(mode="full", target_epsilon=1.0, private_updates="private-rows")
    assert err.value.field == "privacy.private_updates"
    cfg = tmp_path / "run.yaml"
    cfg.write_text("privacy:\n  mode: confidential\n  private_updates: some\n")
    code = main(["train", "--config", str(cfg), "--out", str(tmp_path / "o")])
    err_text = capsys.readouterr().err
    assert code == 2 and "privacy.private_updates" in err_text and "Traceback" not in err_text
    assert main(["train", "--dataset", str(data), "--private-updates", "some", "--out", str(tmp_path / "p")]) == 2
    assert not (tmp_path / "o").exists() and not (tmp_path / "p").exists()


def _clone(obj):
    if isinstance(obj, torch.Tensor):
        return obj.clone()
    if isinstance(obj, dict):
        return {k: _clone(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_clone(v) for v in obj)
    return obj


def _assert_same(a, b) -> None:
    if isinstance(a, torch.Tensor):
        assert torch.equal(a, b)
    elif isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            _assert_same(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _assert_same(x, y)
    else:
        assert a == b
