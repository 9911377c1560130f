"""Representations: what an entity *is* before fusion.

* :class:`StructuralRepresentation` — a trainable table with one row per
  entity seen in training plus one learned **unseen** row shared by every
  other entity. ``struct_index[e]`` is entity ``e``'s row. A held-out entity
  therefore never reads (or writes) a row trained on another entity's
  statements. Structural dropout (training only) swaps a seen entity's row
  for the unseen row with probability ``p`` so that the model learns to work
  without structure, as it must for unseen entities at test time.
* :class:`TextRepresentation` — public per-entity description inputs held as
  buffers (never trained, never privatised: descriptions are public), an
  optional trainable text module over them, and a trainable linear
  projection to the model width.
"""

from __future__ import annotations

import torch
from torch import nn

from textkg.errors import ConfigError


class StructuralRepresentation(nn.Module):
    """Structural rows: ``(n_seen + 1, d)`` (or ``(K + 1, d)`` hashed); the last row is the unseen row.

    Args:
        num_entities: Size of the global entity id space.
        seen_entities: ``(n_seen,)`` long ids of the entities seen in training
            (distinct, in ``[0, num_entities)``).
        dim: Width ``d``.
        dropout: Structural dropout probability in ``[0, 1)``.
        buckets: ``0`` (one row per seen entity) or ``K``: seen entities share
            ``K`` hashed rows (fewer rows, each trained by more statements:
            one option for a table that DP noise would drown).

    Buffers:
        ``struct_index (num_entities,)``: global id → table row (``n_seen`` =
        the unseen row).
    """

    struct_index: torch.Tensor  # the buffer above, registered in __init__

    def __init__(
        self, num_entities: int, seen_entities: torch.Tensor, dim: int, *, dropout: float = 0.0, buckets: int = 0
    ) -> None:
        super().__init__()
        seen = check_seen_entities(seen_entities, num_entities)
        if not 0.0 <= dropout < 1.0:
            raise ConfigError(
                f"structural_dropout must be in [0, 1), got {dropout!r}", field="model.structural_dropout"
            )
        if isinstance(buckets, bool) or not isinstance(buckets, int) or buckets < 0:
            raise ConfigError(f"must be a non-negative integer, got {buckets!r}", field="model.structural_buckets")
        self.dropout = float(dropout)
        n_seen = len(seen)
        # Hashed rows (the "hashing trick", Weinberger et al. 2009): seen entity i (in sorted-id
        # order) shares row i mod K. The map depends only on the seen ids, which are public
        # whenever the run is private (the public vocabulary), so it reveals nothing.
        n_rows = min(buckets, n_seen) if buckets else n_seen
        self.buckets = int(buckets)
        self.unseen_row = n_rows
        index = torch.full((num_entities,), n_rows, dtype=torch.long)
        index[seen] = torch.arange(n_seen) % max(n_rows, 1)
        self.register_buffer("struct_index", index)
        self.weight = nn.Parameter(torch.empty(n_rows + 1, dim))
        nn.init.xavier_uniform_(self.weight)

    def rows(
        self, entities: torch.Tensor, *, generator: torch.Generator | None = None, training: bool = False
    ) -> torch.Tensor:
        """Table rows ``entities.shape`` that ``entities`` read.

        Structural dropout applies only when ``training`` and a ``generator``
        is given: each occurrence of a seen entity independently reads the
        unseen row with probability ``dropout``.
        """
        rows = self.struct_index[entities]
        if training and generator is not None and self.dropout > 0:
            # drawn where the generator lives (the CPU's for training runs), then moved: every device
            # sees the same mask, and a CPU run draws exactly what it always drew
            drop = (torch.rand(rows.shape, generator=generator, device=generator.device) < self.dropout).to(rows.device)
            rows = torch.where(drop, torch.full_like(rows, self.unseen_row), rows)
        return rows


def check_seen_entities(seen_entities: torch.Tensor, num_entities: int) -> torch.Tensor:
    """Validate and sort the seen-entity ids; returns a ``(n_seen,)`` long tensor."""
    seen = torch.as_tensor(seen_entities)
    if seen.ndim != 1 or (seen.numel() and (seen.dtype.is_floating_point or seen.dtype == torch.bool)):
        raise ConfigError(
            f"seen_entities must be a 1-d tensor of entity ids, got shape {tuple(seen.shape)} and dtype {seen.dtype}",
            field="seen_entities",
        )
    seen = seen.long().sort().values
    if seen.numel() and (int(seen[0]) < 0 or int(seen[-1]) >= num_entities):
        raise ConfigError(f"seen_entities must lie in [0, {num_entities})", field="seen_entities")
    if seen.numel() > 1 and bool((seen[1:] == seen[:-1]).any()):
        raise ConfigError("seen_entities holds duplicate ids", field="seen_entities")
    return seen


