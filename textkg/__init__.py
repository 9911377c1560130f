"""textkg: privacy-preserving, text-augmented, inductive knowledge-graph embeddings.

Data flows one way: :mod:`textkg.data` → :mod:`textkg.encoders` → :mod:`textkg.models`
→ :mod:`textkg.training` (+ :mod:`textkg.privacy`) → :mod:`textkg.evaluation` → report.
"""

from __future__ import annotations

from textkg._version import __version__
from textkg.errors import ConfigError, DataError, PrivacyError, TextKGError

__all__ = ["__version__", "TextKGError", "DataError", "ConfigError", "PrivacyError", "load"]


def load(run_dir):
    """Load a trained run directory for prediction (see :mod:`textkg.predict`)."""
    from textkg.predict import load_predictor

    return load_predictor(run_dir)
