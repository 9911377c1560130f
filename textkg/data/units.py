"""Privacy units that are not entities of the model: a patient and all of their statements.

Under ``--privacy-unit entity --unit-entities FILE`` every statement that mentions an entity of
``FILE`` (one entity id per line: a public rule, e.g. a cohort's ``patients.txt``) is a *unit
statement*, owned by that entity. The unit entities are taken out of the graph before anything is
built: they get no structural row, no text, no name in ``graph.json``, and no shape of the run
depends on how many there are. Their statements are kept aside as *links* of their unit,
``(unit, relation, other entity, role)``, one :class:`UnitLinks` per triple set. A unit's vector is
folded in from its own links (the relation-aware neighbour average of ERAvg, Albooyeh et al. 2020,
arXiv:2004.13230v2; :func:`textkg.models.known_links.link_estimates`), at training time as at
prediction time, where a new patient is embedded from their own statements on the user's side.

:func:`split_units` does the split; :func:`read_unit_entities` reads the list, naming the file and
line of a bad id. The links use the public graph's entity ids and the layout of
:func:`textkg.models.known_links.move_by_links` (``(row of the unit, relation, other, role)``), so a
held-out unit is folded in with ``move_by_links(model, zeros, links, matrix,
method=LinkMethod("mix", 0.0))``, the representation the unit-level training uses
(:mod:`textkg.training.unit_step`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from textkg.data.graph import KnowledgeGraph
from textkg.data.io import read_id_list
from textkg.data.known_links import NEW_IS_HEAD, NEW_IS_TAIL
from textkg.errors import DataError

#: triple sets whose units must be disjoint: a unit's statements lie in one set of each family
#: (a training unit is never an evaluation unit)
SET_FAMILIES = (("train", "valid", "test"), ("ind-train", "ind-valid", "ind-test"))
#: the config field a bad unit list is reported under
FIELD = "privacy.unit_entities"


@dataclass(frozen=True, eq=False)
class UnitLinks:
    """The statements of one triple set's units, as links of their unit.

    Attributes:
        units: External ids of the units that have at least one statement in the set, sorted;
            row ``i`` of :attr:`links` names ``units[i]``.
        links: ``(m, 4)`` long ``(unit row, relation, other, role)``, sorted by unit row (then
            relation, other, role): the statement ``(unit, relation, other)`` when ``role`` is
            :data:`~textkg.data.known_links.NEW_IS_HEAD`, ``(other, relation, unit)`` when it is
            :data:`~textkg.data.known_links.NEW_IS_TAIL`. ``relation`` and ``other`` are ids of the
            public graph :func:`split_units` returns.
        targets: ``None`` (every link is a target of the unit-level loss) or the relation ids whose
            links are (``privacy.unit_targets``, a public rule): a unit's other links only fold it in.
    """

    units: tuple[str, ...]
    links: torch.Tensor
    targets: tuple[int, ...] | None = None

    @property
    def num_units(self) -> int:
        return len(self.units)

    def counts(self) -> torch.Tensor:
        """``(U,)`` long: each unit's number of links."""
        return torch.bincount(self.links[:, 0], minlength=self.num_units)

    def offsets(self) -> torch.Tensor:
        """``(U + 1,)`` long: unit ``i``'s links are ``links[offsets[i]:offsets[i + 1]]``."""
        return torch.cat([torch.zeros(1, dtype=torch.long), self.counts().cumsum(0)])

    def of(self, row: int) -> torch.Tensor:
        """``(k, 4)``: the links of unit ``row``."""
        start, end = self.offsets()[row : row + 2].tolist()
        return self.links[start:end]

    def select(self, rows: torch.Tensor) -> UnitLinks:
        """The units ``rows`` (``(k,)`` long, increasing) alone, renumbered ``0..k-1``."""
        rows = torch.as_tensor(rows, dtype=torch.long)
        new = torch.full((self.num_units,), -1, dtype=torch.long)
        new[rows] = torch.arange(len(rows))
        keep = new[self.links[:, 0]] >= 0
        links = self.links[keep].clone()
        links[:, 0] = new[links[:, 0]]
        return UnitLinks(units=tuple(self.units[i] for i in rows.tolist()), links=links, targets=self.targets)

    def triples(self, unit_ids: torch.Tensor) -> torch.Tensor:
        """``(m, 3)`` the statements, with unit ``i`` written as ``unit_ids[i]`` (e.g. rows of a
        matrix of folded-in unit vectors appended to the graph's entities)."""
        u = torch.as_tensor(unit_ids, dtype=torch.long)[self.links[:, 0]]
        r, o, head = self.links[:, 1], self.links[:, 2], self.links[:, 3] == NEW_IS_HEAD
        return torch.stack([torch.where(head, u, o), r, torch.where(head, o, u)], dim=1)

    @staticmethod
    def empty() -> UnitLinks:
        return UnitLinks(units=(), links=torch.zeros(0, 4, dtype=torch.long))


