"""Reports of finished runs: PNG plots (see :mod:`textkg.report.plots`).

Public API::

    from textkg.report import write_run_plots, write_comparison_plots
    write_run_plots("runs/dp")                 # -> runs/dp/plots/*.png
    from textkg.report.plots import plot_frontier, plot_roc, plot_epsilon_vs_step, plot_valid_mrr
"""

from textkg.report.plots import (
    plot_epsilon_vs_step,
    plot_frontier,
    plot_roc,
    plot_valid_mrr,
    write_comparison_plots,
    write_run_plots,
)

__all__ = [
    "plot_epsilon_vs_step",
    "plot_frontier",
    "plot_roc",
    "plot_valid_mrr",
    "write_comparison_plots",
    "write_run_plots",
]
