"""Reports of finished runs: PNG plots (see :mod:`textkg.report.plots`).

Public API::

    from textkg.report import write_run_plots, write_comparison_plots
    write_run_plots("runs/dp")                 # -> runs/dp/plots/*.png
    from textkg.report.plots import plot_frontier, plot_roc, plot_epsilon_vs_step, plot_valid_mrr

The plots need matplotlib, an extra (``pip install 'textkg[plots]'``): :func:`require_plots` says so
as a user error before a command starts; the names above are imported on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

from textkg.errors import ConfigError

__all__ = [
    "plot_epsilon_vs_step",
    "plot_frontier",
    "plot_roc",
    "plot_valid_mrr",
    "require_plots",
    "write_comparison_plots",
    "write_run_plots",
]


def require_plots(what: str) -> None:
    """Refuse (exit 2) ``what`` when matplotlib, which draws its plots, is not installed."""
    try:
        importlib.import_module("matplotlib")
    except ImportError:
        raise ConfigError(
            f"{what} draws its plots with matplotlib, which is not installed: pip install 'textkg[plots]'",
            field="plots",
        ) from None


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("textkg.report.plots"), name)
    raise AttributeError(f"module 'textkg.report' has no attribute {name!r}")
