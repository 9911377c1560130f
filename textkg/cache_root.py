"""The textkg cache's root folder, read from ``$TEXTKG_CACHE_DIR``: one definition for every layer (datasets,
encoded features, adapted encoders), below all of them."""

from __future__ import annotations

import os
from pathlib import Path


def default_cache_dir() -> Path:
    """``$TEXTKG_CACHE_DIR`` or ``~/.cache/textkg``, absolute: a relative ``$TEXTKG_CACHE_DIR`` is read from the
    working folder once, here, so that a folder a run records in its ``config.json`` (its adapted encoder) is one a
    later ``predict`` or ``place`` run from elsewhere can open (a run names only absolute, trusted folders:
    :mod:`textkg.pipeline.run_files`)."""
    return Path(os.environ.get("TEXTKG_CACHE_DIR") or Path.home() / ".cache" / "textkg").absolute()


__all__ = ["default_cache_dir"]
