"""One registry pattern for every family of named parts (issue 30).

Encoders, interactions, fusions, presets, datasets, file formats, attacks and accountants are
each one :class:`Registry`: a name maps to an object (a class, a function, a spec or a config),
with the same rules everywhere, as PyKEEN's ``class_resolver`` keeps them:

* **one duplicate rule**: registering a name that is already taken raises
  :class:`DuplicateNameError` (a :class:`~textkg.errors.ConfigError`), even for the same object,
  unless the caller opts in with ``replace=True``;
* an unknown name raises :class:`~textkg.errors.ConfigError` whose message lists the allowed
  choices from the registry itself, never a hand-kept list.

Each family keeps its public functions (``register_preset``, ``get_interaction``,
``list_datasets``, ...) as thin wrappers that add what is particular to it. A family of classes
builds its objects with :meth:`Registry.make`, which takes what PyKEEN's ``Resolver.make`` takes: a
registered name, a class or an instance, plus keyword arguments, with one rule for each case; a
family whose entries are ``"module:Class"`` strings (imported only when used) passes ``load``.

This module sits in the base layer (it imports only :mod:`textkg.errors`), so every layer,
the self-contained :mod:`textkg.privacy` and :mod:`textkg.encoders` included, may use it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

from textkg.errors import ConfigError

T = TypeVar("T")


class DuplicateNameError(ConfigError):
    """A name that is already registered was registered again without ``replace=True``."""


class Registry(Generic[T]):
    """Named objects of one family.

    Args:
        family: What the objects are, in words (``"interaction"``, ``"model preset"``); used in
            error messages.
        field: The config field an error names (default: ``family``).
        sort: List names sorted (default) or in the order they were registered.
        load: Turns an entry into the class :meth:`make` builds (e.g. imports ``"module:Class"``);
            default: the entry is the class.
    """

    def __init__(
        self, family: str, *, field: str | None = None, sort: bool = True, load: Callable[[T], Any] | None = None
    ) -> None:
        self.family = family
        self.field = family if field is None else field
        self.sort = sort
        self.load = load
        self._items: dict[str, T] = {}

    def register(self, name: str, obj: T, *, replace: bool = False) -> T:
        """Make ``obj`` available as ``name`` and return it.

        Raises:
            DuplicateNameError: ``name`` is taken and ``replace`` is false.
            ConfigError: ``name`` is not a non-empty string.
        """
        if not isinstance(name, str) or not name:
            raise ConfigError(f"a {self.family} name must be a non-empty string, got {name!r}", field=self.field)
        if name in self._items and not replace:
            raise DuplicateNameError(
                f"{self.family} name {name!r} is already registered (pass replace=True to replace it)",
                field=self.field,
            )
        self._items[name] = obj
        return obj

    def decorator(self, name: str, *, replace: bool = False) -> Callable[[T], T]:
        """``@registry.decorator(name)``: register the decorated object as ``name``."""

        def decorate(obj: T) -> T:
            return self.register(name, obj, replace=replace)

        return decorate

    def get(self, name: str) -> T:
        """The object registered as ``name``.

        Raises:
            ConfigError: ``name`` is not registered; the message lists :meth:`names`.
        """
        try:
            return self._items[name]
        except (KeyError, TypeError):  # TypeError: an unhashable "name"
            raise ConfigError(self.unknown_message(name), field=self.field) from None

    def resolve_class(self, query: Any, base: type) -> type:
        """The class of ``query``: a registered name (loaded with ``load``) or a subclass of ``base``.

        Raises:
            ConfigError: an unknown name (listing :meth:`names`), or neither a name nor a subclass.
        """
        obj: Any = query
        if isinstance(query, str):
            obj = self.get(query)
            obj = obj if self.load is None else self.load(obj)
        if not (isinstance(obj, type) and issubclass(obj, base)):
            raise ConfigError(f"expected {self._a()} name, class or instance, got {query!r}", field=self.field)
        return obj

    def make(self, query: Any, *args: Any, base: type, kwargs_field: str | None = None, **kwargs: Any) -> Any:
        """Build an object of the family from a name, a class or an instance (PyKEEN's ``Resolver.make``).

        Args:
            query: A registered name, a subclass of ``base``, or an instance of ``base`` (returned as
                is; then ``args`` and ``kwargs`` must be empty).
            *args: Positional constructor arguments (e.g. a fusion's width).
            base: The family's base class.
            kwargs_field: The config field an argument error names (default: the registry's field).
            **kwargs: Constructor arguments.

        Raises:
            ConfigError: an unknown name (listing the registered names), something that is neither
                a name, a class nor an instance, arguments given with an instance, or arguments the
                class does not take.
        """
        field = self.field if kwargs_field is None else kwargs_field
        if isinstance(query, base):
            if args or kwargs:
                raise ConfigError(f"arguments cannot be applied to {self._a()} instance", field=field)
            return query
        cls = self.resolve_class(query, base)
        try:
            return cls(*args, **kwargs)
        except TypeError as exc:
            name = query if isinstance(query, str) else getattr(cls, "name", cls.__name__)
            raise ConfigError(f"bad arguments for {self.family} {name!r}: {exc}", field=field) from None

    def _a(self) -> str:
        return ("an " if self.family[:1] in "aeiou" else "a ") + self.family

    def unknown_message(self, name: object) -> str:
        """``unknown <family> 'name'; choose one of: <names>``, for wrappers that add to it."""
        return f"unknown {self.family} {name!r}; choose one of: {', '.join(self.names())}"

    def names(self) -> list[str]:
        """The registered names, sorted (or in registration order with ``sort=False``)."""
        return sorted(self._items) if self.sort else list(self._items)

    def values(self) -> list[T]:
        """The registered objects, in registration order (where the first match wins)."""
        return list(self._items.values())

    def copy(self) -> Registry[T]:
        """An independent registry with the same entries (tests register into a copy)."""
        out: Registry[T] = Registry(self.family, field=self.field, sort=self.sort, load=self.load)
        out._items = dict(self._items)
        return out

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"Registry({self.family!r}: {', '.join(self.names())})"
