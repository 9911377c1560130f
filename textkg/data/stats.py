"""Counts describing a graph and a split (``textkg data stats``)."""

from __future__ import annotations

from collections import Counter

import torch

from textkg.data.graph import KnowledgeGraph, Split

#: what :func:`textkg.data.ontology.build_graph` reports about a file, shown by ``textkg data stats``
_READER_INFO = (
    "format",
    "obsolete_skipped",
    "obsolete_terms",
    "unlabelled_skipped",
    "dropped_statements",
    "type_roots",
)


def kg_stats(kg: KnowledgeGraph, split: Split | None = None) -> dict:
    """JSON-serialisable counts of entities, relations and triples.

    Returns:
        ``{"name", "num_entities", "num_relations", "triple_sets": {set: n},
        "entity_types": {type: n} | None, "relations": {relation: {set: n}},
        "given_entity_splits": {set: n} | None, "split": {...} | None}``;
        ``split`` holds per-set triple, entity, entity-type and per-relation
        counts, the split's ``kind``, ``seed`` and ``extra`` details. Graphs read
        from an ontology or RDF file add ``"read"``: the format, obsolete and
        unlabelled terms skipped, and statements dropped.
    """
    stats = {
        "name": kg.name,
        "num_entities": kg.num_entities,
        "num_relations": kg.num_relations,
        "triple_sets": {k: len(v) for k, v in kg.triples.items()},
        "entity_types": None if kg.entity_types is None else dict(sorted(Counter(kg.entity_types).items())),
        "relations": _per_relation(kg, kg.triples),
        "given_entity_splits": None if kg.entity_splits is None else {k: len(v) for k, v in kg.entity_splits.items()},
        "split": None,
    }
    read = {k: kg.info[k] for k in _READER_INFO if k in kg.info}
    if read:  # an ontology or RDF file: what its reader skipped
        stats["read"] = read
    if split is not None:
        sets = {"train": split.train, "valid": split.valid, "test": split.test}
        stats["split"] = {
            "kind": split.kind,
            "seed": split.seed,
            "triples": {k: len(v) for k, v in sets.items()},
            "entities": {
                "train": len(split.train_entities),
                "valid": len(split.valid_entities),
                "test": len(split.test_entities),
            },
            "filter_triples": len(split.filter_triples),
            "entity_types": _types_per_set(kg, split),
            "relations": _per_relation(kg, sets),
            "extra": split.extra,
        }
    return stats


def _per_relation(kg: KnowledgeGraph, sets) -> dict:
    """``{relation: {set name: count}}``."""
    counts = {
        k: torch.bincount(v[:, 1], minlength=kg.num_relations).tolist() if len(v) else [0] * kg.num_relations
        for k, v in sets.items()
    }
    return {r: {k: c[j] for k, c in counts.items()} for j, r in enumerate(kg.relations)}


def _types_per_set(kg: KnowledgeGraph, split: Split) -> dict | None:
    if kg.entity_types is None:
        return None
    out = {}
    for name, ents in (("train", split.train_entities), ("valid", split.valid_entities), ("test", split.test_entities)):
        out[name] = dict(sorted(Counter(kg.entity_types[i] for i in ents.tolist()).items()))
    return out
