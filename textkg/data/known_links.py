"""A new entity's known links, as a user gives them (``textkg predict --known-links FILE``).

One link per line, tab-separated: ``relation``, ``entity`` (the other entity's id in the graph),
``direction``: ``tail`` when the other entity is the tail, ``(new, relation, entity)``, and
``head`` when it is the head, ``(entity, relation, new)`` (the words of ``predict --direction``).
Empty lines and lines starting with ``#`` are skipped; a file with no link at all (empty, or
comments only) is an error, not a silent zero-shot. With ``predict --batch``, each line starts with
one more column, ``name``: the batch row (its first column) whose known link it is
(:func:`read_known_links_by_name`). Every problem is a :class:`~textkg.errors.DataError` naming
the file, the line and the field.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch

from textkg.errors import DataError

#: role of the new entity in a known link: head of ``(new, r, other)`` or tail of ``(other, r, new)``
NEW_IS_HEAD, NEW_IS_TAIL = 0, 1
#: the ``direction`` column's words and the new entity's role they mean
DIRECTIONS = {"tail": NEW_IS_HEAD, "head": NEW_IS_TAIL}
COLUMNS = ("relation", "entity", "direction")


def parse_known_links(
    rows: Sequence[Sequence[str]], *, entities: Sequence[str], relations: Sequence[str], source: str = "known links"
) -> torch.Tensor:
    """``(m, 3)`` long ``(relation, other entity, role)`` from rows of ``(relation, entity, direction)``.

    ``rows[i]`` is reported as line ``i + 1`` of ``source``. Raises :class:`DataError` for a row that
    is not 3 fields, an unknown relation or entity, or a direction other than ``head``/``tail``.
    """
    entity_id = {e: i for i, e in enumerate(entities)}
    relation_id = {r: i for i, r in enumerate(relations)}
    out = []
    for line, row in enumerate(rows, start=1):
        if len(row) != len(COLUMNS):
            raise DataError(
                f"expected {len(COLUMNS)} tab-separated columns ({', '.join(COLUMNS)}), got {len(row)}",
                file=source,
                line=line,
            )
        relation, entity, direction = (part.strip() for part in row)
        if relation not in relation_id:
            raise DataError(
                f"unknown relation {relation!r}; known: {', '.join(relations)}",
                file=source,
                line=line,
                field="relation",
            )
        if entity not in entity_id:
            raise DataError(
                f"unknown entity {entity!r} (give an entity id of the run's graph)",
                file=source,
                line=line,
                field="entity",
            )
        if direction not in DIRECTIONS:
            raise DataError(
                f"direction must be 'tail' ((new, relation, entity)) or 'head' ((entity, relation, new)), "
                f"got {direction!r}",
                file=source,
                line=line,
                field="direction",
            )
        out.append((relation_id[relation], entity_id[entity], DIRECTIONS[direction]))
    return torch.tensor(out, dtype=torch.long).reshape(-1, 3)


def link_lines(path: str | Path) -> list[tuple[int, list[str]]]:
    """``[(line number, tab-separated fields)]`` of the file's link lines (blank lines and ``#`` comments
    skipped); none is an error."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise DataError("file not found", file=path) from None
    except IsADirectoryError:
        raise DataError("is a directory, not a file", file=path) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataError("not valid UTF-8", file=path, line=data[: exc.start].count(b"\n") + 1) from None
    out = [
        (line, raw.rstrip("\r").split("\t"))
        for line, raw in enumerate(text.splitlines(), start=1)
        if raw.strip() and not raw.lstrip().startswith("#")
    ]
    if not out:
        raise DataError(
            "no known link (the file is empty or has comments only); leave out --known-links for zero-shot", file=path
        )
    return out


def _parse_line(path, line: int, fields: list[str], entities, relations) -> torch.Tensor:
    try:
        return parse_known_links([fields], entities=entities, relations=relations, source=str(path))
    except DataError as exc:
        raise DataError(exc.message, file=path, line=line, field=exc.field) from None


