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
        return f"{prefix}: {self.message}" if prefix else self.message


class DataError(TextKGError):
    """Malformed or inconsistent dataset files."""


class ConfigError(TextKGError):
    """An invalid option, config file entry or registry name."""


class PrivacyError(TextKGError):
    """A privacy budget or mechanism setting that cannot be honoured."""
