"""The trainer's optimizer: Adam, or lazy Adam on the entity table (``train.optimizer``).

``adam`` (default): ``torch.optim.Adam`` over every trained parameter (Kingma &
Ba 2015, arXiv:1412.6980v9, Alg. 1). Its state is dense, and so is its work:
every step reads and writes the first and second moments of every row of the
entity table, touched or not. That is O(N·d) per step, so an epoch of T/B steps
costs O(N·d·T/B), which grows with the square of the graph when T grows with N.

``lazy-adam``: the entity table's gradient is row-sparse (``F.embedding(...,
sparse=True)`` in :meth:`textkg.models.KGEModel.gather`), and
``torch.optim.SparseAdam`` updates the moments and the values of the rows the
batch touched only (the "lazy Adam" of TensorFlow Addons): O(B·d) per step. The
other parameters keep ``Adam``. The first step is Adam's step (Adam's moments
of an untouched row are still zero, so the row does not move); later steps
differ, because Adam keeps moving a row on its momentum after the batches stop
touching it, and lazy Adam does not. The moments themselves stay dense
``(N, d)`` tensors in both.

Only for non-private runs with sampled negatives: DP-SGD noises every row at
every step, and the 1-vs-all loss reads every row, so every row is touched.
"""

from __future__ import annotations

from typing import Any

import torch

from textkg.training.config import OPTIMIZERS


class OptimizerSet:
    """Several torch optimizers stepped as one: the ``param_groups``, ``step``, ``zero_grad``
    and ``state_dict`` that :class:`textkg.training.trainer.Trainer` uses."""

    def __init__(self, optimizers: list[torch.optim.Optimizer]) -> None:
        self.optimizers = optimizers

    @property
    def param_groups(self) -> list[dict[str, Any]]:
        return [group for opt in self.optimizers for group in opt.param_groups]

    def zero_grad(self, set_to_none: bool = True) -> None:
        for opt in self.optimizers:
            opt.zero_grad(set_to_none=set_to_none)

    def step(self) -> None:
        for opt in self.optimizers:
            opt.step()

    def state_dict(self) -> dict[str, Any]:
        return {"optimizers": [opt.state_dict() for opt in self.optimizers]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for opt, s in zip(self.optimizers, state["optimizers"], strict=True):
            opt.load_state_dict(s)


def build_optimizer(model, *, name: str, lr: float, weight_decay: float):
    """The optimizer ``name`` (one of :data:`textkg.training.config.OPTIMIZERS`) over ``model``'s trained parameters.

    ``lazy-adam`` sets ``model.sparse_entity_rows`` so that the entity table's
    gradient is row-sparse; a model without a structural table gets plain Adam.
    """
    if name not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {name!r}; choose one of {OPTIMIZERS}")
    trained = [p for p in model.parameters() if p.requires_grad]
    structural = getattr(model, "structural", None)
    if name == "adam" or structural is None:
        return adam(trained, lr=lr, weight_decay=weight_decay, scales=lr_scales(model))
    table = structural.weight
    model.sparse_entity_rows = True
    rest = [p for p in trained if p is not table]
    optimizers: list[torch.optim.Optimizer] = [torch.optim.SparseAdam([table], lr=lr)]
    if rest:
        optimizers.append(adam(rest, lr=lr, weight_decay=weight_decay, scales=lr_scales(model)))
    return OptimizerSet(optimizers)


def lr_scales(model) -> dict[int, float]:
    """``{id(parameter): factor}`` for the parameters of submodules with an ``lr_scale`` attribute
    (``top-layers``: pretrained transformer layers train at a fraction of ``train.lr``)."""
    scales: dict[int, float] = {}
    for module in model.modules():
        scale = getattr(module, "lr_scale", None)
        if isinstance(scale, float):
            scales.update((id(p), scale) for p in module.parameters())
    return scales


#: devices whose parameters get torch's fused Adam kernel (:func:`adam`)
FUSED_ADAM_DEVICES = ("cpu", "cuda")


def adam(
    params: list[torch.nn.Parameter], *, lr: float, weight_decay: float, scales: dict[int, float] | None = None
) -> torch.optim.Adam:
    """``torch.optim.Adam``, fused (one kernel per parameter) where torch has the kernel.

    The fused step is Adam's update in another floating-point order (parameters agree with
    the unfused step to ~1e-8 after 30 FB15k-237 steps, ``tests/training/test_training_step_oracle.py``)
    and 2.5x faster on CPU: for a dense ``(14.5k, 128)`` entity table it was 4 of the 28 ms
    of a step (docs/results/throughput.md, "Throughput against PyKEEN").

    ``scales``: ``{id(parameter): factor}``; those parameters form groups of their own at ``lr x factor``
    (the learning-rate schedule scales every group's own rate).
    """
    fused = all(p.device.type in FUSED_ADAM_DEVICES and p.dtype.is_floating_point for p in params)
    scales = scales or {}
    if not any(id(p) in scales for p in params):  # one group, exactly as before
        return torch.optim.Adam(params, lr=lr, weight_decay=weight_decay, fused=fused or None)
    groups: dict[float, list[torch.nn.Parameter]] = {}
    for p in params:
        groups.setdefault(scales.get(id(p), 1.0), []).append(p)
    param_groups = [{"params": ps, "lr": lr * factor} for factor, ps in groups.items()]
    return torch.optim.Adam(param_groups, lr=lr, weight_decay=weight_decay, fused=fused or None)
