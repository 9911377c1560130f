"""How much memory a run will need, estimated before training starts, and a refusal when it cannot fit.

:func:`estimate_memory` counts the large buffers of a prepared run, each as
rows × width × bytes:

- ``parameters``: every trained tensor (float32), listed by its largest
  parts (the structural table, the relation table, the text projection);
- ``frozen text features``: the model's buffers (pooled or token features);
  pooled features memory-mapped from the encoder cache (``mapped_features``)
  are file-backed pages the kernel can drop, listed at 0 bytes;
- ``gradients`` and ``Adam state``: one and two float32 copies of the trained
  parameters (Adam's exp_avg and exp_avg_sq, Kingma & Ba 2015, Alg. 1);
- ``scores``: the training step's score matrix, B × (1 + k) for sampled
  negatives or B × N for 1-vs-all (``negatives: all``), with one gradient
  copy, and the evaluation's score matrix: ``eval_batch_size`` × the
  candidates scored per call, ``min(N, chunk + eval_batch_size)`` with the
  candidate chunk of :func:`textkg.evaluation.ranking.default_candidate_chunk`
  (a 256 MiB bound), plus the entity vectors that evaluation caches (N × d);
- under privacy: per-example row gradients of the sampled negatives path
  (expected B × rows read × d), per-example gradients of the dense
  parameters (``vmap(grad)``: three B × dense copies), and the noise: one float64 copy of every
  noised parameter per step held (the current step and the two that
  :class:`textkg.privacy.randomness.NoisePrefetcher` draws ahead) plus the float32
  noised gradient.

It is an estimate of the peak, not a bound: the allocator, Python objects,
torch's own workspace and the tokenizer are not counted, so
:data:`OVERHEAD_BYTES` is added. :func:`check_memory` refuses a run whose
estimate exceeds the memory available now (``MemAvailable`` of
``/proc/meminfo``; no check where that cannot be read), naming each
component, and ``TEXTKG_SKIP_MEMORY_CHECK=1`` turns the refusal off.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field

import torch

from textkg.errors import ConfigError

#: Fixed allowance for what the component list does not count (interpreter, torch, allocator slack).
OVERHEAD_BYTES = 768 * 2**20
#: Steps of float64 noise held at once under privacy (the current one and two drawn ahead).
NOISE_STEPS_HELD = 3
#: Environment variable that turns the refusal (not the estimate) off.
SKIP_ENV = "TEXTKG_SKIP_MEMORY_CHECK"


@dataclass
class MemoryEstimate:
    """Estimated peak bytes by component (``components``), plus :data:`OVERHEAD_BYTES`."""

    components: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.components.values()) + OVERHEAD_BYTES

    def to_dict(self) -> dict:
        return {"components_bytes": dict(self.components), "overhead_bytes": OVERHEAD_BYTES, "total_bytes": self.total}

    def describe(self) -> str:
        parts = ", ".join(
            f"{name} {_human(n)}" for name, n in sorted(self.components.items(), key=lambda kv: -kv[1]) if n
        )
        return f"{_human(self.total)} ({parts}, overhead {_human(OVERHEAD_BYTES)})"


def placement_bytes(*, num_valid_queries: int, num_candidates: int, num_entities: int, batch: int = 256) -> int:
    """The placement evaluation's peak (:mod:`textkg.evaluation.placement.combination`), an upper bound:
    sized as when the tuner kept each component's standardised validation scores (3 components x
    queries x candidates, float32) while it tried the weight grid; since 2026-11-28 it ranks a batch of
    terms at a time (:func:`textkg.evaluation.placement.grid.weighting_ranks`), which needs less. A
    batch of new terms holds about six float64 ``batch x N`` work arrays (neighbour-vote weights and
    their roll-up, scores, standardisation)."""
    return 3 * 4 * num_valid_queries * num_candidates + 6 * 8 * batch * num_entities


def eval_score_columns(eval_batch_size: int, num_entities: int) -> int:
    """Candidates one evaluation call scores: the default candidate chunk plus the batch's targets
    appended to it (:mod:`textkg.evaluation.ranking`), at most every entity."""
    from textkg.evaluation.ranking import default_candidate_chunk

    return min(num_entities, default_candidate_chunk(eval_batch_size) + eval_batch_size)


def estimate_memory(
    model: torch.nn.Module,
    cfg,
    *,
    num_entities: int,
    private: bool,
    placement: tuple[int, int] | None = None,
    mapped_features: bool = False,
) -> MemoryEstimate:
    """Estimate a run's peak memory from its built model and config.

    Args:
        model: The built model (parameters and buffers allocated; nothing trained yet).
        cfg: The :class:`~textkg.training.config.RunConfig`.
        num_entities: Entities in the graph (candidates of 1-vs-all and of evaluation).
        private: Whether training is DP-SGD (``--privacy`` other than ``none``).
        placement: ``(validation placement queries, candidates)`` when the run evaluates
            placement of new terms (:func:`placement_bytes`), else ``None``.
        mapped_features: The pooled text features are memory-mapped from the
            encoder cache (``TEXTKG_MMAP_FEATURES=1``): their pages are file-backed
            and reclaimable, so they are listed at 0 bytes with their size on disk.
    """
    tc = cfg.train
    trained = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    param_bytes = sum(p.numel() * p.element_size() for _, p in trained)
    largest = sorted(trained, key=lambda np_: -np_[1].numel())[:3]
    buffers = dict(model.named_buffers())
    mapped = {n: b for n, b in buffers.items() if mapped_features and n.endswith("text_text_features")}
    c: dict[str, int] = {
        "parameters (" + ", ".join(f"{n} {tuple(p.shape)}" for n, p in largest) + ")": param_bytes,
        "frozen text features": sum(b.numel() * b.element_size() for n, b in buffers.items() if n not in mapped),
        "gradients": param_bytes,
        "Adam state": 2 * param_bytes,
    }
    if mapped:
        on_disk = sum(b.numel() * b.element_size() for b in mapped.values())
        c[f"pooled text features, memory-mapped ({_human(on_disk)} on disk, read on touch)"] = 0
    dim = max((p.shape[-1] for _, p in trained if p.ndim == 2), default=getattr(cfg.model, "dim", 0))
    b = tc.batch_size
    if tc.negatives == "all":
        pool = tc.pool_size or num_entities
        c["training scores (B x candidates, with gradient)"] = 2 * 4 * b * pool
        c["candidate representations (candidates x d, with gradient)"] = 2 * 4 * pool * dim
    else:
        c["training scores (B x (1 + k), with gradient)"] = 2 * 4 * b * (1 + tc.num_negatives)
        c["gathered rows (B x (2 + k) x d, with gradient)"] = 2 * 4 * b * (2 + tc.num_negatives) * dim
    c["evaluation scores (eval batch x candidate chunk)"] = (
        3 * 4 * eval_score_columns(tc.eval_batch_size, num_entities) * tc.eval_batch_size
    )
    c["entity vectors cached for evaluation (N x d)"] = 4 * num_entities * dim
    if private and tc.negatives == "all":  # exact clipping, no per-example gradients (training.one_vs_all)
        pool = num_entities
        c["1-vs-all clipping (B x candidates factors, chunk workspace)"] = 4 * (2 * b * pool + 12 * (1 << 22))
        c["(candidates x candidates) feature Gram, cached up to 16384 candidates"] = (
            4 * pool * pool if pool * pool <= 1 << 28 else 0
        )
    elif private:
        c["per-example gradients (B x rows read x d)"] = 4 * b * (3 + tc.num_negatives) * dim
        tables_of = getattr(model, "tables", None)  # KGEModel's row-gathered tables; other modules have none
        tables = tables_of() if tables_of is not None else {}
        dense = sum(p.numel() for _, p in trained) - sum(t.numel() for t in tables.values())
        if dense > 0:  # vmap(grad) over the dense parameters: per-example grads, their clipped copy, workspace
            c["per-example dense gradients (3 x B x dense parameters)"] = 3 * 4 * b * dense
    if placement is not None:
        c["placement evaluation (tuner's validation scores, vote work arrays)"] = placement_bytes(
            num_valid_queries=placement[0], num_candidates=placement[1], num_entities=num_entities
        )
    if private:
        c[f"DP noise (float64, {NOISE_STEPS_HELD} steps held, + float32 noised gradient)"] = (
            NOISE_STEPS_HELD * 8 + 4
        ) * sum(p.numel() for _, p in trained)
    return MemoryEstimate(c)


def available_bytes() -> int | None:
    """``MemAvailable`` from ``/proc/meminfo`` (Linux), else ``None``."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def check_memory(estimate: MemoryEstimate, *, available: int | None = None, quiet: bool = False) -> None:
    """Print the estimate on stderr; refuse (:class:`ConfigError`) if it exceeds ``available``.

    ``available=None`` reads :func:`available_bytes`; if that is unknown too,
    nothing is refused. ``TEXTKG_SKIP_MEMORY_CHECK=1`` prints but never refuses.
    """
    available = available_bytes() if available is None else available
    if not quiet:
        of = "" if available is None else f" of {_human(available)} available"
        print(f"memory estimate: {estimate.describe()}{of}", file=sys.stderr)
    if available is None or estimate.total <= available or os.environ.get(SKIP_ENV) == "1":
        return
    raise ConfigError(
        f"this run needs an estimated {estimate.describe()}, more than the {_human(available)} available. "
        f"Lower --batch-size or eval_batch_size, use a smaller --dim, or run on a larger machine "
        f"(set {SKIP_ENV}=1 to try anyway)",
        field="memory",
    )


def _human(n: int) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"
