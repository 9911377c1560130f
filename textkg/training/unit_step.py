"""The unit-level step: one patient (a unit entity) with all of their statements is one example.

User-level DP-SGD (McMahan, Ramage, Talwar & Zhang, ICLR 2018, "Learning differentially private
recurrent language models", arXiv:1710.06963v3, Alg. 1 with one local step; Charles et al. 2024,
"Fine-tuning large language models with user-level differential privacy", arXiv:2407.07737v1, ELS:
example-level sampling within a Poisson sample of users). A step

1. draws a Poisson sample of the private units at q = B_u / N̄_u (N̄_u the DECLARED number of
   units, public; the secret ``sampling`` stream of :class:`textkg.privacy.randomness.SecretRandomness`);
2. bounds each sampled unit's contribution: at most m of its statements (``max_statements_per_unit``),
   chosen with the secret ``bounding`` stream when it has more;
3. makes every kept statement of a target relation a *target* (every relation, or those of
   ``--unit-targets``: a public rule; the unit's other statements only fold it in): the unit's vector is
   folded in from its OTHER kept links (leave-one-out, :func:`fold_in`), and the target is scored against
   K corruptions of its other end drawn from the entity pool (or from ``--unit-candidates``, a public list
   of the entities a target's other end may be), with the run's loss;
4. takes the gradient of the SUM of the unit's target losses with respect to every dense parameter
   and every table row the unit read (one ``vmap(grad)`` over units with padded ``(U, L, …)`` link
   tensors and a mask; padded entries have exactly zero gradient), clips the unit's whole gradient to
   C, adds N(0, σ²C²) to every entry of every trained parameter and divides by B_u
   (:class:`textkg.privacy.dp_sgd.DPSGDStep`: one example = one unit).

A unit's vector is the relation-aware neighbour average of ERAvg (Albooyeh et al. 2020, "Out-of-Sample
Representation Learning for Knowledge Graphs", Findings of EMNLP, arXiv:2004.13230v2): the mean over
its links of the vector each link's query points at, ``head_from(r, v_other)`` when the unit is the
head and ``tail_from(v_other, r)`` when it is the tail, normalised as the model normalises entities.
That is :func:`textkg.models.known_links.link_estimates` averaged, i.e. ``move_by_links`` with
``LinkMethod("mix", 0.0)`` (:func:`textkg.training.unit_eval.unit_vectors`), so the representation
trained is the one a user computes at prediction time for a new patient from their own statements.
A target whose unit has no other kept link is scored from the zero vector (the ``mix`` prior of a
unit without links): its loss still trains the relation and the other end.

:class:`UnitSGD` runs the same batches and the same loss by plain SGD (no clipping, no noise): the
non-private ceiling of ``--privacy none --privacy-unit entity``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad, vmap

from textkg.data.known_links import NEW_IS_HEAD
from textkg.data.units import UnitLinks
from textkg.errors import ConfigError, PrivacyError
from textkg.privacy.dp_sgd import DPSGDStep, per_example_input_grads
from textkg.privacy.randomness import SecretRandomness
from textkg.privacy.sampling import poisson_sample
from textkg.training.private_step import noise_shapes


@dataclass(frozen=True)
class UnitBatch:
    """The kept links of a step's sampled units, padded to ``L`` per unit.

    Attributes:
        relations, others, roles: ``(U, L)`` long: link ``j`` of unit ``i`` (padding: relation 0, the
            pool's first entity, role head).
        mask: ``(U, L)`` bool: real links (each unit has at most m).
        negatives: ``(U, L, K)`` long: corruptions of each link's other end, from the entity pool.
        targets: ``(U, L)`` bool: the real links whose loss counts (:attr:`UnitLinks.targets`; every real
            link when it is ``None``). Every real link folds its unit in.
    """

    relations: torch.Tensor
    others: torch.Tensor
    roles: torch.Tensor
    mask: torch.Tensor
    negatives: torch.Tensor
    targets: torch.Tensor

    @property
    def num_units(self) -> int:
        return self.relations.shape[0]


def training_units(units: UnitLinks, entity_pool: torch.Tensor, num_entities: int) -> UnitLinks:
    """The training units' links whose other end is in ``entity_pool`` (a public per-link rule: a link
    to an entity without a structural row, e.g. one an inductive split holds out, is dropped unread);
    units left without a link are dropped."""
    in_pool = torch.zeros(num_entities, dtype=torch.bool)
    in_pool[entity_pool] = True
    links = units.links[in_pool[units.links[:, 2]]]
    rows = torch.unique(links[:, 0])
    return UnitLinks(units=units.units, links=links, targets=units.targets).select(rows)


def bound_contributions(
    units: UnitLinks, rows: torch.Tensor, *, max_statements: int, uniform: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """At most ``max_statements`` links of each unit of ``rows``, chosen at random when it has more.

    Args:
        units: the units' links.
        rows: ``(U,)`` sorted unit rows (the step's Poisson sample).
        max_statements: m.
        uniform: ``(n,)`` uniforms, one per link of the sampled units (in :attr:`UnitLinks.links`
            order), from the secret ``bounding`` stream; ``None``: keep each unit's first m.

    Returns:
        ``(links (k, 4), slot (k,))``: the kept links (column 0: the unit's position ``0..U-1`` in
        ``rows``) and each one's position ``0..m-1`` among its unit's kept links.
    """
    offsets = units.offsets()
    starts, ends = offsets[rows], offsets[rows + 1]
    counts = ends - starts
    owner = torch.repeat_interleave(torch.arange(len(rows)), counts)
    first = torch.repeat_interleave(starts, counts)
    position = torch.arange(int(counts.sum())) - torch.repeat_interleave(counts.cumsum(0) - counts, counts)
    links = units.links[first + position]
    if uniform is not None:  # a random order within each unit: sort by (owner, uniform)
        order = torch.argsort(owner.double() + uniform.double())
        links, owner = links[order], owner[order]
    keep = position < max_statements  # position within the unit, in the (re)ordered list
    links = torch.cat([owner.unsqueeze(1), links[:, 1:]], dim=1)[keep]
    return links, position[keep]


def unit_batch(
    units: UnitLinks,
    rows: torch.Tensor,
    *,
    max_statements: int,
    num_negatives: int,
    entity_pool: torch.Tensor,
    generator: torch.Generator,
    uniform: torch.Tensor | None = None,
) -> UnitBatch:
    """The padded :class:`UnitBatch` of the units ``rows`` (:func:`bound_contributions`, then K
    corruptions of each kept link's other end drawn uniformly from ``entity_pool`` with ``generator``)."""
    links, slot = bound_contributions(units, rows, max_statements=max_statements, uniform=uniform)
    u = len(rows)
    width = int(slot.max()) + 1 if len(slot) else 1
    rel = torch.zeros(u, width, dtype=torch.long)
    other = torch.full((u, width), int(entity_pool[0]), dtype=torch.long)
    role = torch.full((u, width), NEW_IS_HEAD, dtype=torch.long)
    mask = torch.zeros(u, width, dtype=torch.bool)
    at = (links[:, 0], slot)
    rel[at], other[at], role[at], mask[at] = links[:, 1], links[:, 2], links[:, 3], True
    pick = torch.randint(len(entity_pool), (u, width, num_negatives), generator=generator)
    targets = mask
    if units.targets is not None:
        targets = mask & torch.isin(rel, torch.tensor(units.targets, dtype=torch.long))
    return UnitBatch(relations=rel, others=other, roles=role, mask=mask, negatives=entity_pool[pick], targets=targets)


def _finish(model, v: torch.Tensor) -> torch.Tensor:
    return F.normalize(v, p=2.0, dim=-1) if model.normalize_entities else v


def link_vectors(model, relations: torch.Tensor, other_vectors: torch.Tensor, roles: torch.Tensor) -> torch.Tensor:
    """``(..., d)``: each link's estimate of its unit's vector, differentiable in the relation rows.

    :func:`textkg.models.known_links.link_estimates` with the relation vectors given (``relations``
    ``(..., dr)`` rows, not ids): ``head_from(r, v_other)`` where the unit is the head,
    ``tail_from(v_other, r)`` where it is the tail.
    """
    inter = model.interaction
    head = (roles == NEW_IS_HEAD).unsqueeze(-1)
    return torch.where(head, inter.head_from(relations, other_vectors), inter.tail_from(other_vectors, relations))


def fold_in(model, estimates: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``(..., L, d)``: for each link, its unit's vector from the unit's OTHER links (leave-one-out).

    Args:
        model: the KG model (its ``normalize_entities``).
        estimates: ``(..., L, d)`` :func:`link_vectors` of a unit's links.
        mask: ``(..., L)`` bool, the real links.

    Returns:
        ``finish(mean of the other real links' estimates)``, or zeros where the link is its unit's only one.
    """
    w = mask.to(estimates.dtype)
    weighted = w.unsqueeze(-1) * estimates
    others = weighted.sum(dim=-2, keepdim=True) - weighted  # (..., L, d): the sum over j != t
    count = w.sum(dim=-1, keepdim=True) - w  # (..., L)
    has = (count > 0).unsqueeze(-1)
    mean = others / count.clamp(min=1.0).unsqueeze(-1)
    return torch.where(has, _finish(model, mean), torch.zeros_like(mean))


def entity_vectors_from_rows(model, entities: torch.Tensor, structural: torch.Tensor | None) -> torch.Tensor:
    """``(..., d)``: the fused entity vectors of ``entities`` from gathered structural rows (``None`` for a
    text-only model), as :meth:`textkg.models.KGEModel.score_rows` computes them."""
    text = model.text(entities) if model.text is not None else None
    return _finish(model, model.fusion(structural, text))


def unit_losses(model, batch: tuple[torch.Tensor, ...], rows: dict[str, torch.Tensor], loss_fn) -> torch.Tensor:
    """``(...)``: each unit's summed target loss (module docstring, step 3); ``vmap``-compatible.

    Args:
        model: the KG model.
        batch: ``(relations, others, roles, mask, negatives, targets)`` of :class:`UnitBatch` (any leading
            dims).
        rows: ``{"entity": (..., L, 1 + K, d)`` structural rows of ``[other, negatives]`` (absent for a
            text-only model), ``"relation": (..., L, dr)}``.
        loss_fn: the run's per-example loss over ``(..., 1 + K)`` scores.
    """
    _, others, roles, mask, negatives, targets = batch
    ends = torch.cat([others.unsqueeze(-1), negatives], dim=-1)  # (..., L, 1 + K)
    ent = entity_vectors_from_rows(model, ends, rows.get("entity"))  # (..., L, 1 + K, d)
    v_other, v_neg = ent[..., 0, :], ent[..., 1:, :]
    r = rows["relation"]
    unit = fold_in(model, link_vectors(model, r, v_other, roles), mask)  # (..., L, d)
    head = roles == NEW_IS_HEAD
    inter = model.interaction
    positive = torch.where(head, inter.score(unit, r, v_other), inter.score(v_other, r, unit))
    u, rr = unit.unsqueeze(-2), r.unsqueeze(-2)
    negative = torch.where(head.unsqueeze(-1), inter.score(u, rr, v_neg), inter.score(v_neg, rr, u))
    losses = loss_fn(torch.cat([positive.unsqueeze(-1), negative], dim=-1))  # (..., L)
    return (losses * targets.to(losses.dtype)).sum(dim=-1)


def unit_plan(model, batch: UnitBatch, generator: torch.Generator | None) -> dict[str, torch.Tensor]:
    """Rows of each table the batch reads: ``{"entity": (U, L, 1 + K), "relation": (U, L)}`` (structural
    dropout as in :meth:`textkg.models.KGEModel.lookup_plan`)."""
    dev = model.relation_embeddings.device
    plan = {}
    if model.structural is not None:
        ends = torch.cat([batch.others.unsqueeze(-1), batch.negatives], dim=-1).to(dev)
        plan["entity"] = model.structural.rows(ends, generator=generator, training=model.training)
    plan["relation"] = batch.relations.to(dev)
    return plan


def _inputs(model, batch: UnitBatch) -> tuple[torch.Tensor, ...]:
    dev = model.relation_embeddings.device
    fields = (batch.relations, batch.others, batch.roles, batch.mask, batch.negatives, batch.targets)
    return tuple(t.to(dev) for t in fields)


class _UnitLoss(nn.Module):
    """Wraps :func:`unit_losses` as ``forward`` so ``functional_call`` can drive it."""

    def __init__(self, model, loss_fn) -> None:
        super().__init__()
        self.model = model
        self.loss_fn = loss_fn

    def forward(self, batch, rows):
        return unit_losses(self.model, batch, rows, self.loss_fn)


def per_unit_gradients(model, batch: UnitBatch, loss_fn, generator: torch.Generator | None):
    """Each unit's gradient of its summed target loss.

    Returns:
        ``(dense, rows)``: ``dense[name]`` is ``(U, *param.shape)``; ``rows[table] = (indices (U, M),
        grads (U, M, d))`` (a unit's repeated rows are coalesced by the clipping, as for statements).
    """
    tables = model.tables()
    plan = unit_plan(model, batch, generator)
    gathered = {name: tables[name].detach()[idx] for name, idx in plan.items()}
    inputs = _inputs(model, batch)
    u = batch.num_units
    row_grads = None
    if not model.dense_parameters():  # one batched backward: unit i's loss reads only its own rows
        row_grads = per_example_input_grads(lambda rows: unit_losses(model, inputs, dict(rows), loss_fn), gathered)
    dense_out: dict[str, torch.Tensor] = {}
    if row_grads is None:
        wrapper = _UnitLoss(model, loss_fn)
        dense = {f"model.{k}": v.detach() for k, v in model.dense_parameters().items()}
        buffers = {f"model.{k}": v for k, v in model.named_buffers()}

        def one_unit(dense_params, rows, data):
            return functional_call(wrapper, {**buffers, **dense_params}, (data, rows))

        dense_g, row_grads = vmap(grad(one_unit, argnums=(0, 1)), in_dims=(None, 0, 0), randomness="different")(
            dense, gathered, inputs
        )
        dense_out = {k[len("model.") :]: g for k, g in dense_g.items()}
    rows_out = {
        name: (plan[name].reshape(u, -1), row_grads[name].reshape(u, -1, row_grads[name].shape[-1])) for name in plan
    }
    return dense_out, rows_out


class UnitPrivateStep:
    """One unit-level DP-SGD step (module docstring); fills ``.grad`` of every trained parameter.

    Args:
        model: a :class:`textkg.models.KGEModel`.
        units: the private units' links (:func:`training_units`).
        entity_pool: ``(P,)`` entities the negatives are drawn from.
        loss_fn: the run's per-example loss.
        num_negatives: K.
        max_statements: m.
        mechanism: the :class:`textkg.privacy.dp_sgd.DPSGDStep` (its expected batch size: B_u = q·N̄_u).
        sample_rate: q = B_u / N̄_u.
        generator: the step's secret auxiliary stream (corruptions, dropout).
        randomness: the secret source of the unit sample, the bounding and the noise (``None``: draw
            the sample from ``generator`` and keep the first m links; tests only).
        step: the step's index (selects the secret streams).
        noise: pre-drawn unit-variance noise of this step, or ``None`` to draw it from ``randomness``.
        trained_rows: ``None`` (every trained parameter is updated), or, under ``--private-updates
            private-rows``, ``{table: (rows,) or (rows, 1) bool}`` the only rows a private step updates
            (:class:`textkg.training.private_rows.PrivateRowUpdates`; a mask of public inputs). Each unit's
            gradient is then restricted to those rows BEFORE it is clipped: the step is DP-SGD on that
            subset of the parameters, the rest frozen for it (the release depends on the private units only
            through the noised sum over the subset, whose sensitivity is still C), so the clipping bound is
            spent on what the step may change instead of on gradients it throws away.
    """

    def __init__(
        self,
        model,
        *,
        units: UnitLinks,
        entity_pool: torch.Tensor,
        loss_fn: Callable[[torch.Tensor], torch.Tensor],
        num_negatives: int,
        max_statements: int,
        mechanism: DPSGDStep,
        sample_rate: float,
        generator: torch.Generator,
        randomness: SecretRandomness | None = None,
        step: int = 0,
        noise: dict | None = None,
        trained_rows: dict[str, torch.Tensor] | None = None,
    ) -> None:
        self.model, self.units, self.entity_pool, self.loss_fn = model, units, entity_pool, loss_fn
        self.trained_rows = trained_rows
        self.num_negatives, self.max_statements, self.mechanism = num_negatives, max_statements, mechanism
        self.sample_rate, self.generator, self.randomness, self.step, self.noise = (
            sample_rate,
            generator,
            randomness,
            step,
            noise,
        )

    def sample(self) -> UnitBatch:
        """The step's Poisson sample of units with their bounded links and corruptions."""
        return sample_unit_batch(
            self.units,
            sample_rate=self.sample_rate,
            max_statements=self.max_statements,
            num_negatives=self.num_negatives,
            entity_pool=self.entity_pool,
            generator=self.generator,
            randomness=self.randomness,
            step=self.step,
        )

    def __call__(self) -> int:
        """Take the step; returns the realised number of sampled units (never released)."""
        model = self.model
        batch = self.sample()
        tables, dense_params = model.tables(), model.dense_parameters()
        noise = self.noise
        if noise is None and self.randomness is not None:
            noise = self.randomness.normal(noise_shapes(model), step=self.step)
        if batch.num_units:
            dense_g, row_g = per_unit_gradients(model, batch, self.loss_fn, self.generator)
        else:  # an empty sample is still a step of the mechanism: noise only
            dense_g, row_g = (
                {},
                {
                    k: (
                        torch.zeros(0, 0, dtype=torch.long, device=t.device),
                        torch.zeros(0, 0, t.shape[-1], device=t.device),
                    )
                    for k, t in tables.items()
                },
            )
        for k, p in dense_params.items():
            dense_g.setdefault(k, torch.zeros((batch.num_units, *p.shape), device=p.device))
        for k, t in tables.items():  # a table no unit read (e.g. none sampled) still gets its noise
            row_g.setdefault(
                k,
                (
                    torch.zeros(batch.num_units, 0, dtype=torch.long, device=t.device),
                    torch.zeros(batch.num_units, 0, t.shape[-1], device=t.device),
                ),
            )
        if self.trained_rows is not None:
            dense_g, row_g = restrict_to_rows(dense_g, row_g, self.trained_rows)
        noised = self.mechanism(dense_g, row_g, {k: t.shape[0] for k, t in tables.items()}, noise)
        for k, p in {**dense_params, **tables}.items():
            p.grad = noised[k].to(device=p.device, dtype=p.dtype).view_as(p)
        return batch.num_units


def restrict_to_rows(
    dense_g: dict[str, torch.Tensor],
    row_g: dict[str, tuple[torch.Tensor, torch.Tensor]],
    trained_rows: dict[str, torch.Tensor],
) -> tuple[dict[str, torch.Tensor], dict[str, tuple[torch.Tensor, torch.Tensor]]]:
    """Per-unit gradients with every part outside ``trained_rows`` set to 0: the dense parameters' (a
    private-rows step never updates them), every table row not marked, and every table without a mask."""
    dense = {k: torch.zeros_like(g) for k, g in dense_g.items()}
    rows = {}
    for name, (idx, grads) in row_g.items():
        mask = trained_rows.get(name)
        if mask is None:
            rows[name] = (idx, torch.zeros_like(grads))
            continue
        keep = mask.reshape(-1).to(idx.device)[idx]
        rows[name] = (idx, grads * keep.unsqueeze(-1).to(grads.dtype))
    return dense, rows


def sample_unit_batch(
    units: UnitLinks,
    *,
    sample_rate: float,
    max_statements: int,
    num_negatives: int,
    entity_pool: torch.Tensor,
    generator: torch.Generator,
    randomness: SecretRandomness | None,
    step: int,
) -> UnitBatch:
    """A step's :class:`UnitBatch`: Poisson-sampled units (secret ``sampling`` stream), at most m links each
    (secret ``bounding`` stream), K corruptions per link (``generator``)."""
    n = units.num_units
    uniform = None if randomness is None else randomness.uniform(n, step=step)
    rows = poisson_sample(n, sample_rate=sample_rate, generator=generator, uniform=uniform)
    bounding = None
    if randomness is not None:
        counts = units.counts()[rows]
        bounding = randomness.uniform(int(counts.sum()), step=step, purpose="bounding")
    return unit_batch(
        units,
        rows,
        max_statements=max_statements,
        num_negatives=num_negatives,
        entity_pool=entity_pool,
        generator=generator,
        uniform=bounding,
    )


class UnitSGD:
    """The units trained with the unit step's batches and loss by plain SGD: no clipping, no noise.

    The non-private ceiling of a unit-level run (``--privacy none --privacy-unit entity``): the same
    representation (units folded in from their own links, leave-one-out targets), the same Poisson
    sample of units at q = B_u / N_u and the same bound m; the step's gradient is ``Σ_units loss / B_u``.
    N_u is the declared number of units when the run gives one (``--private-size``: the same q and steps
    per epoch as the private run it is the ceiling of), else the exact count (nothing is protected). It
    offers the part of :class:`~textkg.training.private_training.PrivateTraining`'s interface the trainer uses.

    Args:
        units: the training units' links.
        batch_size: B_u, the expected number of units per step.
        entity_pool, loss_fn, num_negatives, max_statements: as for :class:`UnitPrivateStep`.
        seed: the run's seed (the unit sample, the bounding and the corruptions of step t derive from it).
        declared_size: N̄_u (``privacy.private_size``), or ``None`` for the exact count.
    """

    #: the trainer records no ε for it
    accounted = False

    def __init__(
        self,
        units: UnitLinks,
        *,
        batch_size: int,
        entity_pool: torch.Tensor,
        loss_fn,
        num_negatives: int,
        max_statements: int,
        seed: int,
        declared_size: int | None = None,
    ) -> None:
        if not units.num_units:
            raise ConfigError("no training statement mentions a unit entity", field="privacy.unit_entities")
        self.units, self.entity_pool, self.loss_fn = units, entity_pool, loss_fn
        self.num_negatives, self.max_statements = num_negatives, max_statements
        self.batch_size = batch_size
        size = units.num_units if declared_size is None else declared_size
        self.sample_rate = min(1.0, batch_size / size)
        self.steps_per_epoch = max(1, round(size / batch_size))
        self.expected_units = self.sample_rate * size
        self.randomness = SecretRandomness.from_seed(seed)
        self.steps = 0

    def budget_exhausted(self) -> bool:
        return False

    def step(self, model) -> None:
        t = self.steps
        generator = self.randomness.torch_generator(step=t)
        batch = sample_unit_batch(
            self.units,
            sample_rate=self.sample_rate,
            max_statements=self.max_statements,
            num_negatives=self.num_negatives,
            entity_pool=self.entity_pool,
            generator=generator,
            randomness=self.randomness,
            step=t,
        )
        self.steps += 1
        if not batch.num_units:
            return
        plan = unit_plan(model, batch, generator)
        loss = unit_losses(model, _inputs(model, batch), model.gather(plan), self.loss_fn).sum()
        (loss / self.expected_units).backward()

    def close(self) -> None:
        pass

    def state_dict(self) -> dict:
        return {"unit_steps": self.steps}

    def load_state_dict(self, state: dict) -> None:
        self.steps = int(state.get("unit_steps", 0))

    def describe(self) -> dict:
        """What ``metrics.json``'s ``train.units`` records (no count of units: a run may be released)."""
        return {
            "unit": "entity",
            "training": "the units' statements by plain SGD (no clipping, no noise): the non-private ceiling",
            "max_statements_per_unit": self.max_statements,
            "representation": "fold-in from the unit's own links (ERAvg mean, leave-one-out per target)",
        }


def check_unit_run(units: UnitLinks) -> None:
    """Refuse a unit-level private run without a single training unit."""
    if not units.num_units:
        raise PrivacyError(
            "no training statement mentions a unit entity of --unit-entities (or none links to an entity "
            "of the public vocabulary)",
            field="privacy.unit_entities",
        )
