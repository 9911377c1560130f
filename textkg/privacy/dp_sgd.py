"""DP-SGD on tensors: per-example gradients, clip, sum, noise, average, account.

Abadi et al. 2016, "Deep Learning with Differential Privacy", arXiv
1607.00133v2, Algorithm 1, with Poisson sampling (Mironov et al. 2019) and
the sum divided by the EXPECTED batch size q·N: dividing by the realised size
would make the scale itself depend on the private sample.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch.func import grad, vmap

from textkg.privacy.clipping import DenseGrads, RowGrads, clip_coefficients, per_example_norms
from textkg.privacy.events import SampledGaussianEvent
from textkg.privacy.noise import gaussian_noise

#: entries of row gradients scaled per chunk in DPSGDStep (~2 MB of float32)
_CHUNK_ENTRIES = 1 << 19


def per_example_grads(
    loss_fn: Callable[..., torch.Tensor],
    params: Mapping[str, torch.Tensor],
    per_example_inputs: Sequence[Any],
    *,
    grad_inputs: Sequence[int] = (0,),
    chunk_size: int | None = None,
    randomness: str = "error",
) -> tuple[dict[str, torch.Tensor], tuple[Any, ...]]:
    """Per-example gradients with ``torch.func.vmap(torch.func.grad(...))``.

    ``loss_fn(params, *one_example_inputs) -> scalar`` sees ONE example: each
    element of ``per_example_inputs`` (a tensor or a pytree of tensors, e.g. a
    dict of gathered table rows) carries a leading batch dim B that vmap
    strips. Gradients are taken w.r.t. ``params`` (shared by all examples)
    and w.r.t. the inputs at positions ``grad_inputs``. Because every example
    gets its own gathered copy of the rows it reads, its gradient w.r.t. that
    copy is exactly its gradient w.r.t. those rows of the table.

    Args:
        loss_fn: per-example loss.
        params: ``{name: Tensor(*shape)}`` dense parameters (detached internally).
        per_example_inputs: tuple of inputs, each with leading dim B.
        grad_inputs: positions in ``per_example_inputs`` to differentiate.
        chunk_size: vmap chunk size (bounds memory), ``None`` for all at once.
        randomness: vmap's randomness mode (``"error"``, ``"different"``, ``"same"``).

    Returns:
        ``(param_grads, input_grads)``: ``param_grads[name]`` is ``(B, *shape)``;
        ``input_grads`` is a tuple aligned with ``grad_inputs``, each shaped like
        its input (same pytree structure, leading dim B).
    """
    inputs = tuple(per_example_inputs)
    grad_inputs = tuple(grad_inputs)
    if any(not 0 <= k < len(inputs) for k in grad_inputs):
        raise ValueError(f"grad_inputs {grad_inputs} out of range for {len(inputs)} inputs")
    detached = {k: v.detach() for k, v in params.items()}

    def loss_of(p: Mapping[str, torch.Tensor], diff: Sequence[Any], rest: Sequence[Any]) -> torch.Tensor:
        args = list(rest)
        for k, value in zip(grad_inputs, diff, strict=True):
            args[k] = value
        return loss_fn(p, *args)

    diff = tuple(inputs[k] for k in grad_inputs)
    rest = tuple(None if k in grad_inputs else x for k, x in enumerate(inputs))
    rest_dims = tuple(None if x is None else 0 for x in rest)
    compute = vmap(
        grad(loss_of, argnums=(0, 1)), in_dims=(None, 0, rest_dims), chunk_size=chunk_size, randomness=randomness
    )
    param_grads, input_grads = compute(detached, diff, rest)
    return dict(param_grads), tuple(input_grads)


def per_example_input_grads(
    batch_loss_fn: Callable[[Mapping[str, torch.Tensor]], torch.Tensor], inputs: Mapping[str, torch.Tensor]
) -> dict[str, torch.Tensor] | None:
    """Per-example gradients w.r.t. per-example inputs from ONE ordinary backward (no ``vmap``).

    ``batch_loss_fn(inputs) -> (B,)`` returns one loss per example, where
    example b's loss reads only ``inputs[k][b]`` (e.g. its own gathered copy
    of the table rows) and no parameter that needs a per-example gradient.
    Then ``∂(Σ_b L_b)/∂inputs[k][b] = ∂L_b/∂inputs[k][b]``: the gradient of the
    summed loss IS the stack of per-example gradients, at the cost of one
    batched backward. (With dense trainable parameters, which every example
    shares, use :func:`per_example_grads`.)

    Args:
        batch_loss_fn: batched per-example loss.
        inputs: ``{name: Tensor(B, ...)}`` (detached internally).

    Returns:
        ``{name: Tensor(B, ...)}`` shaped like ``inputs`` (zeros for an
        input the loss does not read), or ``None`` when ``batch_loss_fn`` did
        not return one loss per example (shape ``(B,)``).
    """
    leaves = {k: v.detach().requires_grad_(True) for k, v in inputs.items()}
    b = next(iter(leaves.values())).shape[0] if leaves else 0
    with torch.enable_grad():
        losses = batch_loss_fn(leaves)
    if losses.shape != (b,):
        return None
    if not losses.requires_grad:
        return {k: torch.zeros_like(v) for k, v in leaves.items()}
    grads = torch.autograd.grad(losses.sum(), list(leaves.values()), allow_unused=True)
    return {k: torch.zeros_like(v) if g is None else g for (k, v), g in zip(leaves.items(), grads, strict=True)}


def as_row_grads(
    indices: Mapping[str, torch.Tensor], grads: Mapping[str, torch.Tensor]
) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """Pair gathered-row gradients with the rows they came from.

    Args:
        indices: ``{table: LongTensor(B, ...)}`` rows each example gathered.
        grads: ``{table: Tensor(B, ..., d)}`` gradients w.r.t. those gathered rows.

    Returns:
        ``{table: (indices (B, M), grads (B, M, d))}`` for :class:`DPSGDStep`.
    """
    out: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
    for name, idx in indices.items():
        g = grads[name]
        b = idx.shape[0]
        out[name] = (idx.reshape(b, -1), g.reshape(b, -1, g.shape[-1]))
    return out


class DPSGDStep:
    """One DP-SGD aggregation: clip each example, sum, add noise, divide by q·N.

    Emits one :class:`textkg.privacy.events.SampledGaussianEvent` to ``accountant``
    per call (a step hook): the mechanism never computes ε itself.

    Args:
        noise_multiplier: σ >= 0.
        max_grad_norm: C > 0 (bound on each example's whole-gradient L2 norm).
        expected_batch_size: q·N > 0, the divisor of the noised sum.
        accountant: anything with ``.step(event)`` (e.g. ``RDPAccountant``), or ``None``.
        sample_rate: q of the Poisson sampling that produced the batch.
        generator: randomness for the noise.
    """

    def __init__(
        self,
        *,
        noise_multiplier: float,
        max_grad_norm: float,
        expected_batch_size: float,
        accountant: Any,
        sample_rate: float,
        generator: torch.Generator | None,
    ) -> None:
        # validate (and build the event) before keeping any state
        self.event = SampledGaussianEvent(sample_rate=sample_rate, noise_multiplier=noise_multiplier)
        if not max_grad_norm > 0:
            raise ValueError(f"max_grad_norm must be > 0, got {max_grad_norm}")
        if not expected_batch_size > 0:
            raise ValueError(f"expected_batch_size must be > 0, got {expected_batch_size}")
        self.noise_multiplier = float(noise_multiplier)
        self.max_grad_norm = float(max_grad_norm)
        self.expected_batch_size = float(expected_batch_size)
        self.sample_rate = float(sample_rate)
        self.accountant = accountant
        self.generator = generator
        self.last_norms: torch.Tensor | None = None

    def __call__(
        self,
        dense_grads: DenseGrads,
        row_grads: RowGrads,
        table_sizes: Mapping[str, int],
        noise: Mapping[str, torch.Tensor] | None = None,
    ) -> dict[str, torch.Tensor]:
        """Noised, averaged gradient of every parameter.

        Args:
            dense_grads: ``{name: (B, *shape)}`` per-example dense gradients.
            row_grads: ``{table: (indices (B, M), grads (B, M, d))}``; B may be 0.
            table_sizes: ``{table: V}``; noise covers all V rows.
            noise: ``{name: unit-variance float64 tensor}`` for every dense parameter
                and table, drawn by the caller from a secret source
                (:class:`textkg.privacy.randomness.SecretRandomness`). The sum is then formed
                in float64 and rounded once to the gradient's dtype (see
                ``textkg/privacy/randomness.py`` on floating-point attacks). ``None``: draw
                from ``generator`` in the gradient's dtype (tests, benchmarks).

        Returns:
            ``{name: (*shape)}`` and ``{table: (V, d)}``.
        """
        missing = set(row_grads) ^ set(table_sizes)
        if missing:
            raise ValueError(f"table_sizes and row_grads must name the same tables; mismatch: {sorted(missing)}")
        norms = per_example_norms(dense_grads, row_grads)
        # (Σ_b c_b g_b + N(0, σ²C²)) / (qN), computed as N(0, (σC/qN)²) + Σ_b (c_b/qN) g_b: the noise is
        # drawn straight into the output and the clipped gradients are added into it (one pass per table)
        scale = clip_coefficients(norms, max_grad_norm=self.max_grad_norm) / self.expected_batch_size
        std = self.noise_multiplier * self.max_grad_norm / self.expected_batch_size
        b = norms.shape[0]
        out: dict[str, torch.Tensor] = {}
        if noise is not None:
            expected = set(dense_grads) | set(row_grads)
            if set(noise) != expected:
                raise ValueError(f"noise must cover every parameter; mismatch: {sorted(set(noise) ^ expected)}")

        def start(name: str, shape: Sequence[int], like: torch.Tensor) -> torch.Tensor:
            if noise is None:
                return gaussian_noise(
                    tuple(shape), std=std, generator=self.generator, dtype=like.dtype, device=like.device
                )
            unit = noise[name]
            if tuple(unit.shape) != tuple(shape):
                raise ValueError(f"noise for {name!r} has shape {tuple(unit.shape)}, expected {tuple(shape)}")
            return unit.to(device=like.device, dtype=torch.float64) * std

        for name, g in dense_grads.items():
            noised = start(name, g.shape[1:], g)
            if b and noised.numel():
                noised.view(-1).addmv_(g.reshape(b, -1).t().to(noised.dtype), scale.to(noised.dtype))
            out[name] = noised.to(g.dtype)
        for name, (idx, g) in row_grads.items():
            d = g.shape[-1]
            noised = start(name, (int(table_sizes[name]), d), g)
            if idx.numel():
                # scale-and-add a few examples at a time: the scaled copy stays small (no B·M·d temporary)
                chunk = max(1, _CHUNK_ENTRIES // max(1, idx.shape[1] * d))
                coef = scale.to(noised.dtype)
                for s in range(0, b, chunk):
                    noised.index_add_(
                        0,
                        idx[s : s + chunk].reshape(-1),
                        (g[s : s + chunk].to(noised.dtype) * coef[s : s + chunk, None, None]).reshape(-1, d),
                    )
            out[name] = noised.to(g.dtype)
        self.last_norms = norms.detach()
        if self.accountant is not None:
            self.accountant.step(self.event)
        return out

    def clipped_sum(
        self, dense_grads: DenseGrads, row_grads: RowGrads, table_sizes: Mapping[str, int]
    ) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """``Σ_b min(1, C/‖g_b‖) g_b`` in float64, with no noise and no event.

        One share of a data-parallel step: each process clips its own examples
        (the clipping is per example, so a share's clipped sum does not depend on
        the other shares), the shares are summed across processes, and the total
        goes to :meth:`noise_clipped_sum`, which adds the noise once and emits the
        step's one event. The same quantity :meth:`__call__` forms inside its noised sum.

        Args:
            dense_grads, row_grads, table_sizes: as for :meth:`__call__` (B may be 0).

        Returns:
            ``({name: (*shape)} float64 for every dense parameter and table, norms (B,))``.
        """
        missing = set(row_grads) ^ set(table_sizes)
        if missing:
            raise ValueError(f"table_sizes and row_grads must name the same tables; mismatch: {sorted(missing)}")
        norms = per_example_norms(dense_grads, row_grads)
        coef = clip_coefficients(norms, max_grad_norm=self.max_grad_norm).to(torch.float64)
        b = norms.shape[0]
        out: dict[str, torch.Tensor] = {}
        for name, g in dense_grads.items():
            total = torch.zeros(g.shape[1:], dtype=torch.float64, device=g.device)
            if b and total.numel():
                total.view(-1).addmv_(g.reshape(b, -1).t().to(torch.float64), coef)
            out[name] = total
        for name, (idx, g) in row_grads.items():
            d = g.shape[-1]
            total = torch.zeros((int(table_sizes[name]), d), dtype=torch.float64, device=g.device)
            if idx.numel():
                chunk = max(1, _CHUNK_ENTRIES // max(1, idx.shape[1] * d))
                for s in range(0, b, chunk):
                    total.index_add_(
                        0,
                        idx[s : s + chunk].reshape(-1),
                        (g[s : s + chunk].to(torch.float64) * coef[s : s + chunk, None, None]).reshape(-1, d),
                    )
            out[name] = total
        return out, norms.detach()

    def noise_clipped_sum(
        self,
        clipped_sums: Mapping[str, torch.Tensor],
        *,
        norms: torch.Tensor,
        noise: Mapping[str, torch.Tensor] | None = None,
    ) -> dict[str, torch.Tensor]:
        """``(Σ_b c_b g_b + N(0, σ²C²)) / (qN)`` from a sum the caller has ALREADY clipped.

        For losses whose per-example gradients are never formed (ghost
        clipping: the clipped sum is the gradient of ``Σ_b c_b L_b``, Li et al.
        2022, arXiv 2110.05679v6, Sec. 4). The caller must have scaled each
        example's whole gradient by ``min(1, max_grad_norm / norm_b)``. The
        noise, its float64 sum rounded once, and the emitted event are those of
        :meth:`__call__`.

        Args:
            clipped_sums: ``{name: (*shape)}`` for EVERY trained parameter (zeros
                where no example reached it: the noise still covers it).
            norms: ``(B,)`` the per-example norms the sum was clipped with (kept
                in ``last_norms``).
            noise: as for :meth:`__call__`; its keys must equal ``clipped_sums``'s.

        Returns:
            ``{name: (*shape)}`` noised averages, each in its sum's dtype.
        """
        if noise is not None and set(noise) != set(clipped_sums):
            raise ValueError(f"noise must cover every parameter; mismatch: {sorted(set(noise) ^ set(clipped_sums))}")
        std = self.noise_multiplier * self.max_grad_norm / self.expected_batch_size
        out: dict[str, torch.Tensor] = {}
        for name, total in clipped_sums.items():
            if noise is None:
                noised = gaussian_noise(
                    total.shape, std=std, generator=self.generator, dtype=total.dtype, device=total.device
                )
            else:
                if tuple(noise[name].shape) != tuple(total.shape):
                    raise ValueError(
                        f"noise for {name!r} has shape {tuple(noise[name].shape)}, expected {tuple(total.shape)}"
                    )
                noised = noise[name].to(device=total.device, dtype=torch.float64) * std
            out[name] = noised.add_(total.to(noised.dtype), alpha=1.0 / self.expected_batch_size).to(total.dtype)
        self.last_norms = norms.detach()
        if self.accountant is not None:
            self.accountant.step(self.event)
        return out
