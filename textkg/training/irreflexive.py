"""Which relations never link an entity to itself (``model.irreflexive``).

Under TransE a symmetric relation (WordNet's derivationally-related forms, FB15k-237's
sibling or award-nominee relations) is learned with a relation vector near zero, because
``h + r ≈ t`` and ``t + r ≈ h`` together force ``r ≈ 0`` (Sun et al. 2019, RotatE, §3.1). Then
the query entity itself scores best: ``‖h + r − h‖ = ‖r‖ ≈ 0``, and ranks first for nearly every
such query although no statement says ``(e, r, e)``. A relation whose training statements
hold no self-loop is *irreflexive* as far as the graph shows; the model then gives
``(e, r, e)`` the lowest score, in training (the 1-vs-all softmax) and in every ranking by
ids (:meth:`textkg.models.KGEModel.score_tails`). The candidate set and the protocol do not
change: the query entity stays a candidate, the model just no longer believes it.

``auto`` reads the training statements, so under ``--privacy`` it is off (it would be an
unnoised use of private statements); a list of relation names is a user's public input,
but exact DP clipping does not support the mask, so a list is refused there.
"""

from __future__ import annotations

import torch

from textkg.errors import ConfigError


def resolve_irreflexive(setting, relations: list[str], train: torch.Tensor, *, private: bool) -> torch.Tensor:
    """``(R,)`` bool: the relations scored as irreflexive.

    Args:
        setting: ``model.irreflexive``: ``"auto"``, ``"none"`` or a list of relation names.
        relations: The graph's relation names, by id.
        train: ``(n, 3)`` training statements (read only for ``"auto"`` and not ``private``).
        private: The run is private (``--privacy`` other than ``none``).

    Raises:
        ConfigError: An unknown relation name, or a list under ``--privacy``.
    """
    mask = torch.zeros(len(relations), dtype=torch.bool)
    if setting == "none" or (setting == "auto" and private):
        return mask
    if setting == "auto":
        counts = torch.bincount(train[:, 1], minlength=len(relations))
        loops = torch.bincount(train[train[:, 0] == train[:, 2]][:, 1], minlength=len(relations))
        return (counts > 0) & (loops == 0)
    if private:
        raise ConfigError(
            "a list of irreflexive relations is not supported with --privacy (exact clipping has no mask); "
            "use 'auto' or 'none'",
            field="model.irreflexive",
        )
    index = {name: i for i, name in enumerate(relations)}
    for name in setting:
        if name not in index:
            raise ConfigError(f"unknown relation {name!r} in model.irreflexive", field="model.irreflexive")
        mask[index[name]] = True
    return mask
