"""Helpers of the adversary tests: copy a run to tamper with, and a pickle bomb."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

TINY = Path(__file__).resolve().parents[1] / "fixtures" / "tiny_blp"


def copy_run(run_dir: Path, dest: Path) -> Path:
    shutil.copytree(run_dir, dest)
    return dest


class Bomb:
    """Unpickling this object creates ``marker``: proof that a loader ran the attacker's code."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def write_pickle_bomb(path: Path, marker: Path) -> Path:
    """A file that runs ``touch marker`` when unpickled (``torch.load(weights_only=False)``)."""
    import torch

    torch.save({"state_dict": Bomb(marker)}, path)
    return path
