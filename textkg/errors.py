"""The one exception family for user errors.

Every error a user can fix (a malformed file, an unknown name, an impossible
option) is a :class:`TextKGError` whose message names the file, line and
field. The CLI prints it without a traceback and exits with status 2.
"""

from __future__ import annotations

from os import PathLike


class TextKGError(Exception):
    """A user-facing error naming where the problem is.

    Args:
        message: What is wrong, in words a user can act on.
        file: The file the problem is in, if any.
        line: 1-based line number in ``file``, if any.
        field: The column, key or option that is wrong, if any.
    """

    def __init__(
        self,
        message: str,
        *,
        file: str | PathLike[str] | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.message = message
        self.file = None if file is None else str(file)
        self.line = line
        self.field = field
        super().__init__(str(self))

    def __str__(self) -> str:
        where = []
        if self.file is not None:
            where.append(self.file if self.line is None else f"{self.file}:{self.line}")
        if self.field is not None:
            where.append(f"field '{self.field}'")
        prefix = ", ".join(where)
        return _printable(f"{prefix}: {self.message}" if prefix else self.message)


def _printable(text: str) -> str:
    """``text`` with every character a terminal would act on (escape sequences, a direction override, a line
    separator) written as its escape: a message quotes names from files that may be crafted (a run's config key
    ``"\x1b]0;...\x07"`` would retitle the user's terminal). Line breaks and tabs stay."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() or ch in "\n\t" else ascii(ch)[1:-1] for ch in text)


class DataError(TextKGError):
    """Malformed or inconsistent dataset files."""


class ConfigError(TextKGError):
    """An invalid option, config file entry or registry name."""


class PrivacyError(TextKGError):
    """A privacy budget or mechanism setting that cannot be honoured."""
