"""On-disk cache of built graphs (plain ``torch.save`` files of tensors, strings and tuples).

A cache file is named by a key that hashes the loader version, the builder's
arguments and the size and modification time of every source file, so any
change to the inputs or the code version builds a fresh file. Files are
written under a temporary name and moved into place with :func:`os.replace`,
so a reader never sees a half-written cache.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import torch

from textkg.cache_root import default_cache_dir as default_cache_dir  # re-exported: cache.default_cache_dir()
from textkg.data.graph import KnowledgeGraph

#: Bump when a loader's output changes for the same source files.
#: 2: an ontology file's info names its valid_holdout (issue 37); 3: the Turtle/N3 and XML-depth guards (issue 51);
#: 4: an ontology's synonyms kept per entity (issue 54)
LOADER_VERSION = 4

_FIELDS = (
    "name",
    "entities",
    "relations",
    "entity_names",
    "entity_descriptions",
    "relation_texts",
    "entity_types",
    "source",
)


def cache_key(name: str, sources: dict[str, Path], **params) -> str:
    """Hex key from the dataset name, parameters, loader version and source file stats."""
    stats = {k: [p.stat().st_size, p.stat().st_mtime_ns] for k, p in sorted(sources.items())}
    payload = json.dumps(
        {"name": name, "params": params, "sources": stats, "loader_version": LOADER_VERSION},
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:20]


def save_graph(kg: KnowledgeGraph, path: Path) -> None:
    """Write ``kg`` to ``path`` atomically."""
    state = {f: _plain(getattr(kg, f)) for f in _FIELDS}
    state["triples"] = {k: v.contiguous() for k, v in kg.triples.items()}
    state["entity_splits"] = None if kg.entity_splits is None else dict(kg.entity_splits)
    state["info"] = json.dumps(kg.info, sort_keys=True)
    state["entity_synonyms"] = None if kg.entity_synonyms is None else [list(s) for s in kg.entity_synonyms]
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        mask = os.umask(0)  # mkstemp makes 0600: the cache follows the umask, as open() would
        os.umask(mask)
        os.fchmod(fd, 0o666 & ~mask)
        with os.fdopen(fd, "wb") as fh:
            torch.save(state, fh)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_graph(path: Path) -> KnowledgeGraph | None:
    """The cached graph, or ``None`` when the file is absent or unreadable."""
    try:
        state = torch.load(path, weights_only=True)
        fields: dict[str, Any] = {f: tuple(state[f]) if isinstance(state[f], list) else state[f] for f in _FIELDS}
        return KnowledgeGraph(
            **fields,
            triples=dict(state["triples"]),
            entity_splits=state["entity_splits"],
            info=json.loads(state["info"]),
            entity_synonyms=_synonyms(state["entity_synonyms"], len(fields["entities"])),
        )
    except FileNotFoundError:
        return None
    except Exception:
        return None


def _synonyms(saved: Any, entities: int) -> tuple[tuple[str, ...], ...] | None:
    """A cached graph's synonyms as saved (``None``, or one list of strings per entity); anything else raises, so
    :func:`load_graph` builds the graph again rather than give synonyms to the wrong entities."""
    if saved is None:
        return None
    if not isinstance(saved, list) or len(saved) != entities:
        raise ValueError("entity_synonyms: one list per entity")
    if not all(isinstance(s, list) and all(isinstance(x, str) for x in s) for s in saved):
        raise ValueError("entity_synonyms: lists of strings")
    return tuple(tuple(s) for s in saved)


def _plain(value):
    return list(value) if isinstance(value, tuple) else value
