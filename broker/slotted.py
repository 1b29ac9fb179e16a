"""A base for plain slotted record classes: equality and repr from their ``__slots__``.

Used instead of ``@dataclass(slots=True)`` for the records every start-up defines (the log's
``BatchInfo``, ``Record`` and ``RecordStats``): a dataclass compiles its generated methods at import
(~3.5M instructions each), a cost every broker start pays (bench/startup_bench.py); a subclass of
:class:`Slotted` writes its ``__init__`` out and gets the rest here. Equality and repr are a
dataclass's: equal when of the same class with equal fields (unhashable), and
``Name(field=value, ...)``."""

from __future__ import annotations

from typing import Any


class Slotted:
    """Equality and repr over ``__slots__`` (the fields, in order); see the module docstring."""

    __slots__: tuple[str, ...] = ()

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in self.__slots__)

    __hash__: Any = None  # mutable, as a dataclass with eq

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"{self.__class__.__qualname__}({fields})"
