"""The house's shape, checked (issue 30): namespaced packages, one-way imports, no circles."""

from __future__ import annotations

import importlib.util


def test_no_generic_top_level_packages():
    """`encoders` and `privacy` live inside textkg: a name that generic would clash with PyPI's `encoders`."""
    import textkg.encoders
    import textkg.privacy

    assert textkg.privacy.__name__ == "textkg.privacy" and textkg.encoders.__name__ == "textkg.encoders"
    for name in ("encoders", "privacy"):
        assert importlib.util.find_spec(name) is None, f"a top-level '{name}' package is installed"
