"""Per-round checkpoints of a federation, and ``--resume`` from them, on both engines that write them.

After every round the server writes ``checkpoint.pt`` (PRIVATE, never
released): the round, the settings, the global trained parameters, the
history, and client-level DP's noise key and Flower ledger. Where the holders'
own states go depends on the engine:

* **in process** (:mod:`textkg.federated.runner`): every holder is in the
  server's process, and ``checkpoint.pt`` holds their states too (optimizer,
  sampler, epoch counter, privacy ledger and the secret key of its noise);
* **Flower's simulation engine** (:mod:`textkg.federated.simulation`) and the
  deployment engine: a holder's state is its own (:mod:`textkg.federated.node`).
  Each holder writes it, before it replies, to a file of its own in the
  ``state-dir`` its node's configuration names:
  ``<state-dir>/<name>/holder-round-<r>.pt`` (PRIVATE; its settings digest, its
  state and the reply it sent). The simulation engine names ``clients/`` of the
  run's folder (``run_simulation`` in flwr 1.42 cannot continue a run: every
  call registers new nodes with empty ``Context.state``). A restarted node
  continues from its latest file, whatever the server says: its ledger and
  round counter never go back. ``--resume`` starts a new simulation from
  ``checkpoint.pt``'s global parameters; a holder that had already trained the
  checkpoint's next round (the crash came between its reply and the server's
  checkpoint) is sent the very parameters it got then, and sends its saved
  reply again (no new noise, no new step). The server never receives a
  holder's state (it would carry the holder's noise key).

A holder writes round r + 1 only after the server has sent round r + 1, that
is after ``checkpoint.pt`` of round r is written, so keeping a holder's last
two rounds always keeps the one ``checkpoint.pt`` needs.
"""

from __future__ import annotations

import re
from pathlib import Path

from textkg.errors import ConfigError
from textkg.federated.names import check_name

#: A checkpoint from before a federation setting existed holds its default.
FEDERATED_DEFAULTS = {"engine": "inprocess", "upload_top_k": None, "noise_decay": None}
_HOLDER_FILE = re.compile(r"holder-round-(\d+)\.pt")


def check_resumable(out_dir: Path) -> None:
    """Raise :class:`ConfigError` unless ``out_dir`` has a round's checkpoint and no final metrics."""
    from textkg.training.checkpoint import CHECKPOINT

    if not (out_dir / CHECKPOINT).is_file():
        raise ConfigError("cannot resume: no checkpoint.pt yet (no round has finished)", file=out_dir)
    if (out_dir / "metrics.json").exists():
        raise ConfigError("cannot resume: this federation has finished (metrics.json exists)", file=out_dir)


def load_checkpoint(out_dir: Path, cfg, fed) -> dict:
    """``checkpoint.pt`` of ``out_dir``, after checking it was written with these settings.

    Args:
        cfg: The run config as the federation runs it (``train.epochs`` = R × E).
        fed: The federation settings.
    """
    from textkg.training import checkpoint as ckpt

    saved = ckpt.load(out_dir / ckpt.CHECKPOINT)
    for key, now, default in (("config", cfg.to_dict(), {}), ("federated", fed.to_dict(), FEDERATED_DEFAULTS)):
        saved[key] = {**default, **saved[key]}
        if saved[key] != now:
            changed = sorted(k for k in set(now) | set(saved[key]) if now.get(k) != saved[key].get(k))
            raise ConfigError(
                f"checkpoint was written with other settings ({', '.join(changed)})", file=out_dir, field=key
            )
    return saved


def holder_state_path(holder_dir: Path, name: str, rounds: int) -> Path:
    """The file of holder ``name``'s state after ``rounds`` rounds (its node's ``state-dir``; PRIVATE)."""
    return Path(holder_dir) / check_name(name, field="holder") / f"holder-round-{rounds}.pt"


def save_holder_state(holder_dir: Path, name: str, rounds: int, payload: bytes) -> None:
    """Write a holder's state after ``rounds`` rounds (atomically) and drop its rounds before ``rounds - 1``."""
    from textkg.training.checkpoint import atomic_write_bytes

    path = holder_state_path(holder_dir, name, rounds)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, payload, private=True)  # PRIVATE: the holder's noise generator and data
    for old in path.parent.iterdir():
        match = _HOLDER_FILE.fullmatch(old.name)
        if match and int(match.group(1)) < rounds - 1:
            old.unlink(missing_ok=True)


def latest_holder_round(holder_dir: Path, name: str) -> int:
    """The last round holder ``name`` wrote a state for in ``holder_dir`` (0: none yet)."""
    folder = Path(holder_dir) / check_name(name, field="holder")
    if not folder.is_dir():
        return 0
    rounds = [int(m.group(1)) for p in folder.iterdir() if (m := _HOLDER_FILE.fullmatch(p.name))]
    return max(rounds, default=0)


def load_holder_state(holder_dir: Path, name: str, rounds: int) -> bytes:
    """The bytes :func:`save_holder_state` wrote for ``rounds``; :class:`ConfigError` if there are none."""
    path = holder_state_path(holder_dir, name, rounds)
    if not path.is_file():
        raise ConfigError(f"cannot resume: holder {name!r} has no state of round {rounds}", file=path)
    return path.read_bytes()
