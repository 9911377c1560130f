"""``privacy.private_updates: private-rows``: private steps update only what public steps cannot reach.

In the ``confidential`` setting (DPKGE, Han et al. 2022) the public statements train most of the
model: the dense layers (text projection, fusion weights), the shared unseen row, and the rows of
every entity and relation that appears in a public statement. A DP-SGD step on the confidential
statements noises all of them; on the full ``hpo`` health setting that noise costs the released
placement of new terms (docs/privacy.md, issue 39). Under ``private-rows`` a private step keeps its
noised gradient only on the **private-only entries**: the structural rows that no public training
statement reads (as a head or a tail; with hashed rows, a row none of whose entities does) and the
rows of relations that no public training statement has. Every other parameter keeps the value the
public steps give it.

Privacy: the step draws the same clipped, noised sum as ``all`` (the mechanism and the ledger are
unchanged), then multiplies it by a 0/1 mask and hands it to an optimizer. The mask is a function
of public inputs only (the unrestricted training statements and the entity/relation vocabulary,
:data:`textkg.training.private_training.PUBLIC_INPUTS`), so the masked update is post-processing
of the DP output and keeps its (ε, δ) (Dwork & Roth 2014, *The Algorithmic Foundations of
Differential Privacy*, Prop. 2.1). The ``dp`` label and ε are those of ``all``.

The private steps get an optimizer of their own (:class:`PrivateRowUpdates`: the same kind, rate and
schedule as the public one, over the tables that have private-only rows), so the public optimizer's
Adam moments and step counts are never touched by a private step, and the private optimizer's
moments never move a public row: a row whose gradient is zero at every private step keeps zero
moments, and Adam's update of it is exactly ``0 / (0 + eps) = 0``. Weight decay is applied to the
private-only rows alone (L2 added to the gradient before the mask, as ``torch.optim.Adam`` adds it),
so it cannot move a public row either.
"""

from __future__ import annotations

import torch

from textkg.training.optim import adam, lr_scales


def private_only_masks(model, public_triples: torch.Tensor) -> dict[str, torch.Tensor]:
    """``{table name: (rows,) bool}``: the rows of each table of ``model`` no public statement reads.

    Args:
        model: a :class:`textkg.models.KGEModel` (its ``tables()``: ``"entity"`` when it has
            structural rows, ``"relation"``).
        public_triples: ``(N_U, 3)`` the statements the public steps train on.

    The unseen row (the last structural row) is read by public steps (structural dropout, unseen
    entities), so it is never private-only. Only tables with at least one private-only row appear.
    """
    tables = model.tables()
    public = public_triples.to(torch.long).cpu()
    masks: dict[str, torch.Tensor] = {}
    structural = getattr(model, "structural", None)
    if "entity" in tables and structural is not None:
        rows = tables["entity"].shape[0]
        reached = torch.zeros(rows, dtype=torch.bool)
        ends = torch.cat([public[:, 0], public[:, 2]]) if len(public) else torch.zeros(0, dtype=torch.long)
        reached[structural.struct_index.cpu()[ends]] = True
        reached[structural.unseen_row] = True
        if not reached.all():
            masks["entity"] = ~reached
    relations = tables["relation"].shape[0]
    reached = torch.zeros(relations, dtype=torch.bool)
    reached[public[:, 1]] = True
    if not reached.all():
        masks["relation"] = ~reached
    return masks


class PrivateRowUpdates:
    """The private steps' own optimizer over the private-only rows (``private_updates: private-rows``).

    Args:
        model: the model both kinds of step train.
        public_triples: ``(N_U, 3)`` the public steps' statements (they decide the mask).
        lr: ``train.lr``; weight_decay: ``train.weight_decay`` (applied to private-only rows only).
    """

    def __init__(self, model, public_triples: torch.Tensor, *, lr: float, weight_decay: float) -> None:
        tables = model.tables()
        masks = private_only_masks(model, public_triples)
        self.params = {name: tables[name] for name in masks}
        #: ``(rows, 1)`` bool masks on the tables' device: the noised gradient is kept where True, 0 elsewhere
        self.masks = {name: mask.to(tables[name].device).unsqueeze(1) for name, mask in masks.items()}
        self.weight_decay = float(weight_decay)
        self.optimizer = (
            adam(list(self.params.values()), lr=lr, weight_decay=0.0, scales=lr_scales(model)) if self.params else None
        )
        self.base_lrs = [] if self.optimizer is None else [group["lr"] for group in self.optimizer.param_groups]

    def counts(self) -> dict[str, int]:
        """``{table: private-only rows}`` (public: the mask depends on public inputs only)."""
        return {name: int(mask.sum()) for name, mask in self.masks.items()}

    @torch.no_grad()
    def step(self, model) -> None:
        """Apply the private step's gradient (already in ``.grad``) to the private-only rows only.

        Post-processing of the noised gradient by a mask of public inputs (Dwork & Roth 2014,
        Prop. 2.1): ε is that of the unmasked step. Every parameter's ``.grad`` is cleared after.
        """
        for name, param in self.params.items():
            if param.grad is None:
                continue
            grad = param.grad if not self.weight_decay else param.grad + self.weight_decay * param
            param.grad = torch.where(self.masks[name], grad, torch.zeros((), dtype=grad.dtype, device=grad.device))
        if self.optimizer is not None:
            self.optimizer.step()
        for param in model.parameters():
            param.grad = None

    def set_lr_factor(self, factor: float) -> None:
        """The learning-rate schedule's factor at this step (as the public optimizer's)."""
        if self.optimizer is None:
            return
        for group, base in zip(self.optimizer.param_groups, self.base_lrs, strict=True):
            group["lr"] = base * factor

    def state_dict(self) -> dict:
        return {"optimizer": None if self.optimizer is None else self.optimizer.state_dict(), "rows": self.counts()}

    def load_state_dict(self, state: dict) -> None:
        if self.optimizer is not None and state.get("optimizer") is not None:
            self.optimizer.load_state_dict(state["optimizer"])
