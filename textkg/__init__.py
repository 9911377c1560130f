"""textkg: privacy-preserving, text-augmented, inductive knowledge-graph embeddings.

Data flows one way: :mod:`textkg.data` → :mod:`textkg.encoders` → :mod:`textkg.models`
→ :mod:`textkg.training` (+ :mod:`textkg.privacy`) → :mod:`textkg.evaluation` → report.
"""

from __future__ import annotations

from textkg._version import __version__
from textkg.errors import ConfigError, DataError, PrivacyError, TextKGError

__all__ = ["__version__", "TextKGError", "DataError", "ConfigError", "PrivacyError", "load"]


def load(run_dir, *, dataset=None):
    """Load a trained run directory or a release bundle for prediction (see :mod:`textkg.predict`).

    ``dataset``: your copy of the dataset (a path). A bundle needs it unless it names a registered dataset:
    textkg never opens a path a bundle names (:class:`textkg.predict.Predictor`).
    """
    from textkg.predict import load_predictor

    return load_predictor(run_dir, dataset=dataset)
