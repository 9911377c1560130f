"""The version, in one place (pyproject.toml reads it; semantic versioning, https://semver.org)."""

__version__ = "0.2.0"
