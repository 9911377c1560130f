"""One DP-SGD step of a KG model (Abadi et al. 2016, arXiv 1607.00133, Alg. 1).

The KG-specific half of the mechanism: draw a Poisson sample of private
triples, give each example its own corruptions, gather the table rows each
example reads (``model.lookup_plan``), and compute every example's gradient
with respect to all dense parameters and to its gathered rows. Because each
example reads its own gathered copy of the rows, these per-example row
gradients are exact and cost O(B·rows·d) instead of Opacus's dense O(B·V·d)
per-example tables:

- a model with no trainable dense parameter (e.g. structural TransE): ONE
  ordinary batched backward of ``Σ_b L_b`` through the gathered ``(B, …, d)``
  copies (:func:`textkg.privacy.per_example_input_grads`); example b's loss reads
  only its own copy, so the gradient w.r.t. copy b is exactly ∂L_b/∂rows_b;
- otherwise ``torch.func.vmap(grad(...))`` over the dense parameters and the
  gathered rows together (one vmapped forward/backward, consistent
  randomness between dense and row gradients).

The mechanism half (clip the whole per-example gradient, add N(0, σ²C²) to
every entry of every trained parameter, divide by the expected batch size,
emit one ``SampledGaussianEvent``) lives in :mod:`textkg.privacy` and knows nothing
about graphs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn
from torch.func import functional_call, grad, vmap

from textkg.models import KGEModel
from textkg.privacy.dp_sgd import DPSGDStep, per_example_input_grads
from textkg.privacy.sampling import poisson_sample
from textkg.training.negatives import corrupt


class _ScoreRows(nn.Module):
    """Wraps ``model.score_rows`` as ``forward`` so ``functional_call`` can drive it."""

    def __init__(self, model: KGEModel) -> None:
        super().__init__()
        self.model = model

    def forward(self, triples: torch.Tensor, rows: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.model.score_rows(triples, rows)


@dataclass(frozen=True)
class Shard:
    """This process's share of a data-parallel private step (:mod:`textkg.distributed`).

    Every process draws the same Poisson sample, corruptions and dropout (the
    same secret key, step by step), takes rows ``rank, rank + world, ...`` of
    the sampled batch, clips them, and ``reduce`` sums the clipped sums across
    processes in place. The noise is then added once to the total, so the step
    is the one-process step up to float summation order.

    Args:
        rank: this process's rank.
        world: the number of processes.
        reduce: sums each tensor of a ``{name: tensor}`` mapping across processes, in place.
    """

    rank: int
    world: int
    reduce: Callable[[dict[str, torch.Tensor]], None]

    def rows(self, n: int) -> torch.Tensor:
        """``(⌈(n - rank) / world⌉,)`` positions of this share in a batch of ``n``."""
        return torch.arange(self.rank, n, self.world)


def noise_shapes(model: KGEModel) -> dict[str, tuple[int, ...]]:
    """``{name: shape}`` of every trained parameter the mechanism noises (dense, then tables)."""
    return {
        **{k: tuple(p.shape) for k, p in model.dense_parameters().items()},
        **{k: tuple(t.shape) for k, t in model.tables().items()},
    }


class PrivateStep:
    """Per-example gradients of a KG model on a Poisson sample, then DP-SGD.

    Args:
        model: a :class:`textkg.models.KGEModel`.
        private_triples: ``(N, 3)`` the private statements (sampled at rate q).
        entity_pool: ``(P,)`` entities negatives are drawn from.
        loss_fn: per-example loss over ``(1 + K,)`` scores.
        num_negatives: K.
        mechanism: the :class:`textkg.privacy.dp_sgd.DPSGDStep` (clip, noise, account).
        sample_rate: q.
        generator: randomness for corruption and dropout (per-example; must not
            depend on the data).
        randomness: the secret source of the Poisson sample and the noise, or
            ``None`` to draw both from ``generator`` (tests only: not secret).
        step: the private step's index (selects the secret streams).
        noise: optional pre-drawn unit noise of this step (``{name: float64 tensor}``,
            e.g. from :class:`textkg.privacy.randomness.NoisePrefetcher`); drawn from
            ``randomness`` when ``None``.
        shard: this process's :class:`Shard` of a data-parallel step, or ``None`` (one process).
    """

    def __init__(
        self,
        model: KGEModel,
        *,
        private_triples: torch.Tensor,
        entity_pool: torch.Tensor,
        loss_fn: Callable[[torch.Tensor], torch.Tensor],
        num_negatives: int,
        mechanism: DPSGDStep,
        sample_rate: float,
        generator: torch.Generator,
        randomness=None,
        step: int = 0,
        noise: dict | None = None,
        shard: Shard | None = None,
    ) -> None:
        self.model = model
        self.private_triples = private_triples
        self.entity_pool = entity_pool
        self.loss_fn = loss_fn
        self.shard = shard
        self.batch_rows: dict[str, torch.Tensor] = {}  # rows of each table the whole sample reads
        self.num_negatives = num_negatives
        self.mechanism = mechanism
        self.sample_rate = sample_rate
        self.generator = generator
        self.randomness = randomness
        self.step = step
        self.noise = noise
        self._wrapper = _ScoreRows(model)

    def per_example_gradients(self, batch: torch.Tensor, rows: torch.Tensor | None = None):
        """Per-example gradients of the loss.

        Args:
            batch: ``(B, 1 + K, 3)`` positives with their corruptions.
            rows: ``(B',)`` positions of the examples to differentiate (a data-parallel
                share), or ``None`` for all. The dropout is drawn for the whole batch
                first, so a share sees the draw one process would make.

        Returns:
            ``(dense, rows)``: ``dense[name]`` is ``(B', *param.shape)``;
            ``rows[table] = (indices (B', M), grads (B', M, d))``.
        """
        model = self.model
        tables = model.tables()
        batch = batch.to(model.relation_embeddings.device)  # ids come from CPU generators; rows live on the device
        plan = model.lookup_plan(batch, generator=self.generator)
        self.batch_rows = {name: idx.reshape(-1).unique() for name, idx in plan.items()}
        if rows is not None:
            batch, plan = batch[rows], {name: idx[rows] for name, idx in plan.items()}
            if not len(rows):
                return {}, {
                    name: (
                        torch.zeros(0, 0, dtype=torch.long, device=batch.device),
                        torch.zeros(0, 0, tables[name].shape[-1], device=batch.device),
                    )
                    for name in plan
                }
        gathered = {name: tables[name].detach()[idx] for name, idx in plan.items()}
        b = batch.shape[0]
        row_grads = None
        if not model.dense_parameters():
            row_grads = per_example_input_grads(
                lambda rows: self.loss_fn(model.score_rows(batch, dict(rows))), gathered
            )
        if row_grads is not None:  # None: the loss was not one value per example; use vmap
            dense_out = {}
        else:
            dense_out, row_grads = self._vmap_gradients(batch, gathered)
        rows_out = {
            name: (plan[name].reshape(b, -1), row_grads[name].reshape(b, -1, row_grads[name].shape[-1]))
            for name in plan
        }
        return dense_out, rows_out

    def _vmap_gradients(self, batch: torch.Tensor, gathered: dict[str, torch.Tensor]):
        """``vmap(grad)`` over (dense parameters, gathered rows): ``({name: (B, *shape)}, {table: (B, …, d)})``."""
        model = self.model
        dense = {f"model.{k}": v.detach() for k, v in model.dense_parameters().items()}
        buffers = {f"model.{k}": v for k, v in model.named_buffers()}
        wrapper, loss_fn = self._wrapper, self.loss_fn

        def example_loss(dense_params, rows, triples):
            state = {**buffers, **dense_params}
            scores = functional_call(wrapper, state, (triples, rows))
            return loss_fn(scores)

        dense_grads, row_grads = vmap(grad(example_loss, argnums=(0, 1)), in_dims=(None, 0, 0), randomness="different")(
            dense, gathered, batch
        )
        return {k[len("model.") :]: g for k, g in dense_grads.items()}, row_grads

    def _reduce(self, sums: dict[str, torch.Tensor], rows: dict[str, torch.Tensor]) -> None:
        """Sum the shares' clipped sums across processes, in place. A table's clipped sum is zero
        outside the rows the whole sample read (``rows``, the same on every process), so only those
        rows are sent, not the whole ``(V, d)`` table."""
        assert self.shard is not None
        sent = {k: (v[rows[k]] if k in rows else v) for k, v in sums.items()}
        self.shard.reduce(sent)
        for k in rows:
            sums[k][rows[k]] = sent[k]

    def __call__(self) -> int:
        """Take one DP step; fills ``.grad`` of every trained parameter.

        Returns:
            The realised (Poisson) batch size.
        """
        n = len(self.private_triples)
        uniform = None if self.randomness is None else self.randomness.uniform(n, step=self.step)
        idx = poisson_sample(n, sample_rate=self.sample_rate, generator=self.generator, uniform=uniform)
        tables = self.model.tables()
        dense_params = self.model.dense_parameters()
        noise = self.noise
        if noise is None and self.randomness is not None:
            noise = self.randomness.normal(noise_shapes(self.model), step=self.step)
        rows = None if self.shard is None else self.shard.rows(len(idx))
        if len(idx):
            batch = corrupt(  # the whole sample's corruptions, in every process: a share sees one process's draw
                self.private_triples[idx],
                num_negatives=self.num_negatives,
                entity_pool=self.entity_pool,
                generator=self.generator,
            )
            dense_g, row_g = self.per_example_gradients(batch, rows)
        else:  # an empty Poisson sample is still a step of the mechanism: noise only
            dense_g = {k: torch.zeros((0, *p.shape), device=p.device) for k, p in dense_params.items()}
            row_g = {
                k: (
                    torch.zeros(0, 0, dtype=torch.long, device=t.device),
                    torch.zeros(0, 0, t.shape[-1], device=t.device),
                )
                for k, t in tables.items()
            }
        for k, p in dense_params.items():
            dense_g.setdefault(k, torch.zeros((len(idx) if rows is None else len(rows), *p.shape), device=p.device))
        table_sizes = {k: t.shape[0] for k, t in tables.items()}
        if self.shard is None:
            noised = self.mechanism(dense_g, row_g, table_sizes, noise)
        else:  # clip this share, sum the shares, then noise the total once
            sums, norms = self.mechanism.clipped_sum(dense_g, row_g, table_sizes)
            self._reduce(sums, self.batch_rows if len(idx) else {k: torch.zeros(0, dtype=torch.long) for k in tables})
            noised = self.mechanism.noise_clipped_sum(sums, norms=norms, noise=noise)
        for k, p in {**dense_params, **tables}.items():
            p.grad = noised[k].to(device=p.device, dtype=p.dtype).view_as(p)
        return len(idx)


class OneVsAllPrivateStep:
    """One DP-SGD step of the 1-vs-all softmax loss (exact ghost clipping).

    Poisson-samples the private triples as :class:`PrivateStep` does, takes
    the exactly clipped sum ``Σ_b min(1, C/‖g_b‖) g_b`` from
    :func:`textkg.training.one_vs_all.clipped_gradient_sum` (no
    per-example gradients), and noises it with
    :meth:`textkg.privacy.dp_sgd.DPSGDStep.noise_clipped_sum`: N(0, σ²C²) on every
    entry of every trained parameter (the keys of :func:`noise_shapes`), then
    divided by the expected batch size. The structural-dropout mask of the
    pool comes from ``generator`` (the step's secret per-step stream), shared
    by every example of the step.

    Args:
        model: a model :func:`textkg.training.one_vs_all.trained_parameters` supports.
        private_triples: ``(N, 3)``; every head and tail must lie in ``entity_pool``.
        entity_pool: ``(P,)`` the candidates (public vocabulary).
        positions: :func:`textkg.training.one_vs_all.pool_positions` of ``entity_pool``.
        temperature: τ of the softmax.
        mechanism, sample_rate, generator, randomness, step, noise: as for :class:`PrivateStep`.
        gram: optional ``(P, P)`` :func:`textkg.training.one_vs_all.feature_gram` (a per-run cache).
        shard: as for :class:`PrivateStep`; the pool's dropout is drawn over the pool, not the
            batch, so every share sees the same mask.
    """

    def __init__(
        self,
        model: KGEModel,
        *,
        private_triples: torch.Tensor,
        entity_pool: torch.Tensor,
        positions: torch.Tensor,
        temperature: float,
        mechanism: DPSGDStep,
        sample_rate: float,
        generator: torch.Generator,
        randomness=None,
        step: int = 0,
        noise: dict | None = None,
        gram: torch.Tensor | None = None,
        shard: Shard | None = None,
    ) -> None:
        self.model = model
        self.private_triples = private_triples
        self.entity_pool = entity_pool
        self.positions = positions
        self.temperature = temperature
        self.mechanism = mechanism
        self.sample_rate = sample_rate
        self.generator = generator
        self.randomness = randomness
        self.step = step
        self.noise = noise
        self.gram = gram
        self.shard = shard

    def __call__(self) -> int:
        """Take one DP step; fills ``.grad`` of every trained parameter. Returns the realised batch size."""
        from textkg.training.one_vs_all import clipped_gradient_sum

        n = len(self.private_triples)
        uniform = None if self.randomness is None else self.randomness.uniform(n, step=self.step)
        idx = poisson_sample(n, sample_rate=self.sample_rate, generator=self.generator, uniform=uniform)
        noise = self.noise
        if noise is None and self.randomness is not None:
            noise = self.randomness.normal(noise_shapes(self.model), step=self.step)
        triples = self.private_triples[idx]
        if self.shard is not None:
            triples = triples[self.shard.rows(len(triples))]
        result = clipped_gradient_sum(
            self.model,
            triples,
            entity_pool=self.entity_pool,
            positions=self.positions,
            max_grad_norm=self.mechanism.max_grad_norm,
            temperature=self.temperature,
            generator=self.generator,
            gram=self.gram,
        )
        names = {id(p): k for k, p in self.model.named_parameters()}
        params = {**self.model.dense_parameters(), **self.model.tables()}
        sums = {k: result.gradients.get(names[id(p)], torch.zeros_like(p)).detach() for k, p in params.items()}
        if self.shard is not None:  # sum the shares in float64, then noise the total once
            sums = {k: v.to(torch.float64) for k, v in sums.items()}
            self.shard.reduce(sums)
        noised = self.mechanism.noise_clipped_sum(sums, norms=result.norms, noise=noise)
        for k, p in params.items():
            p.grad = noised[k].to(device=p.device, dtype=p.dtype).view_as(p)
        return len(idx)
