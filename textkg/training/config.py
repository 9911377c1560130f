"""Frozen run configuration.

YAML/JSON config files and CLI flags only *fill in* these dataclasses; every
default is documented here, once. The defaults are the README's main job
(``textkg train --dataset hpo --split inductive --model fused-transe --epochs 3``):
``RunConfig()`` and a bare ``textkg train`` run it (issue 50; ``tests/cli/test_default_job.py``
keeps both equal to the README's command). ``RunConfig.to_dict()`` is what a run writes
to ``config.json``; ``RunConfig.from_dict()`` reads it back (``--resume``).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from textkg.data.addition_holdout import VALID_HOLDOUTS
from textkg.data.splits import list_candidate_protocols, list_splits
from textkg.devices import check_device_name
from textkg.errors import ConfigError
from textkg.privacy.claims import registered_claims
from textkg.training.losses import list_losses

PRIVACY_MODES = ("none", "full", "confidential", "public-only")
#: modes that run a private (DP-SGD or simulation) step
PRIVATE_STEP_MODES = ("full", "confidential")
#: ``data.vocabulary``: see :class:`DataConfig`
VOCABULARY_CHOICES = ("auto", "texts")
#: the accountants registered at import (textkg.privacy.claims); a config is checked against the registry itself,
#: as are mechanisms (textkg.training.mechanisms), so a class registered later is accepted
PRIVACY_ACCOUNTANTS = tuple(registered_claims())
NEGATIVES = ("sampled", "all")
LR_SCHEDULES = ("constant", "cosine")
OPTIMIZERS = ("adam", "lazy-adam")  # textkg.training.optim
#: ``privacy.private_updates``: see :class:`PrivacyConfig` (textkg.training.private_rows)
PRIVATE_UPDATES = ("auto", "all", "centroids", "private-rows")
#: ``train.placement_cross_encoder``: at most this many fine-tuning steps (about 4 h on two CPU cores)
MAX_CROSS_ENCODER_STEPS = 20_000
#: ``train.adapt_encoder_steps``: at most this many fine-tuning steps of the bi-encoder (about 9 h on two CPU cores)
MAX_ADAPT_ENCODER_STEPS = 20_000
#: ``privacy.unit``: what one neighbouring dataset adds or removes (see :class:`PrivacyConfig`)
PRIVACY_UNITS = ("statement", "entity")
#: ``privacy.max_statements_per_unit``: its default and bound (see :class:`PrivacyConfig`)
DEFAULT_MAX_STATEMENTS_PER_UNIT = 16
MAX_STATEMENTS_PER_UNIT = 4096
#: upper bounds on counts a config may ask for: beyond them a run would overflow or exhaust memory
#: before doing anything useful, so it is refused up front (issue 36, item 11)
MAX_COUNTS = {
    "epochs": 10**6,
    "batch_size": 10**8,
    "num_negatives": 10**6,
    "eval_every": 10**6,
    "eval_batch_size": 10**6,
}
#: the most private steps in one epoch (N̄/B, or 1/q): the epoch's step plan is a list of this length
MAX_PRIVATE_STEPS_PER_EPOCH = 10**7


def check_number(value: Any, field: str, *, low: float = 0.0, high: float = math.inf, closed: bool = False) -> None:
    """Refuse anything but a finite real number in ``(low, high]`` (``[low, high]`` when ``closed``).

    NaN and infinities fail every comparison of the checks that used ``value <= 0``, so they
    would pass them silently; here they are refused by name.
    """
    ok = (
        not isinstance(value, bool)
        and isinstance(value, (int, float))
        and math.isfinite(value)
        and (low <= value if closed else low < value)
        and value <= high
    )
    if not ok:
        bounds = (f">= {low:g}" if closed else f"> {low:g}") if math.isinf(high) else f"in ({low:g}, {high:g}]"
        raise ConfigError(f"must be a finite number {bounds}, got {value!r}", field=field)


@dataclass(frozen=True)
class DataConfig:
    """Which graph and split.

    Attributes:
        dataset: registered name or a BLP-format directory or an ontology file. Default ``hpo``
            (the README's main job); ``hpo-small`` is its one-source subset for quick runs.
        split: ``inductive`` (default: new entities held out for test, the BLP protocol) or
            ``transductive`` (every entity seen in training).
        split_seed: seed of a split built by textkg (ignored for given splits).
        inductive_dir: sub-directory holding ``ind-*.tsv`` files, if not the dataset dir.
        description: ``auto`` (default: the richest file a BLP-format directory has,
            ``long``, else ``first-sentence``, else ``short``; registered datasets
            have one text per entity), ``short`` (entity2text), ``long``
            (entity2textlong) or ``first-sentence`` (entity2text_firstsentence_StAR.txt:
            name and first Wikipedia sentence, the text BLP-style models need on
            FB15k-237). Flag ``--description`` or ``data.description``.
        public_entities: private runs: a file of entity ids, one per line, that get a
            structural row (the public vocabulary). ``None``: every entity of the
            graph that the split does not hold out (``docs/privacy.md``).
        vocabulary: a BLP-format directory's entity and relation vocabulary. ``auto``
            (default): the entities and relations of its statements, or under privacy every
            entity and relation with a text (a public input); ``texts``: every entity and
            relation with a text, always (a federation whose holders keep their statements
            in their own files, ``--partition files``, sets it).
        valid_holdout: how an inductive split built by textkg draws its validation terms, which
            choose the placement method and weights: ``auto`` (default: ``sibling-batches`` for a
            graph read from an ontology file, else ``random``), ``random`` (BLP's draw) or
            ``sibling-batches`` (up to half in whole sibling groups under one ``is_a`` parent, as a
            new release adds terms; :mod:`textkg.data.addition_holdout`). The test terms are the
            same either way.
    """

    dataset: str = "hpo"
    split: str = "inductive"
    split_seed: int = 0
    inductive_dir: str | None = None
    description: str = "auto"
    public_entities: str | None = None
    vocabulary: str = "auto"
    valid_holdout: str = "auto"

    def __post_init__(self) -> None:
        _check_choice("split", self.split, list_splits(), prefix="data")
        _check_choice("vocabulary", self.vocabulary, VOCABULARY_CHOICES, prefix="data")
        _check_choice("valid_holdout", self.valid_holdout, ("auto", *VALID_HOLDOUTS), prefix="data")
        check_seed(self.split_seed, "data.split_seed")


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation and model selection.

    Attributes:
        epochs: passes over the training triples (for DP: expected passes). Default 3, the
            README's main job (``fused-transe`` on ``hpo``, inductive: three epochs in about
            2.5 minutes on two CPU cores, docs/results/main_command.md); ``textkg train`` raises it
            on a small graph when nothing asked for a number (``min_steps``).
        batch_size: batch size (for DP: the *expected* Poisson batch size).
        lr: Adam learning rate.
        num_negatives: corruptions per positive, drawn uniformly and
            independently of the other examples in the batch.
        loss: ``margin`` (ranking loss), ``softplus`` (logistic) or
            ``softmax`` (cross-entropy of the softmax over the positive and
            its negatives).
        negatives: ``sampled`` (``num_negatives`` corruptions per positive)
            or ``all``: every training entity is a negative for both the head
            and the tail (1-vs-all, :mod:`textkg.training.one_vs_all`; needs
            ``loss: softmax``; with privacy only for the models and settings
            :func:`textkg.training.one_vs_all.private_refusal` accepts,
            e.g. ``cpu-fused``, whose per-example gradients are clipped exactly
            without being formed).
        pool_size: ``negatives: all`` only. ``0``: the candidates are every
            training entity. ``k > 0``: each step draws ``k`` training
            entities uniformly, shared by the batch, plus the batch's own heads
            and tails (sampled softmax; for text modules whose entity vectors
            are costly, e.g. ``dkrl``).
        margin: margin of the ranking loss.
        temperature: ``softmax`` only: scores are divided by it (smaller =
            sharper). 0.05 suits TransE-L2 on normalised vectors (``cpu-best``).
        seed: seed of initialisation, negatives, sampling and noise.
        eval_every: validate every this many epochs (model selection by MRR).
        valid_max_triples: validate on a seeded subset of at most this many
            triples (``0`` = all).
        eval_batch_size: queries scored at once during evaluation.
        candidates: candidate protocol, ``blp`` (valid: train+valid entities,
            test: all), ``all`` or ``split``.
        exclude_query: evaluation also removes each query's own entity from
            its ranking (off: the standard filtered protocol; on suits
            irreflexive relations such as ``is_a``; see
            :func:`textkg.evaluation.compute_ranks`).
        weight_decay: Adam weight decay.
        optimizer: ``adam`` (default) or ``lazy-adam``: the entity table gets a row-sparse
            gradient and ``torch.optim.SparseAdam``, which updates only the rows a batch touched
            (O(B·d) per step instead of O(N·d); :mod:`textkg.training.optim`). Non-private runs with
            sampled negatives and no weight decay only.
        lr_schedule: ``constant`` or ``cosine``: step ``t`` of ``T = epochs ×
            steps per epoch`` uses ``lr · (1 + cos(π t / T)) / 2`` (SGDR without
            restarts, Loshchilov & Hutter, ICLR 2017). Set ``epochs`` to what
            ``max_minutes`` allows, or the run stops before the rate has decayed.
        ema_decay: ``0`` (default) or a decay ``d`` in (0, 1): keep an exponential moving
            average of the trained weights, ``ema ← d_t·ema + (1 − d_t)·w`` after every step with
            the warm-up ``d_t = min(d, (1 + t)/(10 + t))`` (as TensorFlow's
            ``ExponentialMovingAverage``). Each validation scores both the raw and the averaged
            weights; the better one is the epoch's candidate for the best model. Averaging the
            iterates of DP-SGD averages out part of the noise (De et al. 2022, "Unlocking
            high-accuracy differentially private image classification through scale", §3.1); it
            is post-processing, so it costs no privacy.
        max_minutes: stop training after this wall time (``None`` = no limit),
            checked after every step; a stopped run is validated at once. Refused under
            ``--privacy full|confidential``: the private step count must not depend on wall time.
        checkpoint_every: also checkpoint every this many steps (``0`` = only per epoch).
        audit_candidates: for membership-inference audits, this many candidate
            statements (confidential ones when privacy is ``confidential`` or
            confidential relations are named; otherwise any training statement)
            are drawn before training and split at random, half into members
            (trained on) and half into non-members (removed from training);
            the split is recorded in ``audit_split.json``. ``0`` = no audit split.
        init_from: a finished run directory whose ``best_model.pt`` initialises the
            model (same graph and model shape). Under ``--privacy confidential`` it
            must be a ``public-only`` run with the same confidential statements, which
            never read one (so the guarantee is unchanged); ``full`` refuses it.
        neighbour_vote: report ``test.neighbour_vote`` (the description-kNN vote for
            new entities, alone and combined with the model; docs/models.md):
            ``auto`` (default) on inductive splits with descriptions, except graphs
            with a placement task (an ``is_a`` relation, e.g. ``hpo``), whose
            ``test.placement`` tables already carry the description baselines and
            where the extra test pass would lengthen the main job; ``on``; ``off``.
        placement_extras: ``on`` (default) or ``off``: ``off`` leaves out the two placement blocks that
            re-place the same held-out terms, ``test.placement_names_only`` (from their names alone) and
            ``test.placement_known_links`` (with their annotations). ``test.placement``,
            ``placement_combined`` and ``placement_selection`` are unchanged. On the full ``hpo`` (2 shared
            cores, load 9–14) the placement took 7.4 min with them and 4.2–6.1 min without (issue 39: a
            benchmark that reads only the placement; ``textkg place`` then has no names-only choice).
        placement_cross_encoder: ``0`` (default: off) or a number of optimiser steps: fine-tune a cross-encoder
            (the packaged MiniLM with a one-logit head) on the ontology's own training ``is_a`` pairs against
            hard negatives (:mod:`textkg.training.adapt_cross`; cached by the ontology's content) and re-rank each
            held-out term's top candidates of the combination with it, its weight chosen on validation
            (:mod:`textkg.evaluation.placement.shortlist`); the run folder keeps the model for ``textkg place``.
            It reads every training ``is_a`` statement, so a private run refuses it.
        adapt_encoder_steps: ``None`` (default: automatic), ``0`` (off) or a number of optimiser steps:
            before encoding, fine-tune the packaged MiniLM on the ontology's own training ``is_a`` pairs
            (:func:`textkg.training.adapt_encoder.adapt_encoder`, in-batch negatives; cached by content) and
            encode every text with it, so the model's text features and every placement method read the
            adapted encoder (:mod:`textkg.pipeline.adaptation`). ``None`` resolves, in ``textkg train``, to
            :data:`textkg.pipeline.adaptation.AUTO_STEPS` on a non-private inductive run of the packaged
            MiniLM with at least :data:`textkg.pipeline.adaptation.AUTO_MIN_PAIRS` training ``is_a`` pairs,
            else to 0; the run's ``config.json`` holds the resolved number and the adapted folder. It reads
            every training ``is_a`` statement, so a private run refuses a number.
        min_steps: ``0`` (default in the Python API: train exactly ``epochs``) or a number of optimiser
            steps: a non-private run whose ``epochs`` give fewer steps raises ``epochs`` to reach it, at
            most 200 (:func:`textkg.training.schedule.epochs_for_min_steps`). ``textkg train`` sets 300
            when no flag, config file or preset gives ``epochs`` (issue 37: 5 epochs of a 2,874-term
            ontology were 35 steps; its model alone scored 0.285 after 3 epochs, 0.466 after 50).
            Not applied under ``--privacy full|confidential``, where ``epochs`` fixes ε.
        device: where the run computes (:mod:`textkg.devices`): ``auto`` (default: CUDA if
            available, else MPS, else the CPU), ``cpu``, ``cuda``, ``cuda:N`` or ``mps``. A device
            the machine does not have is an error, never a silent fallback. Only the syntax is
            checked here (a ``config.json`` written on a GPU machine still loads elsewhere); the
            run resolves the name before it writes anything and records the result in
            ``metrics.json`` (``device``). The CPU results do not depend on this setting.
    """

    epochs: int = 3
    batch_size: int = 512
    lr: float = 1e-3
    num_negatives: int = 32
    loss: str = "margin"
    negatives: str = "sampled"
    pool_size: int = 0
    margin: float = 1.0
    temperature: float = 1.0
    seed: int = 0
    eval_every: int = 1
    valid_max_triples: int = 2000
    eval_batch_size: int = 256
    candidates: str = "blp"
    exclude_query: bool = False
    weight_decay: float = 0.0
    optimizer: str = "adam"
    lr_schedule: str = "constant"
    ema_decay: float = 0.0
    max_minutes: float | None = None
    checkpoint_every: int = 0
    audit_candidates: int = 0
    init_from: str | None = None
    neighbour_vote: str = "auto"
    placement_extras: str = "on"
    placement_cross_encoder: int = 0
    adapt_encoder_steps: int | None = None
    min_steps: int = 0
    device: str = "auto"

    def __post_init__(self) -> None:
        check_device_name(self.device, field="train.device")
        check_seed(self.seed, "train.seed")
        _check_choice("loss", self.loss, list_losses(), prefix="train")
        _check_choice("neighbour_vote", self.neighbour_vote, ("auto", "on", "off"), prefix="train")
        _check_choice("placement_extras", self.placement_extras, ("on", "off"), prefix="train")
        steps = self.placement_cross_encoder
        if isinstance(steps, bool) or not isinstance(steps, int) or not 0 <= steps <= MAX_CROSS_ENCODER_STEPS:
            raise ConfigError(
                f"must be a whole number of steps from 0 (off) to {MAX_CROSS_ENCODER_STEPS}, got {steps!r}",
                field="train.placement_cross_encoder",
            )
        adapt = self.adapt_encoder_steps
        if adapt is not None and (
            isinstance(adapt, bool) or not isinstance(adapt, int) or not 0 <= adapt <= MAX_ADAPT_ENCODER_STEPS
        ):
            raise ConfigError(
                f"must be null (automatic) or a whole number of steps from 0 (off) to {MAX_ADAPT_ENCODER_STEPS}, "
                f"got {adapt!r}",
                field="train.adapt_encoder_steps",
            )
        _check_choice("negatives", self.negatives, NEGATIVES, prefix="train")
        _check_choice("lr_schedule", self.lr_schedule, LR_SCHEDULES, prefix="train")
        _check_choice("optimizer", self.optimizer, OPTIMIZERS, prefix="train")
        if self.optimizer == "lazy-adam" and self.negatives != "sampled":
            raise ConfigError(
                "lazy-adam updates the rows a batch touched; 1-vs-all touches every row: use adam",
                field="train.optimizer",
            )
        if self.optimizer == "lazy-adam" and self.weight_decay:
            raise ConfigError("lazy-adam has no weight decay (torch.optim.SparseAdam)", field="train.optimizer")
        if self.negatives == "all" and self.loss != "softmax":
            raise ConfigError(
                f"negatives 'all' (1-vs-all) needs loss 'softmax', got {self.loss!r}", field="train.negatives"
            )
        if isinstance(self.pool_size, bool) or not isinstance(self.pool_size, int) or self.pool_size < 0:
            raise ConfigError(f"must be an integer >= 0, got {self.pool_size!r}", field="train.pool_size")
        if self.pool_size and self.negatives != "all":
            raise ConfigError(
                "pool_size samples the 1-vs-all candidates: it needs negatives 'all'", field="train.pool_size"
            )
        _check_choice("candidates", self.candidates, list_candidate_protocols(), prefix="train")
        if not isinstance(self.exclude_query, bool):
            raise ConfigError(f"must be true or false, got {self.exclude_query!r}", field="train.exclude_query")
        for name, high in MAX_COUNTS.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
                raise ConfigError(f"must be an integer in [1, {high:,}], got {value!r}", field=f"train.{name}")
        for name, high in (("min_steps", 10**6), ("valid_max_triples", 10**9)):  # 0: none / all of them
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= high:
                raise ConfigError(f"must be an integer in [0, {high:,}], got {value!r}", field=f"train.{name}")
        check_number(self.lr, "train.lr")
        check_number(self.temperature, "train.temperature")
        check_number(self.margin, "train.margin", closed=True)
        check_number(self.weight_decay, "train.weight_decay", closed=True)
        if self.max_minutes is not None:
            check_number(self.max_minutes, "train.max_minutes")
        decay = self.ema_decay
        if isinstance(decay, bool) or not isinstance(decay, (int, float)) or not 0 <= decay < 1:
            raise ConfigError(f"must be a number in [0, 1), got {self.ema_decay!r}", field="train.ema_decay")


@dataclass(frozen=True)
class PrivacyConfig:
    """What is private and how it is protected.

    Attributes:
        mode: ``none``; ``full`` (every training triple is private, q = B/N);
            ``confidential`` (DPKGE, Han et al. 2022: only confidential
            statements get DP, q = B/|C|); ``public-only`` (the baseline a
            confidential run must beat: confidential statements are dropped and
            never read, the rest trains without noise; ε = 0).
        mechanism: ``dp-sgd`` (Poisson sampling, per-example clipping of the
            whole gradient, Gaussian noise on every trained parameter: the
            only mechanism reported as ``dp``) or ``simulation`` (the seed
            paper's batch-level clipping: always reported as ``simulation``).
        noise_multiplier: σ. If ``None``, calibrated to ``target_epsilon``.
        target_epsilon: budget ε; with σ given, training stops before the
            step that would exceed it.
        delta: δ of the (ε, δ) guarantee; ``None`` = 1/(10·N̄), N̄ the declared public size.
        private_size: N̄, a PUBLIC size of the private set that the user declares (an
            estimate or a round bound; it need not be exact). It sets the sampling rate
            q = B/N̄, the steps per epoch round(N̄/B), the default δ and the sum's normaliser
            q·N̄ = B. Under add/remove adjacency the exact number of private statements is
            private, so nothing released may depend on it; the guarantee holds whatever the
            true size (only the realised batch size, never released, follows it). Give this
            or ``sample_rate``; with neither, q uses the exact count and the run is labelled
            ``simulation``.
        sample_rate: q, a PUBLIC Poisson sampling rate (instead of ``private_size``; N̄ = B/q).
        batch_size: B of the private steps only, the expected Poisson batch (``None``: ``train.batch_size``,
            which the public steps use). Public like every count: q = B/N̄ and round(N̄/B) private steps
            per epoch follow from it, while the public steps keep their own batch and schedule.
        max_grad_norm: clipping bound C of each example's whole gradient.
        confidential_relations: relations whose statements are confidential.
        confidential_fraction: alternatively a seeded random fraction of
            training statements marked confidential.
        orders: RDP orders, e.g. ``"2-64"`` (the seed's integer grid);
            ``None`` = the default grid 1.1…10.9, 11…63, 128…1024.
        reproducible_noise: ``None`` (default): the Poisson samples, the noise and
            every random choice of a private step come from a secret key drawn from
            the OS and kept only in ``checkpoint.pt``. An int: derive them from this
            PUBLIC seed instead, for tests and research; the run is then labelled
            ``simulation`` (anyone with the config can replay the noise).
        accountant: what calibrates σ, enforces ``target_epsilon`` and gives the claimed
            ``epsilon``: ``rdp`` (Rényi DP of the Sampled Gaussian Mechanism, converted
            with Canonne–Kamath–Steinke 2020) or ``pld`` (dp-accounting's privacy-loss
            distribution accounting: tighter, slower). The privacy block reports both.
        private_updates: what a private step updates. ``auto`` (default): ``centroids`` for a
            ``confidential`` unit-level run that names one ``unit_targets`` relation and ``unit_candidates``
            (no ``sample_rate`` or ``batch_size``) with a TransE model it can set rows of (weighted or
            structural fusion, one row per entity, unnormalised) whose candidate list has a private-only
            candidate and two public ones to centre on, else ``all``; :class:`RunConfig` and the training job
            resolve it, and ``config.json`` records the choice. ``all``: every trained
            parameter, with the public steps' optimizer. ``private-rows`` (``confidential``
            mode only): only the table rows that no public training statement reads (the
            structural rows of entities, and the rows of relations, that appear in no
            unrestricted training statement), with an optimizer of its own; every other
            parameter keeps what the public steps give it. The noised gradient is the same,
            so is ε: the mask is post-processing of public inputs
            (:mod:`textkg.training.private_rows`). ``centroids`` (``unit: entity`` with one
            ``unit_targets`` relation and ``unit_candidates``): no private step; after the public
            steps, one Gaussian release sets each private-only candidate's row to the noisy mean of
            its units' folded-in vectors (:mod:`textkg.training.unit_centroids`).
        unit: what the guarantee protects. ``statement`` (default): one training statement (one
            confidential statement in ``confidential`` mode). ``entity``: one *unit entity* (a patient)
            with all of its statements (user-level DP: McMahan et al. 2018, arXiv:1710.06963v3; Charles
            et al. 2024, arXiv:2407.07737v1). Every statement that mentions an entity listed in
            ``unit_entities`` is a unit statement, owned by that entity; the unit entities are taken out
            of the graph (no row, no text, no name in ``graph.json``) and a unit's vector is folded in
            from its own statements (:mod:`textkg.training.unit_step`). Under ``entity``, ``mode`` is
            ``confidential`` (patient-level DP-SGD over the units; the other statements are the public
            graph), ``public-only`` (the units are dropped: the ε = 0 baseline) or ``none`` (the units
            are trained with the same fold-in loss by plain SGD: the non-private ceiling);
            ``private_size`` is the declared number of units N̄_u and ``batch_size`` the expected
            number of units per step B_u.
        unit_entities: a file of entity ids, one per line (a public rule, e.g. a cohort's ``patients.txt``);
            a listed id the dataset lacks is an error naming the line. ``unit: entity``: the unit entities.
            ``unit: statement`` (``confidential`` or ``public-only`` only): every training statement that
            mentions a listed entity is confidential (besides any ``confidential_relations`` /
            ``confidential_fraction``); the listed entities stay entities of the model, and a patient with
            k statements is protected by group privacy (:mod:`textkg.privacy.group`).
        max_statements_per_unit: ``unit: entity`` only: m, the most statements of one unit a step
            uses (contribution bounding; a unit with more gets m of them, chosen with the step's secret
            randomness). Public. Default 16: a simulated or real patient record carries a handful to
            about a dozen phenotypes and a diagnosis, so 16 keeps every statement of a typical
            patient while the step's cost (B_u · m · (1 + K) scores) stays bounded; the clipping
            bound C holds for the whole unit whatever m is, so m trades compute against how much of
            a large record one step sees, not privacy.
        unit_targets: ``unit: entity`` only: the relations whose unit statements the unit-level loss
            predicts (e.g. ``diagnosed_with``: a patient is folded in from its other statements and
            trained to rank its diagnosis); ``()`` (default): every unit statement is a target. Public.
        unit_candidates: ``unit: entity`` only: a file of entity ids (one per line, public, e.g. a
            cohort's ``diseases.txt``) that a target's other end is corrupted with, so a target is ranked
            against the entities it could be (a diagnosis against the other diseases, not against
            phenotype terms); default: every entity of the model.
    """

    mode: str = "none"
    mechanism: str = "dp-sgd"
    noise_multiplier: float | None = None
    target_epsilon: float | None = None
    delta: float | None = None
    max_grad_norm: float = 1.0
    confidential_relations: tuple[str, ...] = ()
    confidential_fraction: float | None = None
    orders: str | None = None
    reproducible_noise: int | None = None
    accountant: str = "rdp"
    private_size: int | None = None
    sample_rate: float | None = None
    batch_size: int | None = None
    private_updates: str = "auto"
    unit: str = "statement"
    unit_entities: str | None = None
    max_statements_per_unit: int = DEFAULT_MAX_STATEMENTS_PER_UNIT
    unit_targets: tuple[str, ...] = ()
    unit_candidates: str | None = None

    def __post_init__(self) -> None:
        _check_choice("mode", self.mode, PRIVACY_MODES, prefix="privacy")
        self._check_unit()
        _check_choice("private_updates", self.private_updates, PRIVATE_UPDATES, prefix="privacy")
        if self.private_updates not in ("all", "auto") and self.mode != "confidential":
            # the public statements decide which rows are private-only; without them there is no such row
            raise ConfigError(
                f"--private-updates {self.private_updates} needs --privacy confidential (the rows it updates are "
                f"those no public training statement reads), not --privacy {self.mode}",
                field="privacy.private_updates",
            )
        if self.private_updates == "centroids" and (self.sample_rate is not None or self.batch_size is not None):
            raise ConfigError(
                "--sample-rate and --private-batch-size have no effect with --private-updates centroids (every unit "
                "takes part once: declare the number of units with --private-size)",
                field="privacy.sample_rate" if self.sample_rate is not None else "privacy.batch_size",
            )
        if self.private_updates == "centroids" and (
            self.unit != "entity" or not self.unit_targets or len(self.unit_targets) != 1 or not self.unit_candidates
        ):
            raise ConfigError(
                "--private-updates centroids needs --privacy-unit entity with one --unit-targets relation and "
                "--unit-candidates (a candidate's row is the mean of the units whose target names it)",
                field="privacy.private_updates",
            )
        bsz = self.batch_size
        if bsz is not None and (
            isinstance(bsz, bool) or not isinstance(bsz, int) or not 1 <= bsz <= MAX_COUNTS["batch_size"]
        ):
            raise ConfigError(
                f"--private-batch-size must be an integer in [1, {MAX_COUNTS['batch_size']}], got {bsz!r}",
                field="privacy.batch_size",
            )
        size = self.private_size
        if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 1):
            raise ConfigError(f"must be an integer >= 1, got {size!r}", field="privacy.private_size")
        if self.sample_rate is not None:
            check_number(self.sample_rate, "privacy.sample_rate", high=1.0)
        if self.private_size is not None and self.sample_rate is not None:
            raise ConfigError(
                "give --private-size or --sample-rate, not both (each sets q)", field="privacy.sample_rate"
            )
        if self.mode == "none":
            given = [
                name
                for name, value in (
                    ("--noise-multiplier", self.noise_multiplier),
                    ("--target-epsilon", self.target_epsilon),
                )
                if value is not None
            ]
            if given:
                # a user who gave a budget believes the model is private: never train it silently without DP
                raise ConfigError(
                    f"{', '.join(given)} without --privacy would train a model that is NOT private; add "
                    "--privacy full (every training statement private) or --privacy confidential, or drop "
                    + ("it" if len(given) == 1 else "them"),
                    field="privacy.mode",
                )
        from textkg.training.mechanisms import registered_mechanisms  # torch: only when a config is built

        _check_choice("accountant", self.accountant, tuple(registered_claims()), prefix="privacy")
        _check_choice("mechanism", self.mechanism, tuple(registered_mechanisms()), prefix="privacy")
        if self.mode == "none":
            return
        if self.mode == "public-only":
            if self.unit == "entity":  # the unit statements are what it leaves out
                return
            if not self.confidential_relations and self.confidential_fraction is None and not self.unit_entities:
                raise ConfigError(
                    "public-only training needs --confidential-relations, --confidential-fraction or "
                    "--unit-entities (the statements it leaves out)",
                    field="privacy.confidential_relations",
                )
            if self.confidential_fraction is not None and not 0 < self.confidential_fraction < 1:
                raise ConfigError("must be in (0, 1) for public-only training", field="privacy.confidential_fraction")
            return
        if self.noise_multiplier is None and self.target_epsilon is None:
            raise ConfigError("privacy needs --noise-multiplier or --target-epsilon", field="privacy.noise_multiplier")
        if self.noise_multiplier is not None:
            check_number(self.noise_multiplier, "privacy.noise_multiplier")
        if self.target_epsilon is not None:
            check_number(self.target_epsilon, "privacy.target_epsilon")
        check_number(self.max_grad_norm, "privacy.max_grad_norm")
        if self.delta is not None and not (isinstance(self.delta, (int, float)) and 0 < self.delta < 1):
            raise ConfigError(f"must be in (0, 1), got {self.delta!r}", field="privacy.delta")
        if self.mode == "confidential" and self.unit == "statement":
            if not self.confidential_relations and self.confidential_fraction is None and not self.unit_entities:
                raise ConfigError(
                    "confidential privacy needs --confidential-relations, --confidential-fraction or --unit-entities",
                    field="privacy.confidential_relations",
                )
            if self.confidential_fraction is not None and not 0 < self.confidential_fraction <= 1:
                raise ConfigError("must be in (0, 1]", field="privacy.confidential_fraction")

    def _check_unit(self) -> None:
        """Refuse a unit setting that cannot mean what it says, before anything is read."""
        _check_choice("unit", self.unit, PRIVACY_UNITS, prefix="privacy")
        for name in ("unit_entities", "unit_candidates"):
            given = getattr(self, name)
            if given is not None and not isinstance(given, str) and hasattr(given, "__fspath__"):
                given = str(given)  # a Path from the Python API
                object.__setattr__(self, name, given)
            if given is not None and (not isinstance(given, str) or not given.strip() or "\x00" in given):
                # a crafted config.json (a number, an object, "", a NUL byte) would reach open() as a traceback
                raise ConfigError(
                    f"must be the path of a file (a non-empty string without NUL bytes), got {given!r:.80}",
                    field=f"privacy.{name}",
                )
        targets = self.unit_targets
        if isinstance(targets, list):
            targets = tuple(targets)
            object.__setattr__(self, "unit_targets", targets)
        if not isinstance(targets, tuple) or not all(isinstance(t, str) and t.strip() for t in targets):
            raise ConfigError(f"must be a list of relation names, got {targets!r:.80}", field="privacy.unit_targets")
        seen: set[str] = set()
        for name in targets:  # a crafted config.json: a name twice (a million times), a NUL, a newline
            if name in seen or any(ord(ch) < 32 or ord(ch) == 127 for ch in name):
                raise ConfigError(
                    f"names {name!r:.80} twice or with a control character: a relation name is listed once, "
                    "on one line",
                    field="privacy.unit_targets",
                )
            seen.add(name)
        m = self.max_statements_per_unit
        if isinstance(m, bool) or not isinstance(m, int) or not 1 <= m <= MAX_STATEMENTS_PER_UNIT:
            raise ConfigError(
                f"must be an integer in [1, {MAX_STATEMENTS_PER_UNIT}], got {m!r}",
                field="privacy.max_statements_per_unit",
            )
        if self.unit == "statement":
            if self.unit_entities is not None and self.mode not in ("confidential", "public-only"):
                # statement level: the listed entities' statements are the confidential ones
                raise ConfigError(
                    "--unit-entities names the owners of unit statements: with --privacy-unit entity each listed "
                    "entity is a unit (patient-level DP); with --privacy-unit statement it marks every statement "
                    "that mentions a listed entity confidential and needs --privacy confidential or public-only, "
                    f"not --privacy {self.mode}",
                    field="privacy.unit_entities",
                )
            if m != DEFAULT_MAX_STATEMENTS_PER_UNIT:
                raise ConfigError(
                    "--max-statements-per-unit bounds a unit's statements: it needs --privacy-unit entity",
                    field="privacy.max_statements_per_unit",
                )
            for name, flag in (("unit_targets", "--unit-targets"), ("unit_candidates", "--unit-candidates")):
                if getattr(self, name):
                    raise ConfigError(
                        f"{flag} shapes the unit-level loss: it needs --privacy-unit entity", field=f"privacy.{name}"
                    )
            return
        if self.unit_entities is None:
            raise ConfigError(
                "--privacy-unit entity needs --unit-entities FILE (the unit entities, one id per line: every "
                "statement that mentions one belongs to it)",
                field="privacy.unit_entities",
            )
        if self.mode == "full":
            raise ConfigError(
                "--privacy-unit entity protects the unit entities' statements; the other statements are the public "
                "graph: use --privacy confidential (patient-level DP), public-only (the units left out) or none "
                "(the units trained without noise), not full",
                field="privacy.mode",
            )
        if self.confidential_relations or self.confidential_fraction is not None:
            raise ConfigError(
                "--privacy-unit entity: the private statements are those of the --unit-entities; "
                "--confidential-relations / --confidential-fraction cannot be combined with it",
                field="privacy.confidential_relations"
                if self.confidential_relations
                else "privacy.confidential_fraction",
            )
        from textkg.training.mechanisms import get_mechanism  # torch: only when a config is built

        refusal = get_mechanism(self.mechanism).unit_refusal
        if refusal is not None:
            raise ConfigError(f"--privacy-unit entity: {refusal}", field="privacy.mechanism")


def _centroids_fit(privacy: PrivacyConfig, model: Any) -> bool:
    """Whether ``private_updates: auto`` means ``centroids``: the patient-diagnosis setting (one target relation
    ranked against a candidate list, under patient-level DP) with a model whose rows the release can set
    (:func:`textkg.training.unit_centroids.check_centroid_model`). On the simulated cohort, one release of each
    withheld disease's mean patient gave withheld-disease MRR 0.206 at ε = 1 per patient against DP-SGD's 0.036
    (3 seeds, docs/diagnosis.md)."""
    return (
        privacy.unit == "entity"
        and privacy.mode == "confidential"
        and len(privacy.unit_targets) == 1
        and privacy.unit_candidates is not None
        and privacy.sample_rate is None
        and privacy.batch_size is None
        and getattr(model, "interaction", None) == "transe"
        and getattr(model, "fusion", None) in ("weighted", "structural")
        and not getattr(model, "normalize_entities", False)
        and not getattr(model, "structural_buckets", 0)
    )


@dataclass(frozen=True)
class RunConfig:
    """Everything a run needs; written to ``config.json``.

    Attributes:
        data, train, privacy: The sections above (their defaults: the README's main job).
        model: A :class:`~textkg.models.config.ModelConfig`; ``None`` (default): the preset
            ``model_name`` names.
        model_name: The model preset's name (``textkg models list``). Default ``fused-transe``:
            structure and description fused (the README's main job); the structure-only
            baselines (``transe``, ``distmult``, ``complex``, ``rotate``, ...) are chosen by name.
    """

    data: DataConfig = field(default_factory=DataConfig)
    model: Any = None  # textkg.models.ModelConfig
    train: TrainConfig = field(default_factory=TrainConfig)
    privacy: PrivacyConfig = field(default_factory=PrivacyConfig)
    model_name: str = "fused-transe"

    def __post_init__(self) -> None:
        if self.model is None:  # the named preset, so that RunConfig() is a whole run
            from textkg.models.presets import get_preset

            object.__setattr__(self, "model", get_preset(self.model_name))
        if self.privacy.private_updates == "auto" and not _centroids_fit(self.privacy, self.model):
            # resolved here, where the model is known; a patient-diagnosis run is resolved by the training job,
            # which also sees whether a candidate is private-only (textkg.pipeline.job.resolve_private_updates)
            object.__setattr__(self, "privacy", dataclasses.replace(self.privacy, private_updates="all"))
        if self.train.max_minutes is not None and self.privacy.mode in PRIVATE_STEP_MODES:
            # a wall-time stop makes the number of private steps, and so the released epsilon, depend on
            # how long each step took, which depends on the realised (private) Poisson batch sizes
            raise ConfigError(
                f"--max-minutes cannot be used under --privacy {self.privacy.mode}: the number of private "
                "steps (and so epsilon) must be fixed in advance from public inputs, and a wall-time stop "
                "would make it depend on the private batch sizes; bound the run with --epochs instead",
                field="train.max_minutes",
            )
        self._check_private_steps()
        if self.train.placement_cross_encoder and self.privacy.mode != "none":
            raise ConfigError(
                "the placement cross-encoder is fine-tuned on every training is_a statement, private ones "
                f"included, and released with the run: not offered under --privacy {self.privacy.mode}",
                field="train.placement_cross_encoder",
            )
        if self.train.adapt_encoder_steps and self.privacy.mode != "none":
            raise ConfigError(
                "the encoder's adaptation is fine-tuned on every training is_a statement, private ones included, "
                f"and its weights encode the released texts: not offered under --privacy {self.privacy.mode}",
                field="train.adapt_encoder_steps",
            )
        if self.train.optimizer == "lazy-adam" and self.privacy.mode in PRIVATE_STEP_MODES:
            raise ConfigError(
                "lazy-adam updates the rows a batch touched; DP-SGD noises every row at every step: use adam",
                field="train.optimizer",
            )
        if getattr(self.model, "text_module", None) == "top-layers" and self.privacy.mode in PRIVATE_STEP_MODES:
            # its candidate cache is state written during the forward pass, and a step's output for one
            # example depends on rows the other examples chose: no per-example gradient is defined
            raise ConfigError(
                f"text_module 'top-layers' cannot be trained under --privacy {self.privacy.mode} (its cached "
                "candidate rows are shared across examples, so per-example clipping is not defined); use "
                "'finetune' (DP-SGD over every transformer weight) or frozen features",
                field="model.text_module",
            )
        self._check_unit_run()
        if self.train.negatives == "all" and self.privacy.mode in PRIVATE_STEP_MODES:
            from textkg.training.mechanisms import get_mechanism  # torch: only when needed
            from textkg.training.one_vs_all import private_refusal

            reason = get_mechanism(self.privacy.mechanism).one_vs_all_refusal or private_refusal(self)
            if reason is not None:
                raise ConfigError(
                    f"negatives 'all' (1-vs-all) under privacy: {reason}; or use negatives 'sampled'",
                    field="train.negatives",
                )

    def _check_unit_run(self) -> None:
        """What a unit-level run (``privacy.unit: entity``) does not support, refused by name."""
        if self.privacy.unit != "entity":
            return
        if self.train.negatives != "sampled":
            raise ConfigError(
                "--privacy-unit entity trains each unit statement with sampled negatives; the 1-vs-all "
                "loss (negatives 'all') is not supported: use negatives 'sampled'",
                field="train.negatives",
            )
        if self.train.audit_candidates:
            raise ConfigError(
                "--audit-candidates draws statement-level members; a unit-level run has no such audit",
                field="train.audit_candidates",
            )
        if self.train.optimizer != "adam":
            raise ConfigError(
                "--privacy-unit entity updates every row at a unit step: use optimizer 'adam'", field="train.optimizer"
            )

    @property
    def private_batch_size(self) -> int:
        """B of the private steps: ``privacy.batch_size``, else ``train.batch_size``."""
        return self.privacy.batch_size if self.privacy.batch_size is not None else self.train.batch_size

    def _check_private_steps(self) -> None:
        """Refuse a declared size or rate whose private steps per epoch (N̄/B = 1/q) overflow or exceed
        :data:`MAX_PRIVATE_STEPS_PER_EPOCH`, before anything is read or built."""
        p = self.privacy
        if p.mode not in PRIVATE_STEP_MODES or (p.private_size is None and p.sample_rate is None):
            return
        steps = 1.0 / p.sample_rate if p.sample_rate is not None else (p.private_size or 0) / self.private_batch_size
        if not math.isfinite(steps) or steps > MAX_PRIVATE_STEPS_PER_EPOCH:
            flag, field = (
                ("--private-size", "privacy.private_size")
                if p.sample_rate is None
                else ("--sample-rate", "privacy.sample_rate")
            )
            raise ConfigError(
                f"{flag} gives {steps:.3g} private steps per epoch (N̄/B = 1/q), over the limit of "
                f"{MAX_PRIVATE_STEPS_PER_EPOCH:,}; declare a smaller size, a larger rate or a larger --batch-size",
                field=field,
            )

    def to_dict(self) -> dict:
        return {
            "data": dataclasses.asdict(self.data),
            "model_name": self.model_name,
            "model": self.model.to_dict() if self.model is not None else None,
            "train": dataclasses.asdict(self.train),
            "privacy": {
                **dataclasses.asdict(self.privacy),
                "confidential_relations": list(self.privacy.confidential_relations),
                "unit_targets": list(self.privacy.unit_targets),
            },
        }

    @classmethod
    def from_dict(cls, d: dict, *, source: str = "config") -> RunConfig:
        from textkg.models.config import ModelConfig

        for section in ("data", "train", "privacy"):  # a crafted config.json: "privacy": "abc" was a ValueError
            if d.get(section) is not None and not isinstance(d[section], dict):
                raise ConfigError(f"must be an object, got {type(d[section]).__name__}", file=source, field=section)
        try:
            privacy = dict(d.get("privacy") or {})
            privacy["confidential_relations"] = tuple(privacy.get("confidential_relations") or ())
            return cls(
                data=DataConfig(**(d.get("data") or {})),
                model=ModelConfig.from_dict(d["model"]) if d.get("model") else None,
                train=TrainConfig(**(d.get("train") or {})),
                privacy=PrivacyConfig(**privacy),
                model_name=d.get("model_name", cls.model_name),  # every config.json names it
            )
        except TypeError as exc:
            raise ConfigError(f"unknown or missing key: {exc}", file=source) from None
        except ConfigError as exc:  # a field's check names the field; the file it came from is named here
            if exc.file is None and source != "config":
                exc.file = str(source)
            raise


#: the largest seed: torch's generators take 64 bits, numpy's no negative one
MAX_SEED = 2**63 - 1


def check_seed(value: Any, field: str) -> None:
    """Refuse a seed that is not a whole number in ``[0, MAX_SEED]`` (a crafted ``10**30`` made
    ``torch.manual_seed`` raise an overflow in every command that opened the run)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_SEED:
        raise ConfigError(f"must be a whole number from 0 to 2**63 - 1, got {value!r}", field=field)


def _check_choice(name: str, value: str, choices: tuple[str, ...], prefix: str = "") -> None:
    if value not in choices:
        full = f"{prefix}.{name}" if prefix else name
        raise ConfigError(f"{value!r} is not one of {', '.join(choices)}", field=full)
