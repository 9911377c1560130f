"""The per-example gradient factors of the 1-vs-all loss, and the squared norms built from them.

The building blocks of :mod:`textkg.training.one_vs_all.clipping`, whose
module docstring derives every formula (ghost clipping: Li, Tramèr, Liang &
Hashimoto 2022, arXiv 2110.05679v6, Sec. 4; Bu, Mao & Xu 2023, arXiv
2205.10683v3, Sec. 3). Example b's gradient w.r.t. the pool's fused vectors
``V (P, d)`` is ``Φ_b = F_b G_b^T + diag(c_b) U``; :class:`Factors` holds
``(F_b, G_b, c_b)`` for a chunk of examples, and each ``_*norms`` function
turns them into one parameter's part of ``‖g_b‖²`` without forming ``Φ_b``.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from textkg.models.kge import KGEModel

#: the chunk size of KGEModel.entity_matrix: the dropout mask is drawn in chunks of this many entities
ENTITY_CHUNK = inspect.signature(KGEModel.entity_matrix).parameters["batch_size"].default


@dataclass(frozen=True)
class Pool:
    """The step's shared pool quantities (no grad)."""

    rows: torch.Tensor | None  # (P,) structural rows read (after dropout)
    structural: torch.Tensor | None  # (P, d) weight[rows]
    text: torch.Tensor | None  # (P, d) projected text vectors
    features: torch.Tensor | None  # (P, t) frozen features
    vectors: torch.Tensor  # (P, d) U, the vectors scored
    norms: torch.Tensor  # (P,) ‖v_j‖ (ones without normalisation)
    w_structural: float  # ∂v/∂structural (1 for fusion 'structural')
    w_text: float  # ∂v/∂text (1 for fusion 'text')


def present(x: torch.Tensor | None) -> torch.Tensor:
    """A pool part that must exist because the parameter it feeds is trained."""
    assert x is not None, "a trained parameter's pool part is missing"  # trained_parameters() guarantees it
    return x


def build_pool(model, entity_pool: torch.Tensor, generator: torch.Generator | None) -> Pool:
    """Pool vectors as :meth:`KGEModel.entity_matrix` computes them, drawing the same dropout mask."""
    with torch.no_grad():
        return build_pool_graph(model, entity_pool, generator)[0]


def build_pool_graph(model, entity_pool: torch.Tensor, generator: torch.Generator | None) -> tuple[Pool, torch.Tensor]:
    """:func:`build_pool` (detached) and the fused vectors ``V (P, d)`` with their graph (when grad is enabled)."""
    rows = structural = text = features = None
    if model.structural is not None:  # the mask is drawn chunk by chunk, as entity_matrix draws it
        rows = torch.cat(
            [
                model.structural.rows(entity_pool[i : i + ENTITY_CHUNK], generator=generator, training=model.training)
                for i in range(0, len(entity_pool), ENTITY_CHUNK)
            ]
        )
        structural = model.structural.weight[rows]
    if model.text is not None:
        text = model.text(entity_pool)
        raw = getattr(model.text, f"text_{model.text.keys[0]}")
        features = raw[entity_pool].to(model.text.projection.weight.dtype)
    fused = model.fusion(structural, text)
    if model.normalize_entities:
        norms = torch.linalg.vector_norm(fused, dim=-1).clamp_min(1e-12)
    else:
        norms = torch.ones(fused.shape[0], dtype=fused.dtype, device=fused.device)
    name = model.fusion.name
    w_s = float(model.fusion.w_structural.detach()) if name == "weighted" else 1.0
    w_x = float(model.fusion.w_text.detach()) if name == "weighted" else 1.0
    fused_d, norms = fused.detach(), norms.detach()
    structural = None if structural is None else structural.detach()
    text = None if text is None else text.detach()
    return Pool(rows, structural, text, features, fused_d / norms[:, None], norms, w_s, w_x), fused


