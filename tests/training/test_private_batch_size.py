"""``--private-batch-size``: the private steps' expected Poisson batch, apart from the public steps' batch.

Issue 39's recipe for the health setting: few large private steps (a smaller σ/B per step at the same ε)
while the public ``is_a`` steps keep their batch and schedule, so the control (public-only continued)
trains exactly the public steps the DP run trains. The batch is public, like every count of a ``dp`` run:
q = B/N̄ and round(N̄/B) private steps per epoch, never the private count.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from textkg.cli.config_loading import build_run_config
from textkg.cli.main import build_parser, main
from textkg.errors import ConfigError
from textkg.pipeline.job import run
from textkg.privacy.conversion import rdp_to_epsilon
from textkg.privacy.rdp import DEFAULT_ORDERS, compute_rdp
from textkg.training.config import PrivacyConfig
from textkg.training.private_training import PrivateTraining

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiny_blp"
FLAGS = ["--confidential-relations", "/r/likes", "--split", "inductive", "--private-size", "256"]


def _config(data: Path, *extra: str):
    args = build_parser().parse_args(
        ["train", "--dataset", str(data), "--description", "short", "--model", "transe", "--dim", "8"]
        + ["--epochs", "2", "--batch-size", "32", "--seed", "0", "--privacy", "confidential", *FLAGS, *extra]
    )
    return build_run_config(args)


@pytest.fixture
def data(tmp_path) -> Path:
    out = tmp_path / "d"
    shutil.copytree(FIXTURE, out)
    return out


def test_the_private_steps_take_their_own_batch_and_the_public_steps_keep_theirs(tmp_path, data):
    cfg = _config(data, "--noise-multiplier", "2.0", "--private-batch-size", "128")
    assert cfg.privacy.batch_size == 128 and cfg.train.batch_size == 32 and cfg.private_batch_size == 128
    baseline = _config(data, "--noise-multiplier", "2.0")
    assert baseline.private_batch_size == 32  # unset: the public batch, as before
    run(cfg, tmp_path / "run", progress=False)
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    block = metrics["privacy"]
    # q = B/N̄ = 128/256 and round(256/128) = 2 private steps an epoch, 2 epochs: read from public inputs only
    assert block["sample_rate"] == 0.5 and block["planned_steps"] == 4 and block["steps"] == 4
    assert block["guarantee"] == "dp" and block["ledger"] == [{"sample_rate": 0.5, "noise_multiplier": 2.0, "steps": 4}]
    # the claimed epsilon recomputed from (q, sigma, T) by the pure RDP bound: the accountant saw the new q
    rdp = compute_rdp(sample_rate=0.5, noise_multiplier=2.0, steps=4, orders=DEFAULT_ORDERS)
    eps, _ = rdp_to_epsilon(orders=DEFAULT_ORDERS, rdp=rdp, delta=block["delta"])
    assert block["epsilon_rdp"] == pytest.approx(eps, rel=1e-9)
    # the public steps: every training statement that is not confidential, in batches of --batch-size
    history = metrics["train"]["history"]
    public_steps = history[-1]["step"] - 4  # the trainer counts both kinds of step
    assert public_steps == 2 * _public_steps_per_epoch(baseline)


def _public_steps_per_epoch(cfg) -> int:
    from textkg.pipeline.job import prepare
    from textkg.training.private_training import select_confidential

    prep = prepare(cfg)
    train = prep.split.train
    mask = select_confidential(train, prep.kg.relations, cfg.privacy, seed=cfg.train.seed)
    return -(-int((~mask).sum()) // cfg.train.batch_size)


def _public_report(n_private: int) -> dict:
    cfg = PrivacyConfig(
        mode="confidential", target_epsilon=1.0, private_size=1000, batch_size=250, confidential_relations=("r",)
    )
    pt = PrivateTraining(
        cfg,
        private_triples=torch.randint(0, 50, (n_private, 3)),
        batch_size=250,
        planned_epochs=3,
        entity_pool=torch.arange(50),
        loss_fn=None,
        num_negatives=1,
        trained_parameters=["relation"],
    )
    return pt.report()


def test_neighbouring_private_sets_give_the_same_public_schedule():
    """Adversary: D, D + 1 statement and D + 37 differ only in the private count, which nothing released shows."""
    reports = [_public_report(n) for n in (400, 401, 437)]
    assert reports[0]["sample_rate"] == 0.25 and reports[0]["planned_steps"] == 12  # 250/1000, 3 x round(1000/250)
    assert reports[0]["private_size"] == 1000 and reports[0]["delta"] == pytest.approx(1e-4)
    assert reports[0]["num_private_triples"] is None
    for other in reports[1:]:
        assert json.dumps(other, sort_keys=True) == json.dumps(reports[0], sort_keys=True)


@pytest.mark.parametrize("value", ["0", "-3", "1.5", "100000001"])
def test_a_bad_private_batch_size_exits_2_naming_the_field(data, value, capsys):
    """In this process (issue 38: a new interpreter per value was ~7 CPU-s of imports each); any exception
    but argparse's SystemExit fails the test, as a traceback would. The installed command's exit status
    and stderr without a traceback: tests/cli/test_cli_errors.py::test_console_script_exit_code_without_traceback."""
    argv = ["train", "--dataset", str(data), "--model", "transe", "--dim", "8"]
    argv += ["--privacy", "confidential", *FLAGS, "--target-epsilon", "1", "--private-batch-size", value]
    try:
        code = main([*argv, "--out", str(data.parent / "never")])
    except SystemExit as exit_:  # argparse's refusal of a value that is not an integer
        code = exit_.code
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    assert "--private-batch-size" in err and "unrecognized" not in err
    assert not (data.parent / "never").exists()


def test_the_config_refuses_a_bool_or_non_positive_batch():
    for bad in (True, 0, -1, 2.0):
        with pytest.raises(ConfigError, match="privacy.batch_size"):
            PrivacyConfig(mode="confidential", noise_multiplier=1.0, confidential_relations=("r",), batch_size=bad)


def test_federated_runners_refuse_it_rather_than_ignore_it():
    """Holders and cross-graph parties take --batch-size for their private steps: the flag is refused there."""
    from textkg.federated.config import FederatedConfig
    from textkg.federated.cross_graph.config import HolderSpec
    from textkg.federated.runner import check_settings
    from textkg.training.config import RunConfig

    cfg = RunConfig(privacy=PrivacyConfig(mode="full", target_epsilon=1.0, private_size=100, batch_size=50))
    with pytest.raises(ConfigError, match="--private-batch-size is not supported by federate"):
        check_settings(cfg, FederatedConfig())
    spec = HolderSpec(name="a", dataset="d", privacy={"mode": "full", "target_epsilon": 1, "batch_size": 50})
    with pytest.raises(ConfigError, match="not supported by cross-graph parties"):
        spec.privacy_config()
