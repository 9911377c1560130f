"""The public vocabulary of a private run: which entities get a structural row.

In a non-private run the structural table has one row per entity of the
training statements. Under differential privacy that would leak: one private
statement that names an otherwise unused entity would add a row, and the
table's shape would show it. A private run therefore takes its rows from
public inputs only: the entity vocabulary and its train/valid/test partition
(``docs/privacy.md``, "Threat model").

- Default: every entity of the graph that the split does not hold out (in an
  inductive split, not a valid or test entity; in a transductive split, every
  entity), whether or not a training statement mentions it.
- ``--public-entities FILE``: the user's own list, one entity id per line.
"""

from __future__ import annotations

from pathlib import Path

import torch

from textkg.data.graph import KnowledgeGraph, Split
from textkg.data.io import read_id_list
from textkg.errors import DataError


def held_out_entities(split: Split) -> torch.Tensor:
    """``(k,)`` sorted entities an inductive split holds out (valid ∪ test); empty when transductive."""
    if split.kind != "inductive":
        return torch.empty(0, dtype=torch.long)
    return torch.unique(torch.cat([split.valid_entities, split.test_entities]))


def public_training_entities(kg: KnowledgeGraph, split: Split, path: str | Path | None = None) -> torch.Tensor:
    """The entities that get a structural row in a private run, from public inputs only.

    Args:
        kg: the graph (its entity vocabulary is public).
        split: its split (the entity partition is public).
        path: optional file of entity ids, one per line (``--public-entities``).

    Returns:
        ``(n,)`` sorted unique entity ids.

    Raises:
        DataError: an id the graph does not know, a duplicate, or an entity the
            inductive split holds out (naming the file, line and field).
    """
    held = torch.zeros(kg.num_entities, dtype=torch.bool)
    held[held_out_entities(split)] = True
    if path is None:
        return torch.nonzero(~held).reshape(-1)
    index = {name: i for i, name in enumerate(kg.entities)}
    seen: dict[str, int] = {}
    ids = []
    for line, name in read_id_list(path):
        if name not in index:
            raise DataError(
                f"unknown entity {name!r} (not in the graph's entity vocabulary)", file=path, line=line, field="id"
            )
        if name in seen:
            raise DataError(
                f"entity {name!r} is listed twice (first on line {seen[name]})", file=path, line=line, field="id"
            )
        if held[index[name]]:
            raise DataError(
                f"entity {name!r} is held out by the inductive split (valid/test): it cannot have a structural row",
                file=path,
                line=line,
                field="id",
            )
        seen[name] = line
        ids.append(index[name])
    if not ids:
        raise DataError("no entity listed", file=path, field="id")
    return torch.tensor(sorted(ids), dtype=torch.long)
