"""Reading tab-separated text files with errors that name file, line and field.

Files are decoded as UTF-8 in one go (fast); only when decoding fails is the
offending line and column located. Blank lines are skipped but still counted,
so reported line numbers match what an editor shows.

Every text a data file reader parses comes through :func:`read_text`, which bounds it
(docs/security.md): a file may hold at most :func:`max_file_bytes` bytes (default 2 GiB,
``$TEXTKG_MAX_FILE_BYTES``) and a line at most :func:`max_line_bytes` (default 1 MiB,
``$TEXTKG_MAX_LINE_BYTES``), so that a hostile file (one 64 MB N-Triples literal) is refused
in a second rather than parsed for minutes. Only a regular file is read (no FIFO, no device).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from textkg.errors import DataError

MAX_FILE_ENV = "TEXTKG_MAX_FILE_BYTES"
MAX_LINE_ENV = "TEXTKG_MAX_LINE_BYTES"
DEFAULT_MAX_FILE_BYTES = 2 << 30
DEFAULT_MAX_LINE_BYTES = 1 << 20


def _limit(env: str, default: int) -> int:
    value = os.environ.get(env)
    if value is None:
        return default
    try:
        limit = int(value)
    except ValueError:
        limit = 0
    if limit < 1:
        raise DataError(f"${env} must be a positive number of bytes, got {value!r}", field=env)
    return limit


def max_file_bytes() -> int:
    """The largest data file read, in bytes (``$TEXTKG_MAX_FILE_BYTES``, default 2 GiB)."""
    return _limit(MAX_FILE_ENV, DEFAULT_MAX_FILE_BYTES)


def max_line_bytes() -> int:
    """The longest line of a line-based data file, in bytes (``$TEXTKG_MAX_LINE_BYTES``, default 1 MiB)."""
    return _limit(MAX_LINE_ENV, DEFAULT_MAX_LINE_BYTES)


def _check_lines(raw: bytes, path: Path, limit: int) -> None:
    """Refuse a line longer than ``limit`` bytes (linear time: newline offsets through NumPy)."""
    if len(raw) <= limit:
        return
    ends = np.flatnonzero(np.frombuffer(raw, dtype=np.uint8) == 10)
    starts = np.concatenate(([0], ends + 1))
    lengths = np.concatenate((ends, [len(raw)])) - starts
    too_long = np.flatnonzero(lengths > limit)
    if too_long.size:
        line = int(too_long[0]) + 1
        raise DataError(
            f"line is {int(lengths[too_long[0]]):,} bytes, over the limit of {limit:,} (${MAX_LINE_ENV} raises it)",
            file=path,
            line=line,
        )


def read_bytes(path: str | Path, *, line_limit: bool = True) -> bytes:
    """A regular file's bytes, within :func:`max_file_bytes` (and :func:`max_line_bytes` per line).

    Raises:
        DataError: missing, not a regular file, too large, or a line too long.
    """
    path = Path(path)
    try:
        info = path.stat()
    except FileNotFoundError:
        raise DataError("file not found", file=path) from None
    if not stat.S_ISREG(info.st_mode):
        raise DataError("not a regular file", file=path)
    limit = max_file_bytes()
    if info.st_size > limit:
        raise DataError(
            f"file is {info.st_size:,} bytes, over the limit of {limit:,} (${MAX_FILE_ENV} raises it)", file=path
        )
    with path.open("rb") as fh:
        raw = fh.read(limit + 1)
    if len(raw) > limit:  # grew since stat
        raise DataError(f"file is over the limit of {limit:,} bytes (${MAX_FILE_ENV} raises it)", file=path)
    if line_limit:
        _check_lines(raw, path, max_line_bytes())
    return raw


def read_text(path: str | Path, fields: Sequence[str] | None = None, *, line_limit: bool = True) -> str:
    """The whole file as text, or a :class:`DataError` naming the first bad byte.

    Args:
        path: File to read.
        fields: Column names, used to name the field holding a non-UTF-8 byte.
        line_limit: Bound each line's length (off for formats whose documents may be one line:
            RDF/XML, JSON-LD).

    Raises:
        DataError: the file is missing, not a regular file, over the size limits, or is not valid UTF-8.
    """
    path = Path(path)
    raw = read_bytes(path, line_limit=line_limit)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line_start = raw.rfind(b"\n", 0, exc.start) + 1
        line = raw.count(b"\n", 0, exc.start) + 1
        column = raw.count(b"\t", line_start, exc.start)
        field = fields[column] if fields and column < len(fields) else f"column {column + 1}"
        raise DataError(f"not valid UTF-8 (byte 0x{raw[exc.start]:02x})", file=path, line=line, field=field) from None


def iter_rows(
    path: str | Path, fields: Sequence[str], *, rest_in_last: bool = False
) -> Iterator[tuple[int, list[str]]]:
    """Yield ``(line_number, columns)`` for each non-blank line.

    Args:
        path: A tab-separated file.
        fields: Expected column names; their count is the expected column count.
        rest_in_last: When true, the last column takes the rest of the line,
            tabs included (used for free text).

    Raises:
        DataError: missing file, bad UTF-8, wrong column count, or an empty
            column (the message names the file, line and field).
    """
    text = read_text(path, fields)
    n = len(fields)
    expected = " ".join(f"<{f}>" for f in fields).replace("> <", ">TAB<")
    for i, line in enumerate(text.split("\n"), start=1):
        if line.endswith("\r"):
            line = line[:-1]
        if not line.strip():
            continue
        parts = line.split("\t", n - 1) if rest_in_last else line.split("\t")
        if len(parts) < n and rest_in_last:
            raise DataError(
                f"missing {fields[len(parts)]}: expected {n} tab-separated columns {expected}",
                file=path,
                line=i,
                field=fields[len(parts)],
            )
        if len(parts) != n:
            field = fields[len(parts)] if len(parts) < n else f"column {n + 1}"
            raise DataError(
                f"expected {n} tab-separated columns {expected}, got {len(parts)}", file=path, line=i, field=field
            )
        for name, value in zip(fields, parts, strict=True):
            if not value.strip():
                raise DataError("empty value", file=path, line=i, field=name)
        yield i, parts


def read_triples(path: str | Path) -> tuple[list[tuple[str, str, str]], list[int]]:
    """Triples of a ``head<TAB>relation<TAB>tail`` file and their line numbers.

    Raises:
        DataError: see :func:`iter_rows`; also a triple repeated within the
            file (the line of the repeat is named).
    """
    triples: list[tuple[str, str, str]] = []
    lines: list[int] = []
    first_seen: dict[tuple[str, str, str], int] = {}
    for i, (h, r, t) in iter_rows(path, ("head", "relation", "tail")):
        triple = (h, r, t)
        previous = first_seen.setdefault(triple, i)
        if previous != i:
            raise DataError(f"duplicate triple (first on line {previous})", file=path, line=i)
        triples.append(triple)
        lines.append(i)
    return triples, lines


def read_id_text(
    path: str | Path, *, id_field: str = "id", text_field: str = "text"
) -> tuple[dict[str, str], dict[str, int]]:
    """An ``id<TAB>text`` file as ``({id: text}, {id: line})``.

    The text is the rest of the line after the first tab (tabs inside it are
    kept). Surrounding whitespace is stripped.

    Raises:
        DataError: see :func:`iter_rows`; also an id listed twice.
    """
    texts: dict[str, str] = {}
    lines: dict[str, int] = {}
    for i, (key, text) in iter_rows(path, (id_field, text_field), rest_in_last=True):
        if key in lines:
            raise DataError(f"'{key}' is listed twice (first on line {lines[key]})", file=path, line=i, field=id_field)
        texts[key] = text.strip()
        lines[key] = i
    return texts, lines


def read_id_list(path: str | Path) -> list[tuple[int, str]]:
    """A one-id-per-line file as ``[(line, id)]``."""
    return [(i, parts[0].strip()) for i, parts in iter_rows(path, ("id",))]
