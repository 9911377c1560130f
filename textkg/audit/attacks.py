"""Membership-inference attacks on a released KG model (one registry).

An attack sees what a user of the released run sees — the trained model
(``best_model.pt``), its configuration and the public graph — and the
candidate statements. It returns one score per candidate, **higher = "more
likely a member"** (see :mod:`textkg.audit.stats`).

* ``score``: the model's plausibility score of the statement.
* ``loss``: minus the training loss of the statement against a fixed, seeded
  set of corruptions (the same draw for every candidate, whatever its
  membership): members were fitted, so their loss is lower.
* ``rank``: the mean reciprocal filtered rank of the statement's tail and
  head among all entities (:func:`textkg.evaluation.compute_ranks`): members
  rank higher (lower rank).

Register a new attack with :func:`register_attack`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from textkg.registry import Registry

if TYPE_CHECKING:  # torch is imported where it is used: the CLI parser lists attacks cheaply
    import torch

#: ``(predictor, triples (n, 3), *, seed, batch_size) -> scores (n,)``, higher = member.
AttackFn = Callable[..., "torch.Tensor"]

_ATTACKS: Registry[AttackFn] = Registry("attack")


def register_attack(name: str, fn: AttackFn, *, replace: bool = False) -> None:
    """Make an attack available by name; a taken name raises
    (:class:`textkg.registry.DuplicateNameError`) unless ``replace=True``."""
    _ATTACKS.register(name, fn, replace=replace)


def list_attacks() -> tuple[str, ...]:
    """Registered attack names, sorted."""
    return tuple(_ATTACKS.names())


def get_attack(name: str | AttackFn) -> AttackFn:
    """An attack by name, or a callable passed through."""
    if callable(name):
        return name
    return _ATTACKS.get(name)


def _batches(n: int, batch_size: int):
    for start in range(0, n, batch_size):
        yield slice(start, min(n, start + batch_size))


def score_attack(predictor, triples: torch.Tensor, *, seed: int = 0, batch_size: int = 1024) -> torch.Tensor:
    """``(n,)`` plausibility scores ``model(triples)``."""
    import torch

    del seed
    model = predictor.model
    model.eval()
    with torch.no_grad():
        return torch.cat([model(triples[s]).reshape(-1) for s in _batches(len(triples), batch_size)])


def loss_attack(predictor, triples: torch.Tensor, *, seed: int = 0, batch_size: int = 1024) -> torch.Tensor:
    """``(n,)`` minus the per-example training loss against seeded corruptions.

    The corruptions are drawn exactly as in sampled training (``num_negatives``
    per statement, uniformly from the training entities; also for a model
    trained with ``negatives: all``), from a generator seeded
    with ``seed``, for all candidates at once.
    """
    import torch

    from textkg.training.losses import make_loss
    from textkg.training.negatives import corrupt

    cfg = predictor.config.train
    loss = make_loss(cfg)
    g = torch.Generator().manual_seed(seed + 15485863)
    batch = corrupt(
        triples, num_negatives=cfg.num_negatives, entity_pool=predictor.prepared.split.train_entities, generator=g
    )
    model = predictor.model
    model.eval()
    with torch.no_grad():
        losses = [loss(model(batch[s])) for s in _batches(len(batch), batch_size)]
    return -torch.cat(losses).reshape(-1)


def rank_attack(predictor, triples: torch.Tensor, *, seed: int = 0, batch_size: int = 256) -> torch.Tensor:
    """``(n,)`` mean of the reciprocal filtered tail and head ranks among all entities."""
    import torch

    from textkg.evaluation import compute_ranks

    del seed
    kg = predictor.prepared.kg
    model = predictor.model
    model.eval()
    with torch.no_grad():
        ranks = compute_ranks(
            model,
            triples,
            filter_index=predictor.prepared.filter_index,
            candidates=None,
            num_entities=kg.num_entities,
            batch_size=batch_size,
        )
    # compute_ranks ranks both directions unless told otherwise
    assert ranks.tail_ranks is not None and ranks.head_ranks is not None
    return 0.5 * (1.0 / ranks.tail_ranks.double() + 1.0 / ranks.head_ranks.double())


register_attack("score", score_attack)
register_attack("loss", loss_attack)
register_attack("rank", rank_attack)
