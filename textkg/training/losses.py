"""Per-example losses over ``(…, 1 + K)`` scores (positive first).

Losses return one value per example (no reduction over the batch) so that
the DP trainer can clip per example; the ordinary trainer takes the mean.

Registry (house style: one registry per family): ``register_loss(name, fn, options=(...))``,
``get_loss(name)``, ``list_losses()``. A loss's ``options`` name the ``train`` config fields that
:func:`make_loss` passes to it as keyword arguments (``margin``, ``temperature``), so choosing and
configuring a loss is a registry lookup, never an ``if name == ...`` branch.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from textkg.errors import ConfigError
from textkg.registry import Registry

LossFn = Callable[[torch.Tensor], torch.Tensor]


def margin_ranking(scores: torch.Tensor, *, margin: float = 1.0) -> torch.Tensor:
    """Margin ranking loss, mean over the K negatives (Bordes et al. 2013).

    Args:
        scores: ``(..., 1 + K)``, positive at index 0.

    Returns:
        ``(...)``: ``mean_k max(0, margin - s_pos + s_neg_k)``.
    """
    pos, neg = scores[..., :1], scores[..., 1:]
    return F.relu(margin - pos + neg).mean(dim=-1)


def softplus_loss(scores: torch.Tensor, *, margin: float = 0.0) -> torch.Tensor:
    """Logistic loss (Trouillon et al. 2016): ``softplus(-s_pos) + mean_k softplus(s_neg_k)``.

    Args:
        scores: ``(..., 1 + K)``, positive at index 0.
        margin: unused; kept for a uniform signature.
    """
    del margin
    return F.softplus(-scores[..., 0]) + F.softplus(scores[..., 1:]).mean(dim=-1)


def softmax_cross_entropy(scores: torch.Tensor, *, temperature: float = 1.0) -> torch.Tensor:
    """Cross-entropy of the softmax over ``scores / temperature``, target the positive.

    With sampled negatives this is the sampled-softmax loss; over every
    training entity (``train.negatives: all``) it is the 1-vs-all loss of
    :mod:`textkg.training.one_vs_all`.

    Args:
        scores: ``(..., 1 + K)``, positive at index 0.
        temperature: ``τ > 0``.
    """
    return -torch.log_softmax(scores / temperature, dim=-1)[..., 0]


@dataclass(frozen=True)
class LossSpec:
    """A registered loss: the function, and the ``train`` config fields it takes as keywords."""

    fn: Callable[..., torch.Tensor]
    options: tuple[str, ...] = ()


#: in the order the CLI and the config errors list them (``margin, softplus, softmax``)
_REGISTRY: Registry[LossSpec] = Registry("loss", field="train.loss", sort=False)


def register_loss(
    name: str, fn: Callable[..., torch.Tensor], *, options: tuple[str, ...] = (), replace: bool = False
) -> LossSpec:
    """Make ``fn`` available as ``train.loss: name``.

    Args:
        name: The loss's name in configs and on the command line.
        fn: ``fn(scores, **options)`` → ``(...)`` per-example losses for ``(..., 1 + K)`` scores.
        options: ``train`` config fields passed to ``fn`` by keyword (each a field of
            :class:`~textkg.training.config.TrainConfig`).
        replace: Replace a loss already registered under ``name``.

    Raises:
        DuplicateNameError: ``name`` is taken and ``replace`` is false.
    """
    if not callable(fn):
        raise ConfigError(f"a loss must be callable, got {fn!r}", field="train.loss")
    return _REGISTRY.register(name, LossSpec(fn, tuple(options)), replace=replace)


register_loss("margin", margin_ranking, options=("margin",))
register_loss("softplus", softplus_loss)
register_loss("softmax", softmax_cross_entropy, options=("temperature",))


def list_losses() -> tuple[str, ...]:
    """The registered losses' names, in registration order."""
    return tuple(_REGISTRY.names())


def make_loss(train_config) -> LossFn:
    """The per-example loss over ``(…, 1 + K)`` scores that ``train_config`` names, with its options."""
    spec = _spec(train_config.loss)
    if not spec.options:
        return spec.fn
    return functools.partial(spec.fn, **{option: getattr(train_config, option) for option in spec.options})


def get_loss(name: str) -> Callable[..., torch.Tensor]:
    """Look a loss up by name; unknown names list the registered ones."""
    return _spec(name).fn


def _spec(name: str) -> LossSpec:
    if name not in _REGISTRY:
        choices = ", ".join(sorted(_REGISTRY.names()))
        raise ConfigError(f"unknown loss {name!r}; choose from {choices}", field="train.loss")
    return _REGISTRY.get(name)
