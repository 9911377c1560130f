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
import tempfile
from pathlib import Path
from typing import Any

import torch

CHECKPOINT = "checkpoint.pt"
BEST_MODEL = "best_model.pt"


def atomic_write_bytes(path: Path, data: bytes) -> None:
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
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


def atomic_write_json(path: Path, obj: Any) -> None:
    """Write ``obj`` as strict JSON (undefined numbers become ``null``), atomically."""
    text = json.dumps(strict_json(obj), indent=2, sort_keys=False, allow_nan=False)
    atomic_write_bytes(path, (text + "\n").encode())


def atomic_torch_save(path: Path, obj: Any) -> None:
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        torch.save(obj, tmp)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def load(path: Path) -> dict:
    return torch.load(path, map_location="cpu", weights_only=False)
