"""Loader for BLP / KG-BERT style dataset directories.

A directory holds::

    train.tsv, dev.tsv, test.tsv      head<TAB>relation<TAB>tail   (required)
    entity2text.txt                   id<TAB>name                  (required)
    entity2textlong.txt               id<TAB>long description      (description="long")
    entity2text_firstsentence_StAR.txt  id<TAB>name -- first sentence (description="first-sentence")
    relation2text.txt                 relation<TAB>text            (optional)
    ind-train.tsv, ind-dev.tsv, ind-test.tsv   a given inductive split (optional;
                                      here or in ``inductive_dir``)
    train-ents.txt, dev-ents.txt, test-ents.txt  entity lists of that split (optional)

``dev`` files become the ``"valid"`` / ``"ind-valid"`` triple sets. The graph's
entities are those that occur in some triple file (not every row of
``entity2text.txt``); entity and relation ids are the sorted external ids, so
every split shares one deterministic id map. Every file is validated before any
tensor is built; problems raise :class:`~textkg.errors.DataError` naming the
file, line and field.
"""

from __future__ import annotations

import re
from pathlib import Path

import torch

from textkg.data.graph import KnowledgeGraph
from textkg.data.io import read_id_list, read_id_text, read_triples
from textkg.errors import ConfigError, DataError

TRIPLE_FILES = {"train": "train.tsv", "valid": "dev.tsv", "test": "test.tsv"}
INDUCTIVE_FILES = {"ind-train": "ind-train.tsv", "ind-valid": "ind-dev.tsv", "ind-test": "ind-test.tsv"}
ENTITY_LIST_FILES = {"ind-train": "train-ents.txt", "ind-valid": "dev-ents.txt", "ind-test": "test-ents.txt"}
NAME_FILE = "entity2text.txt"
#: where a graph's entity and relation vocabulary comes from (``load_blp_directory(vocabulary=...)``)
VOCABULARIES = ("statements", "texts")
DESCRIPTION_FILES = {
    "short": "entity2text.txt",
    "long": "entity2textlong.txt",
    "first-sentence": "entity2text_firstsentence_StAR.txt",
}
RELATION_FILE = "relation2text.txt"
#: ``description="auto"``: the first of these files that the directory has (the richest text first)
AUTO_DESCRIPTION_ORDER = ("long", "first-sentence", "short")


