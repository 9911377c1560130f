"""Fine-tune the top transformer layer(s) over cached lower-layer hidden states.

BLP (Daza, Cochez & Groth 2021, arXiv:2010.03496) fine-tunes the whole encoder end to end;
on a CPU that is far too slow. Here the lower ``L - k`` layers are frozen and their token
states cached once (:class:`textkg.encoders.lower_layers.BertLowerLayers`); only the top ``k``
layers (initialised from the pretrained weights) and the pooling run at training time.

The cost that remains is the 1-vs-all loss: it scores every candidate, and each
candidate's vector depends on the trained layers. Running them over ~12k candidate
descriptions per step is out of reach on one CPU thread (~40 s), so in training:

* the pooled output of every candidate is kept in a **candidate cache** and recomputed
  (without gradient) when it is ``refresh_every`` steps old: an amortised
  ``n / refresh_every`` descriptions per step;
* the step's **live** rows, the batch's own heads and tails when the loss names them
  (:meth:`focus`), at most ``live`` of them, are recomputed with gradient and replace
  their cached rows; only they carry gradient to the top layers. The projection and
  everything after it are trained through every row, cached or live.

Evaluation, ``textkg predict`` and ``textkg place`` (eval mode or no gradient) always run
the current layers over the requested rows: the cache is never read outside training.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import nn

from textkg.errors import ConfigError

#: ``pooling`` values: ``mean+cls`` is the concatenation of both, each L2-normalised (as ``concat`` features)
TOP_POOLINGS = ("cls", "mean", "mean+cls")
#: rows run through the layers at once outside the live path (bounds the activations' memory)
_CHUNK = 1024


class TopLayers(nn.Module):
    """Trainable top transformer layers + pooling: ``forward(hidden, mask) -> (n, D)``.

    Args:
        layers: The top ``k`` layers (e.g. ``BertLayer`` modules with eager attention),
            each called as ``layer(hidden, attention_mask=additive_mask)[0]``.
        hidden_size: ``d``, the width of the token states.
        pooling: One of :data:`TOP_POOLINGS`. ``D = d`` (``2d`` for ``mean+cls``).
        live: Most rows recomputed with gradient per training step.
        refresh_every: Age in training steps after which a cached candidate row is recomputed.
        lr_scale: Learning-rate factor of these layers' parameters (read by the optimizer).

    Raises:
        ConfigError: A bad argument (the ``model.text_module_kwargs`` field is named).
    """

    #: the hidden states are rebuilt from the descriptions (and the disk cache): not saved in checkpoints
    persistent_inputs = False
    step_count: torch.Tensor  # () long, training calls so far (persistent: resume continues the schedule)
    _cached: torch.Tensor  # (n, D) float32 candidate cache (not saved)
    _cached_at: torch.Tensor  # (n,) long, the step each cached row was computed at

    def __init__(
        self,
        layers: list[nn.Module],
        *,
        hidden_size: int,
        pooling: str = "mean+cls",
        live: int = 32,
        refresh_every: int = 400,
        lr_scale: float = 0.002,
    ) -> None:
        super().__init__()
        field = "model.text_module_kwargs"
        if pooling not in TOP_POOLINGS:
            raise ConfigError(f"must be one of {', '.join(TOP_POOLINGS)}, got {pooling!r}", field=f"{field}.pooling")
        for name, value in (("live", live), ("refresh_every", refresh_every)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"must be an integer >= 1, got {value!r}", field=f"{field}.{name}")
        if isinstance(lr_scale, bool) or not isinstance(lr_scale, (int, float)) or not lr_scale > 0:
            raise ConfigError(f"must be a number > 0, got {lr_scale!r}", field=f"{field}.lr_scale")
        self.layers = nn.ModuleList(layers)
        self.pooling, self.live, self.refresh_every = pooling, live, refresh_every
        self.lr_scale = float(lr_scale)
        self.out_dim = 2 * hidden_size if pooling == "mean+cls" else hidden_size
        self.register_buffer("step_count", torch.zeros((), dtype=torch.long))
        # the candidate cache: derived from the weights, so never saved (a resumed run refills it)
        self.register_buffer("_cached", torch.zeros(0, self.out_dim), persistent=False)
        self.register_buffer("_cached_at", torch.zeros(0, dtype=torch.long), persistent=False)
        self._focus: torch.Tensor | None = None
        self._calls = 0  # training calls (a step may make several: entity_matrix works in chunks)

    # -- the function ------------------------------------------------------------------------
    def forward(self, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """``(n, D)`` pooled output of the top layers over ``(n, T, d)`` states and ``(n, T)`` mask."""
        mask = mask.bool()
        hidden = hidden.to(next(self.layers[0].parameters()).dtype)
        additive = (~mask)[:, None, None, :].to(hidden.dtype) * torch.finfo(hidden.dtype).min
        for layer in self.layers:
            hidden = layer(hidden, attention_mask=additive)[0]
        return self._pool(hidden, mask)

    def _pool(self, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        cls = hidden[:, 0]
        m = mask.to(hidden.dtype).unsqueeze(-1)
        mean = (hidden * m).sum(1) / m.sum(1).clamp(min=1.0)
        if self.pooling == "cls":
            return cls
        if self.pooling == "mean":
            return mean
        return torch.cat([F.normalize(mean, dim=-1), F.normalize(cls, dim=-1)], dim=-1)

    def _run(self, hidden: torch.Tensor, mask: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """``forward`` on ``rows`` of the full inputs, trimmed to their longest row, in chunks."""
        parts = []
        for lo in range(0, len(rows), _CHUNK):
            idx = rows[lo : lo + _CHUNK]
            m = mask[idx].bool()
            width = max(int(m.sum(1).max()), 1) if len(idx) else 1
            parts.append(self(hidden[idx, :width], m[:, :width]))
        return torch.cat(parts) if parts else hidden.new_zeros(0, self.out_dim)

    # -- rows for TextRepresentation -----------------------------------------------------------
    @contextlib.contextmanager
    def focus(self, entities: torch.Tensor) -> Iterator[None]:
        """One training step: within this block, training calls recompute at most ``live`` of ``entities``
        (the batch's heads and tails) with gradient, however many chunks the rows come in."""
        previous, self._focus = self._focus, self._cap(torch.unique(entities.reshape(-1)))
        calls = self._calls
        try:
            yield
        finally:
            self._focus = previous
            if self._calls != calls:
                self.step_count += 1

    def encode_rows(self, hidden: torch.Tensor, mask: torch.Tensor, *, rows: torch.Tensor) -> torch.Tensor:
        """``(len(rows), D)`` outputs of entity ``rows`` of the full ``(n, T, d)`` / ``(n, T)`` inputs.

        In training with gradient on: cached rows, refreshed when stale, with the live rows
        recomputed with gradient (see the module docstring). Otherwise: computed afresh.
        """
        if not (self.training and torch.is_grad_enabled()):
            return self._run(hidden, mask, rows)
        self._refresh(hidden, mask, rows)
        out = self._cached[rows]
        live = self._live_rows(rows)
        fresh = self._run(hidden, mask, live)
        with torch.no_grad():
            self._cached[live] = fresh.detach()
            self._cached_at[live] = self.step_count
        self._calls += 1
        if self._focus is None:  # no step around this call: the call is the step
            self.step_count += 1
        if not len(live):
            return out
        is_live = torch.isin(rows, live)
        live_part = fresh[torch.searchsorted(live, rows).clamp(max=len(live) - 1)]
        return torch.where(is_live.unsqueeze(-1), live_part, out.to(live_part.dtype))

    def _refresh(self, hidden: torch.Tensor, mask: torch.Tensor, rows: torch.Tensor) -> None:
        """Recompute (no gradient) the cached ``rows`` that are missing or ``refresh_every`` steps old."""
        n = hidden.shape[0]
        if self._cached.shape[0] != n:
            self._cached = hidden.new_zeros(n, self.out_dim, dtype=torch.float32)
            self._cached_at = torch.full((n,), -(2**62), dtype=torch.long, device=hidden.device)
        wanted = torch.unique(rows)
        stale = wanted[self.step_count - self._cached_at[wanted] >= self.refresh_every]
        if len(stale):
            with torch.no_grad():
                self._cached[stale] = self._run(hidden, mask, stale).float()
            self._cached_at[stale] = self.step_count

    def _live_rows(self, rows: torch.Tensor) -> torch.Tensor:
        """Sorted unique rows recomputed with gradient: the step's focus among ``rows``, else ``live`` of ``rows``."""
        candidates = torch.unique(rows)
        if self._focus is not None:
            return candidates[torch.isin(candidates, self._focus.to(rows.device))]
        return self._cap(candidates)

    def _cap(self, rows: torch.Tensor) -> torch.Tensor:
        """At most ``live`` of the sorted ``rows``, drawn from the step count (the same after a resume)."""
        if len(rows) <= self.live:
            return rows
        gen = torch.Generator().manual_seed(int(self.step_count))
        pick = torch.randperm(len(rows), generator=gen)[: self.live].to(rows.device)
        return rows[pick].sort().values


@contextlib.contextmanager
def text_focus(model: nn.Module, entities: torch.Tensor) -> Iterator[None]:
    """:meth:`TopLayers.focus` of ``model.text.module`` when it has one; otherwise nothing."""
    module = getattr(getattr(model, "text", None), "module", None)
    focus = getattr(module, "focus", None)
    if focus is None:
        yield
        return
    with focus(entities):
        yield
