"""Exact per-example clipping for the 1-vs-all softmax loss, without per-example gradients.

Under the 1-vs-all loss (:func:`textkg.training.one_vs_all.loss.one_vs_all_loss`)
every example has a gradient on every entity of the pool, so the per-example
gradients of DP-SGD (Abadi et al. 2016, arXiv 1607.00133v2, Alg. 1) would be
``B × P × d`` for the structural table alone, and ``B × d × t`` for the text
projection. This module never forms them. It uses the two identities of
ghost clipping (Li, Tramèr, Liang & Hashimoto 2022, arXiv 2110.05679v6,
Sec. 4; Bu, Mao & Xu 2023, arXiv 2205.10683v3, Sec. 3):

1. **Norms from the structure of the gradient.** Let ``U (P, d)`` be the pool's
   entity vectors (after the fusion and the L2 normalisation), ``q_b = u_h + r``
   the tail query and ``q'_b = u_t − r`` the head query of example b. For
   TransE-L2, ``score = −‖q − u_j‖``, so with ``g_bj = (softmax_bj − y_bj)/τ``
   and ``A_bj = g_bj / ‖q_b − u_j‖`` (``A'`` for the head side)::

       ∂L_b/∂u_j = A_bj q_b + A'_bj q'_b − (A_bj + A'_bj) u_j + [j = h_b] γ_b + [j = t_b] γ'_b,
       γ_b = ∂L_b/∂q_b = A_b U − (Σ_j A_bj) q_b,   γ'_b likewise,   ∂L_b/∂r_b = γ_b − γ'_b.

   Through ``u_j = v_j / n_j`` the gradient w.r.t. the fused vectors ``V`` is
   ``Φ_b = F_b G_b^T + diag(c_b) U``: a rank-4 part (``F_b (P, 4)`` =
   ``[A_b/n, A'_b/n, e_h/n_h, e_t/n_t]``, ``G_b (d, 4) = [q_b, q'_b, γ_b, γ'_b]``)
   plus a row scaling of the shared ``U`` (``c_b (P,)``). Every parameter's
   part of ``‖g_b‖²`` follows from ``(F_b, G_b, c_b)`` with ``(B, P)``-sized
   work, except the projection weight, whose gradient is ``w_x X^T Φ_b``
   (``X (P, t)`` the frozen features)::

       ‖X^T Φ_b‖² = ‖(X^T F_b) G_b^T‖² + 2 Σ_j c_bj (X X^T F_b)_j · (U G_b)_j + c_b^T ((U U^T) ⊙ (X X^T)) c_b.

   The last term's ``(P, P)`` matrix is shared by the batch and built in row
   blocks (``"gram"``: ``P²(d + t + B)/2 + 6·B·P·t`` multiply-adds, ``P²(d + B)/2 + 4·B·P·t``
   when ``X X^T`` is cached, :func:`~textkg.training.one_vs_all.factors.feature_gram`: the head and
   tail columns of ``F_b`` are one-hot, so their products are gathered rows of ``X X^T``). ``"direct"``
   instead forms ``X^T Φ_b`` for a few examples at a time (``B·P·t·d``
   multiply-adds). ``"auto"`` takes the cheaper by that count. Memory: chunks
   of ``_CHUNK_ELEMENTS`` plus ``c`` for the whole batch, ``(B, P)`` (the size
   of the non-private step's score matrix), never ``B × P × d``.
   Both cost 5.7–9.8× the non-private step (docs/results/private_step.md,
   "Exact DP clipping for the 1-vs-all softmax"; its script retired, at commit 149006c).
2. **The clipped sum without a second pass** (book-keeping: Bu, Mao & Xu 2023,
   arXiv 2210.00038v2, Sec. 3.2). ``Σ_b κ_b g_b`` with ``κ_b = min(1, C/‖g_b‖)``
   is the gradient of ``Σ_b κ_b L_b`` with the ``κ_b`` held constant. Its part
   w.r.t. ``V`` is ``Ψ = Σ_b κ_b Φ_b``, which the kept factors give with
   ``(B, P)``-sized products; one backward of the pool's own graph ``θ → V``
   (no ``B``) and the relation rows' ``Σ_b κ_b (γ_b − γ'_b)`` finish it. The
   older way, one more ordinary backward of :func:`one_vs_all_loss`, stays
   behind ``book_keeping=False``. ``docs/results/private_step.md`` measures both
   on the private recipe.

Nothing is approximated; the norms are exact up to floating-point rounding
(the clipping coefficients use Opacus's ``C / (‖g‖ + 1e-6)``).

**Why per-example clipping is valid here.** Example b's loss depends on its
own triple, the public pool and the structural-dropout mask. The mask is
drawn ONCE per step for the pool (every example sees the same mask, as in
:func:`one_vs_all_loss`), from the step's generator (under DP the step's
secret stream), which is independent of the data. Adding or removing one example therefore changes no other
example's loss or gradient, which is all the sensitivity argument of DP-SGD
needs. :func:`clipped_gradient_sum` draws the mask once, restores the
generator and lets :func:`one_vs_all_loss` draw the same mask again.

**Sampled pools (``train.pool_size``) are not supported.** The sampled pool
of :func:`textkg.training.one_vs_all.loss.sample_pool` adds the batch's heads and
tails, so example b's candidates depend on the OTHER examples of the batch.
A private variant must give each example its own pool: ``k`` entities drawn
independently of the data, plus its own head and tail. The norms then need
``(B, k + 2)`` per-example candidate sets (``A_b`` lives on ``k + 2`` rows,
``U`` becomes a per-example gather ``(B, k + 2, d)``, and for small ``k`` the
``direct`` projection term, ``B·(k+2)·t·d``, is cheap), and the loss itself a
per-example gather instead of one shared pool; this module does not
implement it.

Supported models: TransE with ``p = 2``, fusion ``structural``, ``text`` or
``weighted``, pooled (frozen) text features with a linear projection, with or
without ``normalize_entities`` (``cpu-fused``, ``cpu-best``). The norm of
``F.normalize`` is assumed above its ``eps`` (1e-12).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from textkg.errors import ConfigError
from textkg.models.interactions import TransE
from textkg.privacy.clipping import clip_coefficients
from textkg.training.one_vs_all.factors import (
    Pool,
    build_factors,
    build_pool,
    build_pool_graph,
    gram_term,
    inner,
    present,
    projection_flops,
    projection_sq_norms,
    row_sq_norms,
    row_sum,
)
from textkg.training.one_vs_all.loss import on_model_device, one_vs_all_loss

__all__ = [
    "METHODS",
    "ClippedSum",
    "clipped_gradient_sum",
    "per_example_sq_norms",
    "private_refusal",
    "trained_parameters",
]

#: elements of the largest per-chunk temporary (~16 MB of float32)
_CHUNK_ELEMENTS = 1 << 22
#: the parameters whose per-example gradient this module knows (``named_parameters`` names)
_KNOWN = (
    "structural.weight",
    "relation_embeddings",
    "fusion.w_structural",
    "fusion.w_text",
    "text.projection.weight",
    "text.projection.bias",
)
_FUSIONS = ("structural", "text", "weighted")
METHODS = ("auto", "gram", "direct")


@dataclass(frozen=True)
class ClippedSum:
    """Result of :func:`clipped_gradient_sum`.

    Attributes:
        gradients: ``{name: (*param.shape)}`` ``Σ_b coef_b ∂L_b/∂param`` for every trained parameter.
        norms: ``(B,)`` each example's whole-gradient L2 norm.
        coefficients: ``(B,)`` ``min(1, C / (norm + 1e-6))``.
    """

    gradients: dict[str, torch.Tensor]
    norms: torch.Tensor
    coefficients: torch.Tensor


def trained_parameters(model) -> dict[str, torch.nn.Parameter]:
    """``{name: parameter}`` with ``requires_grad``, after checking the model is supported.

    Raises:
        ConfigError: An unsupported interaction, fusion, text module, or trained parameter.
    """
    inter = model.interaction
    if type(inter) is not TransE or inter.p != 2:
        raise ConfigError(f"exact 1-vs-all clipping supports TransE with p=2, got {inter!r}", field="model.interaction")
    if model.fusion.name not in _FUSIONS:
        raise ConfigError(
            f"exact 1-vs-all clipping supports fusions {', '.join(_FUSIONS)}, got {model.fusion.name!r}",
            field="model.fusion",
        )
    if model.text is not None and (model.text.module is not None or len(model.text.keys) != 1):
        raise ConfigError(
            "exact 1-vs-all clipping needs frozen pooled text features (no text module)", field="model.text_module"
        )
    trained = {name: p for name, p in model.named_parameters() if p.requires_grad}
    unknown = sorted(set(trained) - set(_KNOWN))
    if unknown:
        raise ConfigError(f"exact 1-vs-all clipping does not know the gradient of {', '.join(unknown)}", field="model")
    return trained


def private_refusal(config) -> str | None:
    """Why a private run (a :class:`textkg.training.config.RunConfig`) cannot train 1-vs-all; ``None`` if it can.

    Needs the whole pool (no ``pool_size``: see the module docstring), the default public
    vocabulary (with ``--public-entities`` a private statement's end may have no candidate row,
    and refusing it mid-run would depend on private data), and a model that
    :func:`trained_parameters` supports. Whether the mechanism trains 1-vs-all at all is the
    mechanism's to say (:attr:`textkg.training.mechanisms.Mechanism.one_vs_all_refusal`).
    """
    if config.train.pool_size:
        return "pool_size shares the batch's heads and tails between examples (per-example pools: not supported)"
    if config.data.public_entities is not None:
        return "needs the default public vocabulary (a private statement's end may be outside --public-entities)"
    model = config.model
    if model is None:
        return "needs an explicit model configuration"
    if model.interaction != "transe" or int(model.interaction_kwargs.get("p", 1)) != 2:
        return f"supports TransE with p=2, got {model.interaction} {dict(model.interaction_kwargs)}"
    if model.fusion not in _FUSIONS:
        return f"supports fusions {', '.join(_FUSIONS)}, got {model.fusion!r}"
    if model.text_module not in (None, "lstm-ae"):
        return f"needs frozen pooled text features, got text_module {model.text_module!r}"
    return None


@dataclass
class _Kept:
    """What :func:`_sq_norms` keeps of each chunk for the book-kept clipped sum (Bu et al. 2023)."""

    a1: list[torch.Tensor]
    a2: list[torch.Tensor]
    c: list[torch.Tensor]
    cols: list[torch.Tensor]  # (b, d, 4) [q, q', γ, γ']
    scales: list[torch.Tensor]  # (b, 2) [s_h, s_t]
    grad_r: list[torch.Tensor]  # (b, d) ∂L_b/∂r_b


def _validated(model, triples, entity_pool, positions, method):
    """``(trained, triples, entity_pool, heads, tails)`` on the model's device, after the checks."""
    if method not in METHODS:
        raise ConfigError(f"{method!r} is not one of {', '.join(METHODS)}", field="method")
    trained = trained_parameters(model)
    triples, entity_pool, positions = on_model_device(model, triples, entity_pool, positions)
    heads, tails = positions[triples[:, 0]], positions[triples[:, 2]]
    if bool((heads < 0).any() or (tails < 0).any()):
        raise ConfigError(
            "1-vs-all training needs every head and tail in the entity pool (training entities)", field="train.loss"
        )
    return trained, triples, entity_pool, heads, tails


