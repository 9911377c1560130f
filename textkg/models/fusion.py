"""Fusions: how an entity's structural and description vectors become one vector.

A fusion is an ``nn.Module`` with ``forward(structural, text) -> (..., d)``:
``structural`` is the entity's row of the structural table (the learned
"unseen" row for entities without one), ``text`` the projected description
vector; either is ``None`` when the fusion does not use it
(``uses_structure`` / ``uses_text``). Every fusion is elementwise over the
leading dimensions, so it works inside ``torch.func.vmap``.

=============  ======================================================  =========
name           entity vector                                           dense params
=============  ======================================================  =========
``structural``  ``s`` (classic KGE)                                     none
``text``        ``x`` (BLP, Daza et al. 2021)                            none
``weighted``    ``w_s · s + w_x · x``; scalars, both start at 0.5        ``w_s, w_x``
``gate``        ``g · s + (1 − g) · x``, ``g = σ(W x + b)`` per entity   ``W (1, d), b``
=============  ======================================================  =========

Registry: ``get_fusion(name|class|instance, dim=d, **kwargs)``, ``list_fusions()``.
"""

from __future__ import annotations

from typing import Any, TypeGuard

import torch
from torch import nn

from textkg.errors import ConfigError
from textkg.registry import Registry


class Fusion(nn.Module):
    """Base class. Subclasses set ``name``, ``uses_structure``, ``uses_text``.

    Args:
        dim: Width ``d`` of the structural and description vectors.
    """

    name: str = ""
    uses_structure: bool = True
    uses_text: bool = True

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, structural: torch.Tensor | None, text: torch.Tensor | None) -> torch.Tensor:
        """Fuse ``(..., d)`` structural and ``(..., d)`` description vectors into ``(..., d)``."""
        raise NotImplementedError

    def weights(self) -> dict[str, float]:
        """Interpretable learned fusion weights (JSON-ready); empty when there are none."""
        return {}


class StructuralFusion(Fusion):
    """The structural row only: the classic transductive KGE baseline.

    Unseen entities all share the learned unseen row, so they are
    indistinguishable to this model (a lower bound for inductive tests).
    """

    name = "structural"
    uses_text = False

    def forward(self, structural, text):
        return structural


class TextFusion(Fusion):
    """The description vector only: BLP (Daza et al., WWW 2021, arXiv:2010.03496v3).

    Has no structural table at all, so it is inductive by construction.
    """

    name = "text"
    uses_structure = False

    def forward(self, structural, text):
        return text


class WeightedFusion(Fusion):
    """Learned global weights: ``w_s · structural + w_x · description``.

    The seed paper's fusion. ``w_s`` and ``w_x`` are two scalar parameters,
    both initialised at 0.5 (the plain average), and trained with the rest of
    the model; :meth:`weights` reports them.
    """

    name = "weighted"

    def __init__(self, dim: int, *, init: tuple[float, float] = (0.5, 0.5)) -> None:
        super().__init__(dim)
        self.w_structural = nn.Parameter(torch.tensor(float(init[0])))
        self.w_text = nn.Parameter(torch.tensor(float(init[1])))

    def forward(self, structural, text):
        return self.w_structural * structural + self.w_text * text

    def weights(self):
        return {"w_structural": float(self.w_structural.detach()), "w_text": float(self.w_text.detach())}


class GateFusion(Fusion):
    """Per-entity gate: ``g · structural + (1 − g) · description``, ``g = σ(W x + b)``.

    ``x`` is the entity's (projected) description vector, a function of
    public text only, so the gate is defined for every entity, seen or not.
    ``W`` is ``(1, d)``: one scalar gate per entity. ``W`` starts at zero and
    ``b`` at 0, so training starts from the plain average (``g = 0.5``), as
    :class:`WeightedFusion` does.

    Unseen entities are *not* special-cased here: their structural input is
    the learned unseen row, and structural dropout (which swaps seen rows for
    the unseen row during training) teaches the model — unseen row, gate and
    projection together — what to do without structure; it may learn to
    shrink the unseen row towards 0 so that the description dominates.
    Forcing ``g = 0`` for unseen entities would need the row index inside
    the fusion, which the gathered-row contract does not pass.
    """

    name = "gate"

    def __init__(self, dim: int) -> None:
        super().__init__(dim)
        self.gate = nn.Linear(dim, 1)
        nn.init.zeros_(self.gate.weight)
        nn.init.zeros_(self.gate.bias)

    def forward(self, structural, text):
        g = torch.sigmoid(self.gate(text))  # (..., 1)
        return g * structural + (1 - g) * text

    def weights(self):
        return {
            "gate_bias": float(self.gate.bias.detach()[0]),
            "gate_at_zero_text": float(torch.sigmoid(self.gate.bias.detach()[0])),
        }


_REGISTRY: Registry[type[Fusion]] = Registry("fusion", field="model.fusion")


def register_fusion(cls: type[Fusion], *, replace: bool = False) -> type[Fusion]:
    """Make a :class:`Fusion` subclass available by its ``name`` (usable as a decorator).

    A taken name raises (:class:`textkg.registry.DuplicateNameError`) unless ``replace=True``.
    """
    if not (isinstance(cls, type) and issubclass(cls, Fusion)) or not cls.name:
        raise ConfigError(f"expected a Fusion subclass with a name, got {cls!r}", field="model.fusion")
    return _REGISTRY.register(cls.name, cls, replace=replace)


for _cls in (StructuralFusion, TextFusion, WeightedFusion, GateFusion):
    register_fusion(_cls)


def list_fusions() -> list[str]:
    """Names of the registered fusions, sorted."""
    return _REGISTRY.names()


def fusion_class(name: str) -> type[Fusion]:
    """The class registered as ``name``; unknown names list the registry."""
    return _REGISTRY.get(name)


def _is_fusion_instance(obj: object) -> TypeGuard[Fusion]:
    """``isinstance(obj, Fusion)``, as a type guard: where mypy runs without torch's types, ``nn.Module``
    is ``Any`` and a plain ``isinstance`` cannot tell a :class:`Fusion` from the class itself."""
    return isinstance(obj, Fusion)


def get_fusion(
    name_or_class_or_instance: str | type[Fusion] | Fusion, *, dim: int | None = None, **kwargs: Any
) -> Fusion:
    """Build a fusion module.

    Args:
        name_or_class_or_instance: A registry name (see :func:`list_fusions`),
            a :class:`Fusion` subclass, or an instance (returned as is; then
            ``dim`` and ``kwargs`` must be empty).
        dim: Width ``d`` of the vectors (required for names and classes).
        **kwargs: Constructor arguments, e.g. ``init=(0.5, 0.5)`` for ``weighted``.

    Raises:
        ConfigError: Unknown name, missing ``dim``, bad kwargs.
    """
    obj = name_or_class_or_instance
    args: tuple[int, ...] = ()
    if _is_fusion_instance(obj):
        if dim not in (None, obj.dim):
            raise ConfigError("arguments cannot be applied to a fusion instance", field="model.fusion_kwargs")
    else:
        obj = _REGISTRY.resolve_class(obj, Fusion)  # an unknown name is named before a missing dim
        if dim is None:
            raise ConfigError("dim is required to build a fusion", field="model.dim")
        args = (dim,)
    fusion: Fusion = _REGISTRY.make(obj, *args, base=Fusion, kwargs_field="model.fusion_kwargs", **kwargs)
    return fusion
