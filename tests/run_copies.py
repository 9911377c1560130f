"""Copies of a module-scoped run folder for tests that tamper with it (crafted-run tests).

Large files are hard-linked rather than copied; a test that changes a file replaces it (:func:`rewrite`), so it
never writes through a hard link into the shared run.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

#: files hard-linked, not copied (weights and checkpoints)
LARGE = ("model.safetensors", "checkpoint.pt", "best_model.pt")


def link_or_copy(src: str, dst: str) -> None:
    """Large files are hard-linked (a test that changes one unlinks it first: :func:`rewrite`)."""
    if Path(src).name in LARGE:
        try:
            os.link(src, dst)
            return
        except OSError:
            pass
    shutil.copy2(src, dst)


def copy_run(run: Path, tmp_path: Path, name: str = "run") -> Path:
    """``tmp_path / name``: a copy of ``run`` to tamper with."""
    dest = tmp_path / name
    shutil.copytree(run, dest, copy_function=link_or_copy)
    return dest


def rewrite(path: Path, data: bytes | str) -> None:
    """Replace a file, never writing through a hard link into the shared run."""
    path.unlink()
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))


def edit_json(path: Path, edit) -> None:
    """Rewrite a JSON file with ``edit(data)`` applied."""
    data = json.loads(path.read_text(encoding="utf-8"))
    edit(data)
    rewrite(path, json.dumps(data))
