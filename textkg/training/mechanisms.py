"""The private step's mechanism, chosen by name from one registry (``privacy.mechanism``).

A mechanism is what one private step does with a Poisson (or other) sample of private statements
and what the run may then claim. :class:`textkg.training.private_training.PrivateTraining` owns the
plan (rate, σ, budget, ledger, report) and calls its mechanism once per step; the mechanism fills
``.grad`` of every trained parameter and composes the step's event into the run's ledger. Built in:

* ``dp-sgd``: Poisson sampling, per-example clipping of the whole gradient, N(0, σ²C²) on every
  entry (Abadi et al. 2016, arXiv:1607.00133v2, Alg. 1); the only one a run may label ``dp``.
* ``simulation``: the seed paper's batch-level clipping (:mod:`textkg.privacy.simulation`), NOT DP.

Add one: subclass :class:`Mechanism`, implement :meth:`Mechanism.step`, and register it with
``@register_mechanism("name")``; ``privacy.mechanism: name`` then selects it (docs/architecture.md).
As in every textkg registry (:mod:`textkg.registry`), a taken name raises unless ``replace=True``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import torch

from textkg.privacy.dp_sgd import DPSGDStep
from textkg.privacy.randomness import NoisePrefetcher
from textkg.registry import Registry
from textkg.training.one_vs_all import feature_gram, pool_positions
from textkg.training.private_step import OneVsAllPrivateStep, PrivateStep, noise_shapes

#: 1-vs-all under DP keeps the pool's ``(P, P)`` feature Gram matrix while it has at most this many
#: entries (1 GiB of float32, P <= 16384: inductive FB15k-237's pool of 12,043 fits, which saves about
#: 3 s per step on one thread); larger pools rebuild its blocks every step
GRAM_CACHE_ELEMENTS = 1 << 28


class Mechanism:
    """One private step of a KG model, and what it lets a run claim.

    A mechanism is built once per private run (it may keep caches) and called once per step.

    Attributes:
        name: Its registered name (set by :func:`register_mechanism`).
        not_dp_because: ``None`` when the mechanism meets every mechanism condition of
            docs/privacy.md ("dp needs"); else why a run that uses it is labelled ``simulation``.
        sampling: How a step draws its private examples (the report's ``sampling``).
        clipping: What a step clips (the report's ``clipping``).
        one_vs_all_refusal: ``None`` if it trains the 1-vs-all softmax (``negatives: all``); else why not.
        unit_refusal: ``None`` if it trains units (``privacy.unit: entity``); else why not.
    """

    name: ClassVar[str]
    not_dp_because: ClassVar[str | None] = None
    sampling: ClassVar[str]
    clipping: ClassVar[str]
    one_vs_all_refusal: ClassVar[str | None] = "the mechanism has no 1-vs-all step"
    unit_refusal: ClassVar[str | None] = "the mechanism has no unit-level step; use mechanism 'dp-sgd'"

    @property
    def accounted(self) -> bool:
        """Whether ε may be claimed for its ledger (``epsilon``, ``epsilon_rdp``, ``epsilon_pld``)."""
        return self.not_dp_because is None

    def step(self, run: Any, model, *, generator: torch.Generator, step: int) -> None:
        """Fill ``.grad`` of every trained parameter of ``model`` and compose the step into ``run.accountant``.

        Args:
            run: The :class:`~textkg.training.private_training.PrivateTraining` (the plan: ``private_triples``,
                ``sample_rate``, ``step_noise_multiplier(t)``, ``randomness``, ``accountant``, ...).
            model: The KG model.
            generator: Step ``t``'s secret auxiliary stream (corruptions, dropout).
            step: ``t``, the number of steps composed so far.
        """
        raise NotImplementedError

    def close(self) -> None:
        """Release what the mechanism holds between steps (threads, caches of the secret key)."""


_MECHANISMS: Registry[type[Mechanism]] = Registry("privacy mechanism", field="privacy.mechanism")


def register_mechanism(name: str, *, replace: bool = False) -> Callable[[type[Mechanism]], type[Mechanism]]:
    """Class decorator: make a :class:`Mechanism` available as ``privacy.mechanism: name``; a taken name raises
    (:class:`textkg.registry.DuplicateNameError`) unless ``replace=True``."""

    def decorate(cls: type[Mechanism]) -> type[Mechanism]:
        _MECHANISMS.register(name, cls, replace=replace)
        cls.name = name
        return cls

    return decorate


def get_mechanism(name: str) -> type[Mechanism]:
    """The mechanism class registered as ``name``; an unknown name lists the registered ones."""
    return _MECHANISMS.get(name)


def registered_mechanisms() -> list[str]:
    """Names :func:`get_mechanism` accepts."""
    return _MECHANISMS.names()


@register_mechanism("dp-sgd")
class DPSGD(Mechanism):
    """DP-SGD (Abadi et al. 2016, arXiv:1607.00133v2, Alg. 1) on private statements.

    Sampled negatives: :class:`textkg.training.private_step.PrivateStep`; the 1-vs-all softmax
    (``run.one_vs_all_temperature`` set): :class:`textkg.training.private_step.OneVsAllPrivateStep`,
    exact per-example clipping without per-example gradients.
    """

    sampling = "poisson"
    clipping = "per-example, whole gradient"
    one_vs_all_refusal = None
    unit_refusal = None

    def __init__(self) -> None:
        self._prefetcher: NoisePrefetcher | None = None
        self._feature_gram: torch.Tensor | None = None  # X X^T of the pool (1-vs-all; frozen features)

    def step(self, run: Any, model, *, generator: torch.Generator, step: int) -> None:
        if self._prefetcher is None:
            self._prefetcher = NoisePrefetcher(run.randomness, noise_shapes(model))
        mechanism = DPSGDStep(
            noise_multiplier=run.step_noise_multiplier(step),
            max_grad_norm=run.cfg.max_grad_norm,
            # the sum's normaliser q·N̄ is public: dividing by q·N (Opacus's default) would scale
            # the released update by a function of the private count
            expected_batch_size=run.sample_rate * run.public_size,
            accountant=run.accountant,
            sample_rate=run.sample_rate,
            generator=None,
        )
        if getattr(run, "units", None) is not None:  # one unit entity with all of its statements per example
            self._unit_step(run, model, mechanism, generator=generator, step=step)
            return
        common = {
            "private_triples": run.private_triples,
            "entity_pool": run.entity_pool,
            "mechanism": mechanism,
            "sample_rate": run.sample_rate,
            "generator": generator,
            "randomness": run.randomness,
            "step": step,
            "noise": self._prefetcher.get(step),
            "shard": run.shard,
        }
        if run.one_vs_all_temperature is None:
            PrivateStep(model, loss_fn=run.loss_fn, num_negatives=run.num_negatives, **common)()
            return
        p = len(run.entity_pool)
        if self._feature_gram is None and model.text is not None and p * p <= GRAM_CACHE_ELEMENTS:
            self._feature_gram = feature_gram(model, run.entity_pool)
        OneVsAllPrivateStep(
            model,
            positions=pool_positions(run.entity_pool, model.num_entities),
            temperature=run.one_vs_all_temperature,
            gram=self._feature_gram,
            **common,
        )()

    def _unit_step(self, run: Any, model, mechanism: DPSGDStep, *, generator: torch.Generator, step: int) -> None:
        """User-level DP-SGD over units (:class:`textkg.training.unit_step.UnitPrivateStep`)."""
        from textkg.errors import ConfigError
        from textkg.training.unit_step import UnitPrivateStep

        if run.shard is not None:
            raise ConfigError(
                "--privacy-unit entity has no data-parallel step; train it in one process", field="privacy.unit"
            )
        assert self._prefetcher is not None
        UnitPrivateStep(
            model,
            units=run.units,
            entity_pool=run.entity_pool,
            loss_fn=run.loss_fn,
            num_negatives=run.num_negatives,
            max_statements=run.cfg.max_statements_per_unit,
            mechanism=mechanism,
            sample_rate=run.sample_rate,
            generator=generator,
            randomness=run.randomness,
            step=step,
            noise=self._prefetcher.get(step),
            trained_rows=getattr(run, "trained_rows", None),
        )()

    def close(self) -> None:
        if self._prefetcher is not None:
            self._prefetcher.close()
            self._prefetcher = None


@register_mechanism("simulation")
class Simulation(Mechanism):
    """The seed paper's batch-level clipping (:mod:`textkg.privacy.simulation`): NOT DP, labelled ``simulation``."""

    not_dp_because = "seed-paper mechanism: batch-level clipping, fixed-size batches drawn with replacement (not DP)"
    sampling = "fixed-size batches drawn uniformly with replacement"
    clipping = "batch-level (not DP)"
    one_vs_all_refusal = "needs mechanism 'dp-sgd' (the simulation clips the batch, not each example)"
    unit_refusal = "needs mechanism 'dp-sgd' (the simulation clips the batch, not each unit)"

    def step(self, run: Any, model, *, generator: torch.Generator, step: int) -> None:
        from textkg.privacy.simulation import clip_and_noise_batch_gradient
        from textkg.training.negatives import corrupt

        idx = torch.randint(run.num_private, (run.batch_size,), generator=generator)
        batch = corrupt(
            run.private_triples[idx],
            num_negatives=run.num_negatives,
            entity_pool=run.entity_pool,
            generator=generator,
        )
        loss = run.loss_fn(model(batch, generator=generator)).mean()
        loss.backward()
        params = [p for p in model.parameters() if p.requires_grad and p.grad is not None]
        clip_and_noise_batch_gradient(
            params,
            noise_multiplier=run.step_noise_multiplier(),
            max_grad_norm=run.cfg.max_grad_norm,
            batch_size=run.batch_size,
            generator=generator,
        )
        run.accountant.step(run.next_event())
