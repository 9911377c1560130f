"""PyKEEN's triples as a textkg dataset, without PyKEEN installed.

Two ways in:

* :func:`from_triples_factory` (and :func:`textkg.data.registry.register_triples_factory`, which makes
  it loadable by name): a PyKEEN ``TriplesFactory`` (anything with
  ``mapped_triples`` ``(n, 3)``, ``entity_to_id`` and ``relation_to_id``) or a
  PyKEEN ``Dataset`` (anything with ``training``, ``validation`` and
  ``testing`` factories: they become the given ``train``/``valid``/``test``
  sets, as a BLP directory's files do).
* ``--dataset pykeen:PATH`` (:func:`load_pykeen_path`): PyKEEN's files on
  disk: a folder with ``train.txt``, ``valid.txt`` and ``test.txt`` (the layout
  of PyKEEN's packaged datasets, e.g. Nations), or one triples file; each line
  ``head<TAB>relation<TAB>tail``, no header.

Text: PyKEEN graphs carry none, so descriptions come from a side file
(``descriptions=``, ``id<TAB>text`` per line, every entity listed; the
``pykeen:PATH#descriptions=FILE`` option), else the entity's label stands for
its name and description (``info["descriptions"]`` says which). Relation
texts are the labels with ``_`` and ``/`` as spaces.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import torch

from textkg.data.graph import KnowledgeGraph
from textkg.data.io import iter_rows, read_id_text
from textkg.errors import DataError

#: PyKEEN's file names per triple set, as its packaged datasets ship them
SPLIT_FILES = {"train": "train.txt", "valid": "valid.txt", "test": "test.txt"}


def _labelled(factory) -> list[tuple[str, str, str]]:
    """``(head, relation, tail)`` labels of a TriplesFactory-like object."""
    for attr in ("mapped_triples", "entity_to_id", "relation_to_id"):
        if not hasattr(factory, attr):
            raise DataError(f"not a TriplesFactory: it has no {attr!r}", field="factory")
    entity = {i: label for label, i in factory.entity_to_id.items()}
    relation = {i: label for label, i in factory.relation_to_id.items()}
    mapped = torch.as_tensor(factory.mapped_triples).tolist()
    return [(entity[h], relation[r], entity[t]) for h, r, t in mapped]


def from_triples_factory(
    source, *, descriptions: str | Path | Mapping[str, str] | None = None, name: str = "pykeen"
) -> KnowledgeGraph:
    """A graph from a PyKEEN ``TriplesFactory`` or ``Dataset`` (duck-typed; see the module docstring).

    Args:
        source: The factory, or a dataset with ``training``/``validation``/``testing``.
        descriptions: ``{label: text}`` or an ``id<TAB>text`` file (every entity listed).
        name: The graph's name.
    """
    if all(hasattr(source, a) for a in ("training", "validation", "testing")):
        sets = {
            "train": _labelled(source.training),
            "valid": _labelled(source.validation),
            "test": _labelled(source.testing),
        }
    else:
        sets = {"all": _labelled(source)}
    return build_from_labels(sets, descriptions=descriptions, name=name, source=name)


def load_pykeen_path(path: str | Path, *, descriptions: str | Path | None = None) -> KnowledgeGraph:
    """PyKEEN's triple files on disk (see the module docstring).

    Raises:
        DataError: missing files, rows that are not three tab-separated labels, a description file
            that lacks an entity.
    """
    path = Path(path)
    if path.is_dir():
        missing = [f for f in SPLIT_FILES.values() if not (path / f).is_file()]
        if missing:
            raise DataError(f"a PyKEEN folder needs {', '.join(SPLIT_FILES.values())}; missing {missing}", file=path)
        files = {k: path / f for k, f in SPLIT_FILES.items()}
    else:
        files = {"all": path}
    sets = {k: [(h.strip(), r.strip(), t.strip()) for _, (h, r, t) in iter_rows(f, ("head", "relation", "tail"))]
            for k, f in files.items()}  # fmt: skip
    return build_from_labels(sets, descriptions=descriptions, name=str(path), source=str(path))


def build_from_labels(
    sets: Mapping[str, list[tuple[str, str, str]]],
    *,
    descriptions: str | Path | Mapping[str, str] | None,
    name: str,
    source: str,
) -> KnowledgeGraph:
    """The graph of labelled triple sets (duplicates dropped), with texts as the module docstring says."""
    entities = tuple(sorted({x for rows in sets.values() for h, _, t in rows for x in (h, t)}))
    relations = tuple(sorted({r for rows in sets.values() for _, r, _ in rows}))
    if not entities:
        raise DataError("no triples", file=source)
    if descriptions is None:
        texts, kind = {e: e for e in entities}, "labels"
    else:
        texts = dict(descriptions) if isinstance(descriptions, Mapping) else read_id_text(descriptions)[0]
        kind = "file" if not isinstance(descriptions, Mapping) else "mapping"
        absent = [e for e in entities if not texts.get(e, "").strip()]
        if absent:
            where = descriptions if not isinstance(descriptions, Mapping) else None
            raise DataError(
                f"{len(absent)} entities have no description, e.g. {absent[0]!r}", file=where, field="descriptions"
            )
    eid = {e: i for i, e in enumerate(entities)}
    rid = {r: i for i, r in enumerate(relations)}

    def tensor(rows) -> torch.Tensor:
        ids = sorted({(eid[h], rid[r], eid[t]) for h, r, t in rows})
        return torch.tensor(ids, dtype=torch.long).reshape(-1, 3)

    return KnowledgeGraph(
        name=name,
        entities=entities,
        relations=relations,
        entity_names=entities,
        entity_descriptions=tuple(texts[e].strip() for e in entities),
        relation_texts=tuple(r.replace("_", " ").replace("/", " ").strip() or r for r in relations),
        triples={k: tensor(rows) for k, rows in sets.items()},
        source=source,
        info={"format": "pykeen", "descriptions": kind},
    )
