"""One line per stage when nobody watches a terminal (CI, ``nohup``, a notebook's log).

Progress bars (tqdm) are for a terminal. When stderr is not one, a bar either prints nothing
for minutes or fills a log with carriage returns, so a run prints one timestamped line per
stage instead (graph built, texts encoded, epoch k/K with its loss and validation MRR,
evaluation), as PyKEEN and Lightning do. ``--no-progress`` silences both.
"""

from __future__ import annotations

import sys
import time

_START = time.monotonic()


def log_lines(progress: bool = True) -> bool:
    """True when this run should print stage lines: progress wanted and stderr not a terminal."""
    if not progress:
        return False
    isatty = getattr(sys.stderr, "isatty", None)
    return not (callable(isatty) and isatty())


def stage(message: str, *, progress: bool = True) -> None:
    """Print ``[textkg +MM:SS] message`` to stderr when :func:`log_lines` says so."""
    if log_lines(progress):
        elapsed = int(time.monotonic() - _START)
        print(f"[textkg +{elapsed // 60:02d}:{elapsed % 60:02d}] {message}", file=sys.stderr, flush=True)
