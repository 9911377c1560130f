"""Datasets: loaders, the registry, splits and statistics.

Public API::

    load_dataset(name_or_dir, *, cache_dir=None, **kwargs) -> KnowledgeGraph
    list_datasets() -> tuple[str, ...]
    make_split(kg, kind, *, seed=0, valid_fraction=0.1, test_fraction=0.1, ...) -> Split
    candidate_entities(kg, split, which, protocol) -> LongTensor
    kg_stats(kg, split=None) -> dict
"""

from textkg.data.blp_format import load_blp_directory
from textkg.data.graph import KnowledgeGraph, Split
from textkg.data.registry import DatasetSpec, list_datasets, load_dataset, register_dataset
from textkg.data.splits import candidate_entities, make_split
from textkg.data.stats import kg_stats

__all__ = [
    "DatasetSpec",
    "KnowledgeGraph",
    "Split",
    "candidate_entities",
    "kg_stats",
    "list_datasets",
    "load_blp_directory",
    "load_dataset",
    "make_split",
    "register_dataset",
]
