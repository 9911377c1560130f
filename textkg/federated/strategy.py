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

Top-k uploads (``--upload-top-k K``, :mod:`textkg.federated.topk`): with
``top_k_table`` set, each holder sends K rows of that table and their row
numbers; row r is then averaged over the holders that *uploaded* it (DP-Flames,
Hu et al. 2023, arXiv:2304.02932), with the same formula and 1[uploaded] in
place of 1[changed]. The other tensors are averaged as without top-k:
row-aware when ``rows_changed`` (``--aggregation row``), plain FedAvg otherwise.

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

from textkg.federated.topk import rows_key


class RowAwareFedAvg(FedAvg):
    """Flower's :class:`~flwr.serverapp.strategy.FedAvg` with per-row averaging over the holders that changed a row.

    Args:
        top_k_table: The table the holders upload as top-k rows (``None``: every upload is whole).
        rows_changed: Average the other tables' rows over the holders that changed them (``False``:
            plain FedAvg for every tensor but ``top_k_table``).
        **kwargs: Flower's ``FedAvg`` arguments.
    """

    def __init__(self, *, top_k_table: str | None = None, rows_changed: bool = True, **kwargs) -> None:
        super().__init__(**kwargs)
        self.top_k_table, self.rows_changed = top_k_table, rows_changed

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
            sent = self._sent.get(key)
            if sent is None:  # a top-k upload's row numbers: no parameter of the model
                continue
            if key == self.top_k_table:
                stack, uploaded = _scatter_top_k(sent, [(u[key].numpy(), u[rows_key(key)].numpy()) for u in uploads])
                out[key] = _row_mean(sent, stack, uploaded, weights)
            elif self.rows_changed and sent.ndim >= 2:
                stack = np.stack([u[key].numpy() for u in uploads])  # (K, rows, ...)
                changed = (stack != sent).reshape(len(uploads), sent.shape[0], -1).any(axis=2)  # (K, rows)
                out[key] = _row_mean(sent, stack, changed, weights)
            else:
                out[key] = arrays[key]
        return ArrayRecord(out), metrics


def _scatter_top_k(sent: np.ndarray, uploads: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """``(stack (K, rows, d), uploaded (K, rows))``: each holder's k rows placed at their row numbers."""
    stack = np.repeat(sent[None], len(uploads), axis=0)
    uploaded = np.zeros((len(uploads), sent.shape[0]), dtype=bool)
    for k, (values, rows) in enumerate(uploads):
        rows = rows.astype(np.int64)
        if rows.ndim != 1 or len(np.unique(rows)) != len(rows) or (rows < 0).any() or (rows >= sent.shape[0]).any():
            raise ValueError(f"a top-k upload's row numbers must be distinct rows of 0..{sent.shape[0] - 1}")
        stack[k, rows] = values
        uploaded[k, rows] = True
    return stack, uploaded


def _row_mean(sent: np.ndarray, stack: np.ndarray, mask: np.ndarray, weights: np.ndarray) -> Array:
    """Row r: Σ_k w_k mask[k, r] stack[k, r] / Σ_k w_k mask[k, r]; ``sent[r]`` where no mask is set.

    Args:
        sent: ``(rows, ...)`` what the server sent.
        stack: ``(K, rows, ...)`` the holders' tables.
        mask: ``(K, rows)`` which holder's row counts.
        weights: ``(K,)`` FedAvg weights.
    """
    w = weights[:, None] * mask  # (K, rows)
    total = w.sum(axis=0)  # (rows,)
    shape = (len(stack), sent.shape[0]) + (1,) * (sent.ndim - 1)
    mean = (stack * w.reshape(shape)).sum(axis=0) / np.where(total > 0, total, 1).reshape(shape[1:])
    new = np.where((total > 0).reshape(shape[1:]), mean, sent).astype(sent.dtype)
    return Array(np.ascontiguousarray(new))


def _weight(content: RecordDict, key: str) -> float:
    """The FedAvg weight ``key`` of one reply's (first) metric record."""
    value = next(iter(content.metric_records.values()))[key]
    if not isinstance(value, (int, float)):
        raise ValueError(f"a reply's FedAvg weight {key!r} must be a number, got {value!r}")
    return float(value)
