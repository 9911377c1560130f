"""The one accountant registry: what turns a ledger into a run's claimed ε (``rdp``, ``pld``).

The mechanism emits events and :class:`textkg.privacy.accountant.RDPAccountant` keeps the
ledger (Opacus's split). Which arithmetic *claims* ε from that ledger — and so calibrates σ
and stops training at a budget — is chosen by name from this registry (``privacy.accountant``
in a run's config), never by ``if name == ...`` branches:

* ``rdp``: Rényi DP of the Sampled Gaussian Mechanism (Mironov, Talwar & Zhang 2019,
  arXiv:1908.10530) converted with Canonne, Kamath & Steinke 2020 (arXiv:2004.00010v3,
  Prop. 12); checked before every step; handles a noise schedule.
* ``pld``: privacy-loss distributions through dp-accounting (:mod:`textkg.privacy.pld`):
  tighter, too slow to run every step, so the last allowed step is found once.

One duplicate rule, as in every textkg registry (:mod:`textkg.registry`): registering a taken
name raises unless ``replace=True``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from textkg.errors import ConfigError
from textkg.privacy.accountant import RDPAccountant
from textkg.privacy.calibration import calibrate_noise_multiplier
from textkg.privacy.events import SampledGaussianEvent
from textkg.privacy.pld import pld_calibrate_noise_multiplier, pld_epsilon, pld_max_steps
from textkg.privacy.schedule import GeometricNoiseSchedule
from textkg.registry import Registry

_CLAIMS: Registry[type[Claim]] = Registry("accountant", field="privacy.accountant")


def register_claim(name: str, *, replace: bool = False) -> Callable[[type[Claim]], type[Claim]]:
    """Class decorator: make a claim method available by ``name``; a taken name raises
    (:class:`textkg.registry.DuplicateNameError`) unless ``replace=True``."""

    def decorate(cls: type[Claim]) -> type[Claim]:
        _CLAIMS.register(name, cls, replace=replace)
        cls.name = name
        return cls

    return decorate


def get_claim(name: str, *, orders: Sequence[float] | None = None) -> Claim:
    """The claim method registered as ``name``; an unknown name lists the registered ones."""
    return _CLAIMS.get(name)(orders=orders)


def registered_claims() -> list[str]:
    """Names :func:`get_claim` accepts."""
    return _CLAIMS.names()


class Claim:
    """How ε is claimed from a ledger of ``(q, σ, steps)`` entries at δ."""

    name: ClassVar[str]
    conversion: ClassVar[str]
    supports_schedule: ClassVar[bool] = False

    def __init__(self, *, orders: Sequence[float] | None = None) -> None:
        self.orders = orders

    def epsilon(self, ledger: Sequence[tuple[float, float, int]], *, delta: float) -> float:
        raise NotImplementedError

    def calibrate(
        self,
        *,
        target_epsilon: float,
        delta: float,
        sample_rate: float,
        steps: int,
        schedule: GeometricNoiseSchedule | None = None,
    ) -> float:
        raise NotImplementedError

    def max_steps(
        self, *, target_epsilon: float, delta: float, sample_rate: float, noise_multiplier: float, limit: int
    ) -> int | None:
        """The last step the budget allows, found once; ``None``: check before every step instead."""
        return None

    def one_step_cost(self, event: SampledGaussianEvent, *, delta: float) -> float:
        return self.epsilon([(event.sample_rate, event.noise_multiplier, event.steps)], delta=delta)

    def ledger(self) -> RDPAccountant:
        """A new, empty ledger of ``(q, σ, steps)`` events for this claim to read (the mechanism's step hook)."""
        return RDPAccountant(orders=self.orders)


@register_claim("rdp")
class RDPClaim(Claim):
    conversion = "canonne-kamath-steinke-2020"
    supports_schedule = True

    def epsilon(self, ledger: Sequence[tuple[float, float, int]], *, delta: float) -> float:
        acc = RDPAccountant(orders=self.orders)
        for q, sigma, steps in ledger:
            acc.step(SampledGaussianEvent(sample_rate=q, noise_multiplier=sigma, steps=steps))
        return 0.0 if acc.steps == 0 else acc.get_epsilon(delta=delta)

    def calibrate(self, **kwargs: Any) -> float:
        return calibrate_noise_multiplier(orders=self.orders, **kwargs)


@register_claim("pld")
class PLDClaim(Claim):
    conversion = "dp-accounting PLD, pessimistic (connect the dots)"

    def epsilon(self, ledger: Sequence[tuple[float, float, int]], *, delta: float) -> float:
        return pld_epsilon(ledger, delta=delta)

    def calibrate(self, *, schedule: GeometricNoiseSchedule | None = None, **kwargs: Any) -> float:
        if schedule is not None:
            raise ConfigError("a decaying noise schedule is accounted with RDP only", field="privacy.accountant")
        return pld_calibrate_noise_multiplier(**kwargs)

    def max_steps(
        self, *, target_epsilon: float, delta: float, sample_rate: float, noise_multiplier: float, limit: int
    ) -> int | None:
        return pld_max_steps(
            target_epsilon=target_epsilon,
            delta=delta,
            sample_rate=sample_rate,
            noise_multiplier=noise_multiplier,
            limit=limit,
        )
