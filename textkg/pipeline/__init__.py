"""A run: train, evaluate, report, and open a finished run directory.

The layer above training and evaluation (docs/architecture.md): data → encoders →
models → training / privacy → evaluation → **pipeline** → cli. Runners (release,
federated, distributed) sit beside it.
"""

from textkg.pipeline.job import run
from textkg.pipeline.prepared import Prepared, prepare
from textkg.pipeline.report import evaluate_run

__all__ = ["Prepared", "evaluate_run", "prepare", "run"]
