"""Top-k uploads: a holder sends only the K entity-table rows that changed most (DP-Flames' selection).

DP-Flames (Hu et al. 2023, "Quantifying and Defending against Privacy Threats on
Federated Knowledge Graph Embedding", WWW, arXiv:2304.02932) lets each client
upload only some of its entity embeddings, chosen by how much they changed in
the round. Here, with ``--upload-top-k K``, holder k sends

* every trained tensor but the structural table whole (relation vectors, the
  text projection, fusion weights: the small shared tensors), and
* of the structural table (:data:`STRUCTURAL_TABLE`, one row per training
  entity) only the K rows r with the largest ‖θ_k[r] − θ[r]‖₂, where θ is the
  global model the server sent and θ_k the holder's trained parameters, as
  ``structural.weight`` ``(K, d)`` and their row numbers ``structural.weight:rows``
  ``(K,)`` (ascending; ties go to the lower row).

The server averages each row over the holders that uploaded it and keeps the
value it sent for a row nobody uploaded
(:class:`textkg.federated.strategy.RowAwareFedAvg` with ``top_k_table``).

What the selection leaks:

* Under record-level DP (``--privacy full|confidential``) θ_k is the output of
  the holder's DP-SGD, and θ is public to the adversary (the server sent it).
  :func:`select_rows` reads only these two tensors, so the upload is a function
  of the holder's DP output and public inputs: post-processing, which costs no
  ε (Dwork & Roth 2014, "The Algorithmic Foundations of Differential Privacy",
  Prop. 2.1). K is a public flag, so the upload's shape is public too. A test
  checks that two neighbouring holders with the same parameters upload the same
  rows.
* Without DP the selection is a function of the clear parameters, which a full
  upload would send anyway: it reveals which rows changed most (rows the
  holder's statements touched), and nothing is claimed. DP-Flames' private
  selection (an exponential mechanism, e.g. one-shot Gumbel top-k, Durfee &
  Rogers 2019, arXiv:1905.04273) would protect only the choice of rows, while
  the K uploaded rows would still be in the clear, so it is not built: under
  DP it is not needed (post-processing), without DP it would not make the
  upload private.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from textkg.errors import ConfigError

#: The parameter that holds one row per training entity.
STRUCTURAL_TABLE = "structural.weight"
#: Suffix of the key that carries the uploaded row numbers of a top-k table.
ROWS_SUFFIX = ":rows"


def rows_key(table: str = STRUCTURAL_TABLE) -> str:
    """The upload's key for the row numbers of ``table``."""
    return table + ROWS_SUFFIX


def select_rows(sent: torch.Tensor, trained: torch.Tensor, k: int) -> torch.Tensor:
    """``(k,)`` ascending row numbers of the k rows that moved most from ``sent`` to ``trained``.

    A deterministic function of its two arguments and nothing else (post-processing of a DP
    ``trained``; Dwork & Roth 2014, Prop. 2.1). Ties in ‖trained[r] − sent[r]‖₂ go to the lower row.

    Args:
        sent: ``(rows, d)`` the table the server sent.
        trained: ``(rows, d)`` the holder's table after its local epochs.
        k: How many rows, ``1 <= k <= rows``.
    """
    if sent.shape != trained.shape or sent.ndim != 2:
        raise ValueError(f"expected two (rows, d) tables of one shape, got {tuple(sent.shape)}, {tuple(trained.shape)}")
    if not 1 <= k <= sent.shape[0]:
        raise ConfigError(f"must be in 1..{sent.shape[0]} (the table's rows), got {k}", field="upload-top-k")
    change = (trained.double() - sent.double()).norm(dim=1)
    order = torch.sort(-change, stable=True).indices  # descending change, lower row first on ties
    return order[:k].sort().values


def sparse_upload(
    sent: Mapping[str, torch.Tensor], trained: Mapping[str, torch.Tensor], k: int, *, table: str = STRUCTURAL_TABLE
) -> dict[str, torch.Tensor]:
    """What a holder uploads with ``--upload-top-k k``: every tensor but ``table`` whole, and k rows of it.

    Args:
        sent: The global parameters the server sent.
        trained: The holder's trained parameters (under DP: its DP output).
        k: Rows of ``table`` to upload.
        table: The entity table.

    Returns:
        ``trained`` with ``table`` replaced by ``(k, d)`` rows and ``table:rows`` ``(k,)`` int64.
    """
    if table not in trained or table not in sent:
        raise ConfigError(f"--upload-top-k needs a model with a structural table ({table!r})", field="upload-top-k")
    rows = select_rows(sent[table], trained[table], k)
    out = {name: value for name, value in trained.items() if name != table}
    out[table] = trained[table][rows].clone()
    out[rows_key(table)] = rows
    return out


def dense_upload(
    sent: Mapping[str, torch.Tensor], upload: Mapping[str, torch.Tensor], *, table: str = STRUCTURAL_TABLE
) -> dict[str, torch.Tensor]:
    """An upload as whole tensors: a top-k table's missing rows are the rows the server sent.

    What the server knows of the holder's table after a top-k upload. An upload without
    ``table:rows`` is returned as it is.
    """
    key = rows_key(table)
    if key not in upload:
        return dict(upload)
    full = sent[table].clone()
    full[upload[key]] = upload[table].to(full.dtype)
    out = {name: value for name, value in upload.items() if name != key}
    out[table] = full
    return out
