"""Commands added by later work (audit, sweep); registered here to keep main.py small."""

from __future__ import annotations

HANDLERS: dict = {}


def add_parsers(sub) -> None:
    """Add the extra sub-commands' parsers."""
    return None
