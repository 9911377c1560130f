"""Per-example clipping for dense and row-sparse (embedding-table) gradients.

Two gradient formats, both with a leading example dimension B:

- dense: ``{name: Tensor(B, *param_shape)}``;
- row-sparse: ``{table: (indices LongTensor(B, M), grads Tensor(B, M, d))}``:
  example b read row ``indices[b, m]`` of the ``(V, d)`` table and
  ``grads[b, m]`` is the gradient w.r.t. that read. An example may read the
  same row several times (head == tail, a negative equal to the positive);
  its gradient for that row is the SUM over the reads, so reads are coalesced
  per example before norms are taken.

The norm of example b is the exact L2 norm of its whole gradient over every
parameter (dense and tables together), as DP-SGD requires (Abadi et al. 2016,
arXiv 1607.00133v2, Alg. 1).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

DenseGrads = Mapping[str, torch.Tensor]
RowGrads = Mapping[str, tuple[torch.Tensor, torch.Tensor]]


def batch_size_of(dense_grads: DenseGrads, row_grads: RowGrads) -> int:
    """The common leading dimension B of every gradient (0 if there are none).

    Raises:
        ValueError: the entries disagree on B, or a row entry is malformed.
    """
    sizes = {name: g.shape[0] for name, g in dense_grads.items()}
    for name, (idx, g) in row_grads.items():
        if idx.dim() != 2 or g.dim() != 3 or idx.shape != g.shape[:2]:
            raise ValueError(
                f"row gradients of {name!r} must be indices (B, M) and grads (B, M, d), "
                f"got {tuple(idx.shape)} and {tuple(g.shape)}"
            )
        sizes[name] = idx.shape[0]
    if len(set(sizes.values())) > 1:
        raise ValueError(f"per-example gradients disagree on the batch size: {sizes}")
    return next(iter(sizes.values()), 0)


def coalesce_rows(indices: torch.Tensor, grads: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Sum each example's gradient over repeated reads of the same row.

    Args:
        indices: ``(B, M)`` rows read by each example.
        grads: ``(B, M, d)`` gradients of those reads.

    Returns:
        ``(example, row, summed)``: ``(U,)`` example ids, ``(U,)`` row ids and
        ``(U, d)`` summed gradients, one entry per distinct (example, row).
    """
    b, m = indices.shape
    d = grads.shape[-1]
    if b * m == 0:
        empty = indices.new_zeros(0)
        return empty, empty, grads.new_zeros(0, d)
    num_rows = int(indices.max()) + 1
    example = torch.arange(b, device=indices.device).unsqueeze(1).expand(b, m)
    key = (example * num_rows + indices).reshape(-1)
    unique, inverse = torch.unique(key, return_inverse=True)
    summed = grads.new_zeros(unique.shape[0], d).index_add_(0, inverse, grads.reshape(-1, d))
    return unique // num_rows, unique % num_rows, summed


def _row_sq_norms(indices: torch.Tensor, grads: torch.Tensor) -> torch.Tensor:
    """``(B,)`` squared norms of each example's coalesced row gradient.

    Equal to ``index_add(example, ||summed||²)`` over :func:`coalesce_rows`,
    but only the reads that share their row with another read of the same
    example are coalesced (a per-example sort finds them); every other read's
    gradient is already that row's whole gradient.
    """
    b, m = indices.shape
    if b * m == 0:
        return grads.new_zeros(b)
    sq = torch.linalg.vector_norm(grads, dim=-1).square()  # (B, M), one pass over the grads
    if m == 1:
        total: torch.Tensor = sq.sum(dim=1)
        return total
    ordered, order = indices.sort(dim=1)
    same = ordered[:, 1:] == ordered[:, :-1]  # (B, M - 1): equal neighbours in sorted order
    if not bool(same.any()):
        total = sq.sum(dim=1)
        return total
    repeated_sorted = torch.zeros_like(ordered, dtype=torch.bool)
    repeated_sorted[:, 1:] |= same
    repeated_sorted[:, :-1] |= same
    repeated = torch.zeros_like(repeated_sorted).scatter_(1, order, repeated_sorted)
    out = sq.masked_fill(repeated, 0.0).sum(dim=1)
    example, position = repeated.nonzero(as_tuple=True)
    rows = indices[example, position]
    key = example * (int(rows.max()) + 1) + rows
    unique, inverse = torch.unique(key, return_inverse=True)
    summed = grads.new_zeros(unique.shape[0], grads.shape[-1]).index_add_(0, inverse, grads[example, position])
    owner = torch.zeros_like(unique).index_copy_(0, inverse, example)
    result: torch.Tensor = out.index_add_(0, owner, torch.linalg.vector_norm(summed, dim=-1).square())
    return result