def per_example_sq_norms(
    model,
    triples: torch.Tensor,
    *,
    entity_pool: torch.Tensor,
    positions: torch.Tensor,
    temperature: float = 1.0,
    label_smoothing: float = 0.0,
    generator: torch.Generator | None = None,
    method: str = "auto",
    gram: torch.Tensor | None = None,
) -> dict[str, torch.Tensor]:
    """Each example's squared gradient norm, per trained parameter, of :func:`one_vs_all_loss`.

    Args:
        model: a supported :class:`textkg.models.KGEModel` (see the module docstring),
            in the mode of the step (training mode applies structural dropout).
        triples: ``(B, 3)`` positives whose ends lie in ``entity_pool``.
        entity_pool, positions, temperature, label_smoothing: as for :func:`one_vs_all_loss`.
        generator: the step's dropout randomness (advanced as :func:`one_vs_all_loss` advances it).
        method: ``auto``, ``gram`` or ``direct`` for the projection weight (module docstring).
        gram: optional :func:`~textkg.training.one_vs_all.factors.feature_gram` of ``entity_pool`` (used by ``gram``).

    Returns:
        ``{name: (B,)}`` for every trained parameter; ``‖g_b‖² = Σ_name``.

    Raises:
        ConfigError: Unsupported model, unknown method, or a triple end outside the pool.
    """
    trained, triples, entity_pool, heads, tails = _validated(model, triples, entity_pool, positions, method)
    with torch.no_grad():
        pool = build_pool(model, entity_pool, generator)
        return _sq_norms(model, trained, triples, heads, tails, pool, temperature, label_smoothing, method, gram)[0]


