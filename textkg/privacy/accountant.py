"""The ledger: what composes privacy events, step by step.

The mechanism (:mod:`textkg.privacy.dp_sgd`) only emits "one step at (q, σ)"; the
ledger (:class:`RDPAccountant`) keeps them and does the RDP arithmetic with the pure
functions of :mod:`textkg.privacy.rdp` and :mod:`textkg.privacy.conversion` (Opacus's
split). Which accountant *claims* ε from a ledger (``rdp``, ``pld``) is chosen by name
from the one accountant registry, :mod:`textkg.privacy.claims`, whose
:meth:`~textkg.privacy.claims.Claim.ledger` builds this ledger.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from textkg.errors import ConfigError, PrivacyError
from textkg.privacy.conversion import rdp_to_epsilon
from textkg.privacy.events import SampledGaussianEvent
from textkg.privacy.rdp import DEFAULT_ORDERS, compute_rdp, parse_orders


@lru_cache(maxsize=4096)
def _rdp_one_step(sample_rate: float, noise_multiplier: float, orders: tuple[float, ...]) -> np.ndarray:
    rdp = compute_rdp(sample_rate=sample_rate, noise_multiplier=noise_multiplier, steps=1, orders=orders)
    rdp.setflags(write=False)
    return rdp


class RDPAccountant:
    """Rényi-DP accountant for the Poisson-sampled Gaussian mechanism.

    Ledger: ``history`` is a list of ``(sample_rate, noise_multiplier, steps)``;
    consecutive identical events are merged. RDP composes additively over the
    ledger (Mironov 2017, arXiv 1702.07476v3, Prop. 1) and is converted with
    :func:`textkg.privacy.conversion.rdp_to_epsilon` (CKS 2020, Prop. 12).

    Args:
        orders: RDP orders (each > 1), a spec for :func:`textkg.privacy.rdp.parse_orders`
            (``"2-64"``), or ``None`` for :data:`textkg.privacy.rdp.DEFAULT_ORDERS`.
    """

    name = "rdp"

    def __init__(self, orders: Sequence[float] | str | None = None) -> None:
        self.orders: tuple[float, ...] = DEFAULT_ORDERS if orders is None else parse_orders(orders)
        self.history: list[tuple[float, float, int]] = []

    # -- composition -------------------------------------------------------------
    def step(self, event: SampledGaussianEvent) -> None:
        """Compose one event (a step hook for the mechanism)."""
        if not isinstance(event, SampledGaussianEvent):
            raise TypeError(f"RDPAccountant composes SampledGaussianEvent, got {type(event).__name__}")
        last = self.history[-1] if self.history else None
        if last is not None and last[:2] == (event.sample_rate, event.noise_multiplier):
            self.history[-1] = (last[0], last[1], last[2] + event.steps)
        else:
            self.history.append((event.sample_rate, event.noise_multiplier, event.steps))

    @property
    def steps(self) -> int:
        """Total number of mechanism runs composed so far."""
        return sum(s for _, _, s in self.history)

    def rdp(self, extra: Sequence[tuple[float, float, int]] = ()) -> np.ndarray:
        """Total RDP ``(len(orders),)`` of the ledger (plus ``extra`` entries)."""
        total = np.zeros(len(self.orders), dtype=np.float64)
        for q, sigma, steps in [*self.history, *extra]:
            total = total + steps * _rdp_one_step(q, sigma, self.orders)
        return total

    # -- claims ------------------------------------------------------------------
    def get_privacy_spent(self, *, delta: float) -> tuple[float, float]:
        """``(epsilon, best_alpha)`` of the ledger at ``delta``; ``(0.0, nan)`` before any step."""
        return rdp_to_epsilon(orders=self.orders, rdp=self.rdp().tolist(), delta=delta)

    def get_epsilon(self, *, delta: float) -> float:
        """ε of the ledger at ``delta``."""
        return self.get_privacy_spent(delta=delta)[0]

    def would_exceed(self, event: SampledGaussianEvent, *, target_epsilon: float, delta: float) -> bool:
        """Whether composing ``event`` next would take ε above ``target_epsilon``."""
        extra = [(event.sample_rate, event.noise_multiplier, event.steps)]
        eps, _ = rdp_to_epsilon(orders=self.orders, rdp=self.rdp(extra).tolist(), delta=delta)
        return eps > target_epsilon

    # -- persistence -------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """JSON-serialisable ledger; floats round-trip exactly through ``json``."""
        return {
            "accountant": self.name,
            "orders": [float(a) for a in self.orders],
            "history": [[float(q), float(s), int(n)] for q, s, n in self.history],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Replace the ledger with ``state`` (from :meth:`state_dict`).

        Raises:
            PrivacyError: a malformed ledger (validated before anything is replaced).
        """
        try:
            if state.get("accountant", self.name) != self.name:
                raise ValueError(f"ledger is for accountant {state['accountant']!r}")
            orders = parse_orders([float(a) for a in state["orders"]])
            history = []
            for q, sigma, n in state["history"]:
                event = SampledGaussianEvent(sample_rate=float(q), noise_multiplier=float(sigma), steps=int(n))
                history.append((event.sample_rate, event.noise_multiplier, event.steps))
        except (KeyError, TypeError, ValueError, AttributeError, ConfigError) as exc:
            raise PrivacyError(f"malformed accountant state: {exc}", field="accountant") from None
        if list(orders) != [float(a) for a in state["orders"]]:
            raise PrivacyError("malformed accountant state: orders not sorted/unique", field="accountant")
        self.orders, self.history = orders, history

    def __repr__(self) -> str:
        return f"RDPAccountant(orders={len(self.orders)} orders, steps={self.steps})"


def epsilon_of(
    *, sample_rate: float, noise_multiplier: float, steps: int, delta: float, orders: Sequence[float] | None = None
) -> float:
    """ε of ``steps`` SGM runs at (q, σ) — a one-call convenience over :class:`RDPAccountant`."""
    acc = RDPAccountant(orders=orders)
    acc.step(SampledGaussianEvent(sample_rate=sample_rate, noise_multiplier=noise_multiplier, steps=steps))
    eps = acc.get_epsilon(delta=delta)
    return eps if not math.isnan(eps) else math.inf