@dataclass(frozen=True)
class Factors:
    """``∂L_b/∂V = a1_b q_b^T + a2_b q'_b^T + s_h e_h γ_b^T + s_t e_t γ'_b^T + diag(c_b) U`` for a chunk of b examples.

    ``a1, a2, c, uq, uq_head`` are ``(b, P)`` (``uq = q U^T``); ``q, q_head, gamma, gamma_head`` are
    ``(b, d)``; ``heads, tails`` ``(b,)`` pool positions with scales ``s_h, s_t`` ``(b,)``.
    """

    a1: torch.Tensor
    a2: torch.Tensor
    c: torch.Tensor
    q: torch.Tensor
    q_head: torch.Tensor
    gamma: torch.Tensor
    gamma_head: torch.Tensor
    heads: torch.Tensor
    tails: torch.Tensor
    s_h: torch.Tensor
    s_t: torch.Tensor
    uq: torch.Tensor
    uq_head: torch.Tensor

    def columns(self) -> tuple[torch.Tensor, ...]:
        """The rank-4 part's ``d``-side vectors, each ``(b, d)``."""
        return self.q, self.q_head, self.gamma, self.gamma_head


def build_factors(
    model, pool: Pool, heads, tails, relations, temperature: float, label_smoothing: float
) -> tuple[Factors, torch.Tensor]:
    """The chunk's :class:`Factors` and ``∂L_b/∂r_b = γ_b − γ'_b`` ``(b, d)`` (module docstring)."""
    u, n = pool.vectors, pool.norms
    p_size = u.shape[0]
    h, t = u[heads], u[tails]
    q, q_head = h + relations, t - relations
    sides = []
    for query, target, scores in (
        (q, tails, model.interaction.score_tails(h, relations, u)),
        (q_head, heads, model.interaction.score_heads(relations, t, u)),
    ):
        y = F.one_hot(target, p_size).to(u.dtype) * (1.0 - label_smoothing) + label_smoothing / p_size
        g = (torch.softmax(scores / temperature, dim=-1) - y) / temperature  # ∂L/∂score
        dist = -scores
        a = torch.where(dist > 0, g / dist.clamp_min(torch.finfo(u.dtype).tiny), torch.zeros_like(g))
        sides.append((a, a @ u - a.sum(1, keepdim=True) * query))  # (A, γ = ∂L/∂query)
    (a, gamma), (a_head, gamma_head) = sides
    uq, uq_head = q @ u.T, q_head @ u.T
    rows = torch.arange(len(heads), device=heads.device)
    diag = -(a + a_head)  # ∂L/∂u_j = A_j q + A'_j q' + diag_j u_j + [j = h] γ + [j = t] γ'
    if model.normalize_entities:  # ∂L/∂v_j = (I − u_j u_j^T) ∂L/∂u_j / n_j: the part along u_j vanishes
        u_dot = a * uq + a_head * uq_head + diag * (u * u).sum(-1)[None]  # u_j · ∂L/∂u_j
        u_dot = u_dot.index_put((rows, heads), (h * gamma).sum(1), accumulate=True)
        u_dot = u_dot.index_put((rows, tails), (t * gamma_head).sum(1), accumulate=True)
        c, a1, a2 = (diag - u_dot) / n[None], a / n[None], a_head / n[None]
        s_h, s_t = 1.0 / n[heads], 1.0 / n[tails]
    else:
        c, a1, a2 = diag, a, a_head
        s_h = s_t = torch.ones(len(heads), dtype=u.dtype, device=u.device)
    fac = Factors(a1, a2, c, q, q_head, gamma, gamma_head, heads, tails, s_h, s_t, uq, uq_head)
    return fac, gamma - gamma_head