def per_example_norms(dense_grads: DenseGrads, row_grads: RowGrads) -> torch.Tensor:
    """L2 norm of each example's whole gradient, ``(B,)``.

    Dense entries contribute ``||g_b||²``; table entries contribute the squared
    norms of the example's coalesced rows (:func:`coalesce_rows`: reads of the
    same row by the same example are summed first).
    """
    b = batch_size_of(dense_grads, row_grads)
    dtypes = [g.dtype for g in dense_grads.values()] + [g.dtype for _, g in row_grads.values()]
    devices = [g.device for g in dense_grads.values()] + [g.device for _, g in row_grads.values()]
    sq = torch.zeros(b, dtype=dtypes[0] if dtypes else torch.float32, device=devices[0] if devices else None)
    if b == 0:
        return sq
    for g in dense_grads.values():
        sq += torch.linalg.vector_norm(g.reshape(b, -1), dim=1).square().to(sq.dtype)
    for idx, g in row_grads.values():
        sq += _row_sq_norms(idx, g).to(sq.dtype)
    return sq.sqrt()


def clip_coefficients(norms: torch.Tensor, *, max_grad_norm: float) -> torch.Tensor:
    """``min(1, C / (norm + 1e-6))`` per example, ``(B,)`` (Opacus's convention)."""
    if not max_grad_norm > 0:
        raise ValueError(f"max_grad_norm must be > 0, got {max_grad_norm}")
    return (max_grad_norm / (norms + 1e-6)).clamp(max=1.0)


def aggregate_clipped(
    dense_grads: DenseGrads, row_grads: RowGrads, coefficients: torch.Tensor, table_sizes: Mapping[str, int]
) -> dict[str, torch.Tensor]:
    """Sum of the clipped per-example gradients, one dense tensor per parameter.

    The plain reference form: :class:`textkg.privacy.dp_sgd.DPSGDStep` computes the
    same sum fused with the noise (in chunks); tests check one against the other.

    Args:
        dense_grads: ``{name: (B, *shape)}``.
        row_grads: ``{table: (indices (B, M), grads (B, M, d))}``.
        coefficients: ``(B,)`` from :func:`clip_coefficients`.
        table_sizes: ``{table: V}`` for every table in ``row_grads``.

    Returns:
        ``{name: (*shape)}`` for dense parameters and ``{table: (V, d)}`` for
        tables (repeated reads summed by ``index_add``).
    """
    missing = set(row_grads) ^ set(table_sizes)
    if missing:
        raise ValueError(f"table_sizes and row_grads must name the same tables; mismatch: {sorted(missing)}")
    out: dict[str, torch.Tensor] = {}
    for name, g in dense_grads.items():
        c = coefficients.to(g.dtype).reshape(-1, *([1] * (g.dim() - 1)))
        out[name] = (c * g).sum(dim=0)
    for name, (idx, g) in row_grads.items():
        d = g.shape[-1]
        scaled = g * coefficients.to(g.dtype)[:, None, None]
        out[name] = g.new_zeros(int(table_sizes[name]), d).index_add_(0, idx.reshape(-1), scaled.reshape(-1, d))
    return out
