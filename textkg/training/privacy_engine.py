"""The one façade that makes a KG training run private: :class:`PrivacyEngine`.

Opacus builds a private step once, through ``PrivacyEngine.make_private(module, optimizer,
data_loader, ...)``, and every caller uses it. textkg does the same: ``textkg train``
(:func:`textkg.pipeline.job.build_trainer`), each federated data holder
(:class:`textkg.federated.holder.DataHolder`) and each cross-graph party
(:class:`textkg.federated.cross_graph.party.Party`) build an engine once from their run config and
ask it for the private step of their statements. The engine reads the config; the mechanism
(``privacy.mechanism``, :mod:`textkg.training.mechanisms`) and the accountant (``privacy.accountant``,
:mod:`textkg.privacy.claims`) come from one registry each.

It sits in ``textkg.training`` (below the pipeline and the runners that use it) and knows no run
folder, federation or party.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from textkg.errors import ConfigError
from textkg.privacy.randomness import SecretRandomness
from textkg.training.config import PRIVATE_STEP_MODES, RunConfig
from textkg.training.private_training import PrivateTraining


def trained_parameter_names(model) -> list[str]:
    """Every parameter a private step trains, as the report's ``covered_parameters`` names it:
    ``table:<name>`` for each structural table (row-sparse gradients), then the dense parameters."""
    names = [f"table:{k}" for k in model.tables()]
    return names + list(model.dense_parameters())


class PrivacyEngine:
    """Builds the private step of a run from its config (Opacus's ``PrivacyEngine``, for KG statements).

    Args:
        cfg: The run config (``privacy`` and the ``train`` settings the step follows: batch size,
            epochs, negatives, 1-vs-all temperature).
        extra_reasons: Further reasons any run it builds is not ``dp`` (e.g. ``not_dp_because`` of a
            split drawn from private statements).

    Example:
        >>> engine = PrivacyEngine(cfg)                                  # doctest: +SKIP
        >>> private = engine.make_private(model, private_triples=train[mask],
        ...                               entity_pool=pool, loss_fn=loss)  # doctest: +SKIP
    """

    def __init__(self, cfg: RunConfig, *, extra_reasons: Sequence[str] = ()) -> None:
        self.cfg = cfg
        self.extra_reasons = tuple(extra_reasons)

    @property
    def enabled(self) -> bool:
        """Whether the config asks for a private step (``privacy.mode`` ``full`` or ``confidential``)."""
        return self.cfg.privacy.mode in PRIVATE_STEP_MODES

    def make_private(
        self,
        model,
        *,
        private_triples: torch.Tensor,
        entity_pool: torch.Tensor,
        loss_fn,
        planned_epochs: int | None = None,
        noise_decay: tuple[float, int] | None = None,
        randomness: SecretRandomness | None = None,
    ) -> PrivateTraining:
        """The private step of ``model`` on ``private_triples``: its plan, mechanism, ledger and report.

        Args:
            model: The KG model the step trains (every trained parameter is covered).
            private_triples: ``(N, 3)`` the private statements.
            entity_pool: ``(P,)`` candidate entities of negatives (and of the 1-vs-all softmax).
            loss_fn: The loss of the public steps.
            planned_epochs: Epochs σ is calibrated for (default ``train.epochs``).
            noise_decay: ``(γ, E)``: σ shrinks by γ every E epochs (federated rounds; RDP only).
            randomness: The secret source (default: a fresh secret, or ``--reproducible-noise``'s seed).
        """
        if self.cfg.privacy.unit == "entity":
            raise ConfigError(
                "--privacy-unit entity: this private step trains statements, not units (federated data holders, "
                "cross-graph parties and data-parallel runs do not support the unit entity); use textkg train",
                field="privacy.unit",
            )
        tc = self.cfg.train
        return PrivateTraining(
            self.cfg.privacy,
            private_triples=private_triples,
            batch_size=self.cfg.private_batch_size,  # privacy.batch_size, else train.batch_size
            planned_epochs=tc.epochs if planned_epochs is None else planned_epochs,
            entity_pool=entity_pool,
            loss_fn=loss_fn,
            num_negatives=tc.num_negatives,
            trained_parameters=trained_parameter_names(model),
            randomness=randomness,
            # 1-vs-all recipes (cpu-private): exact per-example clipping of the softmax over the pool
            one_vs_all_temperature=(tc.temperature if tc.negatives == "all" else None),
            noise_decay=noise_decay,
            extra_reasons=self.extra_reasons,
        )

    def make_private_units(
        self,
        model,
        *,
        units,
        entity_pool: torch.Tensor,
        loss_fn,
        planned_epochs: int | None = None,
        randomness: SecretRandomness | None = None,
    ) -> PrivateTraining:
        """The unit-level private step of ``model`` (``privacy.unit: entity``; :mod:`textkg.training.unit_step`).

        Args:
            model: The KG model the step trains (every trained parameter is covered).
            units: The private units' links (:func:`textkg.training.unit_step.training_units`).
            entity_pool: ``(P,)`` candidate entities of negatives.
            loss_fn: The loss of the public steps.
            planned_epochs: Epochs σ is calibrated for (default ``train.epochs``).
            randomness: The secret source (default: a fresh secret, or ``--reproducible-noise``'s seed).

        B (``privacy.batch_size``, else ``train.batch_size``) counts units, as does the declared size N̄
        (``privacy.private_size``): q = B/N̄ is the unit sampling rate.
        """
        tc = self.cfg.train
        return PrivateTraining(
            self.cfg.privacy,
            private_triples=torch.zeros(0, 3, dtype=torch.long),
            batch_size=self.cfg.private_batch_size,
            planned_epochs=tc.epochs if planned_epochs is None else planned_epochs,
            entity_pool=entity_pool,
            loss_fn=loss_fn,
            num_negatives=tc.num_negatives,
            trained_parameters=trained_parameter_names(model),
            randomness=randomness,
            extra_reasons=self.extra_reasons,
            units=units,
        )