def dot(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return (x * y).sum(-1)


def inner(f: Factors, u: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """``(b,)`` ``⟨Φ_b, Z⟩_F`` for a shared ``Z (P, d)``."""
    return (
        dot(f.a1 @ z, f.q)
        + dot(f.a2 @ z, f.q_head)
        + f.s_h * dot(z[f.heads], f.gamma)
        + f.s_t * dot(z[f.tails], f.gamma_head)
        + f.c @ dot(u, z)
    )


def row_sum(f: Factors, u: torch.Tensor, cols: torch.Tensor | None = None) -> torch.Tensor:
    """``(b, d)`` ``Σ_{j ∈ cols} Φ_bj`` (all pool rows when ``cols`` is ``None``)."""
    if cols is None:
        return (
            f.a1.sum(1, keepdim=True) * f.q
            + f.a2.sum(1, keepdim=True) * f.q_head
            + f.s_h[:, None] * f.gamma
            + f.s_t[:, None] * f.gamma_head
            + f.c @ u
        )
    member = torch.zeros(u.shape[0], dtype=torch.bool, device=u.device)
    member[cols] = True
    return (
        f.a1[:, cols].sum(1, keepdim=True) * f.q
        + f.a2[:, cols].sum(1, keepdim=True) * f.q_head
        + (f.s_h * member[f.heads])[:, None] * f.gamma
        + (f.s_t * member[f.tails])[:, None] * f.gamma_head
        + f.c[:, cols] @ u[cols]
    )


def per_row_sq(f: Factors, u: torch.Tensor) -> torch.Tensor:
    """``(b, P)`` ``‖Φ_bj‖²`` of every pool row."""
    qq, hh, qh = dot(f.q, f.q)[:, None], dot(f.q_head, f.q_head)[:, None], dot(f.q, f.q_head)[:, None]
    out = (
        f.a1.square() * qq
        + f.a2.square() * hh
        + f.c.square() * dot(u, u)[None]
        + 2 * (f.a1 * f.a2 * qh + f.a1 * f.c * f.uq + f.a2 * f.c * f.uq_head)
    )
    rows = torch.arange(len(f.heads), device=f.heads.device)

    def dense_row(j):  # (b, d): the row's vector without the γ terms
        return f.a1[rows, j, None] * f.q + f.a2[rows, j, None] * f.q_head + f.c[rows, j, None] * u[j]

    # ‖D + s_h γ + s_t γ'‖² − ‖D‖² added at the head and tail rows (both at once when head == tail)
    at_h = 2 * f.s_h * dot(dense_row(f.heads), f.gamma) + f.s_h.square() * dot(f.gamma, f.gamma)
    at_t = (
        2 * f.s_t * dot(dense_row(f.tails), f.gamma_head)
        + f.s_t.square() * dot(f.gamma_head, f.gamma_head)
        + 2 * (f.heads == f.tails) * f.s_h * f.s_t * dot(f.gamma, f.gamma_head)
    )
    out = out.index_put((rows, f.heads), at_h, accumulate=True)
    return out.index_put((rows, f.tails), at_t, accumulate=True)


def row_sq_norms(f: Factors, u: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """``(b,)`` ``Σ_r ‖Σ_{j: rows_j = r} Φ_bj‖²``: the structural table's part (before ``w_s²``)."""
    values, inverse, counts = torch.unique(rows, return_inverse=True, return_counts=True)
    single = counts[inverse] == 1
    out = (per_row_sq(f, u) * single[None]).sum(1)
    for k in (counts > 1).nonzero().squeeze(1).tolist():  # the unseen row (read by every dropped entity)
        out = out + row_sum(f, u, (inverse == k).nonzero().squeeze(1)).square().sum(1)
    return out


def projection_flops(b: int, p: int, t: int, d: int, *, cached: bool = False) -> dict[str, float]:
    """Multiply-adds of the projection weight's norms by each method (``cached``: ``X X^T`` given)."""
    return {
        "direct": float(b) * p * t * d + 4.0 * b * p * d,
        "gram": 0.5 * p * p * (d + (0 if cached else t) + b) + (4.0 if cached else 6.0) * b * p * t + 2.0 * b * p * d,
    }


def feature_gram(model, entity_pool: torch.Tensor) -> torch.Tensor:
    """``(P, P)`` ``X X^T`` of the pool's frozen text features, for :func:`per_example_sq_norms`.

    Constant for a run (frozen features, fixed pool): a caller with ``P²``
    floats to spare computes it once and saves ``P²·t`` multiply-adds a step.
    """
    raw = getattr(model.text, f"text_{model.text.keys[0]}")
    with torch.no_grad():
        x = raw[entity_pool].to(model.text.projection.weight.dtype)
        return x @ x.T


def projection_sq_norms(
    f: Factors, u: torch.Tensor, x: torch.Tensor, method: str, gram: torch.Tensor | None = None
) -> torch.Tensor:
    """``(b,)`` ``‖X^T Φ_b‖²``; for ``gram`` without its ``(P, P)`` term (:func:`gram_term`).

    ``gram`` (``X X^T``, cached): the head and tail columns of ``F_b`` are one-hot, so every
    inner product with them is a gathered row of ``X X^T`` (``P`` multiply-adds per example)
    instead of a ``(P, t)`` product: ``4·B·P·t`` instead of ``6·B·P·t`` (the two dense columns
    ``A_b/n``, ``A'_b/n`` and the two ``c_b ⊙ U g_m`` still need ``X^T``).
    """
    b, (p, d) = len(f.heads), u.shape
    rows = torch.arange(b, device=f.heads.device)
    if method == "direct":
        phi = f.a1[..., None] * f.q[:, None] + f.a2[..., None] * f.q_head[:, None] + f.c[..., None] * u[None]
        phi = phi.index_put((rows, f.heads), f.s_h[:, None] * f.gamma, accumulate=True)
        phi = phi.index_put((rows, f.tails), f.s_t[:, None] * f.gamma_head, accumulate=True)
        return (x.T @ phi.transpose(0, 1).reshape(p, b * d)).square().reshape(-1, b, d).sum((0, 2))
    g = torch.stack(f.columns(), -1)  # (b, d, 4)
    ug = (f.uq, f.uq_head, f.gamma @ u.T, f.gamma_head @ u.T)  # (U G_b)[:, m], (b, P) each
    if gram is None:
        xf = torch.stack([f.a1 @ x, f.a2 @ x, f.s_h[:, None] * x[f.heads], f.s_t[:, None] * x[f.tails]], -1)
        first = ((xf.transpose(1, 2) @ xf) * (g.transpose(1, 2) @ g)).sum((1, 2))
        second = sum(dot((f.c * ug_m) @ x, xf[..., m]) for m, ug_m in enumerate(ug))
        return first + 2 * second
    kh, kt = gram[f.heads], gram[f.tails]  # (b, P): (X x_h)^T, (X x_t)^T
    # one (4b, P) @ (P, t) product: X^T A/n, X^T A'/n, X^T (c ⊙ U q), X^T (c ⊙ U q')
    x1, x2, y1, y2 = (torch.cat([f.a1, f.a2, f.c * ug[0], f.c * ug[1]]) @ x).split(b)
    k_hh, k_ht, k_tt = kh[rows, f.heads], kh[rows, f.tails], kt[rows, f.tails]
    # the (4, 4) Gram F_b^T X X^T F_b of the columns [A/n, A'/n, s_h e_h, s_t e_t]
    ff = torch.stack(
        [
            torch.stack([dot(x1, x1), dot(x1, x2), f.s_h * dot(f.a1, kh), f.s_t * dot(f.a1, kt)], -1),
            torch.stack([dot(x2, x1), dot(x2, x2), f.s_h * dot(f.a2, kh), f.s_t * dot(f.a2, kt)], -1),
            torch.stack([f.s_h * dot(f.a1, kh), f.s_h * dot(f.a2, kh), f.s_h**2 * k_hh, f.s_h * f.s_t * k_ht], -1),
            torch.stack([f.s_t * dot(f.a1, kt), f.s_t * dot(f.a2, kt), f.s_h * f.s_t * k_ht, f.s_t**2 * k_tt], -1),
        ],
        -2,
    )
    first = (ff * (g.transpose(1, 2) @ g)).sum((1, 2))
    second = dot(y1, x1) + dot(y2, x2) + f.s_h * dot(f.c * ug[2], kh) + f.s_t * dot(f.c * ug[3], kt)
    return first + 2 * second


def gram_term(
    c: torch.Tensor, u: torch.Tensor, x: torch.Tensor, gram: torch.Tensor | None, *, chunk_elements: int
) -> torch.Tensor:
    """``(B,)`` ``c_b^T H c_b``, ``H = (U U^T) ⊙ (X X^T)`` (``gram``: ``X X^T`` if cached).

    ``H`` is symmetric: only its upper block triangle is built, row block by
    row block (``blk × (P − s)``), and the blocks right of the diagonal count twice.
    """
    p = u.shape[0]
    block = max(1, chunk_elements // max(1, p))
    out = c.new_zeros(c.shape[0])
    for s in range(0, p, block):
        e = min(s + block, p)
        kx = x[s:e] @ x[s:].T if gram is None else gram[s:e, s:]
        h = (u[s:e] @ u[s:].T).mul_(kx)  # (blk, P − s), the block row of H right of the diagonal
        h[:, e - s :] *= 2
        # Σ_{j ∈ block} c_bj (H c_b)_j: the (B, blk) product, so the elementwise work is B·P in all
        out += (c[:, s:e] * (c[:, s:] @ h.T)).sum(1)
    return out