def read_unit_entities(path: str | Path, kg: KnowledgeGraph) -> tuple[str, ...]:
    """The unit entities listed in ``path`` (one entity id per line), in file order.

    Raises:
        DataError: an id the graph does not know, an id listed twice, or no id at all
            (naming the file, line and field).
    """
    return read_listed_entities(path, kg.entities)


def listed_entity_mask(path: str | Path, entities: Sequence[str], *, what: str = "unit entity") -> torch.Tensor:
    """``(E,)`` bool: which of ``entities`` (a graph's ids, in id order) the list ``path`` names, with the
    checks of :func:`read_listed_entities`. A statement-level run's rule ``--unit-entities FILE`` under
    ``--privacy confidential``: every statement that mentions a listed entity is confidential."""
    index = {name: i for i, name in enumerate(entities)}
    mask = torch.zeros(len(index), dtype=torch.bool)
    listed = read_listed_entities(path, entities, what=what)
    mask[torch.tensor([index[name] for name in listed], dtype=torch.long)] = True
    return mask


def read_listed_entities(path: str | Path, entities: Sequence[str], *, what: str = "unit entity") -> tuple[str, ...]:
    """The entity ids listed in ``path`` (one per line), in file order; each must be one of ``entities``.

    Raises:
        DataError: an id ``entities`` lacks, an id listed twice, or no id at all (naming the file, line
            and field).
    """
    known = set(entities)
    seen: dict[str, int] = {}
    for line, name in read_id_list(path):
        if name not in known:
            raise DataError(
                f"{what} {name!r} is not in the dataset's entity vocabulary", file=path, line=line, field="id"
            )
        if name in seen:
            raise DataError(
                f"{what} {name!r} is listed twice (first on line {seen[name]})", file=path, line=line, field="id"
            )
        seen[name] = line
    if not seen:
        raise DataError(f"no {what} listed", file=path, field="id")
    return tuple(seen)


def split_units(kg: KnowledgeGraph, unit_ids: Sequence[str]) -> tuple[KnowledgeGraph, dict[str, UnitLinks]]:
    """Take the unit entities out of ``kg`` and keep their statements aside as per-set links.

    Args:
        kg: the graph as loaded (every triple set; ids of ``kg``).
        unit_ids: external ids of the unit entities (e.g. :func:`read_unit_entities`); each must be
            an entity of ``kg``.

    Returns:
        ``(public_kg, units)``. ``public_kg`` is ``kg`` without the unit entities: its entities,
        names, descriptions and types are the others, in their order, with new ids ``0..n-1``;
        every triple set keeps the statements that mention no unit; an inductive split's entity
        lists lose the units. ``units[name]`` is the :class:`UnitLinks` of the triple set ``name``
        (a key of ``kg.triples``: ``"train"``, ``"valid"``, ``"test"``, ``"ind-*"`` or ``"all"``),
        in ``public_kg``'s ids; it is empty when no unit has a statement there.

    Raises:
        DataError: an id ``kg`` does not know; a statement that mentions two unit entities (or one
            twice): it would have two owners; a unit with statements in two sets of one family
            (``train``/``valid``/``test``): a unit is a training unit or an evaluation unit, not both.
    """
    index = {name: i for i, name in enumerate(kg.entities)}
    unknown = [u for u in unit_ids if u not in index]
    if unknown:
        raise DataError(f"unit entity {unknown[0]!r} is not in the dataset's entity vocabulary", field=FIELD)
    is_unit = torch.zeros(kg.num_entities, dtype=torch.bool)
    is_unit[torch.tensor([index[u] for u in unit_ids], dtype=torch.long)] = True
    keep = torch.nonzero(~is_unit).reshape(-1)
    new_id = torch.full((kg.num_entities,), -1, dtype=torch.long)
    new_id[keep] = torch.arange(len(keep))
    unit_rows = torch.nonzero(is_unit).reshape(-1)  # sorted by id, and the ids are sorted external names
    unit_row = torch.full((kg.num_entities,), -1, dtype=torch.long)
    unit_row[unit_rows] = torch.arange(len(unit_rows))
    triples: dict[str, torch.Tensor] = {}
    units: dict[str, UnitLinks] = {}
    for name, t in kg.triples.items():
        t = t.reshape(-1, 3)
        head_unit, tail_unit = is_unit[t[:, 0]], is_unit[t[:, 2]]
        both = head_unit & tail_unit
        if bool(both.any()):
            h, r, tl = t[torch.nonzero(both)[0, 0]].tolist()
            raise DataError(
                f"the statement ({kg.entities[h]}, {kg.relations[r]}, {kg.entities[tl]}) of the {name!r} set "
                "mentions two unit entities (or one twice): a unit statement has exactly one owner",
                file=kg.source or None,
                field=FIELD,
            )
        triples[name] = new_id[t[~(head_unit | tail_unit)]].reshape(-1, 3)
        as_head, as_tail = t[head_unit], t[tail_unit]
        rows = torch.cat([as_head[:, 0], as_tail[:, 2]])
        links = torch.stack(
            [
                rows,
                torch.cat([as_head[:, 1], as_tail[:, 1]]),
                torch.cat([new_id[as_head[:, 2]], new_id[as_tail[:, 0]]]),
                torch.cat(
                    [
                        torch.full((len(as_head),), NEW_IS_HEAD, dtype=torch.long),
                        torch.full((len(as_tail),), NEW_IS_TAIL, dtype=torch.long),
                    ]
                ),
            ],
            dim=1,
        )
        units[name] = _unit_links(links, unit_row, kg.entities)
    _check_disjoint(units, kg)
    entity_splits = None
    if kg.entity_splits is not None:
        entity_splits = {k: new_id[v[~is_unit[v]]] for k, v in kg.entity_splits.items()}
    names = keep.tolist()
    public_kg = dataclasses.replace(
        kg,
        entities=tuple(kg.entities[i] for i in names),
        entity_names=tuple(kg.entity_names[i] for i in names),
        entity_descriptions=tuple(kg.entity_descriptions[i] for i in names),
        entity_types=None if kg.entity_types is None else tuple(kg.entity_types[i] for i in names),
        entity_synonyms=None if kg.entity_synonyms is None else tuple(kg.entity_synonyms[i] for i in names),
        triples=triples,
        entity_splits=entity_splits,
    )
    return public_kg, units


