"""Which textkg versions can read a run directory.

textkg follows semantic versioning (https://semver.org, item 8): a change of
the major version may change what a run directory holds (parameter names,
config keys), so a run made with another major version is refused by
``evaluate``, ``predict`` and :func:`textkg.load` with a message that says how
to proceed, rather than loaded into something it was not made for. Every
``config.json`` records ``textkg_version``.
"""

from __future__ import annotations

from pathlib import Path

from textkg._version import __version__
from textkg.errors import ConfigError

#: The key of config.json and metrics.json that records the version a run was made with.
VERSION_KEY = "textkg_version"


def major(version: str) -> int | None:
    """The major number of ``"MAJOR.MINOR.PATCH[...]"``; ``None`` if it does not start with one."""
    head = str(version).split(".", 1)[0]
    return int(head) if head.isdigit() else None


def check_run_version(config: dict, source: str | Path) -> None:
    """Refuse a run directory whose ``config.json`` was written by another major version.

    Args:
        config: The parsed ``config.json``.
        source: Its path, for the message.

    Raises:
        ConfigError: No ``textkg_version``, one that is not a version, or a
            major version other than this one's.
    """
    made_with = config.get(VERSION_KEY)
    if made_with is None:
        raise ConfigError(
            f"records no {VERSION_KEY}, so the textkg version that made this run is unknown; "
            "re-train it with this version",
            file=source,
            field=VERSION_KEY,
        )
    if major(made_with) is None:
        raise ConfigError(
            f"{VERSION_KEY} {made_with!r} is not a version (MAJOR.MINOR.PATCH)", file=source, field=VERSION_KEY
        )
    if major(made_with) != major(__version__):
        raise ConfigError(
            f"this run was made with textkg {made_with}; this is textkg {__version__}, a "
            f"different major version, whose saved models are not compatible. Re-train the run, "
            f"or read it with `pip install 'textkg=={made_with}'`",
            file=source,
            field=VERSION_KEY,
        )
