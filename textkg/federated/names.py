"""Names of holders and parties, checked before they become folder names.

A holder's name comes from a file the user may not have written (a holders file, a partition
file) and becomes a folder under ``--out`` (``DIR/<name>/checkpoint.pt``, the party's noise key
included). ``../x``, ``/tmp/x`` or ``a/b`` would put that folder outside ``--out``, so a name must
match :data:`NAME_PATTERN` before anything is created: a letter or digit first, then letters,
digits, ``.``, ``_`` or ``-``, at most 64 characters in all. No separator, no ``..`` as a whole
name, no leading dot, no control character (docs/security.md, "Cross-graph federation").
"""

from __future__ import annotations

import re
from os import PathLike

from textkg.errors import ConfigError

#: what a holder's or a party's name may be (it becomes one path component)
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def check_name(
    name: object, *, field: str, file: str | PathLike[str] | None = None, line: int | None = None, error=ConfigError
) -> str:
    """``name`` if it matches :data:`NAME_PATTERN`, else ``error`` (a TextKGError class) naming file, line and field."""
    if not isinstance(name, str) or NAME_PATTERN.fullmatch(name) is None:
        msg = (
            f"name {name!r} is not allowed: it becomes a folder under --out, so it must be 1-64 letters, digits, "
            "'.', '_' or '-', starting with a letter or digit"
        )
        raise error(msg, file=file, line=line, field=field)
    return name
