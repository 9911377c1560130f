"""One data holder of a federation: its statements, its copy of the model, its trainer, ledger and upload."""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

import torch

from textkg.errors import ConfigError
from textkg.federated.client_dp import UNIT_WEIGHT_KEY


def trained_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The parameters a round exchanges: every trained tensor (frozen text features stay home)."""
    return {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}


def fedavg_weight(num_own: int, private) -> int | float:
    """The FedAvg weight a holder sends the server every round.

    Without record-level DP: its own statements (every holder trains the shared ones, so counting
    them would give a holder of 13 statements, hpo's DECIPHER, the weight of one with 5,000). Under
    record-level DP with a declared size (``--private-size N̄`` or ``--sample-rate q``, N̄ = B/q) the
    exact count is private under add/remove adjacency (docs/privacy.md), so the weight is the public
    N̄, the same for every holder: equal weights. Without a declared size the run is ``simulation``
    anyway (q = B/N_k) and the exact count stays the weight.

    Args:
        num_own: the holder's own statements.
        private: its :class:`~textkg.training.private_training.PrivateTraining`, or ``None``.
    """
    if private is not None and private.size_source is not None:
        size = float(private.public_size)
        return int(size) if size.is_integer() else size
    return max(num_own, 1)


class DataHolder:
    """One client: its statements, its copy of the model, its trainer and (under privacy) its ledger.

    Args:
        name: The holder's name.
        prep: The prepared run (graph, public view, model to copy).
        cfg: The run config; ``train.epochs`` must be R × E (the schedule and
            the privacy plan span every round).
        own: ``(n_k, 3)`` the holder's own training statements.
        shared: ``(s, 3)`` public statements every holder trains on.
        out_dir: Where the holder's trainer may write (nothing is written today).
        upload_top_k: Upload only this many structural-table rows (``None``: every tensor whole).
        noise_decay: ``(γ, E)``: under privacy, σ shrinks by γ every E local epochs (one round).
        engine: The federation's :class:`~textkg.training.privacy_engine.PrivacyEngine` (built once for
            every holder; ``None``: one built from ``cfg`` and ``prep``).
    """

    def __init__(
        self,
        name: str,
        prep,
        cfg,
        own: torch.Tensor,
        shared: torch.Tensor,
        out_dir: Path,
        *,
        upload_top_k: int | None = None,
        noise_decay: tuple[float, int] | None = None,
        engine=None,
    ) -> None:
        from textkg.training.losses import make_loss
        from textkg.training.privacy_engine import PrivacyEngine
        from textkg.training.private_training import select_confidential
        from textkg.training.trainer import Trainer

        self.name = name
        self.own, self.shared = own, shared
        self.model = copy.deepcopy(prep.model)
        loss_fn = make_loss(cfg.train)
        self.private = None
        public = torch.cat([shared, own])
        if cfg.privacy.mode != "none":
            mask = select_confidential(
                own, prep.kg.relations, cfg.privacy, seed=cfg.train.seed, entities=prep.kg.entities
            )
            public = torch.cat([shared, own[~mask]])
            if engine is None:
                engine = PrivacyEngine(cfg, extra_reasons=prep.split.extra.get("not_dp_because", ()))
            self.private = engine.make_private(
                self.model,
                private_triples=own[mask],
                entity_pool=prep.split.train_entities,
                loss_fn=loss_fn,
                noise_decay=noise_decay,
            )
        self.upload_top_k = upload_top_k
        self.num_own = len(own)  # private under record-level DP: never sent, and released only in simulation
        self.num_examples = fedavg_weight(len(own), self.private)
        self.trainer = Trainer(
            self.model,
            config=cfg,
            public_triples=public,
            entity_pool=prep.split.train_entities,
            validate=lambda model: 0.0,
            out_dir=out_dir,
            private=self.private,
            loss_fn=loss_fn,
        )

    def fit(self, arrays: dict[str, torch.Tensor], epochs: int) -> tuple[dict[str, torch.Tensor], dict]:
        """Load the global parameters, train ``epochs`` epochs, return the new parameters and metrics."""
        self.model.load_state_dict(arrays, strict=False)
        losses = [x for x in self.trainer.train_epochs(epochs) if x is not None]
        metrics: dict[str, int | float] = {"num-examples": self.num_examples, UNIT_WEIGHT_KEY: 1}
        if losses:
            metrics["public-loss"] = float(sum(losses) / len(losses))
        if self.private is not None:
            metrics["epsilon"] = float(self.private.epsilon())
            metrics["private-steps"] = int(self.private.accountant.steps)
        return self.upload(arrays, trained_state(self.model)), metrics

    def upload(self, sent: dict[str, torch.Tensor], trained: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """What leaves the holder: ``trained``, or its top-k rows (:func:`textkg.federated.topk.sparse_upload`).

        Reads only what the server sent and the trained parameters (under DP, the holder's DP
        output): the choice of rows is post-processing (Dwork & Roth 2014, Prop. 2.1).
        """
        if self.upload_top_k is None:
            return trained
        from textkg.federated.topk import sparse_upload

        return sparse_upload(sent, trained, self.upload_top_k)

    def state_dict(self) -> dict:
        """What a resumed federation needs of this holder (PRIVATE: it holds the secret key of its noise)."""
        return {
            "name": self.name,
            "optimizer": self.trainer.optimizer.state_dict(),
            "generator": self.trainer.generator.get_state(),
            "state": dataclasses.asdict(self.trainer.state),
            "privacy": None if self.private is None else self.private.state_dict(),
        }

    def load_state_dict(self, state: dict) -> None:
        from textkg.training.trainer import TrainState

        if state["name"] != self.name:
            raise ConfigError(f"checkpoint holder {state['name']!r} is not {self.name!r}", field="resume")
        self.trainer.optimizer.load_state_dict(state["optimizer"])
        self.trainer.generator.set_state(state["generator"])
        self.trainer.state = TrainState(**state["state"])
        if self.private is not None:
            self.private.load_state_dict(state["privacy"])

    @property
    def size_is_private(self) -> bool:
        """Whether the holder's statement count is private: record-level DP with a declared size N̄."""
        return self.private is not None and self.private.size_source is not None

    def report(self) -> dict:
        """What the holder tells the server (and ``metrics.json``'s ``clients``): public values only."""
        out = {
            "name": self.name,
            "num_statements": None if self.size_is_private else self.num_own,
            "num_examples": self.num_examples,
            "privacy": None if self.private is None else self.private.report(),
        }
        if self.trainer.state.stopped:
            out["stopped"] = self.trainer.state.stopped
        return out

    def close(self) -> None:
        if self.private is not None:
            self.private.close()
