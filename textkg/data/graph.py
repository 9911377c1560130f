"""In-memory knowledge graph and split containers.

A :class:`KnowledgeGraph` owns ONE global entity→id map shared by every split
of a dataset (per-split maps silently corrupt evaluation). Triples are
``LongTensor`` of shape ``(n, 3)`` holding ``(head, relation, tail)`` ids.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import torch

SplitKind = Literal["transductive", "inductive"]

#: Names of the triple sets a loader may provide.
GIVEN_SPLITS = ("train", "valid", "test")
GIVEN_INDUCTIVE_SPLITS = ("ind-train", "ind-valid", "ind-test")


@dataclass(frozen=True, eq=False)
class KnowledgeGraph:
    """Entities, relations, their text, and id-mapped triples.

    Attributes:
        name: Dataset name (``"hpo"``) or the directory it was read from.
        entities: External entity ids; position ``i`` is internal id ``i``.
        relations: External relation ids; position ``j`` is internal id ``j``.
        entity_names: Short human-readable name per entity.
        entity_descriptions: Description text per entity (never empty).
        relation_texts: Readable text per relation.
        triples: Triple sets by name (``"train"``, ``"valid"``, ``"test"``, and
            optionally ``"ind-train"``, ``"ind-valid"``, ``"ind-test"``, or
            ``"all"`` for graphs without a given split), each ``(n, 3)`` long.
        entity_types: Optional type per entity (``"phenotype"``, ``"disease"``,
            ``"gene"`` for ``hpo``).
        source: Where the graph was loaded from.
        entity_splits: Entity sets of a GIVEN inductive split, keyed
            ``"ind-train"``, ``"ind-valid"``, ``"ind-test"`` (sorted long
            tensors), or ``None`` when the dataset ships no inductive split.
        info: Loader details (files read, text sources), JSON-serialisable.
        entity_synonyms: Optional synonyms per entity (an ontology's ``synonym:`` lines, the name left out),
            read by the placement re-ranker's ``synonym_containment`` feature; ``None`` when the source has none.
    """

    name: str
    entities: tuple[str, ...]
    relations: tuple[str, ...]
    entity_names: tuple[str, ...]
    entity_descriptions: tuple[str, ...]
    relation_texts: tuple[str, ...]
    triples: Mapping[str, torch.Tensor]
    entity_types: tuple[str, ...] | None = None
    source: str = ""
    entity_splits: Mapping[str, torch.Tensor] | None = None
    info: Mapping[str, object] = field(default_factory=dict)
    entity_synonyms: tuple[tuple[str, ...], ...] | None = None

    @property
    def num_entities(self) -> int:
        return len(self.entities)

    @property
    def num_relations(self) -> int:
        return len(self.relations)

    def all_triples(self) -> torch.Tensor:
        """Every distinct triple of every set, ``(n, 3)`` long, sorted lexicographically."""
        parts = [t for t in self.triples.values() if t.numel()]
        if not parts:
            return torch.empty(0, 3, dtype=torch.long)
        return unique_triples(torch.cat(parts))


def unique_ids(ids: torch.Tensor) -> torch.Tensor:
    """Sorted distinct values of a long tensor, ``(k,)`` (numpy: far faster than torch on CPU)."""
    return torch.from_numpy(np.unique(ids.reshape(-1).numpy()))


def unique_triples(triples: torch.Tensor) -> torch.Tensor:
    """Distinct rows of ``(n, 3)`` long triples, sorted lexicographically by (h, r, t)."""
    if not len(triples):
        return triples.reshape(0, 3)
    arr = triples.numpy()
    order = np.lexsort((arr[:, 2], arr[:, 1], arr[:, 0]))
    arr = arr[order]
    keep = np.ones(len(arr), dtype=bool)
    keep[1:] = np.any(arr[1:] != arr[:-1], axis=1)
    return torch.from_numpy(np.ascontiguousarray(arr[keep]))


@dataclass(frozen=True, eq=False)
class Split:
    """Train/valid/test triples plus the entity sets evaluation needs.

    All tensors index the parent graph's global id maps.

    Attributes:
        kind: ``"transductive"`` or ``"inductive"``.
        train, valid, test: ``(n, 3)`` long triples.
        train_entities, valid_entities, test_entities: sorted unique entity
            ids belonging to each split. In an inductive split they are
            disjoint and ``train`` mentions only ``train_entities``.
        filter_triples: every known true triple, used for filtered ranking.
        seed: the seed a generated split was drawn with (``None`` if given).
        extra: split details (protocol, parameters, shortfalls), JSON-serialisable.
    """

    kind: SplitKind
    train: torch.Tensor
    valid: torch.Tensor
    test: torch.Tensor
    train_entities: torch.Tensor
    valid_entities: torch.Tensor
    test_entities: torch.Tensor
    filter_triples: torch.Tensor
    seed: int | None = None
    extra: dict = field(default_factory=dict)

    def triples(self, name: str) -> torch.Tensor:
        return {"train": self.train, "valid": self.valid, "test": self.test}[name]
