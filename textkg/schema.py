"""One validator for every JSON that comes from outside the process (issue 51, build-item 4).

A peer's message, the choices a run's ``metrics.json`` makes that a command acts on, a data holder's
saved state: each is read with :func:`load_json` (bounded in bytes and nesting depth before it is
parsed, strict: no ``NaN`` or ``Infinity``) and checked with :func:`validate` against a small schema
written with the classes below, before any of it is used. A schema says which keys an object holds
(required, optional, nothing else unless it says so), each value's JSON type, a number's range
(finite always), a string's length or allowed values, a list's length, and how many bytes the whole
value may take. A value that breaks it raises :class:`SchemaError` (a :class:`~textkg.errors.ConfigError`)
naming the file and the JSON path of the field (``test.k_shot_selection.link_vote.weight``,
``meta.privacy.ledger[3].steps``); the CLI prints it and exits 2.

It sits in the base layer (it imports only :mod:`textkg.errors`), so every layer may use it.

Example::

    CHOICE = Obj({"chosen": Str(choices=("model", "combined")), "weight": Num(low=0, high=1e6)},
                 required=("chosen",))
    validate(json_value, CHOICE, file=path, path="test.placement_selection")
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from os import PathLike
from typing import Any, Union

from textkg.errors import ConfigError

#: the deepest nesting any JSON textkg reads from outside may have (textkg writes at most ~6 levels)
MAX_DEPTH = 32
#: the default bound of a string value, in characters
MAX_STR = 4096
#: the default bound of a list, in items
MAX_ITEMS = 100_000

Where = Union[str, "PathLike[str]", None]


class SchemaError(ConfigError):
    """A JSON value that its schema does not allow (too deep, too large, a wrong type, key or range)."""


@dataclass(frozen=True)
class Num:
    """A JSON number (never ``true``/``false``), finite, in ``[low, high]`` (an end open when ``*_open``).

    Attributes:
        integer: only integers (``3``, not ``3.0``).
        nullable: ``null`` is allowed too.
    """

    low: float = -math.inf
    high: float = math.inf
    low_open: bool = False
    high_open: bool = False
    integer: bool = False
    nullable: bool = False

    def describe(self) -> str:
        kind = "an integer" if self.integer else "a finite number"
        lo = "" if self.low == -math.inf else ("(" if self.low_open else "[") + f"{self.low:g}"
        hi = "" if self.high == math.inf else f"{self.high:g}" + (")" if self.high_open else "]")
        span = f" in {lo or '(-inf'}, {hi or 'inf)'}" if lo or hi else ""
        return kind + span + (" or null" if self.nullable else "")


@dataclass(frozen=True)
class Str:
    """A JSON string of at most ``max_len`` characters, one of ``choices`` when given."""

    max_len: int = MAX_STR
    choices: tuple[str, ...] | None = None
    nullable: bool = False


@dataclass(frozen=True)
class Bool:
    """``true`` or ``false``."""

    nullable: bool = False


@dataclass(frozen=True)
class List:
    """A JSON list of at most ``max_len`` items, each matching ``item``."""

    item: Spec
    max_len: int = MAX_ITEMS
    nullable: bool = False


@dataclass(frozen=True)
class Obj:
    """A JSON object: ``fields`` maps each known key to its schema; ``required`` must be present.

    Attributes:
        extra: The schema of any other key's value; ``None`` (the default): no other key.
        max_keys: The most keys it may hold (matters with ``extra``).
        max_bytes: The most bytes the whole object may take (its JSON, counted as it is checked).
    """

    fields: Mapping[str, Spec] = field(default_factory=dict)
    required: tuple[str, ...] = ()
    extra: Spec | None = None
    max_keys: int = 1000
    max_bytes: int | None = None
    nullable: bool = False


@dataclass(frozen=True)
class AnyJSON:
    """Any JSON value within the depth, string and list bounds (descriptive text a peer may send)."""

    max_str: int = MAX_STR
    max_len: int = 1000
    nullable: bool = True


@dataclass(frozen=True)
class OneOf:
    """The first of ``options`` that the value matches (e.g. a number or a string)."""

    options: tuple[Spec, ...]
    nullable: bool = False


Spec = Num | Str | Bool | List | Obj | AnyJSON | OneOf


class _Walk:
    """One validation: the file, the depth bound, and the bytes counted so far (byte limits are totals of it)."""

    def __init__(self, file: Where, max_depth: int) -> None:
        self.file, self.max_depth, self.bytes = file, max_depth, 0

    def fail(self, path: str, message: str) -> SchemaError:
        path = path if len(path) <= 200 else path[:90] + " ... " + path[-90:]
        return SchemaError(message, file=self.file, field=path or "(top level)")

    def count(self, path: str, n: int, limit: tuple[int, int] | None) -> None:
        """Add ``n`` bytes; ``limit``: ``(the total self.bytes may reach, the bound stated)``."""
        self.bytes += n
        if limit is not None and self.bytes > limit[0]:
            raise self.fail(path, f"larger than {limit[1]} bytes")

    def check(self, value: Any, spec: Spec, path: str, depth: int, limit: tuple[int, int] | None) -> None:
        if depth > self.max_depth:
            raise self.fail(path, f"nested more than {self.max_depth} levels deep")
        self.count(path, 8, limit)
        if value is None:
            if not spec.nullable:
                raise self.fail(path, f"must be {_expected(spec)}, got null")
            return
        if isinstance(spec, OneOf):
            for option in spec.options:
                try:
                    _Walk(self.file, self.max_depth - depth).check(value, option, path, 0, None)
                except SchemaError:
                    continue
                self.check(value, option, path, depth, limit)  # counted once, by the option that matched
                self.bytes -= 8
                return
            raise self.fail(path, f"must be {_expected(spec)}, got {_show(value)}")
        if isinstance(spec, Num):
            _check_number(self, value, spec, path)
        elif isinstance(spec, Str):
            if not isinstance(value, str):
                raise self.fail(path, f"must be a string, got {_show(value)}")
            if len(value) > spec.max_len:
                raise self.fail(path, f"a string of at most {spec.max_len} characters, got {len(value)}")
            if spec.choices is not None and value not in spec.choices:
                raise self.fail(path, f"must be one of {', '.join(spec.choices)}, got {_show(value)}")
            self.count(path, len(value), limit)
        elif isinstance(spec, Bool):
            if not isinstance(value, bool):
                raise self.fail(path, f"must be true or false, got {_show(value)}")
        elif isinstance(spec, List):
            if not isinstance(value, list):
                raise self.fail(path, f"must be a list, got {_show(value)}")
            if len(value) > spec.max_len:
                raise self.fail(path, f"a list of at most {spec.max_len} items, got {len(value)}")
            for i, item in enumerate(value):
                self.check(item, spec.item, f"{path}[{i}]", depth + 1, limit)
        elif isinstance(spec, Obj):
            self._object(value, spec, path, depth, limit)
        else:
            self._any(value, spec, path, depth, limit)

    def _object(self, value: Any, spec: Obj, path: str, depth: int, limit: tuple[int, int] | None) -> None:
        if not isinstance(value, dict):
            raise self.fail(path, f"must be an object, got {_show(value)}")
        if len(value) > spec.max_keys:
            raise self.fail(path, f"an object of at most {spec.max_keys} keys, got {len(value)}")
        missing = [k for k in spec.required if k not in value]
        if missing:
            raise self.fail(_join(path, missing[0]), "missing (required)")
        if spec.max_bytes is not None:  # limits are totals of self.bytes: this object's own may end sooner
            own = (self.bytes + spec.max_bytes, spec.max_bytes)
            limit = own if limit is None or own[0] < limit[0] else limit
        for key, item in value.items():
            where = _join(path, str(key))
            item_spec = spec.fields.get(key, spec.extra) if isinstance(key, str) else None
            if item_spec is None:
                known = ", ".join(spec.fields) or "none"
                raise self.fail(where, f"unknown key (known: {known})")
            self.count(where, len(key), limit)
            self.check(item, item_spec, where, depth + 1, limit)

    def _any(self, value: Any, spec: AnyJSON, path: str, depth: int, limit: tuple[int, int] | None) -> None:
        if isinstance(value, str):
            if len(value) > spec.max_str:
                raise self.fail(path, f"a string of at most {spec.max_str} characters, got {len(value)}")
            self.count(path, len(value), limit)
        elif isinstance(value, (bool, int, float)):
            if isinstance(value, float) and not math.isfinite(value):
                raise self.fail(path, f"must be finite, got {value!r}")
        elif isinstance(value, (list, dict)):
            if len(value) > spec.max_len:
                raise self.fail(path, f"at most {spec.max_len} items, got {len(value)}")
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for key, item in items:
                if isinstance(value, dict) and not isinstance(key, str):
                    raise self.fail(path, "object keys must be strings")
                where = _join(path, str(key)) if isinstance(value, dict) else f"{path}[{key}]"
                self.count(where, len(str(key)), limit)
                self.check(item, spec, where, depth + 1, limit)
        else:
            raise self.fail(path, f"not a JSON value: {type(value).__name__}")


def _check_number(walk: _Walk, value: Any, spec: Num, path: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (spec.integer and not isinstance(value, int)):
        raise walk.fail(path, f"must be {spec.describe()}, got {_show(value)}")
    try:
        number = float(value)
    except OverflowError:  # an integer beyond any float
        raise walk.fail(path, f"must be {spec.describe()}, got an integer of {len(str(value))} digits") from None
    ok = math.isfinite(number)
    ok = ok and (spec.low < number if spec.low_open else spec.low <= number)
    ok = ok and (number < spec.high if spec.high_open else number <= spec.high)
    if not ok:
        raise walk.fail(path, f"must be {spec.describe()}, got {_show(value)}")


def _expected(spec: Spec) -> str:
    if isinstance(spec, Num):
        return spec.describe()
    if isinstance(spec, OneOf):
        return " or ".join(_expected(o) for o in spec.options)
    return {Str: "a string", Bool: "true or false", List: "a list", Obj: "an object"}.get(type(spec), "a JSON value")


def _show(value: Any) -> str:
    if isinstance(value, (dict, list)):
        return f"{'an object' if isinstance(value, dict) else 'a list'} of {len(value)} items"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _join(path: str, key: str) -> str:
    if not key.isprintable():  # a crafted key's escape sequences never reach the terminal that prints the error
        key = repr(key)[1:-1]
    key = key if len(key) <= 60 else key[:57] + "..."
    return f"{path}.{key}" if path else key


def validate(
    value: Any,
    spec: Spec,
    *,
    file: Where = None,
    path: str = "",
    max_depth: int = MAX_DEPTH,
    max_bytes: int | None = None,
) -> Any:
    """Check ``value`` against ``spec``; return it unchanged.

    Args:
        value: A parsed JSON value (from :func:`load_json`, a message header, ...).
        spec: Its schema.
        file: What the error names as the file (a path, or e.g. ``"message from beta"``).
        path: The JSON path of ``value`` itself, prefixed to every field the error names.
        max_depth: The deepest nesting below ``value``.
        max_bytes: The most bytes ``value`` may take (its strings, keys and 8 per scalar or container).

    Raises:
        SchemaError: naming ``file`` and the field's JSON path.
    """
    _Walk(file, max_depth).check(value, spec, path, 0, None if max_bytes is None else (max_bytes, max_bytes))
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict:
    """An object's pairs as a dict, refusing a key given twice: the parser would keep the last silently, so a
    crafted ``{"weight": 0.3, "weight": 0}`` would read as another value than a reader who stops at the first
    sees."""
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        twice = next(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]
        raise ValueError(f"the key {twice!r} is given twice in one object")
    return out


def load_json(
    raw: bytes | str,
    spec: Spec | None = None,
    *,
    file: Where = None,
    path: str = "",
    max_bytes: int = 64 * 1024 * 1024,
    max_depth: int = MAX_DEPTH,
) -> Any:
    """Parse untrusted JSON text, bounded before it is parsed, and check it against ``spec`` (if given).

    The size is checked before parsing; a nesting deeper than Python's parser goes is refused as its
    ``RecursionError``, and any deeper than ``max_depth`` by :func:`validate` right after, before
    anything recursive reads it; ``NaN``, ``Infinity``, invalid UTF-8 and a key given twice in one object are refused.

    Raises:
        SchemaError: larger than ``max_bytes``, nested deeper than ``max_depth``, not JSON, or not
            what ``spec`` allows; naming ``file`` (and the line, for a syntax error) and the field.
    """
    data = raw.encode("utf-8") if isinstance(raw, str) else bytes(raw)
    if len(data) > max_bytes:
        raise SchemaError(f"larger than {max_bytes} bytes ({len(data)})", file=file, field=path or None)
    try:
        value = json.loads(data.decode("utf-8"), parse_constant=_no_constant, object_pairs_hook=_unique_keys)
    except UnicodeDecodeError:
        raise SchemaError("not valid UTF-8", file=file) from None
    except json.JSONDecodeError as exc:
        raise SchemaError(f"not valid JSON ({exc.msg})", file=file, line=exc.lineno) from None
    except RecursionError:  # a crafted file of deeply nested brackets
        raise SchemaError(f"JSON nested too deeply (at most {max_depth} levels)", file=file) from None
    except ValueError as exc:  # NaN, Infinity
        raise SchemaError(f"not valid JSON ({exc})", file=file) from None
    return validate(
        value,
        AnyJSON(max_str=max_bytes, max_len=max_bytes) if spec is None else spec,
        file=file,
        path=path,
        max_depth=max_depth,
    )


__all__ = [
    "MAX_DEPTH",
    "AnyJSON",
    "Bool",
    "List",
    "Num",
    "Obj",
    "OneOf",
    "SchemaError",
    "Spec",
    "Str",
    "load_json",
    "validate",
]
