"""One line per stage when nobody watches a terminal (CI, ``nohup``, a notebook's log).

Progress bars (tqdm) are for a terminal. When stderr is not one, a bar either prints nothing
for minutes or fills a log with carriage returns, so a run prints one timestamped line per
stage instead (graph built, texts encoded, epoch k/K with its loss and validation MRR,
evaluation), as PyKEEN and Lightning do. ``--no-progress`` silences both.

Work deep inside a stage (encoding tens of thousands of descriptions) reports ``n/N`` lines with
:func:`count` only inside :func:`reporting`, which a run opens around its stages: a library call
outside a run (a test, ``predict``, a notebook cell) prints nothing.
"""

from __future__ import annotations

import contextlib
import contextvars
import sys
import time
from collections.abc import Iterator

_START = time.monotonic()
_REPORTING: contextvars.ContextVar[bool] = contextvars.ContextVar("textkg_progress_reporting", default=False)


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


@contextlib.contextmanager
def reporting(progress: bool = True) -> Iterator[None]:
    """Within the block, :func:`count` prints its ``n/N`` lines (when :func:`log_lines` says so)."""
    token = _REPORTING.set(progress)
    try:
        yield
    finally:
        _REPORTING.reset(token)


def count(what: str, done: int, total: int) -> None:
    """Print ``[textkg +MM:SS] what done/total`` inside :func:`reporting` when stderr is not a terminal."""
    if _REPORTING.get():
        stage(f"{what} {done:,}/{total:,}")


class _NoBar:
    """What :func:`bar` gives when no bar is drawn: the calls a bar takes, doing nothing."""

    def update(self, n: int = 1) -> None:
        pass

    def set_postfix(self, *args: object, **kwargs: object) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self) -> _NoBar:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


def bar(total: int, *, progress: bool = True, **tqdm_kwargs: object):
    """A tqdm progress bar on a terminal; where :func:`log_lines` prints stage lines instead (or
    ``progress`` is false), a bar that draws nothing. The one place textkg makes a bar."""
    if not progress or log_lines(progress):
        return _NoBar()
    from tqdm.auto import tqdm

    return tqdm(total=total, **tqdm_kwargs)
