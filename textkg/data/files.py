"""Ontology and RDF files as datasets: ``--dataset FILE.obo``, ``obo:PATH``, ``owl:PATH``, ``rdf:PATH``.

A dataset string names a file by a format prefix (``obo:``, ``owl:``,
``rdf:``) or by its suffix (``.obo``; ``.owl``; ``.ttl``, ``.nt``, ``.rdf``,
``.xml``, ``.n3``, ``.jsonld``), optionally followed by entity types given by
root terms: ``hp.obo#types=phenotype=HP:0000118,disease=MONDO:0000001``
(:func:`textkg.data.ontology.build_graph`). ``pykeen:PATH#descriptions=FILE``
reads PyKEEN's triple files (:mod:`textkg.data.pykeen`). The string is stored in
a run's ``config.json``, so the run reloads the same graph.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from textkg.data import cache
from textkg.data.graph import KnowledgeGraph
from textkg.data.ontology import Ontology, build_graph, parse_type_roots, read_obo
from textkg.data.rdf import RDF_FORMATS, read_rdf
from textkg.errors import ConfigError, DataError
from textkg.registry import Registry

#: Separates a file name from its options (``PATH#types=...``).
OPTION_MARK = "#"


@dataclass(frozen=True)
class FileFormat:
    """A file format readable as a dataset.

    Attributes:
        name: The prefix that selects it (``obo:PATH``).
        suffixes: File suffixes that select it without a prefix.
        load: Builds the graph from a path and the options given after it.
        options: The option names it takes (``PATH#NAME=VALUE``).
        summary: One line for listings and docs.
        cached: Whether built graphs are cached on disk (keyed by the file's size and
            modification time, the options and the reader libraries' versions), as
            registered datasets are: parsing a large ontology takes seconds, loading it
            from the cache a fraction of that.
    """

    name: str
    suffixes: tuple[str, ...]
    load: Callable[[Path, Mapping[str, str]], KnowledgeGraph]
    options: tuple[str, ...]
    summary: str
    cached: bool = False


_FORMATS: Registry[FileFormat] = Registry("file format", field="dataset")


def register_file_format(fmt: FileFormat, *, replace: bool = False) -> None:
    """Make ``fmt`` selectable by prefix and suffix; a taken name raises
    (:class:`textkg.registry.DuplicateNameError`) unless ``replace=True``."""
    _FORMATS.register(fmt.name, fmt, replace=replace)


def list_file_formats() -> tuple[str, ...]:
    """Prefixes of the registered file formats, sorted."""
    return tuple(_FORMATS.names())


def list_file_suffixes() -> tuple[str, ...]:
    """File suffixes that select a registered format without a prefix (``.obo``, ``.ttl``, ...), sorted."""
    return tuple(sorted({s for f in _FORMATS.values() for s in f.suffixes}))


@dataclass(frozen=True)
class FileSource:
    """A parsed dataset string: the format, the file and its options."""

    format: FileFormat
    path: Path
    options: dict[str, str]


def file_source(spec: str) -> FileSource | None:
    """The file a dataset string names, or ``None`` when it names no file format.

    Raises:
        DataError: an option the format does not take, or one given twice.
    """
    body, *parts = spec.split(OPTION_MARK)
    match = re.match(r"^([a-z]+):(.+)$", body)
    if match and match.group(1) in _FORMATS:
        fmt, path = _FORMATS.get(match.group(1)), Path(match.group(2))
    else:
        path = Path(body)
        found = [f for f in _FORMATS.values() if path.suffix.lower() in f.suffixes]
        if not found:
            return None
        fmt = found[0]
    options: dict[str, str] = {}
    for part in parts:
        key, sep, value = part.partition("=")
        if not sep or key not in fmt.options:
            takes = ", ".join(f"#{o}=..." for o in fmt.options) or "none"
            raise DataError(f"unknown option {part!r} for an {fmt.name} file (it takes {takes})", field="dataset")
        if key in options:
            raise DataError(f"option {key!r} is given twice", field="dataset")
        options[key] = value
    return FileSource(fmt, path, options)


def load_file_dataset(source: FileSource, *, cache_dir: str | Path | None = None, **kwargs) -> KnowledgeGraph:
    """The graph of a dataset file (see :mod:`textkg.data.ontology` for what an ontology's holds).

    ``cache_dir``: where formats with ``cached=True`` keep built graphs (default
    ``$TEXTKG_CACHE_DIR`` or ``~/.cache/textkg``).

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
    if not (source.format.cached and source.path.is_file()):
        return source.format.load(source.path, source.options)
    root = Path(cache_dir) if cache_dir is not None else cache.default_cache_dir()
    key = cache.cache_key(
        f"file-{source.format.name}",
        {"file": source.path.resolve()},
        given=str(source.path),
        options=dict(sorted(source.options.items())),
        readers=_reader_versions(),
    )
    path = root / "datasets" / f"file-{re.sub(r'[^A-Za-z0-9._-]', '_', source.path.name)}-{key}.pt"
    kg = cache.load_graph(path)
    if kg is None:
        kg = source.format.load(source.path, source.options)
        cache.save_graph(kg, path)
    return kg


def _reader_versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    # the guards of issue 36 (size limits, entity and context checks): a graph cached by an older
    # reader may come from a file that they now refuse, so it must not be served from the cache; nor a graph
    # whose descriptions were built by the older rule (a term's parents' names in its text)
    versions = {"textkg-guards": "1", "textkg-descriptions": "own-text"}  # 2026-12-06: no parent names in a text
    for package in ("fastobo", "rdflib"):
        try:
            versions[package] = version(package)
        except PackageNotFoundError:
            versions[package] = "absent"
    return versions


def _ontology_loader(read: Callable[[Path], Ontology]) -> Callable[[Path, Mapping[str, str]], KnowledgeGraph]:
    def load(path: Path, options: Mapping[str, str]) -> KnowledgeGraph:
        roots = parse_type_roots(options["types"], source=str(path)) if "types" in options else None
        return build_graph(read(path), name=str(path), type_roots=roots)

    return load


def _pykeen_loader(path: Path, options: Mapping[str, str]) -> KnowledgeGraph:
    from textkg.data.pykeen import load_pykeen_path

    return load_pykeen_path(path, descriptions=options.get("descriptions"))


register_file_format(
    FileFormat("obo", (".obo",), _ontology_loader(read_obo), ("types",), "OBO 1.4 ontology (fastobo)", cached=True)
)
register_file_format(
    FileFormat("owl", (".owl",), _ontology_loader(read_rdf), ("types",), "OWL in RDF/XML (rdflib)", cached=True)
)
register_file_format(
    FileFormat(
        "rdf",
        tuple(s for s in RDF_FORMATS if s != ".owl"),
        _ontology_loader(read_rdf),
        ("types",),
        "RDF: Turtle, N-Triples, RDF/XML, N3, JSON-LD (rdflib); an OWL ontology in any of them",
        cached=True,
    )
)
register_file_format(
    FileFormat(
        "pykeen",
        (),
        _pykeen_loader,
        ("descriptions",),
        "PyKEEN triples on disk: a folder with train.txt, valid.txt, test.txt, or one head TAB relation TAB tail file",
    )
)