def _sq_norms(
    model, trained, triples, heads, tails, pool: Pool, temperature, label_smoothing, method, gram, keep: bool = False
) -> tuple[dict[str, torch.Tensor], _Kept | None]:
    """:func:`per_example_sq_norms` on a built pool (no grad); ``keep``: also the chunks' :class:`_Kept`."""
    u = pool.vectors
    n, p_size, dim = len(triples), u.shape[0], u.shape[1]
    out = {name: u.new_zeros(n) for name in trained}
    kept = _Kept([], [], [], [], [], []) if keep else None
    if n == 0:
        return out, kept
    proj = "text.projection.weight" in trained
    t_dim = 0 if pool.features is None else pool.features.shape[1]
    if proj and method == "auto":
        flops = projection_flops(n, p_size, t_dim, dim, cached=gram is not None)
        method = min(flops, key=lambda k: flops[k])
    width = 8 + (dim + t_dim if proj and method == "direct" else 0)
    chunk = max(1, _CHUNK_ELEMENTS // (p_size * width))
    keep_all = (proj and method == "gram") or kept is not None
    c_all = u.new_empty((n, p_size) if keep_all else (0, p_size))  # c of every example, filled chunk by chunk
    relations = model.relation_embeddings.detach()[triples[:, 1]]
    for s in range(0, n, chunk):
        sl = slice(s, s + chunk)
        f, grad_r = build_factors(model, pool, heads[sl], tails[sl], relations[sl], temperature, label_smoothing)
        if "relation_embeddings" in trained:
            out["relation_embeddings"][sl] = grad_r.square().sum(1)
        if "fusion.w_structural" in trained:
            out["fusion.w_structural"][sl] = inner(f, u, present(pool.structural)).square()
        if "fusion.w_text" in trained:
            out["fusion.w_text"][sl] = inner(f, u, present(pool.text)).square()
        if "structural.weight" in trained:
            out["structural.weight"][sl] = pool.w_structural**2 * row_sq_norms(f, u, present(pool.rows))
        if "text.projection.bias" in trained:
            out["text.projection.bias"][sl] = pool.w_text**2 * row_sum(f, u).square().sum(1)
        if proj:
            out["text.projection.weight"][sl] = pool.w_text**2 * projection_sq_norms(
                f, u, present(pool.features), method, gram
            )
        if keep_all:
            c_all[sl] = f.c
        if kept is not None:
            kept.a1.append(f.a1)
            kept.a2.append(f.a2)
            kept.cols.append(torch.stack(f.columns(), -1))
            kept.scales.append(torch.stack([f.s_h, f.s_t], -1))
            kept.grad_r.append(grad_r)
    if proj and method == "gram":
        out["text.projection.weight"] += pool.w_text**2 * gram_term(
            c_all, u, present(pool.features), gram, chunk_elements=_CHUNK_ELEMENTS
        )
    if kept is not None:
        kept.c = list(c_all.split(chunk))
    return out, kept


def _book_kept_sum(
    model, trained, triples, heads, tails, pool: Pool, fused: torch.Tensor, kept: _Kept, coef: torch.Tensor
) -> dict[str, torch.Tensor]:
    """``Σ_b coef_b ∂L_b/∂θ`` from the kept factors: book-keeping (Bu, Mao & Xu 2023, arXiv 2210.00038v2,
    Sec. 3.2, "BK"), no second forward pass.

    ``Ψ = Σ_b coef_b Φ_b = (coef ⊙ A/n)^T Q + (coef ⊙ A'/n)^T Q' + (c^T coef) ⊙ U + heads/tails' γ rows``
    (``(P, d)``, the gradient of ``Σ_b coef_b L_b`` w.r.t. the fused vectors ``V``; module docstring),
    then one backward of the pool's own graph ``θ → V`` with ``Ψ`` (``P·t·d``, no ``B``), and
    ``Σ_b coef_b ∂L_b/∂r_b`` added into the relation rows.
    """
    u = pool.vectors
    psi = torch.zeros_like(u)
    weight_c = u.new_zeros(u.shape[0])
    s = 0
    for a1, a2, c, cols, scales in zip(kept.a1, kept.a2, kept.c, kept.cols, kept.scales, strict=True):
        k = coef[s : s + len(a1)].to(u.dtype)
        sl = slice(s, s + len(a1))
        psi += (a1 * k[:, None]).T @ cols[..., 0] + (a2 * k[:, None]).T @ cols[..., 1]
        psi.index_add_(0, heads[sl], (k * scales[:, 0])[:, None] * cols[..., 2])
        psi.index_add_(0, tails[sl], (k * scales[:, 1])[:, None] * cols[..., 3])
        weight_c += k @ c
        s += len(a1)
    psi += weight_c[:, None] * u
    names = [name for name in trained if name != "relation_embeddings"]
    grads: Sequence[torch.Tensor | None] = [None] * len(names)
    if names and fused.requires_grad:
        grads = torch.autograd.grad(fused, [trained[k] for k in names], grad_outputs=psi, allow_unused=True)
    out = {k: torch.zeros_like(p) for k, p in trained.items()}
    out.update({k: g for k, g in zip(names, grads, strict=True) if g is not None})
    if "relation_embeddings" in trained and kept.grad_r:
        rel = trained["relation_embeddings"]
        grad_r = torch.cat(kept.grad_r) * coef.to(u.dtype)[:, None]
        out["relation_embeddings"] = torch.zeros_like(rel).index_add_(0, triples[:, 1], grad_r.to(rel.dtype))
    return {k: out[k] for k in trained}


def clipped_gradient_sum(
    model,
    triples: torch.Tensor,
    *,
    entity_pool: torch.Tensor,
    positions: torch.Tensor,
    max_grad_norm: float,
    temperature: float = 1.0,
    label_smoothing: float = 0.0,
    generator: torch.Generator | None = None,
    method: str = "auto",
    gram: torch.Tensor | None = None,
    book_keeping: bool = True,
) -> ClippedSum:
    """``Σ_b min(1, C/‖g_b‖) g_b`` of the 1-vs-all loss, exactly.

    The norms come from :func:`per_example_sq_norms`. The sum is the gradient
    of ``Σ_b coef_b · L_b`` (coefficients constant):

    - ``book_keeping=True`` (the default): from the factors the norms already
      computed (Bu, Mao & Xu 2023, arXiv 2210.00038v2, Sec. 3.2): ``Ψ (P, d)``
      from ``(B, P)`` products, then one backward of the pool's graph alone
      (:func:`_book_kept_sum`). One pass over the batch; keeps three ``(B, P)``
      matrices (``A/n``, ``A'/n``, ``c``) until the coefficients are known.
    - ``book_keeping=False``: one more backward of :func:`one_vs_all_loss` with
      the same dropout mask (the generator is restored in between).

    Either way the generator ends where one :func:`one_vs_all_loss` leaves it.

    Args:
        max_grad_norm: C > 0.
        book_keeping: see above.
        Others: as for :func:`per_example_sq_norms`.

    Returns:
        :class:`ClippedSum` (no noise, no averaging: the caller's mechanism adds them).
    """
    irreflexive = getattr(model, "irreflexive", None)
    if irreflexive is not None and bool(irreflexive.any()):
        # the norms below are of the unmasked loss: a masked loss would have other gradients
        raise ConfigError("model.irreflexive must be 'none' for exact DP clipping", field="model.irreflexive")
    if book_keeping:
        trained, triples_d, pool_d, heads, tails = _validated(model, triples, entity_pool, positions, method)
        with torch.enable_grad():
            pool, fused = build_pool_graph(model, pool_d, generator)
        with torch.no_grad():
            sq, kept = _sq_norms(
                model, trained, triples_d, heads, tails, pool, temperature, label_smoothing, method, gram, keep=True
            )
            norms = torch.stack(list(sq.values())).sum(0).clamp_min(0).sqrt()
            coef = clip_coefficients(norms, max_grad_norm=max_grad_norm)
            assert kept is not None
            out = _book_kept_sum(model, trained, triples_d, heads, tails, pool, fused, kept, coef)
        return ClippedSum(gradients=out, norms=norms, coefficients=coef)
    state = generator.get_state() if generator is not None else None
    sq = per_example_sq_norms(
        model,
        triples,
        entity_pool=entity_pool,
        positions=positions,
        temperature=temperature,
        label_smoothing=label_smoothing,
        generator=generator,
        method=method,
        gram=gram,
    )
    norms = torch.stack(list(sq.values())).sum(0).clamp_min(0).sqrt()
    coef = clip_coefficients(norms, max_grad_norm=max_grad_norm)
    if generator is not None and state is not None:
        generator.set_state(state)
    trained = trained_parameters(model)
    with torch.enable_grad():
        losses = one_vs_all_loss(
            model,
            triples,
            entity_pool=entity_pool,
            positions=positions,
            temperature=temperature,
            label_smoothing=label_smoothing,
            generator=generator,
        )
        grads: Sequence[torch.Tensor | None]
        if len(triples) == 0:
            grads = [None] * len(trained)
        else:
            total = (coef.detach().to(losses.dtype) * losses).sum()
            grads = torch.autograd.grad(total, list(trained.values()), allow_unused=True)
    out = {name: torch.zeros_like(p) if g is None else g for (name, p), g in zip(trained.items(), grads, strict=True)}
    return ClippedSum(gradients=out, norms=norms, coefficients=coef)
