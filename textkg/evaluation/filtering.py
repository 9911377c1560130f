"""Index of known true triples for the filtered ranking setting.

In the filtered setting (Bordes et al. 2013, "Translating Embeddings for
Modeling Multi-relational Data", Sec. 4.2), ranking the true tail ``t`` of
``(h, r, t)`` ignores every other candidate ``t'`` for which ``(h, r, t')`` is
itself a known true triple; likewise for heads. :class:`FilterIndex` answers
"which tails are true for these ``(h, r)`` queries" for a whole batch at once.

It is stored in compressed-sparse-row form over sorted query keys: no Python
object per triple, so building it for millions of triples takes a sort, and a
batch lookup is one ``searchsorted`` plus a flat gather.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from textkg.data.graph import unique_triples
from textkg.errors import DataError


@dataclass(frozen=True, eq=False)
class _SortedGroups:
    """Values grouped by an int64 key, CSR layout.

    Attributes:
        keys: ``(k,)`` distinct keys, ascending.
        offsets: ``(k + 1,)`` group ``i`` is ``values[offsets[i]:offsets[i + 1]]``.
        values: ``(n,)`` entity ids, grouped by key.
    """

    keys: torch.Tensor
    offsets: torch.Tensor
    values: torch.Tensor

    @classmethod
    def build(cls, keys: torch.Tensor, values: torch.Tensor) -> _SortedGroups:
        order = np.argsort(keys.numpy(), kind="stable")
        keys_sorted = torch.from_numpy(keys.numpy()[order])
        distinct, counts = torch.unique_consecutive(keys_sorted, return_counts=True)
        offsets = torch.zeros(len(distinct) + 1, dtype=torch.long)
        torch.cumsum(counts, 0, out=offsets[1:])
        return cls(keys=distinct, offsets=offsets, values=values[torch.from_numpy(order)])

    def lookup(self, queries: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """All values of each query's group, flattened.

        Args:
            queries: ``(b,)`` int64 keys (need not exist in the index).

        Returns:
            ``(rows, values)``, both ``(m,)`` long: ``values[i]`` belongs to
            the group of ``queries[rows[i]]``. Rows appear in ascending order.
        """
        if len(self.keys) == 0 or len(queries) == 0:
            empty = torch.empty(0, dtype=torch.long)
            return empty, empty
        pos = torch.searchsorted(self.keys, queries).clamp_(max=len(self.keys) - 1)
        found = self.keys[pos] == queries
        starts = self.offsets[pos]
        counts = torch.where(found, self.offsets[pos + 1] - starts, 0)
        rows = torch.repeat_interleave(torch.arange(len(queries)), counts)
        # Position of each output element inside its group: a global counter
        # minus the index at which that group's output begins.
        group_begin = torch.cumsum(counts, 0) - counts
        within = torch.arange(len(rows)) - group_begin[rows]
        return rows, self.values[starts[rows] + within]


class FilterIndex:
    """Known true triples, indexed by ``(head, relation)`` and ``(relation, tail)``.

    Build it once with :meth:`from_triples` from every known true triple
    (train + valid + test); then :meth:`true_tails` / :meth:`true_heads` give,
    for a batch of queries, index pairs ``(row, entity)`` to remove from a
    ``(b, c)`` score matrix (after mapping entity ids to candidate columns).
    """

    def __init__(
        self,
        *,
        num_entities: int,
        num_relations: int,
        by_head_relation: _SortedGroups,
        by_relation_tail: _SortedGroups,
        num_triples: int,
    ) -> None:
        self.num_entities = num_entities
        self.num_relations = num_relations
        self.num_triples = num_triples
        self._tails = by_head_relation
        self._heads = by_relation_tail

    @classmethod
    def from_triples(cls, triples: torch.Tensor, num_entities: int, num_relations: int) -> FilterIndex:
        """Index ``triples`` (duplicates are dropped).

        Args:
            triples: ``(n, 3)`` integer ``(head, relation, tail)`` ids.
            num_entities: Number of entity ids; every head/tail is below it.
            num_relations: Number of relation ids; every relation is below it.

        Raises:
            DataError: ``triples`` is not ``(n, 3)`` integers or holds an id out of range.
        """
        triples = check_triples(triples, num_entities, num_relations)
        triples = unique_triples(triples)
        h, r, t = triples.unbind(1)
        return cls(
            num_entities=num_entities,
            num_relations=num_relations,
            by_head_relation=_SortedGroups.build(h * num_relations + r, t),
            by_relation_tail=_SortedGroups.build(r * num_entities + t, h),
            num_triples=len(triples),
        )

    def true_tails(self, heads: torch.Tensor, relations: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Every known tail of each ``(head, relation)`` query.

        Args:
            heads: ``(b,)`` long entity ids.
            relations: ``(b,)`` long relation ids.

        Returns:
            ``(rows, tails)``, both ``(m,)`` long: ``(heads[rows[i]],
            relations[rows[i]], tails[i])`` is a known triple, each once.
        """
        return self._tails.lookup(heads.long().cpu() * self.num_relations + relations.long().cpu())

    def true_heads(self, relations: torch.Tensor, tails: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Every known head of each ``(relation, tail)`` query.

        Args:
            relations: ``(b,)`` long relation ids.
            tails: ``(b,)`` long entity ids.

        Returns:
            ``(rows, heads)``, both ``(m,)`` long: ``(heads[i],
            relations[rows[i]], tails[rows[i]])`` is a known triple, each once.
        """
        return self._heads.lookup(relations.long().cpu() * self.num_entities + tails.long().cpu())

    def __repr__(self) -> str:
        return (
            f"FilterIndex(num_triples={self.num_triples}, num_entities={self.num_entities}, "
            f"num_relations={self.num_relations})"
        )


def check_triples(triples: torch.Tensor, num_entities: int, num_relations: int) -> torch.Tensor:
    """Return ``triples`` as a CPU long ``(n, 3)`` tensor, or raise :class:`DataError`."""
    if not isinstance(triples, torch.Tensor) or triples.ndim != 2 or triples.shape[1] != 3:
        shape = tuple(triples.shape) if isinstance(triples, torch.Tensor) else type(triples).__name__
        raise DataError(f"filter triples must be an (n, 3) tensor, got {shape}", field="triples")
    if triples.is_floating_point() or triples.is_complex() or triples.dtype == torch.bool:
        raise DataError(f"filter triples must hold integer ids, got {triples.dtype}", field="triples")
    triples = triples.long().cpu()
    for col, name, bound in ((0, "head", num_entities), (1, "relation", num_relations), (2, "tail", num_entities)):
        bad = (triples[:, col] < 0) | (triples[:, col] >= bound)
        if bad.any():
            i = int(bad.nonzero()[0])
            raise DataError(
                f"filter triple {i} has {name} id {int(triples[i, col])}, outside [0, {bound})", field="triples"
            )
    return triples
