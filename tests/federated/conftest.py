"""Shared pieces of the federated tests: the base command and a spy on what the server sends and gets."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

#: A small, fast federation on hpo-small (prefix of every ``textkg federate`` call in these tests).
BASE_ARGS = ("federate", "--dataset", "hpo-small", "--split", "inductive", "--model", "transe", "--dim", "16",
             "--valid-max-triples", "50", "--no-progress", "--batch-size", "1024")  # fmt: skip


@pytest.fixture
def federate_base() -> list[str]:
    return list(BASE_ARGS)


@pytest.fixture
def uploads(monkeypatch):
    """Record what the server sends (``sent``: each call of ``runner.trained_state``) and what every
    holder returns (``returned``: ``(parameters, metrics)`` per ``DataHolder.fit``)."""
    pytest.importorskip("flwr")
    from textkg.federated import runner

    seen = SimpleNamespace(sent=[], returned=[])
    fit, trained_state = runner.DataHolder.fit, runner.trained_state

    def spy_fit(self, arrays, epochs):
        new, metrics = fit(self, arrays, epochs)
        seen.returned.append(({k: v.clone() for k, v in new.items()}, dict(metrics)))
        return new, metrics

    def spy_state(model):
        seen.sent.append(trained_state(model))
        return trained_state(model)

    monkeypatch.setattr(runner.DataHolder, "fit", spy_fit)
    monkeypatch.setattr(runner, "trained_state", spy_state)
    return seen