class _TripleFile:
    """The parsed rows of one triple file, with their line numbers."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.triples, self.lines = read_triples(path)

    def entities(self) -> set[str]:
        return {h for h, _, _ in self.triples} | {t for _, _, t in self.triples}

    def first(self, bad_entity) -> tuple[int, str, str] | None:
        """``(line, field, entity)`` of the first head/tail for which ``bad_entity`` holds."""
        for line, (h, _, t) in zip(self.lines, self.triples, strict=True):
            if bad_entity(h):
                return line, "head", h
            if bad_entity(t):
                return line, "tail", t
        return None


def relation_text_fallback(relation: str) -> str:
    """Readable text for a relation without a ``relation2text.txt`` row.

    ``/people/person/place_of_birth`` → ``"people person place of birth"``.
    """
    text = " ".join(re.sub(r"[/_]+", " ", relation).split())
    return text or relation


def load_blp_directory(
    directory: str | Path,
    *,
    description: str = "short",
    description_file: str | Path | None = None,
    inductive_dir: str | Path | None = None,
    name: str | None = None,
    vocabulary: str = "statements",
    require_entity_lists: str | None = None,
) -> KnowledgeGraph:
    """Read and validate a BLP/KG-BERT directory.

    Args:
        directory: The dataset directory.
        description: ``"short"`` (``entity2text.txt``), ``"long"``
            (``entity2textlong.txt``) or ``"first-sentence"``
            (``entity2text_firstsentence_StAR.txt``, the StAR release's
            "Name -- first Wikipedia sentence" that BLP-style models need);
            an error if the file is absent — no silent fallback. ``"auto"``: the
            richest of these files the directory has (:func:`resolve_description`).
        description_file: Read descriptions from this file instead (a name in
            ``directory`` or a path), e.g. ``entity2text_firstsentence_StAR.txt``.
        inductive_dir: Folder with ``ind-*.tsv`` (relative to ``directory`` or
            the working directory). Default: ``ind-*.tsv`` in ``directory``
            itself, if present.
        name: Graph name (default: the directory path).
        vocabulary: ``"statements"`` (default): the entities and relations that
            occur in some triple file. ``"texts"``: every entity with a row in
            ``entity2text.txt`` and in the description file, and every relation of
            ``relation2text.txt``, whether or not a statement uses it. Private runs
            use ``"texts"``: the vocabulary is then a public input, not something
            computed from private statements (``docs/privacy.md``).
        require_entity_lists: Why an inductive split must come with its ``*-ents.txt``
            lists (e.g. ``"--privacy full"``), or ``None``. Without them the entity
            partition is read off ``ind-train.tsv``; a private run refuses that before any
            statement is read (:func:`missing_entity_lists`).

    Returns:
        A graph with triple sets ``train``/``valid``/``test`` and, when an
        inductive split is present, ``ind-train``/``ind-valid``/``ind-test``
        plus :attr:`KnowledgeGraph.entity_splits`.

    Raises:
        DataError: missing or malformed files, see ``docs/datasets.md``.
        ConfigError: an unknown ``description`` value.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise DataError("not a dataset directory", file=directory)
    desc_path = _description_path(directory, description, description_file)
    ind_path = _inductive_path(directory, inductive_dir)
    if require_entity_lists is not None and ind_path is not None:
        if not all((ind_path / f).is_file() for f in ENTITY_LIST_FILES.values()):
            raise missing_entity_lists(ind_path, require_entity_lists)

    files = {key: _TripleFile(directory / fname) for key, fname in TRIPLE_FILES.items()}
    if ind_path is not None:
        files.update({key: _TripleFile(ind_path / fname) for key, fname in INDUCTIVE_FILES.items()})
    names, _ = read_id_text(directory / NAME_FILE)
    descriptions = names if desc_path == directory / NAME_FILE else read_id_text(desc_path)[0]
    rel_path = directory / RELATION_FILE
    relation_texts = read_id_text(rel_path, id_field="relation")[0] if rel_path.is_file() else None

    for f in files.values():
        _check_known(f, names, directory / NAME_FILE)
        if descriptions is not names:
            _check_known(f, descriptions, desc_path)
        if relation_texts is not None:
            _check_relations(f, relation_texts, rel_path)
    _check_transductive(files["train"], [files["valid"], files["test"]])
    entity_lists = None
    if ind_path is not None:
        entity_lists = _read_entity_lists(ind_path)
        _check_inductive(files, entity_lists)

    if vocabulary not in VOCABULARIES:
        raise ConfigError(f"unknown vocabulary {vocabulary!r}; choose one of {list(VOCABULARIES)}", field="vocabulary")
    if vocabulary == "texts" and relation_texts is None:
        raise DataError(
            "a private run takes its relation vocabulary from this file (a public input), "
            "not from the statements; the directory has none",
            file=rel_path,
        )
    return _build(
        directory,
        name,
        files,
        names,
        descriptions,
        relation_texts,
        entity_lists,
        vocabulary,
        info={
            "description": "file" if description_file is not None else resolve_description(directory, description),
            "vocabulary": vocabulary,
            "description_file": str(desc_path),
            "inductive_dir": None if ind_path is None else str(ind_path),
            #: where an inductive split's entity partition comes from (``None``: no inductive split)
            "entity_partition": _partition_source(ind_path, entity_lists),
            "relation_text": str(rel_path) if relation_texts is not None else "from ids",
        },
    )


def resolve_description(directory: str | Path, description: str) -> str:
    """``description``, or for ``"auto"`` the richest description file ``directory`` has.

    ``auto`` takes ``long`` (``entity2textlong.txt``), else ``first-sentence`` (the StAR file),
    else ``short`` (the names): a text-based model of new entities reads their descriptions,
    and a directory of KG-BERT's release has all of them. The choice is a documented rule,
    recorded in the graph's ``info["description"]``, not a fallback: a named file that is
    absent is still an error.
    """
    if description != "auto":
        return description
    for option in AUTO_DESCRIPTION_ORDER:
        if (Path(directory) / DESCRIPTION_FILES[option]).is_file():
            return option
    return "short"  # absent too: the loader's error names entity2text.txt


