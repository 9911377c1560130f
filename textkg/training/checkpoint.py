"""Atomic checkpoints that carry the privacy ledger.

A checkpoint holds the model, the optimiser, every random generator, the
step/epoch counters, the model-selection state and the accountant's ledger.
Files are written to a temporary name and renamed, so a crash (even
``kill -9``) leaves either the previous checkpoint or the new one, never a
torn file. Nothing computed after the last checkpoint has been released
(training losses of private batches are never printed), so resuming from it
and replaying the same steps reproduces the uninterrupted run's ε exactly.
"""

from __future__ import annotations

import json
import math
import os
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch

from textkg.errors import ConfigError

CHECKPOINT = "checkpoint.pt"
BEST_MODEL = "best_model.pt"


def _umask() -> int:
    mask = os.umask(0)  # the only way to read it; set back at once
    os.umask(mask)
    return mask


def file_mode(*, private: bool = False) -> int:
    """The mode a new file gets: ``0o666`` less the process umask (what ``open()`` would give), or
    ``0o600`` for a ``private`` file (one that holds secret randomness, docs/security.md).
    :func:`tempfile.mkstemp` always makes ``0o600``, so every atomic write sets this mode itself."""
    return 0o600 if private else 0o666 & ~_umask()


def dir_mode() -> int:
    """``0o777`` less the umask: the mode ``mkdir`` gives (:func:`tempfile.mkdtemp` makes ``0o700``)."""
    return 0o777 & ~_umask()


def _temp_beside(path: Path, *, private: bool) -> tuple[int, str]:
    """``(fd, name)`` of a new temporary file in ``path``'s folder, with :func:`file_mode`."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.fchmod(fd, file_mode(private=private))
    return fd, tmp


def atomic_write_bytes(path: Path, data: bytes, *, private: bool = False) -> None:
    """Write ``data`` to ``path`` atomically; the file follows the umask unless ``private`` (``0o600``)."""
    path = Path(path)
    fd, tmp = _temp_beside(path, private=private)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def folder_in_run(root: str | Path, *parts: str, files: Iterable[str] = ()) -> Path:
    """``root/parts...``, checked so that a write into it stays in ``root``: a run folder may come from
    anyone (docs/security.md), and a link in it (``plots -> ~/.ssh``, ``plots/valid_mrr.png -> ~/.bashrc``)
    would make textkg write where the link points. Each part that exists must be a real folder, not a
    symbolic link (``lstat``, never followed), and none of ``files`` in it may be a link or a folder;
    a part that does not exist yet is not made here. Check before writing anything, then write with
    :func:`atomic_write_bytes` (a temporary file renamed over the name: a link is replaced, never followed).

    Raises:
        ConfigError: naming the link or the non-folder (the CLI exits 2).
    """
    path = Path(root)
    for part in parts:
        path = path / part
        _refuse_link(path, folder=True)
    for name in files:
        _refuse_link(path / name, folder=False)
    return path


def _refuse_link(path: Path, *, folder: bool) -> None:
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISLNK(mode):
        raise ConfigError(
            "is a symbolic link: textkg never writes through a link in a run folder (remove it and run again)",
            file=path,
        )
    if folder and not stat.S_ISDIR(mode):
        raise ConfigError("is not a folder", file=path)
    if not folder and stat.S_ISDIR(mode):
        raise ConfigError("is a folder, not a file textkg writes", file=path)


def strict_json(obj: Any) -> Any:
    """``obj`` with every NaN or ±inf float replaced by ``None``: JSON has no such numbers, and
    strict parsers (JavaScript's ``JSON.parse``) reject files that contain them."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: strict_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [strict_json(v) for v in obj]
    return obj


def atomic_write_json(path: Path, obj: Any, *, private: bool = False) -> None:
    """Write ``obj`` as strict JSON (undefined numbers become ``null``), atomically (:func:`atomic_write_bytes`)."""
    text = json.dumps(strict_json(obj), indent=2, sort_keys=False, allow_nan=False)
    atomic_write_bytes(path, (text + "\n").encode(), private=private)


def atomic_torch_save(path: Path, obj: Any, *, private: bool = False) -> None:
    """``torch.save`` to ``path`` atomically; the file follows the umask unless ``private`` (``0o600``:
    a checkpoint, which holds every random generator's state, the noise generator's included)."""
    path = Path(path)
    fd, tmp = _temp_beside(path, private=private)
    os.close(fd)
    try:
        torch.save(obj, tmp)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def load(path: Path) -> dict:
    """Read a ``.pt`` file of tensors (a checkpoint, ``best_model.pt``) WITHOUT running code.

    ``torch.load(weights_only=True)`` unpickles only tensors, containers and primitives; a
    pickle that names any other callable (``os.system`` in a crafted ``best_model.pt``) is
    refused before it is called. Runs and release bundles are made to be shared, so a file
    that needs more is an error naming the file (exit 2), never a fallback to full unpickling.
    """
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # the weights-only refusal (an UnpicklingError), a truncated or foreign file
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(
            f"refusing to load this file: it is not a plain tensor file that loads without running code "
            f"({first[:200]})",
            file=path,
        ) from None


#: a released bundle's weights (https://github.com/huggingface/safetensors: tensors only, no code)
BEST_MODEL_SAFETENSORS = "best_model.safetensors"


def weights_file(run_dir: Path) -> Path | None:
    """The weights of a run or bundle: ``best_model.safetensors`` (bundles) or ``best_model.pt``."""
    for name in (BEST_MODEL_SAFETENSORS, BEST_MODEL):
        if (Path(run_dir) / name).is_file():
            return Path(run_dir) / name
    return None


def load_weights(run_dir: Path) -> dict:
    """The model's state dict from :func:`weights_file`, read without running code."""
    path = weights_file(run_dir)
    if path is None:
        raise ConfigError(
            f"no {BEST_MODEL} or {BEST_MODEL_SAFETENSORS} (training did not finish an epoch)", file=run_dir
        )
    if path.suffix == ".safetensors":
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        try:
            return load_file(str(path), device="cpu")
        except (SafetensorError, OSError, ValueError) as exc:
            raise ConfigError(f"not a readable safetensors file ({exc})", file=path) from None
    return load(path)


def load_run_weights(model: torch.nn.Module, run_dir: Path) -> None:
    """:func:`load_weights` into ``model``; weights whose names or shapes are not the model's (a run whose
    ``config.json`` was edited, or crafted, after training) exit 2 naming both files, not a traceback."""
    state = load_weights(run_dir)
    try:
        model.load_state_dict(state)
    except (RuntimeError, KeyError, TypeError) as exc:
        first = str(exc).strip().splitlines()[:3]
        raise ConfigError(
            "the weights do not fit the model config.json builds (" + " ".join(first)[:300] + ")",
            file=weights_file(Path(run_dir)) or Path(run_dir),
        ) from None


def save_safetensors(path: Path, state: dict) -> None:
    """Write a state dict of tensors as safetensors, atomically (contiguous, unshared copies)."""
    from safetensors.torch import save

    tensors = {k: v.detach().cpu().contiguous().clone() for k, v in state.items()}
    atomic_write_bytes(path, save(tensors))
