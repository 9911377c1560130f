"""Settings of a cross-graph federation: each holder's graph and model, and the exchange.

A ``--holders`` YAML (or JSON) file::

    exchange:                 # every key optional; defaults in ExchangeConfig
      rounds: 1
      target_epsilon: 4.0     # per party, over all its releases (or noise_multiplier)
      delta: 1.0e-5
      clip: 1.0
      mix: 0.5
      fine_tune_epochs: 1
      unit: entity            # or statement: each holder trains with DP-SGD (its privacy block)
      method: procrustes      # or ppat (FKGE's PPAT network, entity unit only; its settings under ppat:),
                              # or average (a running mean of the parties' rotated rows; no mix)
    holders:
      - name: OMIM
        dataset: hpo-small    # any textkg dataset: a name, a BLP directory, an ontology file
        source: OMIM          # hpo only: this annotation source's statements plus the ontology
        model: transe         # a preset
        seed: 0
        data: {split: transductive}
        model_overrides: {dim: 32}
        train: {epochs: 5, batch_size: 512}
        privacy: {mode: full, target_epsilon: 4, private_size: 12000}  # exchange.unit: statement only
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from textkg.errors import ConfigError
from textkg.federated.cross_graph.methods import check_exchange_method
from textkg.federated.cross_graph.ppat import PPATConfig
from textkg.federated.names import check_name


@dataclass(frozen=True)
class HolderSpec:
    """One data holder: its dataset, preset and local training.

    Attributes:
        name: Unique name; the party's output folder.
        dataset: A textkg dataset (``load_dataset``'s argument).
        model: A model preset (``textkg.models.presets``).
        source: ``hpo`` only: keep this annotation source's statements (and the shared ontology).
        seed: Initialisation and sampling seed (each party its own: separate embedding spaces).
        data, model_overrides, train, privacy: Keys of :class:`~textkg.training.config.DataConfig`,
            :class:`~textkg.models.config.ModelConfig`, :class:`~textkg.training.config.TrainConfig` and
            :class:`~textkg.training.config.PrivacyConfig` (DP-SGD on the holder's own statements; only
            with ``exchange.unit: statement``).
    """

    name: str
    dataset: str
    model: str = "transe"
    source: str | None = None
    seed: int = 0
    data: dict = field(default_factory=dict)
    model_overrides: dict = field(default_factory=dict)
    train: dict = field(default_factory=dict)
    privacy: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_name(self.name, field="name")  # it becomes the party's folder: also from the Python API

    @property
    def private(self) -> bool:
        """Whether the holder trains with DP-SGD on its own statements."""
        return self.privacy.get("mode", "none") not in ("none", None)

    def privacy_config(self):
        """The holder's :class:`~textkg.training.config.PrivacyConfig` (``mode: none`` when not given)."""
        from textkg.training.config import PrivacyConfig

        privacy = dict(self.privacy)
        if privacy.get("batch_size") is not None:  # a party's private step takes train.batch_size
            raise ConfigError(
                "privacy.batch_size is not supported by cross-graph parties yet: set train.batch_size",
                field="privacy.batch_size",
            )
        if privacy.get("private_updates", "all") != "all":  # a party's snapshot carries one optimizer
            raise ConfigError(
                "privacy.private_updates is not supported by cross-graph parties yet", field="privacy.private_updates"
            )
        if isinstance(privacy.get("confidential_relations"), list):
            privacy["confidential_relations"] = tuple(privacy["confidential_relations"])
        return PrivacyConfig(**privacy)

    def run_config(self):
        """The party's :class:`~textkg.training.config.RunConfig` (preset, then the overrides)."""
        from textkg.models.config import ModelConfig
        from textkg.models.presets import get_preset, preset_train_defaults
        from textkg.training.config import DataConfig, RunConfig, TrainConfig

        model_cfg = get_preset(self.model)
        if self.model_overrides:
            model_cfg = ModelConfig.from_dict({**model_cfg.to_dict(), **self.model_overrides})
        train = {**preset_train_defaults(self.model, private=self.private), **self.train, "seed": self.seed}
        try:
            return RunConfig(
                data=DataConfig(**{**self.data, "dataset": self.dataset}),
                model=model_cfg,
                train=TrainConfig(**train),
                privacy=self.privacy_config(),
                model_name=self.model,
            )
        except TypeError as exc:
            raise ConfigError(f"holder {self.name!r}: {exc}", field=f"holders.{self.name}") from None


#: What a cross-graph guarantee protects (:attr:`ExchangeConfig.unit`).
UNITS = ("entity", "statement")
#: The holder privacy modes a statement-level exchange accepts (DP-SGD on the holder's statements).
STATEMENT_MODES = ("full", "confidential")


@dataclass(frozen=True)
class ExchangeConfig:
    """The DP exchange between every pair of parties (:mod:`textkg.federated.cross_graph.procrustes`).

    Attributes:
        rounds: Rounds; in each, every pair exchanges once in each direction.
        target_epsilon: Each party's ε over all its planned releases; σ is calibrated to it
            (4.0 when neither it nor ``noise_multiplier`` is given).
        noise_multiplier: σ instead of a target (0: no privacy, labelled so).
        delta: δ of every party's guarantee.
        clip: C, the L2 bound of each released row.
        mix: λ: an aligned row becomes (1 − λ)·own + λ·translated.
        fine_tune_epochs: Local epochs after an update, before the validation decides.
        valid_max_triples: Validation statements the keep/roll-back decision ranks (0: all).
        reproducible_noise: A public seed for the noise (tests): NOT secret, labelled not DP.
        aligned_fraction: Use only this fraction of each intersection (a public hash of the ids, the
            same at both ends): FKGE's ablation of the gain against the overlap size. Each party
            subsamples its own items BEFORE the PSI, so nothing outside the sample is sent and a
            partner learns only the intersection of the samples.
        unit: What the guarantee protects. ``entity`` (default): one aligned entity's embedding; each
            release is a Gaussian mechanism on the rows (``target_epsilon`` / ``noise_multiplier``).
            ``statement``: one training statement of the sender; every holder trains with DP-SGD
            (its own ``privacy`` block, whose ``target_epsilon`` covers its pre-training and every
            fine-tuning epoch), a release is post-processing of its DP model and adds no noise, and
            the received rows only add a candidate to a slot that costs what ``alone``'s costs.
        method: The exchange method (:mod:`textkg.federated.cross_graph.methods`): ``procrustes`` (a
            Gaussian release of the sender's rows and a Procrustes map), ``ppat`` (FKGE's PPAT:
            PATE teachers at the receiver, a student and a linear generator at the sender; entity unit)
            or ``average`` (``procrustes``'s release; the receiver's rows become the running mean of its
            own and its partners' rows, each rotated into its space with its spread; ``mix`` unused).
        ppat: :class:`~textkg.federated.cross_graph.ppat.PPATConfig` (a mapping in a file); only with
            ``method: ppat``.
    """

    rounds: int = 1
    target_epsilon: float | None = None
    noise_multiplier: float | None = None
    delta: float = 1e-5
    clip: float = 1.0
    mix: float = 0.5
    fine_tune_epochs: int = 1
    valid_max_triples: int = 0
    reproducible_noise: int | None = None
    aligned_fraction: float = 1.0
    unit: str = "entity"
    method: str = "procrustes"
    ppat: PPATConfig = field(default_factory=PPATConfig)

    def __post_init__(self) -> None:
        self._check_method()
        checks = [
            ("rounds", isinstance(self.rounds, int) and self.rounds >= 1, "an integer >= 1"),
            ("delta", 0.0 < self.delta < 1.0, "in (0, 1)"),
            ("clip", self.clip > 0, "> 0"),
            ("mix", 0.0 <= self.mix <= 1.0, "in [0, 1]"),
            ("aligned_fraction", 0.0 < self.aligned_fraction <= 1.0, "in (0, 1]"),
            ("fine_tune_epochs", isinstance(self.fine_tune_epochs, int) and self.fine_tune_epochs >= 0, ">= 0"),
        ]
        for name, ok, want in checks:
            if not ok:
                raise ConfigError(f"exchange.{name} must be {want}, got {getattr(self, name)!r}", field=name)
        if self.unit not in UNITS:
            raise ConfigError(f"exchange.unit must be one of {', '.join(UNITS)}, got {self.unit!r}", field="unit")
        if self.unit == "statement":
            budget_keys = ("target_epsilon", "noise_multiplier", "reproducible_noise")
            given = [k for k in budget_keys if getattr(self, k) is not None]
            if given:
                raise ConfigError(
                    f"exchange.{given[0]} with exchange.unit statement: a release is post-processing of the "
                    "sender's DP-SGD model and adds no noise; give each holder's budget (and reproducible_noise) "
                    "in its own privacy block",
                    field=given[0],
                )
            return
        if self.target_epsilon is None and self.noise_multiplier is None:
            object.__setattr__(self, "target_epsilon", 4.0)
        if (self.target_epsilon is None) == (self.noise_multiplier is None):
            raise ConfigError("give exactly one of target_epsilon and noise_multiplier", field="exchange")
        if self.target_epsilon is not None and not self.target_epsilon > 0:
            raise ConfigError("exchange.target_epsilon must be > 0", field="target_epsilon")
        if self.noise_multiplier is not None and not self.noise_multiplier >= 0:
            raise ConfigError("exchange.noise_multiplier must be >= 0", field="noise_multiplier")

    def _check_method(self) -> None:
        """``method`` is registered; ``ppat`` is a PPATConfig (from a mapping), given only with ``method: ppat``."""
        try:
            check_exchange_method(self.method)
        except ConfigError as exc:
            raise ConfigError(f"exchange.method: {exc.message}", field="method") from None
        ppat = self.ppat
        if isinstance(ppat, dict):
            try:
                ppat = PPATConfig(**ppat)
            except TypeError as exc:
                raise ConfigError(f"exchange.ppat: {exc}", field="ppat") from None
            object.__setattr__(self, "ppat", ppat)
        elif not isinstance(ppat, PPATConfig):
            raise ConfigError(f"exchange.ppat must be a mapping, got {type(ppat).__name__}", field="ppat")
        if self.method != "ppat" and ppat != PPATConfig():
            raise ConfigError(f"exchange.ppat is for method ppat; method is {self.method!r}", field="ppat")
        if self.method == "average" and self.mix != 0.5:
            msg = (
                f"exchange.mix is not used by method average (its weight is the running mean 1/(j + 1) of the "
                f"j-th partner's rows in a round); got mix {self.mix!r}"
            )
            raise ConfigError(msg, field="mix")
        if self.method == "ppat" and self.unit != "entity":
            msg = (
                "exchange.method ppat needs exchange.unit entity: at the statement level a release is "
                "post-processing of DP-SGD, and PATE's votes would protect nothing more"
            )
            raise ConfigError(msg, field="method")

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class CrossGraphConfig:
    """Every holder and the exchange."""

    holders: tuple[HolderSpec, ...]
    exchange: ExchangeConfig = field(default_factory=ExchangeConfig)

    def to_dict(self) -> dict:
        return {"holders": [dataclasses.asdict(h) for h in self.holders], "exchange": self.exchange.to_dict()}

    @classmethod
    def from_dict(cls, raw: Any, *, source: str | Path | None = None, lines: dict | None = None) -> CrossGraphConfig:
        """Validate a parsed holders file; errors name the file, the holder's line and the field."""
        lines = lines or {}
        if not isinstance(raw, dict) or not isinstance(raw.get("holders"), list):
            raise ConfigError("expected a mapping with a 'holders' list", file=source, field="holders")
        unknown = set(raw) - {"holders", "exchange"}
        if unknown:
            raise ConfigError(f"unknown keys {sorted(unknown)}", file=source, field=sorted(unknown)[0])
        try:
            exchange = ExchangeConfig(**(raw.get("exchange") or {}))
        except TypeError as exc:
            raise ConfigError(f"exchange: {exc}", file=source, line=lines.get("exchange"), field="exchange") from None
        except ConfigError as exc:
            raise ConfigError(exc.message, file=source, line=lines.get("exchange"), field=exc.field) from None
        holders = []
        for i, entry in enumerate(raw["holders"]):
            line = lines.get(i)
            if not isinstance(entry, dict):
                raise ConfigError("a holder must be a mapping", field=f"holders[{i}]", file=source, line=line)
            for key in ("name", "dataset"):
                if not isinstance(entry.get(key), str) or not entry[key]:
                    msg = f"holder needs a '{key}' string"
                    raise ConfigError(msg, field=f"holders[{i}].{key}", file=source, line=line)
            check_name(entry["name"], field=f"holders[{i}].name", file=source, line=line)
            try:
                holders.append(HolderSpec(**entry))
            except TypeError as exc:
                msg = f"holder {entry['name']!r}: {exc}"
                raise ConfigError(msg, field=f"holders[{i}]", file=source, line=line) from None
            _check_holder_privacy(holders[-1], exchange, field=f"holders[{i}].privacy", file=source, line=line)
        names = [h.name for h in holders]
        if len(holders) < 2 or len(set(names)) != len(names):
            raise ConfigError("need at least 2 holders with distinct names", file=source, field="holders")
        return cls(tuple(holders), exchange)


def _check_holder_privacy(spec: HolderSpec, exchange: ExchangeConfig, *, field: str, file, line) -> None:
    """A holder's ``privacy`` must match ``exchange.unit``; its keys must make a valid PrivacyConfig."""
    if not isinstance(spec.privacy, dict):
        raise ConfigError("privacy must be a mapping", field=field, file=file, line=line)
    mode = spec.privacy.get("mode", "none")
    if exchange.unit == "entity" and spec.private:
        msg = (
            f"privacy mode {mode!r} (local DP-SGD) needs exchange.unit: statement; the entity-level exchange "
            "protects one aligned row and adds its own noise"
        )
        raise ConfigError(msg, field=field, file=file, line=line)
    if exchange.unit == "statement" and mode not in STATEMENT_MODES:
        msg = (
            f"exchange.unit statement needs every holder to train with DP-SGD: privacy.mode one of "
            f"{', '.join(STATEMENT_MODES)}, got {mode!r}"
        )
        raise ConfigError(msg, field=f"{field}.mode", file=file, line=line)
    if exchange.unit == "statement" and spec.privacy.get("target_epsilon") is None:
        msg = "exchange.unit statement needs privacy.target_epsilon: the holder's budget over all its DP-SGD steps"
        raise ConfigError(msg, field=f"{field}.target_epsilon", file=file, line=line)
    try:
        spec.privacy_config()
    except TypeError as exc:
        raise ConfigError(f"holder {spec.name!r}: {exc}", field=field, file=file, line=line) from None
    except ConfigError as exc:  # exc.field is "privacy.<key>"
        where = field.rsplit(".", 1)[0] + "." + (exc.field or "privacy")
        raise ConfigError(exc.message, field=where, file=file, line=line) from None


#: what a cross-graph federation writes at its start (``textkg_version``, settings, σ, the schedule)
RUN_RECORD = "cross_graph.json"
#: the holders' settings, as ``--resume`` reads them back
HOLDERS_RECORD = "holders.json"


def resume_holders(out_dir: str | Path) -> CrossGraphConfig:
    """The settings of a started cross-graph federation (``textkg federate --mode cross-graph --resume``).

    The folder is opened as every run folder is (:func:`textkg.pipeline.run_dir.open_record`): one
    made by another major version is refused before its holders file is read.
    """
    from textkg.pipeline.run_dir import open_record

    out = Path(out_dir)
    open_record(out, RUN_RECORD, what="a cross-graph run directory to resume")
    holders = out / HOLDERS_RECORD
    if not holders.is_file():
        raise ConfigError("cannot resume: not a cross-graph run directory", file=holders, field="resume")
    return load_holders(holders)


def load_holders(path: str | Path) -> CrossGraphConfig:
    """Read and validate a holders file (YAML or JSON)."""
    import yaml

    path = Path(path)
    if not path.is_file():
        raise ConfigError("no such holders file", file=path, field="holders")
    text = path.read_text(encoding="utf-8")
    try:
        raw = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
        lines = {} if path.suffix == ".json" else _holder_lines(yaml.compose(text))
    except (ValueError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot parse: {exc}", file=path, field="holders") from None
    return CrossGraphConfig.from_dict(raw, source=path, lines=lines)


def _holder_lines(node) -> dict:
    """``{i: line of holders[i], "exchange": line}`` (1-based) from a composed YAML document."""
    out: dict = {}
    if node is None or not hasattr(node, "value") or not isinstance(node.value, list):
        return out
    for key, value in node.value:
        if getattr(key, "value", None) == "holders" and isinstance(value.value, list):
            out.update({i: item.start_mark.line + 1 for i, item in enumerate(value.value)})
        elif getattr(key, "value", None) == "exchange":
            out["exchange"] = value.start_mark.line + 1
    return out
