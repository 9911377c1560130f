"""KG-side scheduling of the privacy mechanism: what is private, at what rate,
under which budget, and what the run may honestly claim.

Mechanism and accounting come from :mod:`privacy`; this module decides which
statements are private (``full``: all training statements; ``confidential``:
the DPKGE setting of Han et al. 2022) and produces the ``privacy`` block of
``metrics.json``.
"""

from __future__ import annotations

import math
import warnings

import torch

from privacy.accountant import RDPAccountant
from privacy.calibration import calibrate_noise_multiplier
from privacy.dp_sgd import DPSGDStep
from privacy.events import SampledGaussianEvent
from privacy.rdp import parse_orders
from textkg.errors import ConfigError, PrivacyError
from textkg.training.config import PrivacyConfig
from textkg.training.private_step import PrivateStep

PUBLIC_INPUTS = ["entity descriptions", "relation texts", "pretrained encoder weights",
                 "validation and test statements"]


def select_confidential(train: torch.Tensor, relations: tuple[str, ...], cfg: PrivacyConfig,
                        *, seed: int) -> torch.Tensor:
    """Boolean mask ``(N,)`` of confidential training statements.

    By relation name (``confidential_relations``) or a seeded random fraction.
    """
    if cfg.mode == "full":
        return torch.ones(len(train), dtype=torch.bool)
    mask = torch.zeros(len(train), dtype=torch.bool)
    if cfg.confidential_relations:
        index = {r: i for i, r in enumerate(relations)}
        for name in cfg.confidential_relations:
            if name not in index:
                raise ConfigError(f"unknown relation {name!r}; the graph has: {', '.join(relations[:20])}"
                                  + (" …" if len(relations) > 20 else ""),
                                  field="privacy.confidential_relations")
            mask |= train[:, 1] == index[name]
    if cfg.confidential_fraction is not None:
        g = torch.Generator().manual_seed(seed + 7919)
        mask |= torch.rand(len(train), generator=g) < cfg.confidential_fraction
    if not mask.any():
        raise PrivacyError("no training statement is confidential", field="privacy.confidential_relations")
    return mask