def _unit_links(links: torch.Tensor, unit_row: torch.Tensor, entities: Sequence[str]) -> UnitLinks:
    """:class:`UnitLinks` from ``(m, 4)`` links whose first column is the unit's id in the old graph."""
    if not len(links):
        return UnitLinks.empty()
    present = torch.unique(links[:, 0])  # sorted ids, i.e. sorted external names
    local = torch.full((len(unit_row),), -1, dtype=torch.long)
    local[present] = torch.arange(len(present))
    links = torch.cat([local[links[:, 0]].unsqueeze(1), links[:, 1:]], dim=1)
    key = links.numpy()
    order = np.lexsort((key[:, 3], key[:, 2], key[:, 1], key[:, 0]))
    return UnitLinks(
        units=tuple(entities[i] for i in present.tolist()),
        links=torch.from_numpy(np.ascontiguousarray(key[order])),
    )


def _check_disjoint(units: Mapping[str, UnitLinks], kg: KnowledgeGraph) -> None:
    for family in SET_FAMILIES:
        owner: dict[str, str] = {}
        for name in family:
            for unit in units[name].units if name in units else ():
                if unit in owner:
                    raise DataError(
                        f"unit entity {unit!r} has statements in both the {owner[unit]!r} and the {name!r} sets: "
                        "a unit is a training unit or a held-out one, so all its statements go in one file",
                        file=kg.source or None,
                        field=FIELD,
                    )
                owner[unit] = name


def unit_entities_of(kg: KnowledgeGraph, path: str | Path) -> tuple[KnowledgeGraph, dict[str, UnitLinks]]:
    """:func:`split_units` of the units listed in ``path`` (:func:`read_unit_entities`)."""
    return split_units(kg, read_unit_entities(path, kg))


def units_of_split(units: Mapping[str, UnitLinks], kind: str) -> dict[str, UnitLinks]:
    """``{"train", "valid", "test"}`` of the units a run of split ``kind`` uses: a given inductive split's
    ``ind-*`` sets when ``kind`` is ``"inductive"`` and the graph has them, else ``train``/``valid``/``test``.

    Raises:
        DataError: the graph has no such sets (e.g. one ``all`` set): a unit's split is given by the file
            its statements are in.
    """
    names = ("ind-train", "ind-valid", "ind-test") if kind == "inductive" and "ind-train" in units else None
    names = names or ("train", "valid", "test")
    if not all(n in units for n in names):
        raise DataError(
            "a unit-level run takes each unit's split from the file its statements are in (train.tsv, dev.tsv, "
            "test.tsv); this dataset has no such files",
            field=FIELD,
        )
    return dict(zip(("train", "valid", "test"), (units[n] for n in names), strict=True))
