"""One torch thread for the federated equality tests: a multi-threaded CPU reduction may sum in another order."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import torch

T = TypeVar("T")


def one_thread(fn: Callable[[], T]) -> T:
    """``fn()`` with torch limited to one thread, then the previous thread count restored."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return fn()
    finally:
        torch.set_num_threads(threads)
