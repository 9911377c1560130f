"""A data holder on Flower is its own authority: its local settings, and the one thing a server may ask.

A Flower server (the ServerApp, whoever submits the run) may be the adversary (docs/security.md).
So everything that decides a holder's data and privacy comes from the holder's own node, never from
a message (issue 51 items 2 and 3):

* **the settings** (dataset path, model, hyper-parameters, privacy mode and budget, noise source,
  rounds and local epochs): the node's own settings file, the ``settings`` key of its
  ``--node-config`` (:data:`SETTINGS`, the format :func:`settings_dict` writes; ``textkg
  federate-app`` writes one into the app, and each holder keeps its own copy);
* **its state** (optimizer, sampler, epoch counter, privacy ledger, the secret key of its noise) and
  **resume**: the ``state-dir`` of its ``--node-config`` (:data:`STATE_DIR`). After every round the
  holder writes its state there before it replies, and a restarted node continues from its latest
  state: its ledger and round counter go on, never back;
* **its own statements file** (``--partition files``): ``data-file`` of its ``--node-config``.

The server's train message may carry the global parameters (ArrayRecord ``arrays``: exactly the
model's trained tensors, with their shapes) and the round number (ConfigRecord ``config`` with
Flower's ``server-round``) and nothing else (:func:`check_train_message`): any other record or key
(a folder, a seed, a dataset, a budget, the old ``textkg-settings``) is refused, and the node does
not train. The round must be the holder's next one; asked again for the round it trained last, with
the very parameters it was sent then, the holder sends the same reply again (a copy of a release it
already made: no new noise, no new step in its ledger); anything else is refused. Its report names
the digest of its own settings (:meth:`NodeSettings.digest`), which the server compares with its own.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from textkg.errors import ConfigError
from textkg.federated.config import FederatedConfig

#: ``node_config`` keys of a node's own configuration (``flower-supernode --node-config``)
SETTINGS, STATE_DIR = "settings", "state-dir"
#: what a train message may hold: its records, and the keys of its ConfigRecord
ARRAYS_RECORD, CONFIG_RECORD, ROUND_KEY = "arrays", "config", "server-round"
#: the largest settings file a node reads (bytes)
MAX_SETTINGS_BYTES = 1 << 20


# -- the settings file ---------------------------------------------------------------


def settings_dict(cfg, fed: FederatedConfig) -> dict:
    """textkg's settings of a federation as one JSON-ready dict (``textkg train``'s config + the federation).

    The ``engine`` is left out: it is how the server runs the federation, nothing a holder needs."""
    federated = {key: value for key, value in fed.to_dict().items() if key != "engine"}
    return {"config": cfg.to_dict(), "federated": federated}


def settings_from_dict(data: Any, *, source: str = "settings") -> tuple[Any, FederatedConfig]:
    """``(RunConfig, FederatedConfig)`` from :func:`settings_dict`'s dict."""
    from textkg.training.config import RunConfig

    if not isinstance(data, dict) or not isinstance(data.get("config"), dict):
        raise ConfigError("expected an object with 'config' and 'federated'", file=source)
    fed_data = data.get("federated")
    if not isinstance(fed_data, dict):
        raise ConfigError("expected an object with 'config' and 'federated'", file=source)
    names = {f.name for f in dataclasses.fields(FederatedConfig)}
    unknown = sorted(set(fed_data) - names)
    if unknown:
        raise ConfigError(f"unknown federated settings {', '.join(unknown)}", file=source, field="federated")
    cfg = RunConfig.from_dict(data["config"], source=source)
    fed = FederatedConfig(**fed_data)
    from textkg.federated.runner import check_settings

    check_settings(cfg, fed)
    return cfg, fed


