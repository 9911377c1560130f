"""End-to-end run: data → features → model → training (+privacy) → evaluation → files.

Inputs are validated before anything is written. A run directory holds
``config.json``, ``graph.json`` (id maps for prediction), ``lstm_ae.pt``
(``lstm-ae`` models only: the autoencoder that codes descriptions), ``checkpoint.pt``
(with the privacy ledger), ``best_model.pt`` and, last, ``metrics.json``.
Every file is written atomically.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from textkg._version import __version__
from textkg.data import KnowledgeGraph, Split, candidate_entities, load_dataset
from textkg.data.graph import unique_triples
from textkg.data.vocabulary import public_training_entities
from textkg.devices import describe_device, resolve_device
from textkg.errors import ConfigError
from textkg.evaluation import FilterIndex, evaluate
from textkg.evaluation.metrics import QueryMask
from textkg.evaluation.popularity import RelationPopularity
from textkg.evaluation.ranking import QueryShard
from textkg.models import KGEModel, build_model
from textkg.pipeline.memory import check_memory, estimate_memory
from textkg.progress import stage
from textkg.training import checkpoint as ckpt
from textkg.training.audit_split import draw_audit_split
from textkg.training.config import PRIVATE_STEP_MODES, RunConfig
from textkg.training.features import AUTOENCODER_FILE, entity_texts, mmap_features, text_inputs
from textkg.training.irreflexive import resolve_irreflexive
from textkg.training.losses import make_loss
from textkg.training.private_split import owner_test_statements, split_for_privacy
from textkg.training.private_training import PrivateTraining, public_only_report, select_confidential
from textkg.training.trainer import Trainer
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


def load_graph_and_split(cfg: RunConfig):
    kwargs = {}
    if cfg.data.inductive_dir:
        kwargs["inductive_dir"] = cfg.data.inductive_dir
    if cfg.data.description not in ("short", "auto") or (
        cfg.data.description == "auto" and Path(cfg.data.dataset).is_dir()
    ):
        kwargs["description"] = cfg.data.description  # "auto" on a registered dataset: its one text
    if cfg.privacy.mode != "none" and Path(cfg.data.dataset).is_dir():
        kwargs["vocabulary"] = "texts"  # a public vocabulary, not one computed from private statements
    kg = load_dataset(cfg.data.dataset, **kwargs)
    split, reasons = split_for_privacy(kg, cfg)
    if reasons:  # carried to the privacy block's not_dp_because
        split = dataclasses.replace(split, extra={**split.extra, "not_dp_because": list(reasons)})
    return kg, split


def prepare(cfg: RunConfig, run_dir: Path | None = None, *, device: torch.device | None = None) -> Prepared:
    """Load, split, encode and build the model (no files written).

    ``run_dir``: an existing run (resume, prediction); an ``lstm-ae`` model
    reuses the autoencoder saved there instead of pre-training a new one.
    ``device``: where the frozen encoders run and the model lives (its public text
    inputs included); ``None`` resolves ``cfg.train.device`` (:func:`textkg.devices.resolve_device`).
    The model is built on the CPU, from the seed, and then moved, so it starts from the
    same values on every device.
    """
    device = resolve_device(cfg.train.device) if device is None else device
    torch.manual_seed(cfg.train.seed)
    kg, split = load_graph_and_split(cfg)
    private_mask, private_filter = None, None
    if cfg.privacy.mode != "none":
        split, private_mask, private_filter = public_view(kg, split, cfg)
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
    private_mask = select_confidential(train, kg.relations, cfg.privacy, seed=cfg.train.seed)
    vocabulary = public_training_entities(kg, split, cfg.data.public_entities)
    public_filter = unique_triples(torch.cat([split.valid, split.test, train[~private_mask]]))
    private_filter = split.filter_triples if split.kind == "transductive" else None
    split = dataclasses.replace(split, train_entities=vocabulary, filter_triples=public_filter)
    return split, private_mask, private_filter


def _subset(triples: torch.Tensor, max_triples: int, seed: int) -> torch.Tensor:
    if not max_triples or len(triples) <= max_triples:
        return triples
    g = torch.Generator().manual_seed(seed)
    return triples[torch.randperm(len(triples), generator=g)[:max_triples]]


#: Graphs with at most this many relations also get one metrics subset per relation.
MAX_RELATIONS_FOR_SUBSETS = 20


def _subset_masks(triples: torch.Tensor, seen: torch.Tensor, kg: KnowledgeGraph) -> dict[str, torch.Tensor | QueryMask]:
    """Named masks over ``triples``' ranking queries for the ``test.subsets`` metrics.

    Triple level (both queries of each selected triple): ``both_seen`` /
    ``head_unseen`` / ``tail_unseen`` / ``any_unseen`` split the triples by
    whether their entities were in the training graph; graphs with few
    relations (``hpo``) also get ``relation:<name>`` (e.g. ``relation:is_a``
    restricted to ``head_unseen`` is "place a new term under its parents").

    Query level (:class:`QueryMask`): ``answer_seen`` / ``answer_unseen`` take
    every head and tail query and split them by whether the entity being
    predicted was in the training graph; for ``(new_term, is_a, seen_parent)``
    the tail query is ``answer_seen`` and the head query ``answer_unseen``.

    Empty subsets are left out.
    """
    is_seen = torch.zeros(kg.num_entities, dtype=torch.bool)
    is_seen[seen] = True
    head_seen, tail_seen = is_seen[triples[:, 0]], is_seen[triples[:, 2]]
    masks: dict[str, torch.Tensor | QueryMask] = {
        "both_seen": head_seen & tail_seen,
        "head_unseen": ~head_seen,
        "tail_unseen": ~tail_seen,
        "any_unseen": ~(head_seen & tail_seen),
        "answer_seen": QueryMask(head=head_seen, tail=tail_seen),
        "answer_unseen": QueryMask(head=~head_seen, tail=~tail_seen),
    }
    if kg.num_relations <= MAX_RELATIONS_FOR_SUBSETS:
        for rel_id, name in enumerate(kg.relations):
            masks[f"relation:{name}"] = triples[:, 1] == rel_id
    return {k: v for k, v in masks.items() if bool(v.any())}


def evaluate_split(
    prep: Prepared,
    cfg: RunConfig,
    which: str,
    *,
    max_triples: int = 0,
    progress: bool = False,
    filter_index: FilterIndex | None = None,
    triples: torch.Tensor | None = None,
    scorer=None,
):
    """Filtered ranking metrics on ``which``; the filter is the run's (public, under privacy)
    unless ``filter_index`` is given. ``triples``: rank these statements of ``which`` only
    (e.g. one data holder's share), with ``which``'s candidates. ``scorer``: rank with this
    :class:`~textkg.evaluation.ranking.Scorer` instead of the model (e.g. a combination)."""
    triples = _subset(prep.split.triples(which) if triples is None else triples, max_triples, cfg.train.seed)
    candidates = candidate_entities(prep.kg, prep.split, which, cfg.train.candidates)
    prep.model.eval()
    with torch.no_grad():
        return evaluate(
            prep.model if scorer is None else scorer,
            triples,
            filter_index=filter_index or prep.filter_index,
            candidates=candidates,
            num_entities=prep.kg.num_entities,
            batch_size=cfg.train.eval_batch_size,
            subset_masks=_subset_masks(triples, prep.split.train_entities, prep.kg),
            exclude_query=cfg.train.exclude_query,
            progress=progress,
            shard=prep.query_shard,
        )


def _trained_parameter_names(model) -> list[str]:
    names = [f"table:{k}" for k in model.tables()]
    return names + list(model.dense_parameters())


def confidential_mask(prep: Prepared, cfg: RunConfig) -> torch.Tensor:
    """``(N,)`` statements of the training split that are private (all in ``full`` mode).

    With no privacy but named confidential relations/fraction (a non-private
    baseline of a confidential run), the same statements are marked, so that
    audits of DP and non-DP runs draw from the same pool.
    """
    if prep.private_mask is not None:
        return prep.private_mask
    train = prep.split.train
    named = cfg.privacy.confidential_relations or cfg.privacy.confidential_fraction is not None
    if cfg.privacy.mode == "full" or (cfg.privacy.mode == "none" and not named):
        return torch.ones(len(train), dtype=torch.bool)
    return select_confidential(train, prep.kg.relations, cfg.privacy, seed=cfg.train.seed)


def build_trainer(
    prep: Prepared, cfg: RunConfig, out_dir: Path, *, trainer_class: type[Trainer] = Trainer
) -> tuple[Trainer, PrivateTraining | None, dict | None]:
    train = prep.split.train
    private_mask = confidential_mask(prep, cfg)
    audit = None
    if cfg.train.audit_candidates:
        keep, members, non_members = draw_audit_split(
            train, private_mask, num_candidates=cfg.train.audit_candidates, seed=cfg.train.seed
        )
        train, private_mask = train[keep], private_mask[keep]
        audit = {
            "seed": cfg.train.seed,
            "members": members.tolist(),
            "non_members": non_members.tolist(),
            "candidate_pool": "all training statements" if bool(private_mask.all()) else "confidential",
        }
    loss_fn = make_loss(cfg.train)

    entity_pool = prep.split.train_entities
    private = None
    public = train
    if cfg.privacy.mode == "public-only":  # the confidential statements are never read
        public = train[~private_mask]
    elif cfg.privacy.mode != "none":
        public, private_triples = train[~private_mask], train[private_mask]
        private = PrivateTraining(
            cfg.privacy,
            private_triples=private_triples,
            batch_size=cfg.train.batch_size,
            planned_epochs=cfg.train.epochs,
            entity_pool=entity_pool,
            loss_fn=loss_fn,
            num_negatives=cfg.train.num_negatives,
            trained_parameters=_trained_parameter_names(prep.model),
            one_vs_all_temperature=(cfg.train.temperature if cfg.train.negatives == "all" else None),
            extra_reasons=tuple(prep.split.extra.get("not_dp_because", ())),
        )

    def validate(model) -> float:
        if not len(prep.split.valid):
            return 0.0
        return evaluate_split(prep, cfg, "valid", max_triples=cfg.train.valid_max_triples).to_dict()["mrr"]

    trainer = trainer_class(
        prep.model,
        config=cfg,
        public_triples=public,
        entity_pool=entity_pool,
        validate=validate,
        out_dir=out_dir,
        private=private,
        loss_fn=loss_fn,
    )
    return trainer, private, audit


def graph_record(kg, split) -> dict:
    """Id maps a predictor needs to name its answers."""
    return {
        "name": kg.name,
        "entities": list(kg.entities),
        "entity_names": list(kg.entity_names),
        "entity_types": None if kg.entity_types is None else list(kg.entity_types),
        "relations": list(kg.relations),
        "relation_texts": list(kg.relation_texts),
        "train_entities": split.train_entities.tolist(),
    }


def run(
    cfg: RunConfig,
    out_dir: Path,
    *,
    resume: bool = False,
    progress: bool = True,
    trainer_class: type[Trainer] = Trainer,
    query_shard: QueryShard | None = None,
) -> dict:
    """Train and evaluate; returns the metrics dict written to ``metrics.json``.

    ``trainer_class``: the :class:`Trainer` to use, e.g. the data-parallel one of
    :mod:`textkg.distributed` (a runner beside this one). ``query_shard``: that
    runner's share of the validation and test queries (the metrics are the same).
    """
    out_dir = Path(out_dir)
    if not resume and out_dir.exists() and any(out_dir.iterdir()):
        raise ConfigError(
            f"output directory {out_dir} is not empty; pass --resume {out_dir} to continue it or choose another --out",
            field="out",
        )
    device = resolve_device(cfg.train.device)  # a device this machine lacks: refused before anything is written
    if device.type == "mps" and cfg.privacy.mode in PRIVATE_STEP_MODES:
        raise ConfigError(
            "private training adds the DP noise in float64, which MPS does not have; use --device cpu or cuda",
            field="train.device",
        )
    stage(f"reading {cfg.data.dataset} and encoding its texts ({cfg.model_name})", progress=progress)
    prep = prepare(cfg, out_dir if resume else None, device=device)  # validates every input before anything is written
    prep.query_shard = query_shard
    stage(
        f"graph ready: {prep.kg.num_entities:,} entities, {prep.kg.num_relations} relations, "
        f"{len(prep.split.train):,} / {len(prep.split.valid):,} / {len(prep.split.test):,} train / valid / test "
        "statements; texts encoded",
        progress=progress,
    )
    trainer, private, audit = build_trainer(prep, cfg, out_dir, trainer_class=trainer_class)
    check_memory(
        estimate_memory(
            prep.model,
            cfg,
            num_entities=prep.kg.num_entities,  # refuses before writing
            private=private is not None,
            placement=_placement_size(prep),
            mapped_features=mmap_features(),
        ),
        quiet=not progress,
    )
    init = None if resume or cfg.train.init_from is None else initialise_from(prep, cfg, Path(cfg.train.init_from))
    out_dir.mkdir(parents=True, exist_ok=True)
    if resume:
        trainer.restore(ckpt.load(out_dir / ckpt.CHECKPOINT))
    else:
        ckpt.atomic_write_json(out_dir / "config.json", {"textkg_version": __version__, **cfg.to_dict()})
        ckpt.atomic_write_json(out_dir / "graph.json", graph_record(prep.kg, prep.split))
        if prep.autoencoder is not None:  # prediction codes new descriptions with the same autoencoder
            prep.autoencoder.save(out_dir / AUTOENCODER_FILE)
        if audit is not None:
            ckpt.atomic_write_json(out_dir / "audit_split.json", audit)
        if init is not None:
            ckpt.atomic_write_json(out_dir / INIT_RECORD, init)
    stage(f"training {cfg.train.epochs} epochs", progress=progress)
    state = trainer.fit(progress=progress)
    stage("evaluating on the test statements", progress=progress)
    if private is not None and state.stopped == "privacy budget reached":
        print(
            f"warning: the privacy budget (--target-epsilon {cfg.privacy.target_epsilon:g}) stopped training "
            f"after {private.accountant.steps} of {private.planned_steps} planned private steps "
            f"(epoch {state.epoch} of {cfg.train.epochs})",
            file=sys.stderr,
        )
    metrics = {
        "textkg_version": __version__,
        "dataset": cfg.data.dataset,
        # which description file a BLP-format directory was read with ("auto" resolved)
        "descriptions": prep.kg.info.get("description_file"),
        "split": cfg.data.split,
        "device": describe_device(device),
        "model": {
            "name": cfg.model_name,
            **cfg.model.to_dict(),
            "num_parameters": sum(p.numel() for p in prep.model.parameters() if p.requires_grad),
            **_fusion_weights(prep.model),
            # the relations model.irreflexive resolved to (auto: no self-loop among their training statements)
            "irreflexive_relations": [
                r for r, flag in zip(prep.kg.relations, prep.model.irreflexive.tolist(), strict=True) if flag
            ],
            # what model.unseen_structure resolved to ("row" without a structural table or pooled features)
            "unseen_structure_applied": "neighbours" if prep.model.any_unseen_neighbours else "row",
        },
        "train": {
            "epochs": state.epoch,
            "steps": state.step,
            "seconds": state.seconds,
            "best_epoch": state.best_epoch,
            "stopped": state.stopped,
            "history": state.history,
        },
        "valid": _final_valid(prep, cfg, progress),
        "test": evaluate_split(prep, cfg, "test", progress=progress).to_dict(),
        "privacy": _privacy_block(prep, cfg, private),
    }
    if cfg.train.init_from is not None:
        metrics["train"]["initialised_from"] = init or _recorded_init(out_dir)
        if metrics["privacy"] is not None:
            metrics["privacy"]["initialised_from"] = metrics["train"]["initialised_from"]
    placement = _placement(prep, cfg)  # inductive splits of graphs with an is_a relation only
    if placement is not None:
        metrics["test"].update(placement)  # placement, placement_baselines[, placement_combined, placement_selection]
    vote = _neighbour_vote(prep, cfg)  # inductive splits with descriptions only
    if vote is not None:
        metrics["test"]["neighbour_vote"] = vote
    # inductive splits only: test.k_shot, test.k_shot_selection. Not by default on a graph with a placement task
    # (an ontology: thousands of new terms made it the slowest part of the README's run); evaluate --k-shot gives it
    k_shot = k_shot_report(prep, cfg) if placement is None else None
    if k_shot is not None:
        metrics["test"].update(k_shot)
    placed = _placement_known_links(prep, cfg)  # ontologies: placement with the terms' annotations
    if placed is not None:
        metrics["test"]["placement_known_links"] = placed
    stage("evaluation done", progress=progress)
    if cfg.privacy.mode != "none":
        metrics["evaluation_filter"] = PUBLIC_FILTER_NOTE
        owner = _owner_metrics(prep, cfg)
        if owner:
            ckpt.atomic_write_json(out_dir / PRIVATE_METRICS, {"note": PRIVATE_METRICS_NOTE, **owner})
    ckpt.atomic_write_json(out_dir / "metrics.json", metrics)
    return metrics


INIT_RECORD = "init_from.json"


def initialise_from(prep: Prepared, cfg: RunConfig, source: Path) -> dict:
    """Load ``source``'s ``best_model.pt`` into ``prep.model`` after checking that the privacy guarantee
    survives it; returns what ``metrics.json`` records (also written to ``init_from.json`` by the caller).

    Under ``confidential`` privacy the source must be a ``public-only`` run of the same dataset with the
    same confidential statements (relations, fraction and seed): it read none of them, so starting from it
    adds nothing to ε. Under ``full`` privacy every training statement is private, so any source trained on
    this graph would void the guarantee: refused.
    """
    from textkg.pipeline.run_dir import open_run

    opened = open_run(source, what="a finished textkg run for --init-from")
    for name in ("metrics.json", ckpt.BEST_MODEL):
        if not (source / name).is_file():
            raise ConfigError(f"not a finished textkg run (no {name})", file=source, field="init_from")
    src_cfg = opened.config
    src_privacy = (opened.metrics() or {}).get("privacy") or {}
    mode = cfg.privacy.mode
    if mode == "full":
        raise ConfigError(
            "--init-from under --privacy full: every training statement is private, so a model trained on "
            "them would void the guarantee; use --privacy confidential with a public-only source",
            field="init_from",
        )
    if mode in ("confidential", "public-only"):
        same = (
            src_privacy.get("mode") == "public-only"
            and src_cfg.data == cfg.data
            and src_cfg.privacy.confidential_relations == cfg.privacy.confidential_relations
            and src_cfg.privacy.confidential_fraction == cfg.privacy.confidential_fraction
            and src_cfg.train.seed == cfg.train.seed
        )
        if not same:
            raise ConfigError(
                f"under --privacy {mode} the initial model must come from a --privacy public-only run on the "
                "same data with the same confidential statements (relations, fraction and seed); "
                f"{source} is not one",
                file=source,
                field="init_from",
            )
    state = ckpt.load(source / ckpt.BEST_MODEL)
    own = prep.model.state_dict()
    if state.keys() != own.keys() or any(state[k].shape != own[k].shape for k in own):
        raise ConfigError(
            "the source run's model does not match this one (graph, preset or dim differ)",
            file=source / ckpt.BEST_MODEL,
            field="init_from",
        )
    prep.model.load_state_dict(state)
    return {
        "run": str(source),
        "privacy_mode": src_privacy.get("mode", "none"),
        "best_model_sha256": hashlib.sha256((source / ckpt.BEST_MODEL).read_bytes()).hexdigest(),
    }


def _recorded_init(out_dir: Path) -> dict | None:
    path = out_dir / INIT_RECORD
    return json.loads(path.read_text()) if path.is_file() else None


def _privacy_block(prep: Prepared, cfg: RunConfig, private: PrivateTraining | None) -> dict | None:
    if private is not None:
        return private.report()
    if cfg.privacy.mode == "public-only":
        assert prep.private_mask is not None
        return public_only_report(cfg.privacy)
    return None


#: what ``metrics.json`` of a private run says about its filtered ranking
PUBLIC_FILTER_NOTE = (
    "filtered with public statements only (validation, test and unrestricted training "
    "statements); in an inductive split this equals the standard filter"
)
#: metrics that use private statements without noise: kept apart, never released
PRIVATE_METRICS = "private_metrics.json"
PRIVATE_METRICS_NOTE = (
    "for the data owner: these metrics read private statements without noise (`test`: the standard "
    "filter, private training statements included; `confidential_test`: the confidential statements "
    "at the test entities, which no released file reads). NOT covered by the privacy guarantee; "
    "`textkg release` never copies this file."
)


def _owner_metrics(prep: Prepared, cfg: RunConfig) -> dict:
    """What goes to ``private_metrics.json``: metrics that read private statements unnoised.

    * ``test``: transductive private runs, the test split under the standard filter (private
      training statements included);
    * ``confidential_test``: inductive ``confidential`` / ``public-only`` runs on a generated split,
      the confidential statements at the test entities (:func:`owner_test_statements`), with the
      owner's filter (every statement of the graph): e.g. ``has_phenotype`` for new HPO terms, the
      number that says whether DP on the annotations beats public-only; beside it
      ``confidential_test_baselines["relation-popularity"]``, the candidates that fill the slot most
      often among the training statements (the owner's, confidential ones included).
    """
    owner: dict = {}
    if prep.private_filter_index is not None:  # transductive: the standard protocol needs private statements
        owner["test"] = evaluate_split(prep, cfg, "test", filter_index=prep.private_filter_index).to_dict()
    held = owner_test_statements(prep.kg, prep.split, cfg)
    if held is not None and len(held):
        everything = FilterIndex.from_triples(prep.kg.all_triples(), prep.kg.num_entities, prep.kg.num_relations)
        owner["confidential_test"] = evaluate_split(prep, cfg, "test", filter_index=everything, triples=held).to_dict()
        # the simplest alternative, on the same statements: the candidates that fill the slot most often in training
        popular = RelationPopularity(
            prep.split.train, num_entities=prep.kg.num_entities, num_relations=prep.kg.num_relations
        )
        owner["confidential_test_baselines"] = {
            "relation-popularity": evaluate_split(
                prep, cfg, "test", filter_index=everything, triples=held, scorer=popular
            ).to_dict()
        }
    return owner


def _placement(prep: Prepared, cfg: RunConfig) -> dict | None:
    """Placement of the test split's new terms under existing ones
    (:mod:`textkg.evaluation.placement`), with its description baselines; ``None``
    unless the split is inductive and the graph has an ``is_a`` relation.

    Under privacy the ontology that ``close@1``, ``parent-of-nearest`` and the
    combined scorer's vote read is the public training statements (none in
    ``full`` mode), since metrics.json is released; the combination is tuned on
    validation statements, which are public inputs."""
    from textkg.evaluation.placement import placement_queries
    from textkg.evaluation.placement_ensemble import evaluate_placement

    if placement_queries(prep.kg, prep.split) is None:
        return None
    # a private run's hierarchy (close@1, parent-of-nearest, vote) is its public training statements only
    hierarchy = None if prep.private_mask is None else prep.split.train[~prep.private_mask]
    prep.model.eval()
    with torch.no_grad():
        return evaluate_placement(
            prep.model,
            prep.kg,
            prep.split,
            text_features=_description_features(prep),
            batch_size=max(1, min(cfg.train.eval_batch_size, 256)),
            hierarchy=hierarchy,
        )


def _placement_size(prep: Prepared) -> tuple[int, int] | None:
    """``(validation placement queries, largest candidate group)`` for the memory estimate, or ``None``."""
    from textkg.evaluation.placement import placement_queries

    valid = placement_queries(prep.kg, prep.split, which="valid")
    if valid is None:
        return None
    return valid.num_queries, max(len(g) for g in valid.groups)


def _neighbour_vote(prep: Prepared, cfg: RunConfig) -> dict | None:
    """The description-kNN vote for new entities (:mod:`textkg.evaluation.neighbour_vote`): alone
    (a baseline) and added to the model with a weight chosen on the validation subset that
    selected the model. ``None`` unless the split is inductive, has validation statements and the
    model reads descriptions. Under privacy the vote reads the public training statements only,
    and under ``full`` there are none: skipped, with the reason. One scoring pass over the
    validation subset ranks every weight; one over the test split ranks the model, the vote and
    the chosen combination."""
    from textkg.evaluation.metrics import RankingMetrics
    from textkg.evaluation.neighbour_vote import (
        DEFAULT_SPREAD_WEIGHTS,
        DEFAULT_WEIGHTS,
        choose_weights,
        rank_weights,
        weights_key,
    )
    from textkg.evaluation.placement import placement_queries

    if cfg.data.split != "inductive" or not len(prep.split.valid) or getattr(prep.model, "text", None) is None:
        return None
    if cfg.train.neighbour_vote == "off" or (
        cfg.train.neighbour_vote == "auto" and placement_queries(prep.kg, prep.split) is not None
    ):
        return None
    if cfg.privacy.mode == "full":
        return {"skipped": "every training statement is private: the vote has no public statement to read"}
    vote = neighbour_vote_of(prep)
    prep.model.eval()

    def ranks(which: str, triples: torch.Tensor, weights, spread_weights) -> dict:
        return rank_weights(
            prep.model,
            vote,
            triples,
            filter_index=prep.filter_index,
            candidates=candidate_entities(prep.kg, prep.split, which, cfg.train.candidates),
            weights=weights,
            spread_weights=spread_weights,
            batch_size=max(1, min(cfg.train.eval_batch_size, 256)),
            exclude_query=cfg.train.exclude_query,
        )

    max_valid = cfg.train.valid_max_triples
    valid = ranks(
        "valid", _subset(prep.split.valid, max_valid, cfg.train.seed), DEFAULT_WEIGHTS, DEFAULT_SPREAD_WEIGHTS
    )
    by_weights = {
        (w, m): float(torch.cat(valid[weights_key(w, m)]).reciprocal().mean())
        for m in DEFAULT_SPREAD_WEIGHTS
        for w in DEFAULT_WEIGHTS
    }
    weight, spread_weight = choose_weights(by_weights)
    test_triples = prep.split.test
    test = ranks("test", test_triples, [weight], [spread_weight])
    masks = _subset_masks(test_triples, prep.split.train_entities, prep.kg)

    def block(key: str) -> dict:
        head, tail = test[key]
        d = RankingMetrics.from_ranks(head, tail).to_dict()
        out = {k: d[k] for k in ("mrr", "mr", "hits@1", "hits@3", "hits@10", "num_triples")}
        for name in ("answer_seen", "answer_unseen"):
            mask = masks.get(name)
            if isinstance(mask, QueryMask):
                sub = RankingMetrics.from_query_mask(head, tail, mask).to_dict()
                out[name] = {k: sub[k] for k in ("mrr", "hits@1", "hits@10")}
        return out

    return {
        "method": "the k nearest training entities by description vote for their own answers (new query "
        "entities only); the spread passes each candidate the votes of its spread_k nearest training "
        "entities by description (a seen query's own answers stand in for its vote); "
        "combined = standardised model score + weight x vote + spread_weight x spread",
        "k": vote.k,
        "spread_k": vote.spread_k,
        "temperature": vote.temperature,
        "weight": weight,
        "spread_weight": spread_weight,
        "chosen_on": f"validation MRR on {max_valid or 'all'} validation statements (the model-selection subset)",
        "valid_mrr_by_weight": {weights_key(w, m): v for (w, m), v in by_weights.items()},
        "vote_only": block("vote_only"),
        "combined": block(weights_key(weight, spread_weight)),
    }


def k_shot_report(prep: Prepared, cfg: RunConfig, ks: tuple[int, ...] | None = None) -> dict | None:
    """``{"k_shot": {"0": ..., "1": ...}, "k_shot_selection": ...}``: new entities with ``ks`` known links
    (:mod:`textkg.evaluation.k_shot`), the mix of the links chosen on the model-selection validation
    subset; ``None`` unless the split is inductive. The known links are valid and test statements
    (public inputs, as a user's own links are at inference); no training statement is read."""
    from textkg.evaluation.k_shot import DEFAULT_KS, evaluate_k_shot

    if cfg.data.split != "inductive":
        return None
    inter = prep.model.interaction
    try:  # an interaction registered by a user may lack the links' estimates (Interaction.tail_from)
        inter.tail_from(prep.model.relation_embeddings.new_zeros(1, prep.model.dim), prep.model.relation_embeddings[:1])
    except NotImplementedError as exc:
        return {"k_shot_skipped": str(exc)}
    prep.model.eval()
    with torch.no_grad():
        return evaluate_k_shot(
            prep.model,
            valid=_subset(prep.split.valid, cfg.train.valid_max_triples, cfg.train.seed),
            test=prep.split.test,
            seen=prep.split.train_entities,
            filter_index=prep.filter_index,
            valid_candidates=candidate_entities(prep.kg, prep.split, "valid", cfg.train.candidates),
            test_candidates=candidate_entities(prep.kg, prep.split, "test", cfg.train.candidates),
            num_entities=prep.kg.num_entities,
            ks=DEFAULT_KS if ks is None else ks,
            seed=cfg.train.seed,
            batch_size=max(1, min(cfg.train.eval_batch_size, 256)),
            exclude_query=cfg.train.exclude_query,
            temperature=cfg.train.temperature,  # fold-in's softmax at the scale the scores were trained at
        )


def _placement_known_links(prep: Prepared, cfg: RunConfig) -> dict | None:
    """:func:`textkg.evaluation.placement_links.placement_with_known_links` of the run's model."""
    from textkg.evaluation.placement_links import placement_with_known_links

    statements = None if prep.private_mask is None else prep.split.train[~prep.private_mask]  # public ones only
    with torch.no_grad():
        return placement_with_known_links(prep.model, prep.kg, prep.split, statements=statements)


def neighbour_vote_of(prep: Prepared):
    """The run's :class:`~textkg.evaluation.neighbour_vote.NeighbourVote`: frozen description
    features, and the training statements it may read (the public ones under privacy)."""
    from textkg.evaluation.neighbour_vote import NeighbourVote

    graph = prep.split.train if prep.private_mask is None else prep.split.train[~prep.private_mask]
    return NeighbourVote(
        _description_features(prep), graph, prep.split.train_entities, num_relations=prep.kg.num_relations
    )


def _description_features(prep: Prepared) -> torch.Tensor:
    """``(num_entities, D)`` frozen description features: the model's own pooled ones if
    it has them, else the default ``bert`` encoder's (cached on disk)."""
    text = getattr(prep.model, "text", None)
    if text is not None and getattr(text, "module", None) is None and hasattr(text, "text_text_features"):
        return text.text_text_features.cpu()  # the votes and baselines read them on the CPU
    from textkg.encoders import cached_encode, get_encoder
    from textkg.training.features import default_cache_dir

    return cached_encode(get_encoder("bert"), entity_texts(prep.kg), cache_dir=default_cache_dir()).float()


def _final_valid(prep: Prepared, cfg: RunConfig, progress: bool) -> dict | None:
    """Validation metrics of the selected model, on the same seeded subset that
    selected it (``train.valid_max_triples``; ``num_triples`` says how many)."""
    if not len(prep.split.valid):
        return None
    return _flat(evaluate_split(prep, cfg, "valid", max_triples=cfg.train.valid_max_triples, progress=progress))


def _flat(result) -> dict:
    d = result.to_dict()
    return {k: d[k] for k in ("mrr", "mr", "hits@1", "hits@3", "hits@10", "num_triples")}


def _fusion_weights(model) -> dict:
    fn = getattr(model, "fusion_weights", None)
    return {"fusion_weights": fn()} if callable(fn) else {}


def evaluate_run(
    run_dir: Path,
    *,
    progress: bool = True,
    exclude_query: bool | None = None,
    device: str | torch.device = "auto",
    k_shot: tuple[int, ...] | None = None,
) -> dict:
    """Re-evaluate a finished run's best model on its validation and test splits.

    ``exclude_query``: override the run's ``train.exclude_query`` protocol.
    ``k_shot``: also the k-shot protocol at these numbers of known links (:func:`k_shot_report`;
    inductive runs only).
    ``device``: where to evaluate (a name as for ``--device``, or a :class:`torch.device`);
    not the run's ``train.device``, which may name a device this machine lacks.
    """
    if not isinstance(device, torch.device):
        device = resolve_device(device, field="device")
    from textkg.pipeline.run_dir import open_run

    run_dir = Path(run_dir)
    cfg = open_run(run_dir).config
    if exclude_query is not None:  # an evaluation protocol choice, not a training one
        cfg = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, exclude_query=exclude_query))
    prep = prepare(cfg, run_dir, device=device)
    state = ckpt.load_weights(run_dir)
    prep.model.load_state_dict(state)
    out = {
        "device": describe_device(device),
        "exclude_query": cfg.train.exclude_query,
        "valid": _flat(evaluate_split(prep, cfg, "valid", progress=progress)) if len(prep.split.valid) else None,
        "test": evaluate_split(prep, cfg, "test", progress=progress).to_dict(),
    }
    if k_shot is not None:
        report = k_shot_report(prep, cfg, k_shot)
        if report is None:
            raise ConfigError("--k-shot needs a run on an inductive split (new entities)", field="k_shot")
        out["test"].update(report)
    return out
