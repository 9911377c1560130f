"""End-to-end run: data → features → model → training (+privacy) → evaluation → files.

Inputs are validated before anything is written. A run directory holds
``config.json``, ``graph.json`` (id maps for prediction), ``lstm_ae.pt``
(``lstm-ae`` models only: the autoencoder that codes descriptions), ``checkpoint.pt``
(with the privacy ledger), ``best_model.pt`` and, last, ``metrics.json``.
Every file is written atomically.

The training job: :func:`build_trainer`, :func:`run`, ``--init-from``. What it starts from is
:mod:`textkg.pipeline.prepared` (:func:`prepare`, :class:`Prepared`) and what it reports after
training is :mod:`textkg.pipeline.report` (:func:`evaluate_split`, the ``test`` blocks); both names
stay importable from here, where the runners beside the pipeline take them.
"""

from __future__ import annotations

import hashlib
import sys
from dataclasses import replace
from pathlib import Path

import torch

from textkg._version import __version__
from textkg.devices import describe_device, resolve_device
from textkg.errors import ConfigError
from textkg.evaluation.ranking import QueryShard
from textkg.pipeline.adaptation import resolve_adaptation
from textkg.pipeline.memory import check_memory, estimate_memory
from textkg.pipeline.memory_report import link_stage_size, placement_size
from textkg.pipeline.prepared import Prepared, prepare
from textkg.pipeline.report import (
    PRIVATE_METRICS,
    PRIVATE_METRICS_NOTE,
    PUBLIC_FILTER_NOTE,
    evaluate_split,
    extra_test_blocks,
    final_valid,
    fusion_weights_block,
    owner_metrics,
)
from textkg.pipeline.run_files import check_storable, store_run_files
from textkg.progress import reporting, stage
from textkg.training import checkpoint as ckpt
from textkg.training.audit_split import draw_audit_split
from textkg.training.config import PRIVATE_STEP_MODES, RunConfig
from textkg.training.features import AUTOENCODER_FILE, mmap_features
from textkg.training.losses import make_loss
from textkg.training.privacy_engine import PrivacyEngine
from textkg.training.private_training import PrivateTraining, public_only_report, select_confidential
from textkg.training.schedule import epochs_for_min_steps, plan_epoch
from textkg.training.trainer import Trainer
from textkg.training.unit_centroids import CENTROID_RECORD, CentroidRelease, check_centroid_model, file_sha256


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
    return select_confidential(train, prep.kg.relations, cfg.privacy, seed=cfg.train.seed, entities=prep.kg.entities)


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
    if prep.units is not None:  # privacy.unit entity: the units' statements are kept aside (textkg.data.units)
        private = unit_training(prep, cfg, loss_fn)
    elif cfg.privacy.mode == "public-only":  # the confidential statements are never read
        public = train[~private_mask]
    elif cfg.privacy.mode != "none":
        public, private_triples = train[~private_mask], train[private_mask]
        engine = PrivacyEngine(cfg, extra_reasons=prep.split.extra.get("not_dp_because", ()))
        private = engine.make_private(
            prep.model, private_triples=private_triples, entity_pool=entity_pool, loss_fn=loss_fn
        )

    def validate(model) -> float:
        if prep.units is not None and prep.units["valid"].num_units:  # the held-out units' own statements
            from textkg.training.unit_eval import unit_metrics

            return unit_metrics(model, prep.units["valid"], max_links=cfg.train.valid_max_triples)["mrr"]
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
        private=None if isinstance(private, CentroidRelease) else private,  # a release after training, no step
        loss_fn=loss_fn,
    )
    return trainer, private, audit


