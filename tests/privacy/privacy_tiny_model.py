"""A tiny model that reads two tables through gathered rows plus a linear layer.

Each example is ``(h, r, t, n)``: head, relation, tail and one corrupted tail.
Score ``s(h, r, t) = −||W e_h + b + w_r − W e_t||²``; loss
``softplus(−s(h,r,t)) + softplus(s(h,r,n))``. Rows read per example:
entity rows ``[h, t, n]`` (h == t or n == t repeats a row), relation row ``[r]``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

V_ENT, V_REL, DIM = 12, 3, 5


def triple_loss(params, rows, example):
    """Per-example loss: ``params`` dense dict, ``rows`` gathered rows of one example."""
    ent, rel = rows["entity"], rows["relation"]  # (3, d), (1, d)
    w, b = params["linear.weight"], params["linear.bias"]
    h, t, n = (ent[i] @ w.T + b for i in range(3))
    pos = -((h + rel[0] - t) ** 2).sum()
    neg = -((h + rel[0] - n) ** 2).sum()
    return F.softplus(-pos) + F.softplus(neg) + 0.0 * example.sum()


def plan(examples):
    """Rows each example reads: ``{table: LongTensor(B, m)}``."""
    return {"entity": examples[:, [0, 2, 3]], "relation": examples[:, [1]]}


def make_tiny():
    g = torch.Generator().manual_seed(0)
    tables = {"entity": torch.randn(V_ENT, DIM, generator=g), "relation": torch.randn(V_REL, DIM, generator=g)}
    dense = {
        "linear.weight": torch.randn(DIM, DIM, generator=g) * 0.5,
        "linear.bias": torch.randn(DIM, generator=g) * 0.1,
    }
    examples = torch.tensor(
        [
            [0, 0, 1, 2],
            [3, 1, 3, 4],  # head == tail
            [5, 2, 6, 6],  # negative == tail
            [7, 0, 7, 7],  # head == tail == negative
            [8, 1, 9, 10],
            [11, 2, 0, 11],  # negative == head
        ]
    )
    return tables, dense, examples


def oracle_grads(tables, dense, example):
    """One example at a time with ordinary autograd on the FULL tables."""
    t = {k: v.clone().requires_grad_(True) for k, v in tables.items()}
    d = {k: v.clone().requires_grad_(True) for k, v in dense.items()}
    rows = {k: t[k][idx] for k, idx in plan(example[None]).items()}
    rows = {k: v[0] for k, v in rows.items()}
    loss = triple_loss(d, rows, example)
    names = list(t) + list(d)
    grads = torch.autograd.grad(loss, [t[k] for k in t] + [d[k] for k in d])
    return dict(zip(names, grads, strict=True))
