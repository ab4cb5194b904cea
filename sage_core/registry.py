"""One shape for every registry (the library's methods, model families, forwards and cache strategies; the app's
panels): a process-wide table by name, the built-in entries fixed, others added and removed by name, an unknown
name refused in one sentence that lists the choices."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Generic, TypeVar

from .errors import ConfigError

Entry = TypeVar("Entry")


class Registry(Mapping[str, Entry], Generic[Entry]):
    """Entries by name (`key(entry)`); `kind` names one in sentences ("forward", "cache strategy")."""

    def __init__(self, kind: str, key: Callable[[Entry], str], taken: str = "") -> None:
        self.kind = kind
        self.key = key
        self.taken = taken or f"a {kind} named {{name!r}} is registered already"
        self._entries: dict[str, Entry] = {}
        self._built_in: set[str] = set()

    def add(self, entry: Entry, *, built_in: bool = False) -> Entry:
        name = self.key(entry)
        if name in self._entries:
            raise ConfigError(self.taken.format(name=name))
        self._entries[name] = entry
        if built_in:
            self._built_in.add(name)
        return entry

    def remove(self, name: str) -> None:
        """Remove an entry `add` added (the built-in ones stay)."""
        if name in self._built_in:
            raise ConfigError(f"{name!r} is a built-in {self.kind}")
        self._entries.pop(name, None)

    def named(self, name: object) -> Entry:
        """The entry of this name, or one sentence naming the choices."""
        entry = self._entries.get(name) if isinstance(name, str) else None
        if entry is None:
            raise ConfigError(f"unknown {self.kind} {name!r}; choose one of {', '.join(self._entries)}")
        return entry

    def built_in(self, name: str) -> bool:
        return name in self._built_in

    def __getitem__(self, name: str) -> Entry:
        return self._entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)


__all__ = ["Registry"]
