"""What a run is built from: the graph, its split, the public view under privacy, the model.

:func:`prepare` loads, splits, encodes and builds the model without writing a file; the training job
(:mod:`textkg.pipeline.job`), the post-run report (:mod:`textkg.pipeline.report`) and the runners
beside them (predict, federated, tune) all start from its :class:`Prepared`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from textkg.data import KnowledgeGraph, Split, load_dataset
from textkg.data.graph import unique_triples
from textkg.data.units import UnitLinks, listed_entity_mask, unit_entities_of, units_of_split
from textkg.data.vocabulary import public_training_entities
from textkg.devices import resolve_device
from textkg.errors import ConfigError
from textkg.evaluation import FilterIndex
from textkg.evaluation.ranking import QueryShard
from textkg.models import KGEModel, build_model
from textkg.training.config import RunConfig
from textkg.training.features import AUTOENCODER_FILE, entity_texts, mmap_features, text_inputs
from textkg.training.irreflexive import resolve_irreflexive
from textkg.training.private_split import split_for_privacy
from textkg.training.private_training import select_confidential
from textkg.training.unseen_structure import apply_unseen_structure

if TYPE_CHECKING:  # encoders.lstm_ae is imported only by lstm-ae runs
    from textkg.encoders.lstm_ae import LSTMAutoencoder


@dataclass
class Prepared:
    """Everything built from the config before training starts."""

    kg: KnowledgeGraph
    split: Split
    model: KGEModel
    filter_index: FilterIndex
    #: ``lstm-ae`` models: the autoencoder that coded the descriptions (saved with the run).
    autoencoder: LSTMAutoencoder | None = None
    #: ``(N,)`` which training statements are private (``None`` in a non-private run).
    private_mask: torch.Tensor | None = None
    #: private transductive runs: the standard filter (every known statement, private ones
    #: included), for ``private_metrics.json`` only; never used for selection or the release.
    private_filter_index: FilterIndex | None = None
    #: data-parallel runs: this process's share of every evaluation split (:mod:`textkg.distributed`)
    query_shard: QueryShard | None = None
    #: ``privacy.unit: entity``: the unit entities' links by split (``"train"``: the private units;
    #: ``"valid"``, ``"test"``: the held-out ones), in ``kg``'s ids (:mod:`textkg.data.units`); else ``None``
    units: dict[str, UnitLinks] | None = None
    #: ``privacy.unit: entity``: the entities a unit target's other end is corrupted with
    #: (:func:`unit_candidate_ids`); else ``None``
    unit_candidates: torch.Tensor | None = None


def load_graph_and_split(cfg: RunConfig):
    """``(kg, split)`` of the run; under ``privacy.unit: entity`` the graph without its unit entities."""
    kg, split, _ = load_graph_units_and_split(cfg)
    return kg, split


def load_graph_units_and_split(cfg: RunConfig):
    """``(kg, split, units)``: :func:`load_graph_and_split` and, under ``privacy.unit: entity``, the unit
    entities' links by split (:func:`textkg.data.units.units_of_split`; else ``None``). The unit entities
    are taken out of ``kg`` before it is split, encoded or built into a model."""
    kwargs = {}
    if cfg.data.inductive_dir:
        kwargs["inductive_dir"] = cfg.data.inductive_dir
    if cfg.data.description not in ("short", "auto") or (
        cfg.data.description == "auto" and Path(cfg.data.dataset).is_dir()
    ):
        kwargs["description"] = cfg.data.description  # "auto" on a registered dataset: its one text
    units_run = cfg.privacy.unit == "entity"
    if (cfg.data.vocabulary == "texts" or cfg.privacy.mode != "none" or units_run) and Path(cfg.data.dataset).is_dir():
        kwargs["vocabulary"] = "texts"  # a public vocabulary, not one computed from private statements
    if cfg.privacy.mode != "none" and cfg.data.split == "inductive" and Path(cfg.data.dataset).is_dir():
        kwargs["require_entity_lists"] = f"--privacy {cfg.privacy.mode}"  # a public entity partition too
    kg = load_dataset(cfg.data.dataset, **kwargs)
    units = None
    if units_run:  # the unit entities leave the graph here: no row, text or name of theirs is built
        assert cfg.privacy.unit_entities is not None  # PrivacyConfig refuses entity without a list
        kg, by_set = unit_entities_of(kg, cfg.privacy.unit_entities)
    split, reasons = split_for_privacy(kg, cfg)
    if reasons:  # carried to the privacy block's not_dp_because
        split = dataclasses.replace(split, extra={**split.extra, "not_dp_because": list(reasons)})
    if units_run:
        units = units_of_split(by_set, split.kind)
        if cfg.privacy.unit_targets:
            targets = unit_target_ids(cfg.privacy.unit_targets, kg.relations)
            units = {name: dataclasses.replace(links, targets=targets) for name, links in units.items()}
    return kg, split, units


def unit_target_ids(names, relations) -> tuple[int, ...]:
    """The relation ids of ``privacy.unit_targets`` (names of ``relations``, the graph's relation names).

    Raises:
        ConfigError: a name the graph has no statement of.
    """
    index = {r: i for i, r in enumerate(relations)}
    for name in names:
        if name not in index:
            raise ConfigError(
                f"--unit-targets names {name!r:.80}, which is not a relation of the dataset "
                f"(its relations: {', '.join(list(relations)[:20])})",
                field="privacy.unit_targets",
            )
    return tuple(sorted({index[name] for name in names}))


def unit_candidate_ids(cfg: RunConfig, kg: KnowledgeGraph, pool: torch.Tensor) -> torch.Tensor:
    """``(P,)`` the entities a unit target's other end is corrupted with: ``pool`` (the public
    vocabulary), or its entities listed in ``privacy.unit_candidates``.

    Raises:
        DataError: a listed id the dataset lacks (naming the file and line), none listed.
        ConfigError: no listed entity is in the public vocabulary.
    """
    if not cfg.privacy.unit_candidates:
        return pool
    listed = listed_entity_mask(cfg.privacy.unit_candidates, kg.entities, what="candidate entity")
    kept = pool[listed[pool]]
    if not len(kept):
        raise ConfigError(
            "no entity of --unit-candidates has a row in the model (the public vocabulary)",
            file=cfg.privacy.unit_candidates,
            field="privacy.unit_candidates",
        )
    return kept


def prepare(
    cfg: RunConfig, run_dir: Path | None = None, *, device: torch.device | None = None, loaded: tuple | None = None
) -> Prepared:
    """Load, split, encode and build the model (no files written).

    ``run_dir``: an existing run (resume, prediction); an ``lstm-ae`` model
    reuses the autoencoder saved there instead of pre-training a new one.
    ``device``: where the frozen encoders run and the model lives (its public text
    inputs included); ``None`` resolves ``cfg.train.device`` (:func:`textkg.devices.resolve_device`).
    The model is built on the CPU, from the seed, and then moved, so it starts from the
    same values on every device. ``loaded``: the ``(kg, split, units)`` :func:`load_graph_units_and_split`
    gave for this ``cfg`` already (the encoder's adaptation reads them first), else read here.
    """
    from textkg.training.adapt_encoder import check_resolved

    check_resolved(cfg)  # steps asked for that no textkg train resolved: refused, never silently skipped
    device = resolve_device(cfg.train.device) if device is None else device
    torch.manual_seed(cfg.train.seed)
    kg, split, units = load_graph_units_and_split(cfg) if loaded is None else loaded
    private_mask, private_filter = None, None
    if cfg.privacy.mode != "none" or units is not None:  # a unit-level run: the public vocabulary in every mode
        split, private_mask, private_filter = public_view(kg, split, cfg)
    candidates = None if units is None else unit_candidate_ids(cfg, kg, split.train_entities)  # before encoding
    saved = Path(run_dir) / AUTOENCODER_FILE if run_dir is not None else None
    autoencoder = None
    if saved is not None and saved.is_file():
        from textkg.encoders.lstm_ae import load_autoencoder

        autoencoder = load_autoencoder(saved)
    features = text_inputs(cfg.model, entity_texts(kg), seed=cfg.train.seed, autoencoder=autoencoder, device=device)
    autoencoder = features.pop("autoencoder", None)
    model = build_model(
        cfg.model,
        num_entities=kg.num_entities,
        num_relations=kg.num_relations,
        seen_entities=split.train_entities,
        share_text_inputs=mmap_features(),  # keep memory-mapped features mapped (TEXTKG_MMAP_FEATURES=1)
        **features,
    ).to(device)
    model.set_irreflexive(
        resolve_irreflexive(
            getattr(cfg.model, "irreflexive", "none"),
            list(kg.relations),
            split.train,
            private=cfg.privacy.mode != "none",
        )
    )
    apply_unseen_structure(model, cfg.model.unseen_structure, split.train_entities)
    filter_index = FilterIndex.from_triples(split.filter_triples, kg.num_entities, kg.num_relations)
    if private_filter is not None:
        private_filter = FilterIndex.from_triples(private_filter, kg.num_entities, kg.num_relations)
    return Prepared(
        kg=kg,
        split=split,
        model=model,
        filter_index=filter_index,
        autoencoder=autoencoder,
        private_mask=private_mask,
        private_filter_index=private_filter,
        units=units,
        unit_candidates=candidates,
    )


def public_view(kg, split, cfg: RunConfig):
    """What a private run may build from: ``(split, private_mask, private_filter_triples)``.

    The returned split's ``train_entities`` (the structural table's rows, the
    negative pool, ``graph.json``) is the public vocabulary
    (:func:`textkg.data.vocabulary.public_training_entities`), and its
    ``filter_triples`` (filtered ranking for model selection and every reported
    metric) holds only public statements: validation, test and, in
    ``confidential`` mode, the unrestricted training statements. In an inductive
    split no training statement can answer a valid or test query, so the public
    filter gives the same metrics as the standard one; in a transductive split
    it does not, and the standard-filter metrics go to ``private_metrics.json``
    (``private_filter_triples``, else ``None``), which is never released.
    """
    train = split.train
    if cfg.privacy.unit == "entity":  # the unit statements left the graph: every statement here is public
        private_mask = torch.zeros(len(train), dtype=torch.bool)
    else:
        private_mask = select_confidential(train, kg.relations, cfg.privacy, seed=cfg.train.seed, entities=kg.entities)
    vocabulary = public_training_entities(kg, split, cfg.data.public_entities)
    public_filter = unique_triples(torch.cat([split.valid, split.test, train[~private_mask]]))
    private_filter = split.filter_triples if split.kind == "transductive" else None
    split = dataclasses.replace(split, train_entities=vocabulary, filter_triples=public_filter)
    return split, private_mask, private_filter


def seeded_subset(triples: torch.Tensor, max_triples: int, seed: int) -> torch.Tensor:
    """At most ``max_triples`` of ``triples``: a seeded random subset (all of them when ``max_triples`` is 0
    or not smaller), the same for the same seed."""
    if not max_triples or len(triples) <= max_triples:
        return triples
    g = torch.Generator().manual_seed(seed)
    return triples[torch.randperm(len(triples), generator=g)[:max_triples]]