def _description_path(directory: Path, description: str, description_file) -> Path:
    description = resolve_description(directory, description)
    if description not in DESCRIPTION_FILES:
        raise ConfigError(
            f"unknown description {description!r}; choose one of {sorted([*DESCRIPTION_FILES, 'auto'])}",
            field="description",
        )
    if description_file is not None:
        path = Path(description_file)
        path = path if path.is_absolute() or path.is_file() else directory / path
        if not path.is_file():
            raise DataError("description file not found", file=path, field="description_file")
        return path
    path = directory / DESCRIPTION_FILES[description]
    if not path.is_file():
        raise DataError(
            f"description={description!r} needs this file (no fallback to {NAME_FILE})", file=path, field="description"
        )
    return path


def _inductive_path(directory: Path, inductive_dir) -> Path | None:
    if inductive_dir is None:
        present = [f for f in INDUCTIVE_FILES.values() if (directory / f).is_file()]
        if not present:
            return None
        path = directory
    else:
        path = Path(inductive_dir)
        if not path.is_absolute() and (directory / path).is_dir():
            path = directory / path
        if not path.is_dir():
            raise DataError("inductive split directory not found", file=path, field="inductive_dir")
    missing = [f for f in INDUCTIVE_FILES.values() if not (path / f).is_file()]
    if missing:
        raise DataError(
            f"an inductive split needs {', '.join(INDUCTIVE_FILES.values())}; missing {', '.join(missing)}", file=path
        )
    return path


def _check_known(f: _TripleFile, texts: dict[str, str], text_path: Path) -> None:
    unknown = f.entities().difference(texts)
    if unknown:
        first = f.first(unknown.__contains__)
        assert first is not None  # every entity of `unknown` came from f's own triples
        line, field, entity = first
        raise DataError(f"unknown entity '{entity}': it has no row in {text_path}", file=f.path, line=line, field=field)


def _check_relations(f: _TripleFile, texts: dict[str, str], text_path: Path) -> None:
    for line, (_, r, _) in zip(f.lines, f.triples, strict=True):
        if r not in texts:
            raise DataError(f"relation '{r}' has no row in {text_path}", file=f.path, line=line, field="relation")


def _check_transductive(train: _TripleFile, evaluation: list[_TripleFile]) -> None:
    """No evaluation triple repeats a training triple.

    Evaluation entities need not occur in training (FB15k-237's dev/test
    mention a few entities that train.tsv does not); they only need text.
    """
    train_set = set(train.triples)
    for f in evaluation:
        for line, triple in zip(f.lines, f.triples, strict=True):
            if triple in train_set:
                raise DataError(f"triple leaks from training: it is also in {train.path}", file=f.path, line=line)


def _read_entity_lists(ind_path: Path) -> dict[str, set[str]] | None:
    """The optional ``*-ents.txt`` lists; disjointness is checked here."""
    paths = {key: ind_path / fname for key, fname in ENTITY_LIST_FILES.items()}
    if not all(p.is_file() for p in paths.values()):
        return None
    lists: dict[str, set[str]] = {}
    owner: dict[str, str] = {}
    for key, path in paths.items():
        lists[key] = set()
        for line, entity in read_id_list(path):
            if entity in owner:
                raise DataError(
                    f"entity '{entity}' is also listed in {paths[owner[entity]]}; "
                    "inductive entity sets must be disjoint",
                    file=path,
                    line=line,
                    field="id",
                )
            owner[entity] = key
            lists[key].add(entity)
    return lists


