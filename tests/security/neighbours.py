"""What the attack tests here compare between neighbouring datasets (one private statement apart)."""

from __future__ import annotations

import shutil
from pathlib import Path


def neighbour_copy(fixture: Path, dest: Path, *, append: tuple[str, str] | None = None, remove=()) -> Path:
    """A copy of the dataset folder ``fixture`` at ``dest``; ``append``: ``(file, line)`` to add one
    statement to a file of it; ``remove``: files (relative paths) to delete from the copy."""
    shutil.copytree(fixture, dest)
    for name in remove:
        (dest / name).unlink()
    if append is not None:
        name, line = append
        with open(dest / name, "a", encoding="utf-8") as fh:
            fh.write(line.rstrip("\n") + "\n")
    return dest


def shape_tree(obj):
    """The keys of ``obj`` all the way down (values dropped, list lengths kept)."""
    if isinstance(obj, dict):
        return {k: shape_tree(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [shape_tree(v) for v in obj]
    return type(obj).__name__ if obj is not None else None


def message_view(content) -> dict:
    """A Flower message's content as the receiver sees it: array shapes and dtypes, metric and config values."""
    return {
        "arrays": {n: {k: (tuple(a.shape), a.dtype) for k, a in r.items()} for n, r in content.array_records.items()},
        "metrics": {n: dict(r) for n, r in content.metric_records.items()},
        "configs": {n: {k: str(v) for k, v in r.items()} for n, r in content.config_records.items()},
    }