def read_known_links(path: str | Path, *, entities: Sequence[str], relations: Sequence[str]) -> torch.Tensor:
    """:func:`parse_known_links` of a TSV file (line numbers are the file's own); a file without a link
    is a :class:`DataError`."""
    links = [_parse_line(path, line, fields, entities, relations) for line, fields in link_lines(path)]
    return torch.cat(links)


def read_known_links_by_name(
    path: str | Path, *, names: Sequence[str], entities: Sequence[str], relations: Sequence[str]
) -> dict[str, torch.Tensor]:
    """``{name: (m, 3) links}`` from a TSV of ``name, relation, entity, direction`` lines (``predict
    --batch``: ``name`` is a batch row's first column; rows without a line get no links). A name that
    is not in ``names`` is a :class:`DataError` naming the line."""
    known = set(names)
    out: dict[str, list[torch.Tensor]] = {}
    for line, fields in link_lines(path):
        if len(fields) != len(COLUMNS) + 1:
            raise DataError(
                f"expected {len(COLUMNS) + 1} tab-separated columns with --batch (name, {', '.join(COLUMNS)}), "
                f"got {len(fields)}",
                file=path,
                line=line,
            )
        name = fields[0].strip()
        if name not in known:
            raise DataError(
                f"no batch row is named {name!r} (the first column of the --batch file)",
                file=path,
                line=line,
                field="name",
            )
        out.setdefault(name, []).append(_parse_line(path, line, fields[1:], entities, relations))
    return {name: torch.cat(parts) for name, parts in out.items()}


#: columns an annotation file must have (the ``phenotype.hpoa`` header names)
HPOA_COLUMNS = ("database_id", "qualifier", "hpo_id")


def read_annotations(path: str | Path, *, entities: Sequence[str]) -> tuple[dict[str, list[int]], int]:
    """``({term id: [entity ids annotated to it]}, rows naming an entity outside the graph)`` from a
    ``phenotype.hpoa``-shaped file: ``#`` comment lines, then a tab-separated header with at least
    ``database_id``, ``qualifier`` and ``hpo_id`` (an ``aspect`` column, if any, keeps ``P`` rows only),
    then one annotation per line; ``NOT`` annotations are skipped. A disease that the run's graph does
    not hold cannot be used and is counted, not an error (an hpoa release names thousands)."""
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise DataError("file not found", file=path) from None
    except UnicodeDecodeError as exc:
        raise DataError(
            "not valid UTF-8", file=path, line=Path(path).read_bytes()[: exc.start].count(b"\n") + 1
        ) from None
    entity_id = {e: i for i, e in enumerate(entities)}
    header: dict[str, int] | None = None
    out: dict[str, list[int]] = {}
    unknown = 0
    for line, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip() or raw.startswith("#"):
            continue
        parts = raw.rstrip("\r").split("\t")
        if header is None:
            header = {name.strip(): k for k, name in enumerate(parts)}
            missing = [c for c in HPOA_COLUMNS if c not in header]
            if missing:
                raise DataError(
                    f"the header lacks column(s) {', '.join(missing)} (a phenotype.hpoa header names them)",
                    file=path,
                    line=line,
                    field=missing[0],
                )
            continue
        if len(parts) != len(header):
            raise DataError(f"expected {len(header)} tab-separated columns, got {len(parts)}", file=path, line=line)
        row = {c: parts[k].strip() for c, k in header.items()}
        if row["qualifier"] == "NOT" or row.get("aspect", "P") != "P":
            continue
        if not row["hpo_id"]:
            raise DataError("empty term id", file=path, line=line, field="hpo_id")
        entity = entity_id.get(row["database_id"])
        if entity is None:
            unknown += 1
            continue
        ids = out.setdefault(row["hpo_id"], [])
        if entity not in ids:
            ids.append(entity)
    return out, unknown
