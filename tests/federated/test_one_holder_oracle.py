"""Issue 16's oracle: a federation of one data holder is centralized training.

One holder with every training statement and nothing shared, trained with FedAvg
and no privacy for R rounds of one local epoch, ends where ``textkg train``
(:func:`textkg.pipeline.job.run`) ends after R epochs with the same seed
and settings: the same trained tensors, bit for bit, and the same validation and
test metrics. It holds because the holder keeps one trainer for every round: the
Adam moments and step counts, the cosine learning-rate schedule over R x E
epochs, the generator its negatives and structural dropout draw from, and the
epoch counter that seeds each epoch's batch order all carry over, as they would
for one data holder training alone. FedAvg over one holder returns its upload
unchanged (Flower scales it by the weight factor n / n, exactly 1.0), and
loading the global parameters writes them into the tensors the optimizer steps.
The control tests show the oracle notices a holder that restarts its optimizer
or its generator every round.

Every test runs on one torch thread (a multi-threaded reduction may sum in
another order). The partition code refuses fewer than 2 holders, and
``--clients 1`` stays an error (a federation of one is of no use to anyone), so
the tests hand the runner a one-holder partition in place of ``make_partition``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch
from fed_threads import one_thread

from textkg.models import get_preset
from textkg.training.config import DataConfig, RunConfig, TrainConfig

pytestmark = pytest.mark.portability  # rerun by .ci/run under another thread count and ISA

pytest.importorskip("flwr")

TINY = Path(__file__).resolve().parents[1] / "fixtures" / "tiny_blp"
ROUNDS = 3


#: The models of the oracle: plain TransE with sampled negatives and a constant learning rate, and a
#: text-augmented one (GloVe bag of words fused with a structural table under structural dropout, which
#: draws from the trainer's generator) trained 1-vs-all with the cosine schedule over R epochs.
MODELS = {
    "transe": (dataclasses.replace(get_preset("transe"), dim=8), {}),
    "glove-fused": (
        dataclasses.replace(get_preset("glove-bow"), dim=8, fusion="weighted", structural_dropout=0.5),
        {"loss": "softmax", "negatives": "all", "temperature": 0.05, "lr": 5e-3, "lr_schedule": "cosine"},
    ),
}


def _config(model: str = "transe") -> RunConfig:
    model_cfg, train = MODELS[model]
    return RunConfig(
        data=DataConfig(dataset=str(TINY), split="transductive"),
        # "none": federate resolves "auto" to "none" (the server reads no holder's statements)
        model=dataclasses.replace(model_cfg, irreflexive="none"),
        # eval_every > epochs: centralized training validates only after its last epoch, so its best
        # model is its last one, as the federation's is (no selection); batch 16: several Adam steps an epoch
        train=TrainConfig(epochs=ROUNDS, batch_size=16, seed=7, eval_every=ROUNDS + 1, **train),
        model_name=model,
    )


@pytest.fixture
def one_holder(monkeypatch):
    """The runner partitions the training statements into one holder, ``client-0``, with nothing shared."""
    from textkg.federated import runner
    from textkg.federated.partition import Partition

    def make_partition(kg, train, scheme, **kwargs):
        return Partition(scheme, ("client-0",), torch.zeros(len(train), dtype=torch.long))

    monkeypatch.setattr(runner, "make_partition", make_partition)
    return runner


def _both(runner, tmp_path: Path, model: str = "transe") -> tuple[dict, dict]:
    from textkg.pipeline.job import run

    cfg = _config(model)
    central = one_thread(lambda: run(cfg, tmp_path / "central", progress=False))
    fed = runner.FederatedConfig(partition="random", clients=None, rounds=ROUNDS, local_epochs=1)
    federated = one_thread(lambda: runner.federate_inprocess(cfg, fed, tmp_path / "fed", progress=False))
    return central, federated


def _load(path: Path) -> dict[str, torch.Tensor]:
    return torch.load(path, weights_only=False)


@pytest.mark.parametrize("model", sorted(MODELS))
def test_one_holder_federation_is_centralized_training(tmp_path, one_holder, model):
    from textkg.pipeline.job import prepare

    central, federated = _both(one_holder, tmp_path, model)
    assert federated["federated"]["sizes"] == {"client-0": 200, "shared": 0}  # every tiny_blp training statement

    glob = _load(tmp_path / "fed" / "best_model.pt")  # the last round's global model
    last = _load(tmp_path / "central" / "checkpoint.pt")["model"]  # the model after the last epoch
    best = _load(tmp_path / "central" / "best_model.pt")
    initial = one_thread(lambda: prepare(_config(model), device=torch.device("cpu"))).model.state_dict()
    assert glob.keys() == last.keys() == best.keys()
    for name in glob:
        assert torch.equal(glob[name], last[name]), name
        assert torch.equal(glob[name], best[name]), name
    assert not torch.equal(glob["structural.weight"], initial["structural.weight"])  # it trained

    assert federated["test"] == central["test"]
    assert federated["valid"] == central["valid"]["mrr"]


#: What a holder that started afresh every round would lose: its Adam moments and step counts, or the
#: generator its negatives are drawn from (reseeded, it draws round 1's negatives again every round).
RESTARTS = {
    "optimizer": lambda trainer: trainer.optimizer.state.clear(),
    "generator": lambda trainer: trainer.generator.manual_seed(trainer.config.train.seed),
}


@pytest.mark.parametrize("restart", sorted(RESTARTS))
def test_a_holder_that_restarts_every_round_is_not_centralized_training(tmp_path, one_holder, monkeypatch, restart):
    """The controls: the oracle sees the optimizer state and the generator a round passes to the next."""
    fit = one_holder.DataHolder.fit

    def restarting_fit(self, arrays, epochs):
        if self.trainer.state.epoch:
            RESTARTS[restart](self.trainer)
        return fit(self, arrays, epochs)

    monkeypatch.setattr(one_holder.DataHolder, "fit", restarting_fit)
    _both(one_holder, tmp_path)
    glob = _load(tmp_path / "fed" / "best_model.pt")
    last = _load(tmp_path / "central" / "checkpoint.pt")["model"]
    assert not torch.equal(glob["structural.weight"], last["structural.weight"])
