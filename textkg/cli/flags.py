"""The flags several commands share (``train``, ``sweep``, ``federate``, ``tune``, ``place``, ...).

Each of train's flags is declared once, in :data:`TRAIN_FLAGS`: its option, the config key it fills
(``data.split_seed``) and its help. Everything else about a config-backed flag comes from the frozen
dataclass that owns the key: its type (``int``, ``float``, a switch for ``bool``), and the default that
its help states (``[config data.split_seed; default 0]``, so ``--help`` and docs/cli.md cannot drift
from it). :data:`textkg.cli.config_loading.FLAG_FIELDS` (flag → config key) is derived from the same
table. Every command module takes its flags from here, so no command module imports
``textkg.cli.main`` (which imports every command module): no import circle (issue 30).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import types
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from textkg.data.splits import list_candidate_protocols, list_splits
from textkg.models.config import ModelConfig
from textkg.training.config import (
    LR_SCHEDULES,
    NEGATIVES,
    OPTIMIZERS,
    PRIVACY_MODES,
    PRIVACY_UNITS,
    PRIVATE_UPDATES,
    DataConfig,
    PrivacyConfig,
    RunConfig,
    TrainConfig,
)
from textkg.training.losses import list_losses

#: the config sections a flag may fill, by the first part of its key
SECTIONS: dict[str, type] = {"data": DataConfig, "train": TrainConfig, "privacy": PrivacyConfig, "model": ModelConfig}
#: sections whose flags state the dataclass default in their help (a --model preset's own values are
#: described by ``textkg models list``)
DOCUMENTED_SECTIONS = ("data", "train", "privacy")
DEVICE_METAVAR = "{auto,cpu,cuda,cuda:N,mps}"


def device_help(what: str) -> str:
    """The help of a ``--device`` flag, ``what`` saying which device it picks."""
    return (
        f"{what}: auto (default: cuda if available, else mps, else cpu), cpu, cuda, cuda:N or mps; "
        "a device this machine lacks is an error (docs/scaling.md, Devices)"
    )


def add_device_flag(p: argparse.ArgumentParser, what: str) -> None:
    # validated by textkg.devices
    p.add_argument("--device", metavar=DEVICE_METAVAR, help=device_help(what))


@dataclass(frozen=True)
class Flag:
    """One flag of ``train`` (and of the commands that take train's flags), declared once.

    Attributes:
        option: ``--split-seed``; the argparse dest is its name with ``_`` for ``-``.
        help: What it does, in words (a config-backed flag's default is appended from the dataclass).
        key: ``section.field`` of the config it fills (``None``: a flag that fills no config field).
        choices: The allowed values, or a function listing them from their registry.
        metavar: The value's name in ``--help``.
        type: The argparse type of a flag without ``key`` (a config-backed flag's comes from its field).
        action: The argparse action of a flag without ``key``.
    """

    option: str
    help: str
    key: str | None = None
    choices: Sequence[str] | Callable[[], Sequence[str]] | None = None
    metavar: str | None = None
    type: Callable[[str], object] | None = None
    action: str | None = None

    @property
    def dest(self) -> str:
        return self.option[2:].replace("-", "_")

    @property
    def section_field(self) -> tuple[str, str]:
        """``("data", "split_seed")`` of ``key``."""
        section, _, name = (self.key or "").partition(".")
        return section, name

    def add_to(self, p: argparse.ArgumentParser) -> None:
        """Add the flag to ``p``; every flag defaults to ``None`` so that the config file / preset default wins."""
        kwargs: dict = {"help": self.help}
        if self.metavar is not None:
            kwargs["metavar"] = self.metavar
        if self.choices is not None:
            kwargs["choices"] = list(self.choices() if callable(self.choices) else self.choices)
        kind = self.type
        if self.key is not None:
            kind = _field_type(*self.section_field) or self.type
        if kind is bool:
            kwargs.update(action="store_true", default=None)
        elif self.action is not None:
            kwargs["action"] = self.action
        elif kind in (int, float):
            kwargs["type"] = number_flag(KEY_NUMBERS[self.key or self.dest], key=self.key)
        elif kind is not None:
            kwargs["type"] = kind
        p.add_argument(self.option, **kwargs)


def _field_type(section: str, name: str) -> type | None:
    """``int``, ``float`` or ``bool`` of a config field (``X | None`` read as ``X``); ``None`` for text."""
    hints = typing.get_type_hints(SECTIONS[section])
    kind = hints[name]
    args = [a for a in typing.get_args(kind) if a is not type(None)]
    if typing.get_origin(kind) in (typing.Union, types.UnionType) and len(args) == 1:
        kind = args[0]
    return kind if kind in (int, float, bool) else None


@dataclass(frozen=True)
class NumberFlag:
    """The argparse ``type`` of a numeric flag: ``kind`` (``int`` or ``float``) in ``[low, high]`` (an end
    open when ``*_open``), finite, never subnormal (``1e-320``), else exit 2 naming the flag and its range.

    Every numeric flag of every command takes one of :data:`NUMBERS` (issue 51): its range is declared
    there, once, and tests/security/test_numeric_flag_ranges.py walks the parser to check that none is
    a bare ``int`` or ``float``.
    """

    kind: type
    low: float
    high: float
    low_open: bool = False
    high_open: bool = False
    key: str | None = None

    @property
    def __name__(self) -> str:  # what argparse and the help snapshot call the type
        return self.kind.__name__

    def describe(self) -> str:
        lo, hi = ("(" if self.low_open else "[") + f"{self.low:g}", f"{self.high:g}" + (")" if self.high_open else "]")
        what = "an integer" if self.kind is int else "a finite number"
        return f"{what} in {lo}, {hi}" + (f" (config {self.key})" if self.key else "")

    def __call__(self, text: str) -> int | float:
        try:
            value: int | float = self.kind(text)
            ok = math.isfinite(value) and not (value and abs(value) < sys.float_info.min)
        except (ValueError, OverflowError):  # not a number, or an integer beyond any float
            value, ok = 0, False
        ok = ok and (self.low < value if self.low_open else self.low <= value)
        ok = ok and (value < self.high if self.high_open else value <= self.high)
        if not ok:
            shown = text if len(text) <= 40 else text[:37] + "..."
            raise argparse.ArgumentTypeError(f"must be {self.describe()}, got {shown!r}")
        return value


#: the range of every numeric flag, by what it counts (issue 51): a flag declares ``type=number_flag(NAME)``
NUMBERS: dict[str, NumberFlag] = {
    "seed": NumberFlag(int, 0, 2**63 - 1),
    "dim": NumberFlag(int, 1, 65_536),
    "epochs": NumberFlag(int, 1, 10**6),
    "batch_size": NumberFlag(int, 1, 10**8),
    "count": NumberFlag(int, 1, 10**6),  # negatives per statement, epochs between validations
    "size": NumberFlag(int, 0, 10**9),  # 0: all / off
    "items": NumberFlag(int, 1, 10**9),  # pairs, rows
    "private_size": NumberFlag(int, 1, 10**12),
    "unit_statements": NumberFlag(int, 1, 4096),  # --max-statements-per-unit (MAX_STATEMENTS_PER_UNIT)
    "steps": NumberFlag(int, 1, 10**9),
    "frozen_layers": NumberFlag(int, 0, 5),  # of MiniLM's 6 (textkg encoders adapt --frozen-layers)
    "top_k": NumberFlag(int, 1, 10**6),
    "processes": NumberFlag(int, 1, 1024),
    "clients": NumberFlag(int, 1, 100_000),
    "rounds": NumberFlag(int, 1, 10**6),
    "lr": NumberFlag(float, 0, 10, low_open=True),
    "probability": NumberFlag(float, 0, 1),
    "fraction": NumberFlag(float, 0, 1, low_open=True),  # (0, 1]
    "decay": NumberFlag(float, 0, 1, high_open=True),  # [0, 1)
    "noise_decay": NumberFlag(float, 0, 1, low_open=True),  # (0, 1]
    "margin": NumberFlag(float, 0, 1e6),
    "temperature": NumberFlag(float, 1e-3, 1e3),
    "minutes": NumberFlag(float, 0, 1e7, low_open=True),
    "sigma": NumberFlag(float, 1e-9, 1e4),  # beyond: sigma^2 overflows the accountant (1e-9: a noise-free ceiling)
    "epsilon": NumberFlag(float, 0, 1e4, low_open=True),
    "delta": NumberFlag(float, 0, 1, low_open=True, high_open=True),
    "sample_rate": NumberFlag(float, 0, 1, low_open=True),
    "clip": NumberFlag(float, 0, 1e6, low_open=True),
    "alpha": NumberFlag(float, 0, 1, low_open=True, high_open=True),
    "share": NumberFlag(float, 0, 1),
    "exponent": NumberFlag(float, 0, 10),  # a Zipf popularity's s (textkg data simulate-patients)
}
#: train's numeric flags (config key, or dest for a flag without one) → their :data:`NUMBERS` entry
KEY_NUMBERS: dict[str, str] = {
    "data.split_seed": "seed",
    "model.dim": "dim",
    "model.structural_dropout": "probability",
    "train.epochs": "epochs",
    "train.batch_size": "batch_size",
    "train.lr": "lr",
    "train.ema_decay": "decay",
    "train.num_negatives": "count",
    "train.pool_size": "size",
    "train.margin": "margin",
    "train.temperature": "temperature",
    "train.seed": "seed",
    "train.eval_every": "count",
    "train.valid_max_triples": "size",
    "train.max_minutes": "minutes",
    "train.checkpoint_every": "size",
    "train.audit_candidates": "size",
    "train.placement_cross_encoder": "size",
    "train.adapt_encoder_steps": "size",
    "privacy.noise_multiplier": "sigma",
    "privacy.target_epsilon": "epsilon",
    "privacy.delta": "delta",
    "privacy.private_size": "private_size",
    "privacy.sample_rate": "sample_rate",
    "privacy.batch_size": "batch_size",
    "privacy.max_grad_norm": "clip",
    "privacy.confidential_fraction": "fraction",
    "privacy.reproducible_noise": "seed",
    "privacy.max_statements_per_unit": "unit_statements",
}


def rdp_orders(text: str) -> str:
    """The argparse ``type`` of ``--orders``: the spec as given, once :func:`textkg.privacy.rdp.parse_orders`
    has read it (at most ``MAX_ORDERS`` orders, each finite and at most ``MAX_ORDER``; a range is counted
    before it is expanded)."""
    from textkg.errors import ConfigError
    from textkg.privacy.rdp import parse_orders

    try:
        parse_orders(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(exc.message) from None
    return text


def number_flag(name: str, *, key: str | None = None) -> NumberFlag:
    """The argparse ``type`` of a numeric flag counting ``name`` (:data:`NUMBERS`); ``key``: the config key it
    fills, named in its error."""
    return dataclasses.replace(NUMBERS[name], key=key)


#: train's flags, in the order ``--help`` lists them
TRAIN_FLAGS: tuple[Flag, ...] = (
    Flag("--config", help="YAML/JSON file filling the same config as the flags"),
    Flag(
        "--dataset",
        key="data.dataset",
        help="hpo, hpo-small, a BLP-format directory, or a file: FILE.obo, FILE.owl, FILE.ttl|.nt|.rdf, "
        "obo:/owl:/rdf:/pykeen:PATH, optionally #types=TYPE=ROOT,... (docs/datasets.md)",
    ),
    Flag(
        "--split",
        key="data.split",
        choices=list_splits,
        help="transductive: every entity is seen in training; inductive: new entities held out for test",
    ),
    Flag("--split-seed", key="data.split_seed", help="seed of the inductive split (which entities are held out)"),
    Flag("--inductive-dir", key="data.inductive_dir", help="sub-directory with ind-*.tsv (BLP-format datasets)"),
    Flag(
        "--valid-holdout",
        key="data.valid_holdout",
        choices=("auto", "random", "sibling-batches"),
        help="how an inductive split draws its validation terms: auto (sibling-batches for an ontology file, "
        "else random), random, or sibling-batches (up to half in whole sibling groups, as a release adds terms)",
    ),
    Flag(
        "--description",
        key="data.description",
        help="description file of a BLP-format directory: auto (default: long, else "
        "first-sentence, else short, whichever the directory has), short "
        "(entity2text.txt), long (entity2textlong.txt), first-sentence "
        "(entity2text_firstsentence_StAR.txt)",
    ),
    Flag(
        "--model",
        help="model preset (textkg models list): fused-transe fuses structure and description; "
        "transe, distmult, complex, rotate are structure only",
    ),
    Flag("--encoder", key="model.encoder", help="override the preset's text encoder"),
    Flag(
        "--encoder-model",
        help="local transformer folder for the preset's bert / sentence-transformers encoder "
        "(e.g. the output of textkg encoders adapt)",
    ),
    Flag("--fusion", key="model.fusion", help="override the preset's fusion"),
    Flag("--dim", key="model.dim", help="embedding dimension (overrides the --model preset's)"),
    Flag(
        "--structural-dropout",
        key="model.structural_dropout",
        help="probability in [0, 1] that a training entity's structural row is replaced by the unseen row "
        "(overrides the --model preset's)",
    ),
    Flag(
        "--autoencoder",
        metavar="FILE",
        help="lstm-ae models (torchcoder-aec): use this pre-trained autoencoder "
        "(textkg encoders pretrain-aec) instead of pre-training one in the run",
    ),
    Flag(
        "--epochs",
        key="train.epochs",
        help="passes over the training statements (under DP: expected passes); when neither this, a config "
        "file nor a preset gives it, train raises it on a small graph to reach train.min_steps steps",
    ),
    Flag(
        "--batch-size", key="train.batch_size", help="statements per step (under DP: the expected Poisson batch size B)"
    ),
    Flag("--lr", key="train.lr", help="Adam learning rate"),
    Flag(
        "--lr-schedule",
        key="train.lr_schedule",
        choices=LR_SCHEDULES,
        help="constant, or cosine: decay the rate to 0 over --epochs",
    ),
    Flag(
        "--ema-decay",
        key="train.ema_decay",
        metavar="D",
        help="keep a moving average of the weights (decay D, e.g. 0.99) and validate it beside "
        "the raw weights; the better is kept. Costs no privacy (post-processing)",
    ),
    Flag(
        "--optimizer",
        key="train.optimizer",
        choices=OPTIMIZERS,
        help="lazy-adam: update only the entity rows a batch touched (large graphs; non-private, sampled negatives)",
    ),
    Flag("--num-negatives", key="train.num_negatives", help="--negatives sampled: corruptions per statement"),
    Flag(
        "--loss",
        key="train.loss",
        choices=list_losses,
        help="margin (ranking), softplus (logistic) or softmax (cross-entropy over the statement and its negatives)",
    ),
    Flag(
        "--negatives",
        key="train.negatives",
        choices=NEGATIVES,
        help="sampled: --num-negatives corruptions per triple; all: every training entity "
        "(1-vs-all, needs --loss softmax; with --privacy only for TransE-L2 models over pooled "
        "features, e.g. cpu-fused, and without --pool-size)",
    ),
    Flag(
        "--pool-size",
        key="train.pool_size",
        help="--negatives all: draw this many candidate entities per "
        "step instead of every training entity (sampled softmax; 0 = all)",
    ),
    Flag("--margin", key="train.margin", help="--loss margin: the margin, in score units"),
    Flag("--temperature", key="train.temperature", help="softmax loss: divide scores by this"),
    Flag(
        "--seed",
        key="train.seed",
        help="seed of initialisation and negatives (DP noise is secret unless --reproducible-noise)",
    ),
    Flag("--eval-every", key="train.eval_every", help="validate every this many epochs (model selection by MRR)"),
    Flag(
        "--valid-max-triples",
        key="train.valid_max_triples",
        help="validate on a seeded subset of at most this many statements (0: all)",
    ),
    Flag(
        "--candidates",
        key="train.candidates",
        choices=list_candidate_protocols,
        help="candidate entities ranked in evaluation: blp (valid: train+valid entities, test: all), all, split",
    ),
    Flag(
        "--exclude-query",
        key="train.exclude_query",
        help="evaluation: remove each query's own entity from its ranking (irreflexive relations)",
    ),
    Flag(
        "--neighbour-vote",
        key="train.neighbour_vote",
        choices=("auto", "on", "off"),
        help="report the description-kNN vote for new entities, alone and combined with the model "
        "(test.neighbour_vote; auto: inductive splits with descriptions, except graphs with a placement task)",
    ),
    Flag(
        "--placement-extras",
        key="train.placement_extras",
        choices=("on", "off"),
        help="off: leave out test.placement_names_only and test.placement_known_links (the held-out terms "
        "placed again from their names alone and with their annotations); the placement is unchanged",
    ),
    Flag(
        "--placement-cross-encoder",
        key="train.placement_cross_encoder",
        metavar="STEPS",
        help="fine-tune a cross-encoder on the ontology's training is_a pairs for STEPS steps and re-rank each "
        "new term's top candidates with it, its weight chosen on validation (0: off; cached by content)",
    ),
    Flag(
        "--adapt-encoder",
        key="train.adapt_encoder_steps",
        metavar="STEPS",
        help="before encoding, fine-tune the packaged MiniLM on the ontology's training is_a pairs for STEPS "
        "steps of 64 pairs (its upper 3 layers) and encode every text with it (0: off; unset: 150 on a non-private "
        "inductive ontology run with at least 1,000 training is_a pairs, else off; cached by content)",
    ),
    Flag(
        "--max-minutes",
        key="train.max_minutes",
        help="stop training after this wall time, in minutes (unset: no limit)",
    ),
    Flag(
        "--checkpoint-every",
        key="train.checkpoint_every",
        help="also checkpoint every this many steps (0: only once per epoch)",
    ),
    Flag(
        "--init-from",
        key="train.init_from",
        metavar="RUN",
        help="initialise the model from RUN's best_model.pt (same graph and model); under --privacy "
        "confidential RUN must be a --privacy public-only run with the same confidential statements",
    ),
    Flag(
        "--audit-candidates",
        key="train.audit_candidates",
        help="hold out half of N candidate statements as audit non-members",
    ),
    Flag(
        "--privacy",
        key="privacy.mode",
        choices=PRIVACY_MODES,
        help="none; full (every training statement private); confidential (DP on the confidential "
        "statements only); public-only (drop the confidential statements: the baseline, epsilon 0)",
    ),
    Flag(
        "--mechanism",
        key="privacy.mechanism",
        choices=("dp-sgd", "simulation"),  # the built-in mechanisms; tests/test_registry.py checks the registry
        help="dp-sgd: Poisson sampling, per-example clipping, Gaussian noise (the only mechanism labelled dp); "
        "simulation: the seed paper's batch-level clipping, always labelled simulation",
    ),
    Flag(
        "--noise-multiplier",
        key="privacy.noise_multiplier",
        metavar="SIGMA",
        help="sigma: noise standard deviation in units of --max-grad-norm (unset: calibrated to --target-epsilon)",
    ),
    Flag(
        "--target-epsilon",
        key="privacy.target_epsilon",
        metavar="EPS",
        help="privacy budget epsilon (per statement, at --delta): sigma is calibrated to it, or with "
        "--noise-multiplier training stops before exceeding it",
    ),
    Flag("--delta", key="privacy.delta", help="delta of the guarantee (unset: 1/(10 N), N = --private-size)"),
    Flag(
        "--private-size",
        key="privacy.private_size",
        metavar="N",
        help="a PUBLIC size of the private set (an estimate or a round bound you may publish): q = B/N, "
        "round(N/B) steps per epoch. The exact count is private; without this or --sample-rate the run "
        "is labelled simulation (docs/privacy.md)",
    ),
    Flag(
        "--sample-rate",
        key="privacy.sample_rate",
        metavar="Q",
        help="a PUBLIC Poisson sampling rate q (instead of --private-size)",
    ),
    Flag(
        "--private-batch-size",
        key="privacy.batch_size",
        metavar="B",
        help="expected Poisson batch of the private steps only (q = B/N, round(N/B) private steps per epoch); "
        "unset: --batch-size. The public steps keep --batch-size",
    ),
    Flag(
        "--max-grad-norm",
        key="privacy.max_grad_norm",
        metavar="C",
        help="clipping bound C: the L2 norm of each private example's whole gradient",
    ),
    Flag(
        "--confidential-relations",
        key="privacy.confidential_relations",
        metavar="NAMES",
        help="comma-separated relation names (as in the dataset, e.g. has_phenotype) whose statements are confidential",
    ),
    Flag(
        "--confidential-fraction",
        key="privacy.confidential_fraction",
        help="instead of --confidential-relations: a seeded random fraction in (0, 1] of training statements",
    ),
    Flag(
        "--orders",
        key="privacy.orders",
        type=rdp_orders,
        help="RDP orders, e.g. 2-64 (default: 1.1..10.9, 11..63, 128..1024)",
    ),
    Flag(
        "--accountant",
        key="privacy.accountant",
        choices=("rdp", "pld"),
        help="what calibrates sigma and gives the claimed epsilon: rdp (default) or pld "
        "(dp-accounting's privacy-loss distributions: tighter, slower); both are reported",
    ),
    Flag(
        "--private-updates",
        key="privacy.private_updates",
        choices=PRIVATE_UPDATES,
        help="what a private step updates: auto (default: centroids for --privacy-unit entity with one "
        "--unit-targets relation and --unit-candidates on a TransE model, else all); all (every trained parameter); "
        "private-rows (--privacy confidential: only the table rows no public training statement reads; the same "
        "noise, the same epsilon); centroids (no private step: one Gaussian release after the public steps sets "
        "each private-only candidate's row to its units' noisy mean)",
    ),
    Flag(
        "--reproducible-noise",
        key="privacy.reproducible_noise",
        metavar="SEED",
        help="derive the private steps' noise and sampling from this PUBLIC seed (tests, "
        "research); the run is then labelled 'simulation', not 'dp'",
    ),
    Flag(
        "--privacy-unit",
        key="privacy.unit",
        choices=PRIVACY_UNITS,
        help="what the guarantee protects: statement (one training statement) or entity (one entity of "
        "--unit-entities, a patient, with all of its statements: patient-level DP; --private-size is then the "
        "declared number of units and --private-batch-size the expected units per step)",
    ),
    Flag(
        "--unit-entities",
        key="privacy.unit_entities",
        metavar="FILE",
        help="--privacy-unit entity: the unit entities, one id per line (public); every statement that mentions "
        "one belongs to it, and they are taken out of the graph (no row, no name in the release). With "
        "--privacy-unit statement and --privacy confidential or public-only: every statement that mentions a "
        "listed entity is confidential (one statement is the unit; a patient is protected by group privacy)",
    ),
    Flag(
        "--max-statements-per-unit",
        key="privacy.max_statements_per_unit",
        metavar="M",
        help="--privacy-unit entity: at most M statements of one unit per step (contribution bounding; "
        "chosen with the secret randomness when a unit has more)",
    ),
    Flag(
        "--unit-targets",
        key="privacy.unit_targets",
        metavar="NAMES",
        help="--privacy-unit entity: comma-separated relation names whose unit statements the loss predicts "
        "(e.g. diagnosed_with); a unit's other statements only fold it in (default: every unit statement)",
    ),
    Flag(
        "--unit-candidates",
        key="privacy.unit_candidates",
        metavar="FILE",
        help="--privacy-unit entity: entity ids (one per line, public) a unit target's other end is corrupted "
        "with, e.g. a cohort's diseases.txt (default: every entity of the model)",
    ),
    Flag(
        "--public-entities",
        key="data.public_entities",
        metavar="FILE",
        help="private runs: entity ids (one per line) that get a structural row; default: "
        "every entity the split does not hold out",
    ),
    Flag(
        "--device", key="train.device", metavar=DEVICE_METAVAR, help=device_help("train.device: where the run computes")
    ),
    Flag(
        "--out",
        help="run directory (must be new or empty); unset: train writes runs/MODEL-DATASET-SPLIT, "
        "tune runs/tune-MODEL-DATASET, federate runs/federated-DATASET-PARTITION",
    ),
    Flag("--resume", metavar="DIR", help="continue a run directory from its checkpoint"),
    Flag("--no-progress", action="store_true", help="no progress bar on stderr"),
)


def default_job_flags() -> list[str]:
    """The job a bare ``textkg train`` runs, as flags read from the dataclass defaults:
    ``--dataset hpo --split inductive --model fused-transe --epochs 3`` (the README's main job)."""
    run = RunConfig()
    return [
        *("--dataset", run.data.dataset, "--split", run.data.split),
        *("--model", run.model_name, "--epochs", str(run.train.epochs)),
    ]


def add_train_flags(p: argparse.ArgumentParser) -> None:
    """Add :data:`TRAIN_FLAGS` to ``p``, each config-backed flag's help ending with its key and default."""
    for flag in TRAIN_FLAGS:
        flag.add_to(p)
    _note_config_defaults(p)


def _note_config_defaults(p: argparse.ArgumentParser) -> None:
    """Append each config-backed flag's config key and default to its help text.

    The default is read from the frozen dataclass that the flag fills, so it is documented once and
    ``--help`` and docs/cli.md cannot drift from it; presets that set their own value are named.
    """
    from textkg.models.presets import PRESET_TRAIN_DEFAULTS

    keyed = {flag.dest: flag.section_field for flag in TRAIN_FLAGS if flag.section_field[0] in DOCUMENTED_SECTIONS}
    for action in p._actions:
        if action.dest == "model" and action.help is not None:  # RunConfig.model_name: the preset
            (default,) = (f.default for f in dataclasses.fields(RunConfig) if f.name == "model_name")
            action.help = f"{action.help} [config model_name; default {default}]"
        if action.dest not in keyed or action.help is None:
            continue
        section, name = keyed[action.dest]
        fields = {f.name: f for f in dataclasses.fields(SECTIONS[section])}
        default = fields[name].default
        shown = "unset" if default is None else "none" if default == () else repr(default).strip("'")
        note = f"config {section}.{name}; default {shown}"
        presets = sorted(n for n, d in PRESET_TRAIN_DEFAULTS.items() if section == "train" and name in d)
        if presets:
            note += f"; the presets {', '.join(presets)} set their own"
        action.help = f"{action.help} [{note}]".replace("%", "%%")
