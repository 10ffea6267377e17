"""Immutable value classes the per-version code makes several times per event (a verdict, the
evidence view, the facts the policy reads): a class that sets its fields once in a plain
`__init__`, with equality, hash and repr over the fields it names in `FIELDS`.

Why not `@dataclass(frozen=True)`: the dataclass decorator writes `__init__` at run time, so it
stays interpreted even in a module mypyc compiles, and a frozen one sets each field through
`object.__setattr__`: about 1.3 µs per instance against 0.07 for a compiled `__init__`, some
eleven instances per event (docs/BENCHMARKS.md, "Issue 26: value classes compiled (stop 44)").
Fields are `Final` (mypy refuses an assignment after `__init__`).
"""

from __future__ import annotations

from typing import ClassVar


class Value:
    """Equality, hash and repr over `FIELDS`, the fields that say what the value is."""

    FIELDS: ClassVar[tuple[str, ...]] = ()

    def _values(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self.FIELDS)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, Value)
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        pairs = zip(self.FIELDS, self._values(), strict=True)
        shown = ", ".join(f"{name}={value!r}" for name, value in pairs)
        return f"{type(self).__name__}({shown})"
