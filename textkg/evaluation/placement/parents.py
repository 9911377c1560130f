"""Neighbours' votes for their parents, summed over the statements of the neighbours only.

``parent-of-nearest`` (:mod:`.methods`), the neighbour vote (:mod:`.combination`) and the vote over
TF-IDF neighbours (:mod:`.context`) each let a new term's ``k`` nearest existing terms pass a weight
to their parents. Written densely, a batch of ``b`` terms builds a ``(b, N)`` weight per entity and
adds ``weight[:, child]`` into ``parent`` for **every** ``(child, parent)`` statement: ``b × m`` work
per batch, on an ontology of ``m`` statements, for the ``b × k`` weights that are not 0.
:class:`ChildParents` keeps the statements sorted by child, so a batch reads only the statements of
its ``b × k`` neighbours (``b × k × parents per term``) and writes them into the ``(b, c)`` result.

The sums are **equal** to the dense form's, bit for bit: each candidate's votes are added in the
statements' order (that of ``torch.unique(edges, dim=0)``, which the dense form also uses), and the
dense form's other terms are exact zeros (``tests/evaluation/test_placement_parents.py`` compares the
two). Only the ``(child, parent)`` statements the caller passes are read.
"""

from __future__ import annotations

import torch


class ChildParents:
    """``(child, parent)`` statements, deduplicated and sorted by child (then parent).

    Args:
        parent_edges: ``(m, 2)`` long ``(child, parent)`` statements.
        num_entities: ``N``; every id in ``parent_edges`` is below it.

    Attributes:
        child, parent: ``(m',)`` long, the unique statements in ``torch.unique(edges, dim=0)`` order.
        starts: ``(N + 1,)`` long: entity ``e``'s statements as a child are ``starts[e]:starts[e + 1]``.
    """

    def __init__(self, parent_edges: torch.Tensor, num_entities: int) -> None:
        edges = parent_edges.long().reshape(-1, 2)
        unique = torch.unique(edges, dim=0) if len(edges) else edges
        self.child, self.parent = unique[:, 0].contiguous(), unique[:, 1].contiguous()
        self.num_entities = num_entities
        self.starts = torch.searchsorted(self.child, torch.arange(num_entities + 1))

    def votes(
        self,
        neighbours: torch.Tensor,
        weights: torch.Tensor,
        candidates: torch.Tensor,
        share: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """``(b, c)`` each candidate's summed votes: ``Σ weights[r, j] · share[s]`` over the statements ``s``
        whose child is ``neighbours[r, j]`` and whose parent is ``candidates[col]``, added in statement order.

        Equal to ``w = zeros(b, N).scatter_(1, neighbours, weights)``, then ``zeros_like(w).index_add_(1, parent,
        w[:, child] * share)``, then ``[:, candidates]`` (module docstring), when each row's ``neighbours`` are
        distinct.

        Args:
            neighbours: ``(b, k)`` long entity ids, distinct within a row.
            weights: ``(b, k)`` their weights (the result's dtype).
            candidates: ``(c,)`` long entity ids: the result's columns (a repeated id repeats its column).
            share: ``(m',)`` a factor per statement (``None``: 1, nothing multiplied).
        """
        b, k = neighbours.shape
        column = torch.full((self.num_entities,), -1, dtype=torch.long)
        column[candidates] = torch.arange(len(candidates))
        if not torch.equal(column[candidates], torch.arange(len(candidates))):  # a repeated candidate
            distinct, inverse = torch.unique(candidates, return_inverse=True)
            return self.votes(neighbours, weights, distinct, share)[:, inverse]
        flat = neighbours.reshape(-1)
        count = self.starts[flat + 1] - self.starts[flat]  # statements of each (row, neighbour)
        pair = torch.repeat_interleave(torch.arange(b * k), count)
        first = torch.repeat_interleave(torch.cumsum(count, 0) - count, count)
        statement = self.starts[flat][pair] + torch.arange(len(pair)) - first
        row = pair // k
        col = column[self.parent[statement]]
        keep = col >= 0
        row, col, statement, pair = row[keep], col[keep], statement[keep], pair[keep]
        order = torch.argsort(row * len(self.child) + statement)  # per row, in statement order
        row, col, statement, pair = row[order], col[order], statement[order], pair[order]
        value = weights.reshape(-1)[pair]
        if share is not None:
            value = value * share[statement]
        out = torch.zeros(b * len(candidates), dtype=weights.dtype)
        out.index_add_(0, row * len(candidates) + col, value)
        return out.reshape(b, len(candidates))


__all__ = ["ChildParents"]