def _check_inductive(files: dict[str, _TripleFile], lists: dict[str, set[str]] | None) -> None:
    """Held-out (valid/test) entities never occur in ``ind-train``; sets are consistent."""
    train, valid, test = files["ind-train"], files["ind-valid"], files["ind-test"]
    if lists is None:
        seen = train.entities()
        earlier = {"validation": f"{train.path.name}", "test": f"{train.path.name} or {valid.path.name}"}
        for f, what in ((valid, "validation"), (test, "test")):
            for line, (h, _, t) in zip(f.lines, f.triples, strict=True):
                if h in seen and t in seen:
                    raise DataError(
                        f"an inductive {what} triple must involve an entity unseen in "
                        f"training, but '{h}' and '{t}' both occur in {earlier[what]}",
                        file=f.path,
                        line=line,
                        field="head/tail",
                    )
            seen = seen | f.entities()
        return
    allowed = {
        "ind-train": lists["ind-train"],
        "ind-valid": lists["ind-train"] | lists["ind-valid"],
        "ind-test": lists["ind-train"] | lists["ind-valid"] | lists["ind-test"],
    }
    where = {e: key for key, ents in lists.items() for e in ents}
    for key, f in ((k, files[k]) for k in INDUCTIVE_FILES):
        hit = f.first(lambda e, ok=allowed[key]: e not in ok)
        if hit is not None:
            line, field, entity = hit
            owner = where.get(entity)
            listed = f"a {owner} entity" if owner else "in no *-ents.txt list"
            raise DataError(
                f"entity '{entity}' is {listed}, so it may not occur in {f.path.name}",
                file=f.path,
                line=line,
                field=field,
            )
    for key, f in (("ind-valid", valid), ("ind-test", test)):
        own = lists[key]
        for line, (h, _, t) in zip(f.lines, f.triples, strict=True):
            if h not in own and t not in own:
                raise DataError(
                    f"triple touches no {key} entity: both ends belong to earlier sets",
                    file=f.path,
                    line=line,
                    field="head/tail",
                )


#: ``info["entity_partition"]`` of an inductive split without ``*-ents.txt`` lists
PARTITION_FROM_STATEMENTS = "inferred from ind-train.tsv"


def missing_entity_lists(ind_path: str | Path | None, why: str) -> DataError:
    """The error for an inductive split without its ``*-ents.txt`` lists in a run that needs them (``why``)."""
    return DataError(
        f"{why} needs the inductive split's entity lists ({', '.join(ENTITY_LIST_FILES.values())}) in this "
        "folder: without them the entity partition (training, validation and test entities, the structural "
        "table's rows, the evaluation statements kept) is read off ind-train.tsv, whose statements are "
        "private, so one private statement would change what is released. List every entity of each set, "
        "one id per line",
        file=ind_path,
        field="inductive_dir",
    )


def _partition_source(ind_path: Path | None, entity_lists: dict[str, set[str]] | None) -> str | None:
    """Where the entity partition of an inductive split comes from: the ``*-ents.txt`` lists, or the
    statements themselves (a training entity is one that ``ind-train.tsv`` names)."""
    if ind_path is None:
        return None
    if entity_lists is None:
        return PARTITION_FROM_STATEMENTS
    return "files: " + ", ".join(ENTITY_LIST_FILES.values())


def _inferred_entity_sets(files: dict[str, _TripleFile]) -> dict[str, set[str]]:
    train = files["ind-train"].entities()
    valid = files["ind-valid"].entities() - train
    test = files["ind-test"].entities() - train - valid
    return {"ind-train": train, "ind-valid": valid, "ind-test": test}


def _build(
    directory: Path, name, files, names, descriptions, relation_texts, entity_lists, vocabulary, info: dict
) -> KnowledgeGraph:
    entity_set: set[str] = set()
    relation_set: set[str] = set()
    for f in files.values():
        entity_set |= f.entities()
        relation_set.update(r for _, r, _ in f.triples)
    if vocabulary == "texts":  # every statement's entities and relations have texts (checked above)
        entity_set |= set(names).intersection(descriptions)
        relation_set |= set(relation_texts)
    entities = tuple(sorted(entity_set))
    relations = tuple(sorted(relation_set))
    eid = {e: i for i, e in enumerate(entities)}
    rid = {r: i for i, r in enumerate(relations)}
    triples = {}
    for key, f in files.items():
        ids = [(eid[h], rid[r], eid[t]) for h, r, t in f.triples]
        triples[key] = torch.tensor(ids, dtype=torch.long).reshape(-1, 3)
    entity_splits = None
    if "ind-train" in files:
        sets = entity_lists if entity_lists is not None else _inferred_entity_sets(files)
        entity_splits = {
            key: torch.tensor(sorted(eid[e] for e in ents if e in eid), dtype=torch.long) for key, ents in sets.items()
        }
    rel_text = tuple(relation_texts[r] if relation_texts is not None else relation_text_fallback(r) for r in relations)
    return KnowledgeGraph(
        name=name or str(directory),
        entities=entities,
        relations=relations,
        entity_names=tuple(names[e] for e in entities),
        entity_descriptions=tuple(descriptions[e] for e in entities),
        relation_texts=rel_text,
        triples=triples,
        entity_types=None,
        source=str(directory),
        entity_splits=entity_splits,
        info=info,
    )