def resolve_private_updates(prep: Prepared, cfg: RunConfig) -> RunConfig:
    """``privacy.private_updates: auto`` left by :class:`RunConfig` (a patient-diagnosis run on a TransE model):
    ``centroids`` when the candidate list can carry the release
    (:func:`textkg.training.unit_centroids.unusable_candidates`, public inputs only), else ``all``."""
    if cfg.privacy.private_updates != "auto":
        return cfg
    from textkg.training.unit_centroids import unusable_candidates

    chosen = "all"
    if prep.units is not None and prep.unit_candidates is not None and prep.units["train"].targets:
        target = int(prep.units["train"].targets[0])
        if unusable_candidates(prep.model, prep.unit_candidates, prep.split.train, target) is None:
            chosen = "centroids"
    return replace(cfg, privacy=replace(cfg.privacy, private_updates=chosen))


def unit_training(prep: Prepared, cfg: RunConfig, loss_fn):
    """The unit steps of a ``privacy.unit: entity`` run: ``confidential``: patient-level DP-SGD
    (:meth:`PrivacyEngine.make_private_units`); ``none``: the same loss by plain SGD (:class:`UnitSGD`, the
    ceiling); ``public-only``: none (the units are never read)."""
    from textkg.training.unit_step import UnitSGD, training_units

    assert prep.units is not None
    if cfg.privacy.mode == "public-only":
        return None
    pool = prep.split.train_entities
    units = training_units(prep.units["train"], pool, prep.kg.num_entities)
    if prep.unit_candidates is not None:  # --unit-candidates: the corruptions of a target's other end
        pool = prep.unit_candidates
    if cfg.privacy.private_updates == "centroids":  # no private step: one release after the public steps
        assert prep.unit_candidates is not None
        check_centroid_model(prep.model)  # refused before training, not after
        release = CentroidRelease(
            cfg.privacy,
            units=units,
            candidates=prep.unit_candidates,
            public_triples=prep.split.train,
            declared_units=cfg.privacy.private_size,
        )
        release.check_candidates(prep.model)
        return release
    if cfg.privacy.mode == "none":
        return UnitSGD(
            units,
            batch_size=cfg.private_batch_size,
            entity_pool=pool,
            loss_fn=loss_fn,
            num_negatives=cfg.train.num_negatives,
            max_statements=cfg.privacy.max_statements_per_unit,
            seed=cfg.train.seed,
            declared_size=cfg.privacy.private_size,
        )
    engine = PrivacyEngine(cfg, extra_reasons=prep.split.extra.get("not_dp_because", ()))
    return engine.make_private_units(prep.model, units=units, entity_pool=pool, loss_fn=loss_fn)


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
    loaded, adaptation = None, None
    if not resume:
        check_storable(cfg.to_dict())  # a run that could not be opened again: refused before writing
        cfg, loaded, adaptation = resolve_adaptation(cfg, progress=progress)  # writes only into the textkg cache
    if device.type == "mps" and cfg.privacy.mode in PRIVATE_STEP_MODES:
        raise ConfigError(
            "private training adds the DP noise in float64, which MPS does not have; use --device cpu or cuda",
            field="train.device",
        )
    stage(f"reading {cfg.data.dataset} and encoding its texts ({cfg.model_name})", progress=progress)
    with reporting(progress):  # the encoder's "texts encoded n/N" lines
        prep = prepare(cfg, out_dir if resume else None, device=device, loaded=loaded)  # validates before writing
    prep.query_shard = query_shard
    stage(
        f"graph ready: {prep.kg.num_entities:,} entities, {prep.kg.num_relations} relations, "
        f"{len(prep.split.train):,} / {len(prep.split.valid):,} / {len(prep.split.test):,} train / valid / test "
        "statements; texts encoded",
        progress=progress,
    )
    if not resume:  # a resumed run's config.json holds the epochs it resolved
        cfg = scale_epochs(cfg, len(prep.split.train))
    cfg = resolve_private_updates(prep, cfg)
    trainer, private, audit = build_trainer(prep, cfg, out_dir, trainer_class=trainer_class)
    memory = estimate_memory(
        prep.model,
        cfg,
        num_entities=prep.kg.num_entities,
        private=private is not None,
        placement=placement_size(prep, cfg),
        link_stage=link_stage_size(prep, cfg),
        mapped_features=mmap_features(),
    )
    check_memory(memory, quiet=not progress)  # refuses before writing
    init = None if resume or cfg.train.init_from is None else initialise_from(prep, cfg, Path(cfg.train.init_from))
    out_dir.mkdir(parents=True, exist_ok=True)
    released = False
    if resume:
        if isinstance(private, CentroidRelease):  # a crafted record stops here, before anything is drawn
            released = private.restore(out_dir / CENTROID_RECORD, out_dir / ckpt.BEST_MODEL)
        trainer.restore(ckpt.load(out_dir / ckpt.CHECKPOINT))
    else:
        ae_file = AUTOENCODER_FILE if prep.autoencoder is not None else None
        stored = store_run_files(cfg.to_dict(), out_dir, autoencoder_file=ae_file)  # copies the char LMs in
        ckpt.atomic_write_json(out_dir / "config.json", {"textkg_version": __version__, **stored})
        ckpt.atomic_write_json(out_dir / "graph.json", graph_record(prep.kg, prep.split))
        if prep.autoencoder is not None:  # prediction codes new descriptions with the same autoencoder
            prep.autoencoder.save(out_dir / AUTOENCODER_FILE)
        if audit is not None:
            ckpt.atomic_write_json(out_dir / "audit_split.json", audit, private=True)  # names member statements
        if init is not None:
            ckpt.atomic_write_json(out_dir / INIT_RECORD, init)
    stage(f"training {cfg.train.epochs} epoch{'' if cfg.train.epochs == 1 else 's'}", progress=progress)
    state = trainer.fit(progress=progress)
    if isinstance(private, CentroidRelease) and not (
        released and private.applied == file_sha256(out_dir / ckpt.BEST_MODEL)  # resumed after the release
    ):
        stage(
            "releasing the private-only candidates' rows: one Gaussian release of their units' means", progress=progress
        )
        private.apply(prep.model, record=out_dir / CENTROID_RECORD)
        ckpt.atomic_torch_save(out_dir / ckpt.BEST_MODEL, prep.model.state_dict())
        private.mark_applied(out_dir / CENTROID_RECORD, out_dir / ckpt.BEST_MODEL)
    if isinstance(private, PrivateTraining) and state.stopped == "privacy budget reached":
        print(
            f"warning: the privacy budget (--target-epsilon {cfg.privacy.target_epsilon:g}) stopped training "
            f"after {private.accountant.steps} of {private.planned_steps} planned private steps "
            f"(epoch {state.epoch} of {cfg.train.epochs})",
            file=sys.stderr,
        )
    stage("evaluating: ranking the validation statements", progress=progress)
    valid = final_valid(prep, cfg, progress)
    stage("ranking the test statements", progress=progress)
    test = evaluate_split(prep, cfg, "test", progress=progress).to_dict()
    metrics = {
        "textkg_version": __version__,
        "dataset": cfg.data.dataset,
        # which description file a BLP-format directory was read with ("auto" resolved)
        "descriptions": prep.kg.info.get("description_file"),
        "split": cfg.data.split,
        # inductive: how the validation terms that choose the placement method were drawn (issue 37)
        "valid_holdout": prep.split.extra.get("valid_holdout"),
        "device": describe_device(device),
        "model": {
            "name": cfg.model_name,
            **cfg.model.to_dict(),
            "num_parameters": sum(p.numel() for p in prep.model.parameters() if p.requires_grad),
            **fusion_weights_block(prep.model),
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
        "valid": valid,
        "test": test,
        "privacy": _privacy_block(prep, cfg, private),
        # train.adapt_encoder_steps as resolved (textkg.pipeline.adaptation): steps, why, the adapted folder
        "encoder_adaptation": adaptation if adaptation is not None else _resumed_adaptation(cfg),
    }
    if private is None:  # what was estimated before training (benchmarks/memory_estimate.py sets it beside the
        # measured peak); never under DP: the process's size depends on the number of private statements
        metrics["memory_estimate"] = memory.to_dict()
    few = few_steps_warning(state.step, state.epoch, stopped=state.stopped)
    if few:
        metrics["train"]["warning"] = few
    if cfg.train.init_from is not None:
        metrics["train"]["initialised_from"] = init or _recorded_init(out_dir)
        if metrics["privacy"] is not None:
            metrics["privacy"]["initialised_from"] = metrics["train"]["initialised_from"]
    # placement, the neighbour vote, k-shot
    metrics["test"].update(extra_test_blocks(prep, cfg, progress=progress, run_dir=out_dir))
    if prep.units is not None:  # the held-out units' own statements, each hidden in turn (public units)
        from textkg.training.unit_eval import unit_metrics

        metrics["test"]["units"] = unit_metrics(prep.model, prep.units["test"])
        if private is not None and not isinstance(private, PrivateTraining | CentroidRelease):  # the ceiling
            metrics["train"]["units"] = private.describe()
    stage("evaluation done", progress=progress)
    if cfg.privacy.mode != "none":
        metrics["evaluation_filter"] = PUBLIC_FILTER_NOTE
        owner = owner_metrics(prep, cfg)
        if owner:
            ckpt.atomic_write_json(out_dir / PRIVATE_METRICS, {"note": PRIVATE_METRICS_NOTE, **owner}, private=True)
    ckpt.atomic_write_json(out_dir / "metrics.json", metrics)
    return metrics


def _resumed_adaptation(cfg: RunConfig) -> dict:
    """The ``encoder_adaptation`` block of a resumed run: what its ``config.json`` resolved."""
    steps = cfg.train.adapt_encoder_steps
    folder = (cfg.model.encoder_kwargs or {}).get("model_name_or_path") if steps else None
    return {"steps": steps, "why": "resumed: as the run's config.json says", "folder": folder}


#: Fewer optimiser steps than this in a finished run get a warning (issue 37: 3 epochs of a 2,874-term
#: ontology were 21 steps, and the model alone scored 0.285 against 0.466 after 50 epochs).
MIN_STEPS = 300


def few_steps_warning(steps: int, epochs: int, *, stopped: str | None = None) -> str | None:
    """A sentence when a run took fewer than :data:`MIN_STEPS` optimiser steps (else ``None``): on a small
    graph a few epochs are a few steps, and the model is likely undertrained."""
    if steps >= MIN_STEPS or steps == 0 or stopped is not None:
        return None
    per_epoch = max(1, steps // max(1, epochs))
    return (
        f"only {steps} training steps ({epochs} epochs of {per_epoch}): the model is likely undertrained on a "
        f"graph this small; --epochs {-(-MIN_STEPS // per_epoch)} gives at least {MIN_STEPS} steps"
    )


def scale_epochs(cfg: RunConfig, num_train: int) -> RunConfig:
    """``cfg`` with ``train.epochs`` raised to reach ``train.min_steps`` optimiser steps on this graph
    (non-private runs only: under DP the planned epochs fix ε). The resolved epochs go to ``config.json``."""
    tc = cfg.train
    if not tc.min_steps or cfg.privacy.mode != "none":
        return cfg
    per_epoch = plan_epoch(num_public=num_train, num_private=0, batch_size=tc.batch_size).public_steps
    epochs = epochs_for_min_steps(epochs=tc.epochs, min_steps=tc.min_steps, steps_per_epoch=per_epoch)
    return cfg if epochs == tc.epochs else replace(cfg, train=replace(tc, epochs=epochs))


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
            and src_cfg.privacy.unit == cfg.privacy.unit
            and src_cfg.privacy.unit_entities == cfg.privacy.unit_entities
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
    from textkg.pipeline.run_dir import read_run_json

    path = out_dir / INIT_RECORD
    return read_run_json(path) if path.is_file() or path.is_symlink() else None


def _privacy_block(prep: Prepared, cfg: RunConfig, private) -> dict | None:
    if isinstance(private, PrivateTraining | CentroidRelease):
        return private.report()
    if cfg.privacy.mode == "public-only":
        assert prep.private_mask is not None
        return public_only_report(cfg.privacy)
    return None
