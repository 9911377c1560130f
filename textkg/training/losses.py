"""Per-example losses over ``(…, 1 + K)`` scores (positive first).

Losses return one value per example (no reduction over the batch) so that
the DP trainer can clip per example; the ordinary trainer takes the mean.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
import torch.nn.functional as F

from textkg.errors import ConfigError

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


LOSSES: dict[str, Callable[..., torch.Tensor]] = {
    "margin": margin_ranking,
    "softplus": softplus_loss,
    "softmax": softmax_cross_entropy,
}


def make_loss(train_config) -> LossFn:
    """The per-example loss over ``(…, 1 + K)`` scores that ``train_config`` names, with its options."""
    loss = get_loss(train_config.loss)
    if train_config.loss == "margin":
        return functools.partial(loss, margin=train_config.margin)
    if train_config.loss == "softmax":
        return functools.partial(loss, temperature=train_config.temperature)
    return loss


def get_loss(name: str) -> Callable[..., torch.Tensor]:
    """Look a loss up by name; unknown names list the registered ones."""
    try:
        return LOSSES[name]
    except KeyError:
        raise ConfigError(
            f"unknown loss {name!r}; choose from {', '.join(sorted(LOSSES))}", field="train.loss"
        ) from None
