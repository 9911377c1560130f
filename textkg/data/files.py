"""Ontology and RDF files as datasets: ``--dataset FILE.obo``, ``obo:PATH``, ``owl:PATH``, ``rdf:PATH``.

A dataset string names a file by a format prefix (``obo:``, ``owl:``,
``rdf:``) or by its suffix (``.obo``; ``.owl``; ``.ttl``, ``.nt``, ``.rdf``,
``.xml``, ``.n3``, ``.jsonld``), optionally followed by entity types given by
root terms: ``hp.obo#types=phenotype=HP:0000118,disease=MONDO:0000001``
(:func:`textkg.data.ontology.build_graph`). The string is stored in a run's
``config.json``, so the run reloads the same graph.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from textkg.data.graph import KnowledgeGraph
from textkg.data.ontology import Ontology, build_graph, parse_type_roots, read_obo
from textkg.data.rdf import RDF_FORMATS, read_rdf
from textkg.errors import ConfigError

#: Marks the entity types after a file name.
TYPES_MARK = "#types="


@dataclass(frozen=True)
class FileFormat:
    """A file format readable as a dataset.

    Attributes:
        name: The prefix that selects it (``obo:PATH``).
        suffixes: File suffixes that select it without a prefix.
        read: Reads a file into an :class:`~textkg.data.ontology.Ontology`.
        summary: One line for listings and docs.
    """

    name: str
    suffixes: tuple[str, ...]
    read: Callable[[Path], Ontology]
    summary: str


_FORMATS: dict[str, FileFormat] = {}


def register_file_format(fmt: FileFormat) -> None:
    """Make ``fmt`` selectable by prefix and suffix (replacing an earlier one of that name)."""
    _FORMATS[fmt.name] = fmt


def list_file_formats() -> tuple[str, ...]:
    """Prefixes of the registered file formats, sorted."""
    return tuple(sorted(_FORMATS))


@dataclass(frozen=True)
class FileSource:
    """A parsed dataset string: the format, the file and the optional type roots."""

    format: FileFormat
    path: Path
    type_roots: dict[str, str] | None


def file_source(spec: str) -> FileSource | None:
    """The file a dataset string names, or ``None`` when it names no file format.

    Raises:
        DataError: a malformed ``#types=`` part.
    """
    body, mark, roots = spec.partition(TYPES_MARK)
    match = re.match(r"^([a-z]+):(.+)$", body)
    if match and match.group(1) in _FORMATS:
        fmt, path = _FORMATS[match.group(1)], Path(match.group(2))
    else:
        path = Path(body)
        fmt = next((f for f in _FORMATS.values() if path.suffix.lower() in f.suffixes), None)  # type: ignore[assignment]
        if fmt is None:
            return None
    return FileSource(fmt, path, parse_type_roots(roots, source=str(path)) if mark else None)


def load_file_dataset(source: FileSource, **kwargs) -> KnowledgeGraph:
    """The graph of an ontology or RDF file (see :mod:`textkg.data.ontology` for what it holds).

    Raises:
        ConfigError: an option other than ``description="short"`` (a file has one text per entity).
        DataError: unreadable or malformed file.
    """
    for option, value in kwargs.items():
        if not (option == "description" and value in ("short", "auto")):
            raise ConfigError(
                f"an {source.format.name} file does not take {option}={value!r} (it has one text per entity)",
                field=option,
            )
    return build_graph(source.format.read(source.path), name=str(source.path), type_roots=source.type_roots)


register_file_format(FileFormat("obo", (".obo",), read_obo, "OBO 1.4 ontology (fastobo)"))
register_file_format(FileFormat("owl", (".owl",), read_rdf, "OWL ontology in RDF/XML (rdflib)"))
register_file_format(
    FileFormat(
        "rdf",
        tuple(s for s in RDF_FORMATS if s != ".owl"),
        read_rdf,
        "RDF: Turtle, N-Triples, RDF/XML, N3, JSON-LD (rdflib); an OWL ontology in any of them",
    )
)
