"""The settings of a federation (``textkg federate``'s own flags), validated at construction."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from textkg.errors import ConfigError
from textkg.federated.client_dp import DEFAULT_CLIENT_DELTA
from textkg.federated.partition import SCHEMES

#: every holder in this process, or Flower's simulation engine with the holders in Ray actors (no Flower
#: import here: the CLI's parser reads it). ``ray`` was called ``simulation`` until issue 41, a word the
#: privacy label uses for "not DP"; the old name is still accepted (the CLI prints a notice).
ENGINES = ("inprocess", "ray")
#: old engine name → its name now
DEPRECATED_ENGINES = {"simulation": "ray"}

#: Server aggregations by name.
AGGREGATIONS = ("fedavg", "row")


@dataclass(frozen=True)
class FederatedConfig:
    """How the federation runs.

    Attributes:
        partition: A scheme of :data:`textkg.federated.partition.SCHEMES`.
        clients: K for ``random`` / ``relation`` (``None``: from the scheme).
        rounds: Federated rounds R.
        local_epochs: Epochs each holder trains per round E.
        partition_file: The TSV of the ``column`` scheme.
        aggregation: ``fedavg`` (default: Flower's FedAvg over whole tensors) or
            ``row`` (:class:`textkg.federated.strategy.RowAwareFedAvg`: a table
            row is averaged over the holders that changed it; no better on
            ``hpo-small`` over 3 seeds, so not the default).
        client_noise_multiplier: σ of client-level DP-FedAvg
            (:mod:`textkg.federated.client_dp`); ``None``: no client-level DP
            unless ``client_target_epsilon`` is set.
        client_target_epsilon: Calibrate σ so that R rounds give this ε.
        client_clip: C, the L2 bound of each holder's whole update.
        client_delta: δ of the client-level guarantee.
        engine: ``inprocess`` (default: every holder in this process, one after
            another; ``checkpoint.pt`` and ``--resume``) or ``ray``
            (Flower's simulation engine: the deployment apps, holders in Ray
            actors; needs ``textkg[ray]``). Same outputs. ``simulation``, its
            name before issue 41, is read as ``ray``.
        upload_top_k: ``None`` (default): every holder uploads every trained
            tensor. K: it uploads only the K structural-table rows that moved
            most in the round, plus every other tensor whole, and the server
            averages each row over the holders that uploaded it
            (:mod:`textkg.federated.topk`; DP-Flames' selection). Under
            record-level DP the choice is post-processing (no extra ε);
            without DP nothing is claimed. Not with client-level DP.
        noise_decay: ``None`` (default): a constant σ. γ in (0, 1]: under
            record-level DP, each holder's σ is σ_0 · γ^r in round r = 0, 1, …
            (:class:`textkg.privacy.schedule.GeometricNoiseSchedule`), with σ_0
            calibrated so that the ledger of all rounds meets ``--target-epsilon``.
    """

    partition: str = "random"
    clients: int | None = 3
    rounds: int = 3
    local_epochs: int = 1
    partition_file: str | None = None
    aggregation: str = "fedavg"
    client_noise_multiplier: float | None = None
    client_target_epsilon: float | None = None
    client_clip: float = 1.0
    client_delta: float = DEFAULT_CLIENT_DELTA
    engine: str = "inprocess"
    upload_top_k: int | None = None
    noise_decay: float | None = None

    @property
    def client_dp(self) -> bool:
        """Whether the server applies client-level DP-FedAvg."""
        return self.client_noise_multiplier is not None or self.client_target_epsilon is not None

    def __post_init__(self) -> None:
        if self.client_noise_multiplier is not None and self.client_target_epsilon is not None:
            raise ConfigError(
                "give --client-noise-multiplier or --client-target-epsilon, not both", field="client_target_epsilon"
            )
        for name in ("client_noise_multiplier", "client_target_epsilon", "client_clip"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, (int, float)) and value > 0 and value < float("inf")):
                raise ConfigError(f"must be a positive number, got {value!r}", field=name.replace("_", "-"))
        if not 0 < self.client_delta < 1:
            raise ConfigError(f"must be in (0, 1), got {self.client_delta!r}", field="client-delta")
        if self.client_dp and self.aggregation != "fedavg":
            raise ConfigError(
                "client-level DP averages whole updates with equal weights (DP-FedAvg): use --aggregation fedavg",
                field="aggregation",
            )
        if self.aggregation not in AGGREGATIONS:
            raise ConfigError(
                f"unknown aggregation {self.aggregation!r}; expected one of {', '.join(AGGREGATIONS)}",
                field="aggregation",
            )
        if self.engine in DEPRECATED_ENGINES:  # run folders written before the rename resume as before
            object.__setattr__(self, "engine", DEPRECATED_ENGINES[self.engine])
        if self.engine not in ENGINES:
            raise ConfigError(f"unknown engine {self.engine!r}; expected one of {', '.join(ENGINES)}", field="engine")
        if self.partition not in SCHEMES:
            raise ConfigError(
                f"unknown partition {self.partition!r}; expected one of {', '.join(SCHEMES)}", field="partition"
            )
        for name in ("rounds", "local_epochs", "upload_top_k"):
            value = getattr(self, name)
            if name == "upload_top_k" and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"must be an integer >= 1, got {value!r}", field=name.replace("_", "-"))
        if self.upload_top_k is not None and self.client_dp:
            raise ConfigError(
                "client-level DP clips and noises whole updates: --upload-top-k is not supported with it",
                field="upload-top-k",
            )
        decay = self.noise_decay
        if decay is not None and (isinstance(decay, bool) or not isinstance(decay, (int, float)) or not 0 < decay <= 1):
            raise ConfigError(f"must be a number in (0, 1], got {decay!r}", field="noise-decay")

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


#: what a federation records beside its config.json: ``settings`` (the :class:`FederatedConfig`) and more
FEDERATED_RECORD = "federated.json"


def resume_settings(run_dir: Path) -> tuple[Any, FederatedConfig]:
    """``(RunConfig, FederatedConfig)`` of a started federation (``textkg federate --resume``).

    The folder is opened as every run folder is (:func:`textkg.pipeline.run_dir.open_run`): a
    federation made by another major version is refused before anything else is read, and the
    files its config names are checked (docs/security.md).

    Raises:
        ConfigError: not a started federation, another major version, or malformed settings,
            naming the file.
    """
    from textkg.pipeline.run_dir import CONFIG, open_run

    if not (Path(run_dir) / CONFIG).is_file():
        raise ConfigError(f"cannot resume: no {CONFIG} (was the federation started?)", file=Path(run_dir) / CONFIG)
    opened = open_run(run_dir)
    record_path = Path(run_dir) / FEDERATED_RECORD
    record = opened.read(FEDERATED_RECORD)
    if record is None:
        raise ConfigError(f"cannot resume: no {FEDERATED_RECORD} (was the federation started?)", file=record_path)
    settings = record.get("settings")
    if not isinstance(settings, dict):
        raise ConfigError("cannot resume: no settings (written by an older textkg)", file=record_path)
    names = {f.name for f in dataclasses.fields(FederatedConfig)}
    try:
        fed = FederatedConfig(**{k: v for k, v in settings.items() if k in names})
    except TypeError as exc:
        raise ConfigError(f"malformed {FEDERATED_RECORD} ({exc})", file=record_path) from None
    return opened.config, fed


def holder_names(fed: FederatedConfig) -> list[str] | None:
    """The holders' names when the settings alone name them (``None`` for ``column``: the file does)."""
    from textkg.federated.partition import HPO_SOURCES

    if fed.partition == "source":
        return list(HPO_SOURCES)
    if fed.partition == "column" or fed.clients is None:
        return None
    return [f"client-{k}" for k in range(fed.clients)]
