"""Held-out units' own statements, ranked: model selection and the ``test.units`` block of a unit-level run.

Each link of a held-out unit (a validation or test patient) is hidden in turn; the unit's vector is
folded in from its OTHER links (the representation of :mod:`textkg.training.unit_step`, ERAvg's mean
of :func:`textkg.models.known_links.link_estimates`), and the hidden link's other end is ranked
among every entity of the graph, filtered: the unit's other links of the same relation and direction
are removed from the ranking. The held-out units are public (the threat model's validation and test
statements), so the selection and the figures cost no privacy.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from textkg.data.known_links import NEW_IS_HEAD
from textkg.data.units import UnitLinks
from textkg.models.known_links import link_estimates

#: hidden links scored at once
CHUNK = 256


@torch.no_grad()
def unit_vectors(model, links: UnitLinks, matrix: torch.Tensor | None = None) -> torch.Tensor:
    """``(U, d)``: each unit's vector folded in from ALL its links (a held-out patient at prediction time).

    ``finish(mean over the unit's links of link_estimates)``, zeros for a unit without links: what
    :func:`textkg.models.known_links.move_by_links` gives with ``LinkMethod("mix", 0.0)`` from a zero base,
    and what a training target sees (from the unit's other links).

    Args:
        model: the trained model (eval mode).
        links: the units' links (:func:`textkg.data.units.split_units`).
        matrix: the model's ``(N, d)`` entity matrix when the caller has it.
    """
    matrix = model.entity_matrix() if matrix is None else matrix
    dev = matrix.device
    lk = links.links.to(dev)
    est = link_estimates(model, lk[:, 1], matrix[lk[:, 2]], lk[:, 3])
    total = torch.zeros(links.num_units, matrix.shape[1], dtype=matrix.dtype, device=dev).index_add_(0, lk[:, 0], est)
    counts = torch.bincount(lk[:, 0], minlength=links.num_units).to(matrix.dtype).unsqueeze(1)
    mean = total / counts.clamp(min=1.0)
    mean = F.normalize(mean, p=2.0, dim=-1) if model.normalize_entities else mean
    return torch.where(counts > 0, mean, torch.zeros_like(mean))


@torch.no_grad()
def leave_one_out_ranks(model, links: UnitLinks, *, max_links: int = 0, seed: int = 0) -> torch.Tensor:
    """``(n,)`` float: the filtered rank of each hidden link (ties: the mean of the optimistic and the
    pessimistic rank); ``max_links > 0``: a seeded subset of at most that many links."""
    model.eval()
    matrix = model.entity_matrix()
    lk = links.links.to(matrix.device)
    inter = model.interaction
    rel = model.relation_matrix()[lk[:, 1]]
    est = torch.where(
        (lk[:, 3] == NEW_IS_HEAD).unsqueeze(1),
        inter.head_from(rel, matrix[lk[:, 2]]),
        inter.tail_from(matrix[lk[:, 2]], rel),
    )
    total = torch.zeros(links.num_units, matrix.shape[1], dtype=matrix.dtype, device=matrix.device)
    total.index_add_(0, lk[:, 0], est)
    counts = torch.bincount(lk[:, 0], minlength=links.num_units).to(matrix.dtype)
    # the links that filter each other: one unit's, of one relation and direction (a group), found by index so
    # that filtering costs the group's size per hidden link, not every held-out link (quadratic: 80,000 took 25 s)
    _, group = torch.unique(lk[:, [0, 1, 3]], dim=0, return_inverse=True)
    size = torch.bincount(group)
    members = torch.argsort(group, stable=True)
    first = size.cumsum(0) - size
    chosen = torch.arange(len(lk))
    if max_links and len(lk) > max_links:
        chosen = torch.randperm(len(lk), generator=torch.Generator().manual_seed(seed))[:max_links].sort().values
    ranks = []
    for start in range(0, len(chosen), CHUNK):
        at = chosen[start : start + CHUNK].to(matrix.device)
        own = lk[at]
        rest = counts[own[:, 0]] - 1
        mean = (total[own[:, 0]] - est[at]) / rest.clamp(min=1).unsqueeze(1)
        if model.normalize_entities:
            mean = F.normalize(mean, p=2.0, dim=-1)
        query = torch.where((rest > 0).unsqueeze(1), mean, torch.zeros_like(mean))
        head = own[:, 3] == NEW_IS_HEAD
        r = rel[at]
        scores = torch.where(
            head.unsqueeze(1), inter.score_tails(query, r, matrix), inter.score_heads(r, query, matrix)
        )  # (c, N)
        target = scores.gather(1, own[:, 2:3])
        # the unit's other links of the same relation and direction are filtered out of the ranking
        g = group[at]
        offset = torch.arange(int(size[g].max()), device=matrix.device)
        valid = offset.unsqueeze(0) < size[g].unsqueeze(1)  # (c, largest group)
        mates = members[(first[g].unsqueeze(1) + offset).clamp(max=len(lk) - 1)]
        q = torch.arange(len(at), device=matrix.device).unsqueeze(1).expand_as(mates)[valid]
        known = torch.zeros_like(scores, dtype=torch.bool)
        known[q, lk[mates[valid], 2]] = True
        known.scatter_(1, own[:, 2:3], False)
        higher = ((scores > target) & ~known).sum(1)
        ties = ((scores == target) & ~known).sum(1) - 1
        ranks.append(1.0 + higher.double() + ties.clamp(min=0).double() / 2)
    return torch.cat(ranks) if ranks else torch.zeros(0, dtype=torch.float64)


def unit_metrics(model, links: UnitLinks, *, max_links: int = 0, seed: int = 0) -> dict:
    """``{"mrr", "hits@1", "hits@10", "num_links"}`` of :func:`leave_one_out_ranks` (``mrr`` 0 without links)."""
    ranks = leave_one_out_ranks(model, links, max_links=max_links, seed=seed)
    if not len(ranks):
        return {"mrr": 0.0, "hits@1": 0.0, "hits@10": 0.0, "num_links": 0}
    return {
        "mrr": float(ranks.reciprocal().mean()),
        "hits@1": float((ranks <= 1).double().mean()),
        "hits@10": float((ranks <= 10).double().mean()),
        "num_links": len(ranks),
    }
