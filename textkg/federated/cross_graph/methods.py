"""The exchange methods of a cross-graph federation (``exchange.method``), one registry.

An exchange method moves information from a sender's aligned rows to a receiver, and is a class
with:

* ``one_way``: whether the whole exchange is one message from the sender to the receiver (what
  ``--processes`` carries); an interactive method is run in process only;
* ``noise_multiplier(config)``: σ of the sender's release of its rows (what the summary reports);
* ``ledger(name, config, sigma, secret)``: the party's :class:`~textkg.federated.cross_graph.ledger.
  PartyLedger` (or a subclass), which composes every mechanism the method runs on the party's data;
* ``send(step, sender, receiver, ex)``: the transmitted object, with its privacy block, in the
  receiver's hands (interactive methods run their protocol here);
* ``translate(released, own)``: ``(n, d_receiver)`` the received rows in the receiver's space
  (post-processing at the receiver);
* ``mix_weight(receiver, rnd, ex)``: λ of the receiver's update ``(1 − λ)·own + λ·translated``.

Registered: ``procrustes`` (the Gaussian release and a Procrustes map, the default), ``ppat``
(FKGE's PPAT, :mod:`textkg.federated.cross_graph.ppat_exchange`) and ``average`` (``procrustes``'s
release; a spread-matched rotation and a running mean of the parties' rows,
:mod:`textkg.federated.cross_graph.average_exchange`). Classes are imported lazily, by
``"module:Class"``, so that the settings can list the names without importing the runners.
"""

from __future__ import annotations

import importlib
from typing import Any

from textkg.registry import Registry

_METHODS: Registry[str] = Registry("exchange method", field="method", sort=False)
for _name, _target in {
    "procrustes": "textkg.federated.cross_graph.runner:ProcrustesExchange",
    "ppat": "textkg.federated.cross_graph.ppat_exchange:PPATExchange",
    "average": "textkg.federated.cross_graph.average_exchange:AverageExchange",
}.items():
    _METHODS.register(_name, _target)


def register_exchange_method(name: str, target: str | type, *, replace: bool = False) -> None:
    """Make an exchange method available as ``exchange.method: name``.

    Args:
        name: A taken name raises (:class:`textkg.registry.DuplicateNameError`) unless ``replace``.
        target: The class, or ``"module:Class"`` for a lazy import.
        replace: Replace the class registered as ``name``.
    """
    _METHODS.register(
        name, target if isinstance(target, str) else f"{target.__module__}:{target.__qualname__}", replace=replace
    )


def list_exchange_methods() -> list[str]:
    """Names ``exchange.method`` accepts, in registration order."""
    return _METHODS.names()


def check_exchange_method(name: Any) -> None:
    """Raise :class:`~textkg.errors.ConfigError` (listing the registered names) if ``name`` is unknown."""
    _METHODS.get(name)


def get_exchange_method(name: str) -> Any:
    """An instance of the method registered as ``name``."""
    module, _, cls = _METHODS.get(name).partition(":")
    return getattr(importlib.import_module(module), cls)()