class TextRepresentation(nn.Module):
    """Projected description vectors from public per-entity inputs.

    ``x(e) = W · module(inputs_1[e], inputs_2[e], …) + b``; without a module,
    ``x(e) = W · inputs_1[e] + b`` (pooled features).

    Args:
        inputs: Public per-entity tensors, each ``(num_entities, …)``, in the
            order the module takes them, e.g. ``{"text_features": (n, D)}``,
            ``{"token_features": (n, L, d_tok), "token_mask": (n, L)}`` or
            ``{"input_ids": (n, L), "attention_mask": (n, L)}``. Stored as
            buffers named ``text_<key>``.
        dim: Model width ``d``.
        module: Optional trainable module with ``forward(*inputs[ids]) -> (k, D)``
            (DKRL CNN, a fine-tuned transformer wrapper, …).
        module_dim: ``D``, the module's output width (required with a module).
        copy_inputs: Store copies of ``inputs`` (the default). ``False`` keeps
            the given tensors themselves, e.g. features memory-mapped from the
            encoder cache, which then stay on disk until rows are read; the
            caller must not change them afterwards.
        persistent_inputs: Keep the inputs in ``state_dict`` (the default). ``False`` for
            inputs the pipeline rebuilds from the descriptions anyway and that would bloat
            every checkpoint (``top-layers``: cached hidden states, ``(n, T, d)``).
    """

    def __init__(
        self,
        inputs: dict[str, torch.Tensor],
        dim: int,
        *,
        module: nn.Module | None = None,
        module_dim: int | None = None,
        copy_inputs: bool = True,
        persistent_inputs: bool = True,
    ) -> None:
        super().__init__()
        if not inputs:
            raise ConfigError("a text representation needs at least one input tensor", field="text_features")
        sizes = {k: int(v.shape[0]) for k, v in inputs.items()}
        if len(set(sizes.values())) != 1:
            raise ConfigError(f"text inputs disagree on the number of entities: {sizes}", field="text_features")
        self.keys = tuple(inputs)
        for key, value in inputs.items():
            stored = value.detach().clone() if copy_inputs else value.detach()
            self.register_buffer(f"text_{key}", stored, persistent=persistent_inputs)
        self.module = module
        if module is None:
            first = inputs[self.keys[0]]
            if first.ndim != 2 or not first.dtype.is_floating_point:
                raise ConfigError(
                    f"pooled text features must be a float (n, D) tensor, got shape "
                    f"{tuple(first.shape)} and dtype {first.dtype}",
                    field="text_features",
                )
            in_dim = first.shape[1]
        else:
            if module_dim is None:
                raise ConfigError("module_dim is required with a text module", field="text_module")
            in_dim = module_dim
        self.projection = nn.Linear(in_dim, dim)

    @property
    def num_entities(self) -> int:
        return int(getattr(self, f"text_{self.keys[0]}").shape[0])

    def encode(self, *inputs: torch.Tensor) -> torch.Tensor:
        """``(k, d)`` projected vectors of ``k`` entities given their inputs ``(k, …)`` each."""
        x = inputs[0] if self.module is None else self.module(*inputs)
        return self.projection(x.to(self.projection.weight.dtype))

    def forward(self, entities: torch.Tensor) -> torch.Tensor:
        """Projected description vectors ``(*entities.shape, d)`` of entity ids ``entities``."""
        flat = entities.reshape(-1)
        if self.module is None and flat.numel() > self.num_entities:
            # Training batches with many negatives read each entity many times:
            # projecting every entity once and gathering the rows is the same
            # function at a fraction of the cost (pooled features only).
            out = self.encode(getattr(self, f"text_{self.keys[0]}"))[flat]
            return out.reshape(*entities.shape, out.shape[-1])
        encode_rows = getattr(self.module, "encode_rows", None)  # None also when there is no module
        if encode_rows is not None:
            # the module gathers its own rows (DKRL: per length bucket, without the padding)
            x = encode_rows(*(getattr(self, f"text_{k}") for k in self.keys), rows=flat)
            out = self.projection(x.to(self.projection.weight.dtype))
            return out.reshape(*entities.shape, out.shape[-1])
        gathered = [getattr(self, f"text_{k}")[flat] for k in self.keys]
        out = self.encode(*gathered)
        return out.reshape(*entities.shape, out.shape[-1])


class PooledTransformer(nn.Module):
    """Adapter: a Hugging Face encoder as ``forward(input_ids, attention_mask) -> (n, D)``.

    For fine-tuning a transformer as the text module (``text_module="finetune"``;
    the training pipeline builds one in :func:`textkg.training.features.finetune_module`).
    Per-example gradients (DP-SGD) run it under ``torch.func.vmap``, which needs
    the model loaded with ``attn_implementation="eager"``: the SDPA mask helper
    branches on the data (``torch.all(mask == 1)``).

    Args:
        model: A ``transformers`` model returning ``last_hidden_state``.
        pooling: ``"cls"`` (first token, as BLP) or ``"mean"`` (masked mean).
    """

    def __init__(self, model: nn.Module, *, pooling: str = "cls") -> None:
        super().__init__()
        if pooling not in ("cls", "mean"):
            raise ConfigError(f"pooling must be 'cls' or 'mean', got {pooling!r}", field="pooling")
        self.model, self.pooling = model, pooling
        hidden = getattr(getattr(model, "config", None), "hidden_size", None)
        if isinstance(hidden, int) and not isinstance(hidden, bool):
            self.out_dim = hidden  # ``D``; build_model reads it instead of a dry run

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        hidden = self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        if self.pooling == "cls":
            return hidden[:, 0]
        m = attention_mask.to(hidden.dtype).unsqueeze(-1)
        return (hidden * m).sum(1) / m.sum(1).clamp(min=1.0)
