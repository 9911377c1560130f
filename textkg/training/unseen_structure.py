"""The structural part of an entity not seen in training (``model.unseen_structure``).

A fused model (``fusion: weighted``/``gate``) reads a structural row per training entity
and one learned *unseen row* shared by every other entity; structural dropout trains the
unseen row as "an entity with no known links". For a new entity that row says nothing about
*which* entity it is. With ``neighbours`` (the default), a new entity's structural part is
instead the mean of the rows of its ``k`` nearest training entities by description (cosine
of the model's pooled description features, softmax weights at temperature ``τ``): the
neighbourhood aggregation of inductive KG embedding (Hamaguchi et al. 2017, "Knowledge
Transfer for Out-of-Knowledge-Base Entities", IJCAI; Wang et al. 2019, LAN), with
description similarity standing in for the links a new entity does not have yet.

Nothing is retrained: the model trains as before, and the map is applied when ranking
(:meth:`textkg.models.KGEModel.set_unseen_neighbours`). It reads only public inputs: the
descriptions and which entities are in training (the structural table's own rows), so it is
allowed under ``--privacy``. Models without pooled description features (token or fine-tuned
text modules) and models without a structural table keep the unseen row.
"""

from __future__ import annotations

import torch

#: Neighbours per new entity and the softmax temperature over their cosines (as the neighbour vote's
#: spread, :mod:`textkg.evaluation.neighbour_vote`; k = 8, 16, 32 and τ = 0.05, 0.1 were within
#: 0.001 valid MRR on FB15k-237, docs/results/new_entities.md).
K, TEMPERATURE = 16, 0.05


def nearest(
    unit_queries: torch.Tensor,
    unit_voters: torch.Tensor,
    seen: torch.Tensor,
    k: int,
    temperature: float,
    exclude: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(ids (q, k), weights (q, k))``: for unit rows ``unit_queries``, the ``k`` rows of ``unit_voters``
    (the unit features of entities ``seen``) with the highest cosine, as entity ids, and the softmax
    of those cosines at ``temperature``. ``exclude`` ``(q,)``: an entity each query may not pick (itself)."""
    sims = unit_queries @ unit_voters.T
    if exclude is not None:
        sims[seen[None, :] == exclude[:, None]] = float("-inf")
    vals, idx = sims.topk(k, dim=1)
    return seen[idx], torch.softmax(vals / temperature, dim=1)


def nearest_seen(
    features: torch.Tensor,
    seen: torch.Tensor,
    queries: torch.Tensor,
    *,
    k: int = K,
    temperature: float = TEMPERATURE,
    chunk: int = 2048,
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`nearest` from raw ``features`` ``(n, D)`` and ``queries`` ``(q, D)``, in chunks of queries."""
    unit = torch.nn.functional.normalize(features.float(), dim=1)
    seen = torch.as_tensor(seen, dtype=torch.long)
    voters = unit[seen]
    k = min(k, len(seen))
    parts = [
        nearest(torch.nn.functional.normalize(queries[lo : lo + chunk].float(), dim=1), voters, seen, k, temperature)
        for lo in range(0, len(queries), chunk)
    ]
    if not parts:
        return torch.zeros(0, k, dtype=torch.long), torch.zeros(0, k)
    return torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])


def pooled_features(model) -> torch.Tensor | None:
    """The model's own frozen pooled description features ``(n, D)`` on the CPU, or ``None``."""
    text = getattr(model, "text", None)
    if text is None or getattr(text, "module", None) is not None or not hasattr(text, "text_text_features"):
        return None
    return text.text_text_features.cpu()


def apply_unseen_structure(model, setting: str, seen: torch.Tensor) -> str:
    """Map every entity outside ``seen`` to its nearest seen entities when ``setting`` is
    ``"neighbours"`` and the model can (a structural table and pooled features). Returns what
    applies: ``"neighbours"`` or ``"row"``."""
    features = pooled_features(model)
    if setting != "neighbours" or getattr(model, "structural", None) is None or features is None:
        return "row"
    seen = torch.as_tensor(seen, dtype=torch.long).cpu()
    unseen = torch.ones(len(features), dtype=torch.bool)
    unseen[seen] = False
    entities = unseen.nonzero().squeeze(1)
    if not len(entities) or not len(seen):
        return "row"
    ids, weights = nearest_seen(features, seen, features[entities])
    model.set_unseen_neighbours(entities, ids, weights)
    return "neighbours"