class PrivateTraining:
    """DP-SGD (or the labelled seed-paper simulation) on the private statements.

    Args:
        cfg: privacy configuration.
        private_triples: ``(N_C, 3)``.
        batch_size: expected Poisson batch size B (q = B / N_C).
        planned_epochs: for σ calibration (planned steps = epochs · round(N_C/B)).
        entity_pool, loss_fn, num_negatives: as for public steps.
        trained_parameters: names of every trained parameter (for the report).
    """

    def __init__(self, cfg: PrivacyConfig, *, private_triples, batch_size: int, planned_epochs: int,
                 entity_pool, loss_fn, num_negatives: int, trained_parameters: list[str]) -> None:
        self.cfg = cfg
        self.private_triples = private_triples
        self.num_private = len(private_triples)
        self.sample_rate = min(1.0, batch_size / self.num_private)
        self.steps_per_epoch = max(1, round(self.num_private / batch_size))
        self.planned_steps = planned_epochs * self.steps_per_epoch
        self.delta = cfg.delta if cfg.delta is not None else 1.0 / (10 * self.num_private)
        if self.delta >= 1.0 / self.num_private:
            warnings.warn(f"delta={self.delta:g} is not below 1/N = {1 / self.num_private:g}: "
                          "the guarantee is weak", stacklevel=2)
        self.orders = parse_orders(cfg.orders) if cfg.orders else None
        self.accountant = RDPAccountant(orders=self.orders)
        if cfg.noise_multiplier is None:
            self.noise_multiplier = calibrate_noise_multiplier(
                target_epsilon=cfg.target_epsilon, delta=self.delta, sample_rate=self.sample_rate,
                steps=self.planned_steps, orders=self.orders)
            self.calibrated = True
        else:
            self.noise_multiplier = cfg.noise_multiplier
            self.calibrated = False
        self.entity_pool = entity_pool
        self.loss_fn = loss_fn
        self.num_negatives = num_negatives
        self.trained_parameters = trained_parameters
        self.batch_size = batch_size

    # -- budget ---------------------------------------------------------------
    def _event(self) -> SampledGaussianEvent:
        return SampledGaussianEvent(sample_rate=self.sample_rate, noise_multiplier=self.noise_multiplier)

    def budget_exhausted(self) -> bool:
        """True when the next step would exceed ``target_epsilon`` (never overshoot)."""
        if self.cfg.target_epsilon is None:
            return False
        return self.accountant.would_exceed(self._event(), target_epsilon=self.cfg.target_epsilon,
                                            delta=self.delta)

    def epsilon(self) -> float:
        if self.accountant.steps == 0:
            return 0.0
        return self.accountant.get_privacy_spent(delta=self.delta)[0]

    # -- one step -------------------------------------------------------------------
    def step(self, model, generator: torch.Generator) -> None:
        """Fill ``.grad`` of every trained parameter from one private step."""
        if self.cfg.mechanism == "simulation":
            self._simulation_step(model, generator)
        else:
            mechanism = DPSGDStep(noise_multiplier=self.noise_multiplier,
                                  max_grad_norm=self.cfg.max_grad_norm,
                                  expected_batch_size=self.sample_rate * self.num_private,
                                  accountant=self.accountant, sample_rate=self.sample_rate,
                                  generator=generator)
            PrivateStep(model, private_triples=self.private_triples, entity_pool=self.entity_pool,
                        loss_fn=self.loss_fn, num_negatives=self.num_negatives, mechanism=mechanism,
                        sample_rate=self.sample_rate, generator=generator)()

    def _simulation_step(self, model, generator) -> None:
        """The seed paper's batch-level clipping: NOT DP, reported as ``simulation``."""
        from privacy.simulation import clip_and_noise_batch_gradient
        from textkg.training.negatives import corrupt

        n = self.num_private
        idx = torch.randint(n, (self.batch_size,), generator=generator)
        batch = corrupt(self.private_triples[idx], num_negatives=self.num_negatives,
                        entity_pool=self.entity_pool, generator=generator)
        loss = self.loss_fn(model(batch, generator=generator)).mean()
        loss.backward()
        params = [p for p in model.parameters() if p.requires_grad and p.grad is not None]
        clip_and_noise_batch_gradient(params, noise_multiplier=self.noise_multiplier,
                                      max_grad_norm=self.cfg.max_grad_norm, batch_size=self.batch_size,
                                      generator=generator)
        self.accountant.step(self._event())

    # -- ledger -------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {"accountant": self.accountant.state_dict(), "noise_multiplier": self.noise_multiplier}

    def load_state_dict(self, state: dict) -> None:
        self.accountant.load_state_dict(state["accountant"])
        self.noise_multiplier = state["noise_multiplier"]

    def report(self) -> dict:
        """The ``privacy`` block of ``metrics.json``: only what the mechanism covers."""
        eps, alpha = (0.0, math.nan) if self.accountant.steps == 0 else \
            self.accountant.get_privacy_spent(delta=self.delta)
        dp = self.cfg.mechanism == "dp-sgd"
        return {
            "guarantee": "dp" if dp else "simulation",
            "unit": "triple" if self.cfg.mode == "full" else "confidential-triple",
            "epsilon": eps,
            "delta": self.delta,
            "alpha": alpha,
            "accountant": "rdp",
            "conversion": "canonne-kamath-steinke-2020",
            "noise_multiplier": self.noise_multiplier,
            "noise_calibrated_to_target": self.calibrated,
            "target_epsilon": self.cfg.target_epsilon,
            "max_grad_norm": self.cfg.max_grad_norm,
            "sample_rate": self.sample_rate,
            "steps": self.accountant.steps,
            "planned_steps": self.planned_steps,
            "num_private_triples": self.num_private,
            "sampling": "poisson" if dp else "shuffle",
            "clipping": "per-example, whole gradient" if dp else "batch-level (not DP)",
            "covered_parameters": list(self.trained_parameters),
            "public_inputs": PUBLIC_INPUTS,
            "mode": self.cfg.mode,
        }