def read_settings(path: Path) -> tuple[Any, FederatedConfig]:
    """Read a settings file written by ``textkg federate-app`` (at most :data:`MAX_SETTINGS_BYTES`)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError("no such settings file", file=path)
    if path.stat().st_size > MAX_SETTINGS_BYTES:
        raise ConfigError(f"a settings file larger than {MAX_SETTINGS_BYTES} bytes", file=path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise ConfigError(f"not valid JSON ({exc})", file=path) from None
    return settings_from_dict(data, source=str(path))


def settings_digest(cfg, fed: FederatedConfig) -> str:
    """SHA-256 of the settings as a federation runs them (``cfg`` after ``prepare_federation``)."""
    text = json.dumps(settings_dict(cfg, fed), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


# -- a node's own configuration -------------------------------------------------------


@dataclass(frozen=True)
class NodeSettings:
    """What one node decides for itself, all of it from its own machine.

    Attributes:
        cfg: ``textkg train``'s config as the holder reads it from its settings file.
        fed: The federation settings from the same file (rounds, local epochs, partition rule).
        partition: This node's ``partition-id``.
        state_dir: Where the holder keeps its state (PRIVATE: its noise key) and its last reply.
        num_partitions: ``num-partitions``, if the node was told (checked against the settings).
        data_file: The holder's own statements file (``--partition files``).
    """

    cfg: Any
    fed: FederatedConfig
    partition: int
    state_dir: Path
    num_partitions: int | None = None
    data_file: str | None = None


def node_settings(node_config, *, settings: tuple[Any, FederatedConfig] | None = None, state_dir=None) -> NodeSettings:
    """A node's :class:`NodeSettings` from its ``node_config`` (``flower-supernode --node-config``).

    Args:
        node_config: Flower's ``Context.node_config``: ``partition-id``, ``settings`` (a path),
            ``state-dir``, optionally ``num-partitions`` and ``data-file``.
        settings: ``(cfg, fed)`` given by the operator who runs every node in one process (the
            simulation engine), instead of a ``settings`` file.
        state_dir: The state folder given by that operator, instead of ``state-dir``.
    """
    from textkg.federated.grid import DATA_FILE, NUM_PARTITIONS, PARTITION_ID

    def entry(key: str, kind):
        value = node_config.get(key)
        if value is None or isinstance(value, bool) or not isinstance(value, kind):
            raise ConfigError(
                f"this node's --node-config needs {key} (a {kind.__name__}): a node takes its settings, data and "
                "state from its own configuration, never from the server",
                field=key,
            )
        return value

    k = entry(PARTITION_ID, int)
    if settings is None:
        settings = read_settings(Path(str(entry(SETTINGS, str))).expanduser())
    folder = Path(str(entry(STATE_DIR, str))).expanduser() if state_dir is None else Path(state_dir)
    num = node_config.get(NUM_PARTITIONS)
    data_file = node_config.get(DATA_FILE)
    return NodeSettings(
        settings[0],
        settings[1],
        int(k),
        folder,
        None if num is None else int(num),
        None if data_file is None else str(data_file),
    )


# -- what a server may send -----------------------------------------------------------


def check_train_message(content) -> int:
    """The round number of a train message's ``content``; :class:`ConfigError` if it holds anything else.

    Allowed: the ArrayRecord :data:`ARRAYS_RECORD` and the ConfigRecord :data:`CONFIG_RECORD` whose
    only key is Flower's ``server-round`` (an integer >= 1). Nothing a server sends decides where
    the holder's state lives, what it trains or how it is noised."""
    from flwr.app import ArrayRecord, ConfigRecord

    extra = sorted(set(content.keys()) - {ARRAYS_RECORD, CONFIG_RECORD})
    arrays, config = content.get(ARRAYS_RECORD), content.get(CONFIG_RECORD)
    if extra or not isinstance(arrays, ArrayRecord) or not isinstance(config, ConfigRecord):
        raise ConfigError(
            f"refused the server's message: records {sorted(content.keys())}; a node takes only "
            f"{ARRAYS_RECORD!r} (the global parameters) and {CONFIG_RECORD!r} (the round number)",
            field="message",
        )
    keys = sorted(set(config.keys()) - {ROUND_KEY})
    if keys:
        raise ConfigError(
            f"refused the server's message: it sets {', '.join(keys)}; a node takes only the parameters and "
            f"{ROUND_KEY!r}: its settings, data, privacy, noise and state come from its own --node-config",
            field="message",
        )
    n = config.get(ROUND_KEY)
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ConfigError(
            f"refused the server's message: {ROUND_KEY} must be an integer >= 1, got {n!r}", field=ROUND_KEY
        )
    return n


def check_arrays(sent: dict[str, torch.Tensor], expected: dict[str, torch.Tensor]) -> None:
    """The server's parameters must be exactly the model's trained tensors: same names, shapes, dtypes."""
    want = {k: (tuple(v.shape), v.dtype) for k, v in expected.items()}
    got = {k: (tuple(v.shape), v.dtype) for k, v in sent.items()}
    if want != got:
        wrong = sorted(k for k in set(want) | set(got) if want.get(k) != got.get(k))
        raise ConfigError(
            f"refused the server's parameters: {', '.join(wrong[:5])} are not the model's trained tensors",
            field=ARRAYS_RECORD,
        )


def arrays_digest(arrays: dict[str, torch.Tensor]) -> str:
    """SHA-256 of a parameter dict (names, dtypes, shapes, bytes): what a node was sent in a round."""
    h = hashlib.sha256()
    for name in sorted(arrays):
        t = arrays[name].detach().cpu().contiguous()
        h.update(f"{name}\0{t.dtype}\0{tuple(t.shape)}\0".encode())
        h.update(t.numpy().tobytes())
    return h.hexdigest()


# -- the holder's state on its node ----------------------------------------------------


def encode_state(digest: str, holder_state: dict, reply: dict) -> bytes:
    """A holder's file after a round (PRIVATE): its settings digest, its state, and the reply it sent."""
    buffer = io.BytesIO()
    torch.save({"settings_sha256": digest, "holder": holder_state, "reply": reply}, buffer)
    return buffer.getvalue()


def decode_state(blob: bytes, digest: str, *, file: Path) -> dict:
    """The dict :func:`encode_state` wrote (tensors and plain values only), after checking its settings."""
    try:
        saved = torch.load(io.BytesIO(blob), map_location="cpu", weights_only=True)
    except Exception as exc:
        raise ConfigError(f"not a holder state file ({type(exc).__name__})", file=file) from None
    if not isinstance(saved, dict) or set(saved) != {"settings_sha256", "holder", "reply"}:
        raise ConfigError("not a holder state file (written by an older textkg?)", file=file)
    if saved["settings_sha256"] != digest:
        raise ConfigError(
            "this holder's state was written with other settings: its ledger belongs to another federation "
            "(give this node a new state-dir for a new federation; never edit the settings of a started one)",
            file=file,
            field=STATE_DIR,
        )
    return saved
