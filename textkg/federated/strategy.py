"""Row-aware FedAvg: a table row is averaged over the holders that changed it (FKGE's aligned entities).

Plain FedAvg averages whole tensors. A structural row that only one holder
trained (say, a disease only OMIM annotates) is then averaged with the other
holders' copies, which did not move: its update shrinks by that holder's
share of the weight every round. FKGE (Peng et al. 2021, "Differentially
private federated knowledge graphs embedding", CIKM) aggregates an entity's
embedding only over the graphs that hold it. :class:`RowAwareFedAvg` does the
same for every parameter with rows (2-D and up): row r of the new global
tensor is

    sum_k w_k 1[row r of holder k changed] theta_k[r] / sum_k w_k 1[changed],

and keeps the value it was sent when no holder changed it. A 1-D parameter,
and a row every holder changed, get plain FedAvg.

What it reveals: nothing the uploads did not already carry. The server could
compute the same changed-row masks from the uploaded values it gets under plain
FedAvg. Under DP every entry of every upload carries noise, so every row
"changed" and this is plain FedAvg.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict
from flwr.serverapp import Grid
from flwr.serverapp.strategy import FedAvg


class RowAwareFedAvg(FedAvg):
    """Flower's :class:`~flwr.serverapp.strategy.FedAvg` with per-row averaging over the holders that changed a row."""

    def configure_train(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        self._sent = {k: v.numpy() for k, v in arrays.items()}
        return super().configure_train(server_round, arrays, config, grid)

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        replies = list(replies)
        arrays, metrics = super().aggregate_train(server_round, replies)  # checks replies, plain FedAvg
        if arrays is None:
            return arrays, metrics
        valid = [m.content for m in replies if not m.has_error()]
        weights = np.array([_weight(r, self.weighted_by_key) for r in valid])
        uploads = [next(iter(r.array_records.values())) for r in valid]
        out = {}
        for key in arrays:
            sent = self._sent[key]
            if sent.ndim < 2:
                out[key] = arrays[key]
                continue
            stack = np.stack([u[key].numpy() for u in uploads])  # (K, rows, ...)
            changed = (stack != sent).reshape(len(uploads), sent.shape[0], -1).any(axis=2)  # (K, rows)
            w = weights[:, None] * changed  # (K, rows)
            total = w.sum(axis=0)  # (rows,)
            shape = (len(uploads), sent.shape[0]) + (1,) * (sent.ndim - 1)
            mean = (stack * w.reshape(shape)).sum(axis=0) / np.where(total > 0, total, 1).reshape(shape[1:])
            new = np.where((total > 0).reshape(shape[1:]), mean, sent).astype(sent.dtype)
            out[key] = Array(np.ascontiguousarray(new))
        return ArrayRecord(out), metrics


def _weight(content: RecordDict, key: str) -> float:
    """The FedAvg weight ``key`` of one reply's (first) metric record."""
    value = next(iter(content.metric_records.values()))[key]
    if not isinstance(value, (int, float)):
        raise ValueError(f"a reply's FedAvg weight {key!r} must be a number, got {value!r}")
    return float(value)
