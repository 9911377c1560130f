"""How much memory a run will need, estimated before training starts, and a refusal when it cannot fit.

The estimate is an upper bound of the run's peak resident set size (issue 50: it said 1.9 GiB where
the README job peaked at 2.27–2.41 GiB). It is made after :func:`textkg.pipeline.prepared.prepare`,
so what already exists is measured, not modelled, and only what is still to come is counted:

    total = max(peak so far, resident now + Σ components to come) × (1 + MARGIN_FRACTION) + MARGIN_BYTES

- ``resident now`` (``VmRSS`` of ``/proc/self/status``) holds what no row count describes: the
  interpreter, torch and textkg (about 245 MiB), the graph's Python objects (names, descriptions,
  id maps) and what building it left in the allocator, ``transformers`` (235 MiB) and the text
  encoder's weights when the texts were encoded in this process (a cold cache), the encoded
  features, the filter index and the built model (``parameters`` and ``frozen text features``, listed
  for the reader and not counted again). ``peak so far`` (``VmHWM``) covers a transient peak of the
  encoding. Where ``/proc`` cannot be read, :data:`RUNTIME_BYTES` plus the model stands for them.
- The components to come, each rows × width × bytes:

- ``gradients`` and ``Adam state``: one and two float32 copies of the trained
  parameters (Adam's exp_avg and exp_avg_sq, Kingma & Ba 2015, Alg. 1);
- ``scores``: the training step's score matrix, B × (1 + k) for sampled
  negatives or B × N for 1-vs-all (``negatives: all``), with one gradient
  copy, and the evaluation's score matrix: ``eval_batch_size`` × the
  candidates scored per call, ``min(N, chunk + eval_batch_size)`` with the
  candidate chunk of :func:`textkg.evaluation.ranking.default_candidate_chunk`
  (a 256 MiB bound), plus the entity vectors that evaluation caches (N × d);
- the post-run report (:mod:`textkg.pipeline.memory_report`, each part naming the tensors it counts):
  the placement evaluation of ontology terms (normalised copies of the description features, sparse
  text matrices, MiniLM word vectors), or the description neighbour vote, the link re-ranker and k-shot
  of other inductive splits (the vote's kernel, the re-ranker's ``(lists, K, F)`` features, k-shot's
  entity matrices); then the largest transient of those stages (one batch of terms or lists, one fit;
  the stages run one at a time and free their batches), and the same again for what the allocator keeps
  of it (:data:`RETENTION`);
- ``text encoders loaded after the estimate`` (runs with a placement task): the placement re-ranker
  reads MiniLM word vectors and the names-only placement encodes the held-out terms' names again,
  so MiniLM's weights (their size on disk) and, unless already imported, ``transformers``
  (:data:`TRANSFORMERS_BYTES`) are loaded during evaluation, also on a warm cache;
- under privacy: per-example row gradients of the sampled negatives path
  (expected B × rows read × d), per-example gradients of the dense
  parameters (``vmap(grad)``: three B × dense copies), and the noise: one float64 copy of every
  noised parameter per step held (the current step and the two that
  :class:`textkg.privacy.randomness.NoisePrefetcher` draws ahead) plus the float32
  noised gradient.

The margin covers what evaluation builds in Python that no component lists (metric lists, the texts'
word sets) and allocator slack. Measured against the peak
on ``hpo`` (the README job), ``hpo-small``, an ontology file and FB15k-237 by
``benchmarks/memory_estimate.py`` (docs/results/scaling.md, "Memory estimate before a run").
:func:`check_memory` refuses a run whose estimate, less what is already resident, exceeds the memory
available now (``MemAvailable`` of ``/proc/meminfo``; no check where that cannot be read), naming
each component, and ``TEXTKG_SKIP_MEMORY_CHECK=1`` turns the refusal off.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

import torch

from textkg.errors import ConfigError
from textkg.pipeline.memory_report import (
    TRANSIENT,
    LinkStageSize,
    PlacementSize,
    link_stage_parts,
    placement_parts,
)

#: Where ``/proc/self/status`` cannot be read: the interpreter, torch, textkg and the graph, in place of
#: the measured resident size (the allowance the estimate used before issue 50).
RUNTIME_BYTES = 768 * 2**20
#: What importing ``transformers`` (and ``tokenizers``) adds to a process that has torch and textkg:
#: 235 MiB measured (torch 2.13, transformers 4.x, Linux x86-64), rounded up.
TRANSFORMERS_BYTES = 256 * 2**20
#: The margin over the sum: evaluation's Python and numpy objects that no component lists, allocator slack.
MARGIN_FRACTION = 0.10
MARGIN_BYTES = 128 * 2**20
#: Steps of float64 noise held at once under privacy (the current one and two drawn ahead).
NOISE_STEPS_HELD = 3
#: Component names of the post-run report (their parts: :mod:`textkg.pipeline.memory_report`).
PLACEMENT = "placement evaluation (description feature copies, text matrices, word vectors)"
LINK_STAGES = "neighbour vote, link re-ranker and k-shot (kernel, lists, entity matrices)"
#: glibc keeps freed blocks below its mmap threshold (32 MiB at most) in the heap for reuse instead of returning
#: them: a stage's freed temporaries can stay resident beside the next ones, counted as the largest once more
#: (measured on hp.obo: 343 MiB kept beside a 663 MiB live working set of the placement evaluation).
POST_RUN_TRANSIENT = "largest transient of the post-run report (one batch of terms or lists, one fit)"
RETENTION = "allocator retention (the largest transient's freed blocks, kept in the heap)"
#: Environment variable that turns the refusal (not the estimate) off.
SKIP_ENV = "TEXTKG_SKIP_MEMORY_CHECK"


@dataclass
class MemoryEstimate:
    """An upper bound of a run's peak memory: what is resident now, the components still to come, a margin.

    Attributes:
        components: Bytes each buffer still to be allocated will take (gradients, Adam state, scores, ...).
        resident: Bytes resident when the estimate was made (``VmRSS``), or the stand-in for them.
        peak_so_far: The process's peak until then (``VmHWM``; ``resident`` where unknown).
        in_resident: Parts of ``resident`` named for the reader (the model's parameters and features);
            not added again.
        parts: The named parts of the post-run report's components (:mod:`textkg.pipeline.memory_report`),
            by component; their largest transient is counted in its own component.
    """

    components: dict[str, int] = field(default_factory=dict)
    resident: int = 0
    peak_so_far: int = 0
    in_resident: dict[str, int] = field(default_factory=dict)
    parts: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def before_margin(self) -> int:
        return max(self.peak_so_far, self.resident + sum(self.components.values()))

    @property
    def margin(self) -> int:
        return int(MARGIN_FRACTION * self.before_margin) + MARGIN_BYTES

    @property
    def total(self) -> int:
        return self.before_margin + self.margin

    @property
    def still_needed(self) -> int:
        """What the run will allocate beyond what it holds now: the part that must fit in available memory."""
        return max(0, self.total - self.resident)

    def to_dict(self) -> dict:
        return {
            "components_bytes": dict(self.components),
            "resident_bytes": self.resident,
            "peak_so_far_bytes": self.peak_so_far,
            "in_resident_bytes": dict(self.in_resident),
            "parts_bytes": {name: dict(named) for name, named in self.parts.items()},
            "margin_bytes": self.margin,
            "total_bytes": self.total,
        }

    def describe(self) -> str:
        parts = ", ".join(
            f"{name} {_human(n)}" for name, n in sorted(self.components.items(), key=lambda kv: -kv[1]) if n
        )
        held = ", ".join(f"{name} {_human(n)}" for name, n in self.in_resident.items() if n)
        now = f"resident now {_human(self.resident)}" + (f" (of which {held})" if held else "")
        return f"{_human(self.total)} ({now}; to come: {parts or 'nothing'}; margin {_human(self.margin)})"


def resident_bytes() -> tuple[int, int] | None:
    """``(VmRSS, VmHWM)`` of this process in bytes (Linux), else ``None``."""
    found: dict[str, int] = {}
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as f:
            for line in f:
                key = line.split(":", 1)[0]
                if key in ("VmRSS", "VmHWM"):
                    found[key] = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    if "VmRSS" not in found:
        return None
    return found["VmRSS"], max(found["VmRSS"], found.get("VmHWM", 0))


#: the component line of the placement cross-encoder (``train.placement_cross_encoder``)
CROSS_ENCODER = "placement cross-encoder (fine-tuned weights, gradients, Adam state, activations)"
#: a cross-encoder fine-tuning step's activations and their gradients (64 pairs x 64 word pieces x 6 layers)
CROSS_ENCODER_ACTIVATIONS = 256 * 2**20


def encoders_after_estimate(cfg) -> int:
    """Bytes of the text encoders a run with a placement task loads during evaluation: MiniLM (the
    re-ranker's word vectors; the names-only placement's encoder when the run uses it), another
    transformer folder the run's names-only placement encodes with, and ``transformers`` itself unless
    it is imported already. Weights count at their size on disk (safetensors, float32)."""
    folders = {_minilm_folder()}
    if getattr(cfg.train, "placement_extras", "on") == "on":
        folders |= _transformer_folders(getattr(cfg.model, "encoder", None), getattr(cfg.model, "encoder_kwargs", {}))
    weights = sum(_weights_on_disk(f) for f in folders if f is not None)
    return weights + (0 if "transformers" in sys.modules else TRANSFORMERS_BYTES)


def cross_encoder_estimate(cfg) -> int:
    """Bytes of the placement cross-encoder a run with ``train.placement_cross_encoder`` fine-tunes during
    evaluation (:mod:`textkg.training.adapt_cross`): the packaged MiniLM's weights, their gradients, Adam's two
    moments and the copy loaded from the run folder to score with (5 x its weights on disk), and one step's
    activations (:data:`CROSS_ENCODER_ACTIVATIONS`); 0 without it."""
    if not getattr(cfg.train, "placement_cross_encoder", 0):
        return 0
    minilm = _minilm_folder()
    return 5 * (_weights_on_disk(minilm) if minilm is not None else 0) + CROSS_ENCODER_ACTIVATIONS


def _minilm_folder() -> str | None:
    try:
        from textkg.encoders.bert import default_minilm_path

        return default_minilm_path()
    except Exception:  # the package missing: the run fails at evaluation, not here
        return None


def _transformer_folders(encoder: str | None, kwargs: dict) -> set[str | None]:
    if encoder in ("bert", "sentence-transformers"):
        return {kwargs.get("model_name_or_path") or _minilm_folder()}
    if encoder == "concat":
        return set().union(*(_transformer_folders(p.get("name"), p) for p in kwargs.get("parts", [])))
    return set()


def _weights_on_disk(folder: str) -> int:
    """Bytes of the weight files in a local model folder (0 for a hub id or a missing folder)."""
    path = Path(folder)
    if not path.is_dir():
        return 0
    return sum(f.stat().st_size for f in path.iterdir() if f.suffix in (".safetensors", ".bin") and f.is_file())


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
    placement: PlacementSize | None = None,
    link_stage: LinkStageSize | None = None,
    mapped_features: bool = False,
    resident: tuple[int, int] | None = None,
) -> MemoryEstimate:
    """Estimate a run's peak memory from its built model and config.

    Args:
        model: The built model (parameters and buffers allocated; nothing trained yet).
        cfg: The :class:`~textkg.training.config.RunConfig`.
        num_entities: Entities in the graph (candidates of 1-vs-all and of evaluation).
        private: Whether training is DP-SGD (``--privacy`` other than ``none``).
        placement: The placement evaluation's sizes when the run evaluates placement of new terms
            (:func:`textkg.pipeline.memory_report.placement_size`), else ``None``.
        link_stage: The sizes of the neighbour vote, the link re-ranker and k-shot when the run reports
            them (:func:`textkg.pipeline.memory_report.link_stage_size`), else ``None``.
        mapped_features: The pooled text features are memory-mapped from the
            encoder cache (``TEXTKG_MMAP_FEATURES=1``): their pages are file-backed
            and reclaimable, so they are listed at 0 bytes with their size on disk.
        resident: ``(resident now, peak so far)`` in bytes; ``None`` reads them
            (:func:`resident_bytes`), and where that fails :data:`RUNTIME_BYTES` plus
            the model's parameters and features stand for them.
    """
    tc = cfg.train
    trained = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    param_bytes = sum(p.numel() * p.element_size() for _, p in trained)
    largest = sorted(trained, key=lambda np_: -np_[1].numel())[:3]
    buffers = dict(model.named_buffers())
    mapped = {n: b for n, b in buffers.items() if mapped_features and n.endswith("text_text_features")}
    held = {
        "parameters (" + ", ".join(f"{n} {tuple(p.shape)}" for n, p in largest) + ")": param_bytes,
        "frozen text features": sum(b.numel() * b.element_size() for n, b in buffers.items() if n not in mapped),
    }
    c: dict[str, int] = {
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
    parts: dict[str, dict[str, int]] = {}
    if placement is not None:
        parts[PLACEMENT] = placement_parts(placement)
        c["text encoders loaded for placement (MiniLM word vectors, names-only encoding)"] = encoders_after_estimate(
            cfg
        )
        if cross_encoder_estimate(cfg):
            c[CROSS_ENCODER] = cross_encoder_estimate(cfg)
    if link_stage is not None:
        parts[LINK_STAGES] = link_stage_parts(link_stage)
    for name, named in parts.items():
        c[name] = sum(v for k, v in named.items() if k != TRANSIENT)
    if parts:  # one stage runs at a time: the largest transient, and once more for what the allocator keeps
        transient = max(named.get(TRANSIENT, 0) for named in parts.values())
        c[POST_RUN_TRANSIENT] = transient
        c[RETENTION] = transient
    if private:
        c[f"DP noise (float64, {NOISE_STEPS_HELD} steps held, + float32 noised gradient)"] = (
            NOISE_STEPS_HELD * 8 + 4
        ) * sum(p.numel() for _, p in trained)
    if resident is None:
        resident = resident_bytes()
    if resident is None:  # no /proc: the old allowance for the runtime and the graph, plus the model
        now = RUNTIME_BYTES + sum(held.values())
        resident = (now, now)
    return MemoryEstimate(c, resident=resident[0], peak_so_far=max(resident), in_resident=held, parts=parts)


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
    """Print the estimate on stderr; refuse (:class:`ConfigError`) if what it still needs exceeds ``available``.

    ``available=None`` reads :func:`available_bytes`; if that is unknown too,
    nothing is refused. ``TEXTKG_SKIP_MEMORY_CHECK=1`` prints but never refuses.
    """
    available = available_bytes() if available is None else available
    if not quiet:
        more = _human(estimate.still_needed)
        of = "" if available is None else f"; {more} more than held now, {_human(available)} available"
        print(f"memory estimate: {estimate.describe()}{of}", file=sys.stderr)
    if available is None or estimate.still_needed <= available or os.environ.get(SKIP_ENV) == "1":
        return
    raise ConfigError(
        f"this run needs an estimated {estimate.describe()}: {_human(estimate.still_needed)} more than it holds, "
        f"more than the {_human(available)} available. "
        f"Lower --batch-size or eval_batch_size, use a smaller --dim, or run on a larger machine "
        f"(set {SKIP_ENV}=1 to try anyway)",
        field="memory",
    )


def _human(n: int) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"
