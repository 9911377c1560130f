"""Validation terms that look like an ontology's real additions: whole sibling batches under one parent.

Issue 37 measured why a placement method chosen on randomly held-out terms does not carry over to
the terms a new release adds. Real additions arrive as batches of new siblings under one parent
(241 of CL's 349 added pairs), and that parent often had no child before (118 of 349): a neighbour
vote cannot find a parent whose children are all new. A random hold-out rarely produces either
case, since the held-out term's siblings stay in training and vote for its parent.

:func:`sibling_batches` lists hold-out candidates in whole sibling groups: the leaf children of one
parent, grouped, with the groups that leave their parent a leaf first. The inductive split
(:func:`textkg.data.splits.make_split`, ``valid_holdout="sibling-batches"``) fills up to
:data:`BATCH_SHARE` of its validation terms from this order and the rest at random, so methods and
weights chosen on validation face both kinds of new term. Test terms are drawn as before.
"""

from __future__ import annotations

import torch

#: The share of validation terms drawn as whole sibling batches (the rest: at random, as before).
#: About the share of CL's real additions that came in batches (241 / 349 = 0.69), rounded down so that
#: single new terms still weigh on the choice.
BATCH_SHARE = 0.5

#: ``valid_holdout`` values: ``random`` (BLP's draw), ``sibling-batches`` (this module).
VALID_HOLDOUTS = ("random", "sibling-batches")


def sibling_batches(
    triples: torch.Tensor, parent_relation: int, candidates: torch.Tensor, *, seed: int, min_size: int = 2
) -> list[int]:
    """Hold-out candidates in whole sibling groups, groups in a seeded order.

    A group is the leaf children (no child of their own) of one parent ``p`` among ``candidates``,
    when there are at least ``min_size`` of them or they are all of ``p``'s children (holding them
    out leaves ``p`` a leaf: the case a neighbour vote cannot place). Groups that leave their parent a
    leaf come first, then the other groups, each part shuffled with ``seed``; a term in several
    groups is listed once, at its first group.

    Args:
        triples: ``(n, 3)`` statements ``(child, relation, parent)``.
        parent_relation: id of the parent relation (``is_a``).
        candidates: ``(c,)`` entity ids that may be held out.
        seed: seed of the group order.
        min_size: smallest group that does not empty its parent.

    Returns:
        Entity ids, grouped (each group's members adjacent, in id order).
    """
    return [
        c for group in sibling_groups(triples, parent_relation, candidates, seed=seed, min_size=min_size) for c in group
    ]


def sibling_groups(
    triples: torch.Tensor, parent_relation: int, candidates: torch.Tensor, *, seed: int, min_size: int = 2
) -> list[list[int]]:
    """:func:`sibling_batches`' groups, one list each, in its order (a group whose terms all came in an earlier
    group is left out)."""
    edges = triples[triples[:, 1] == parent_relation]
    children: dict[int, set[int]] = {}
    for child, parent in zip(edges[:, 0].tolist(), edges[:, 2].tolist(), strict=True):
        if child != parent:
            children.setdefault(parent, set()).add(child)
    allowed = set(candidates.tolist())
    emptying, other = [], []
    for parent in sorted(children):
        leaves = sorted(c for c in children[parent] if c not in children and c in allowed)
        if len(leaves) == len(children[parent]):
            emptying.append(leaves)
        elif len(leaves) >= min_size:
            other.append(leaves)
    g = torch.Generator().manual_seed(seed)
    groups: list[list[int]] = []
    seen: set[int] = set()
    for part in (emptying, other):
        for i in torch.randperm(len(part), generator=g).tolist():
            fresh = [c for c in part[i] if c not in seen]
            seen.update(fresh)
            if fresh:
                groups.append(fresh)
    return groups
