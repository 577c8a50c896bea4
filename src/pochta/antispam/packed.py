"""A decided letter's largest fields in the form the worker's answer carries them.

A worker that decided a letter sends its verdict back to the server process
(:func:`pochta.mailbox.intake.for_the_server`), which unpickles it under its GIL: the server
is the process that saturates first. Three fields are most of that answer's reading and the
server reads them only sometimes: the verdict's features (when a recipient's own words re-run
the model: ``Scanner.for_owner``), the letter's tokens and their hashes (the same, and when
verdicts teach the learned words). Here each is one string or one ``bytes`` object, which
pickle reads whole (no object a feature, a token or a hash), and the container is made on
first use, once, with exactly the values packed.

:class:`Row` is a read-only mapping of feature names to floats (float64: what a feature is);
:class:`Tokens` and :class:`Hashes` are read-only sequences of str and of unsigned 64-bit
ints. Each compares equal to the plain dict or tuple of its values. :func:`row`,
:func:`tokens` and :func:`hashes` pack a plain value, or return it as it is when it cannot be
packed exactly (a name or token empty or holding the separator, a feature not a float, a hash
outside 0..2**64-1).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, TypeVar, overload

T = TypeVar("T")
SEPARATOR = "\0"
"""Joins names and tokens (no feature name holds it; a token that does is not packed)."""
_FLOAT = frozenset((float,))  # the one type a packed row's values have (not a subclass)


class Row(Mapping[str, float]):
    """Feature names and float64 values, read into a dict on first use."""

    __slots__ = ("_names", "_read", "_values")

    def __init__(self, names: str, values: bytes) -> None:
        self._names = names
        self._values = values
        self._read: dict[str, float] | None = None

    def _dict(self) -> dict[str, float]:
        d = self._read
        if d is None:
            names = self._names.split(SEPARATOR) if self._names else []
            values = array("d", self._values)
            if len(names) != len(values):
                raise ValueError("a packed row's names and values differ in number")
            d = self._read = dict(zip(names, values, strict=True))
        return d

    def __getitem__(self, name: str) -> float:
        return self._dict()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._dict())

    def __len__(self) -> int:
        return len(self._dict())

    def __contains__(self, name: object) -> bool:
        return name in self._dict()

    def __reduce__(self) -> tuple[Any, ...]:
        return Row, (self._names, self._values)

    def __repr__(self) -> str:
        return f"Row({self._dict()!r})"


class _Packed(Sequence[T]):
    """A tuple made on first use from one packed value."""

    __slots__ = ("_packed", "_read")

    def __init__(self, packed: str | bytes) -> None:
        self._packed = packed
        self._read: tuple[T, ...] | None = None

    def _unpack(self) -> tuple[T, ...]:
        raise NotImplementedError

    def _tuple(self) -> tuple[T, ...]:
        t = self._read
        if t is None:
            t = self._read = self._unpack()
        return t

    @overload
    def __getitem__(self, i: int) -> T: ...

    @overload
    def __getitem__(self, i: slice) -> tuple[T, ...]: ...

    def __getitem__(self, i: int | slice) -> T | tuple[T, ...]:
        return self._tuple()[i]

    def __len__(self) -> int:
        return len(self._tuple())

    def __iter__(self) -> Iterator[T]:
        return iter(self._tuple())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, _Packed):
            other = other._tuple()
        return isinstance(other, tuple) and self._tuple() == other

    def __hash__(self) -> int:
        return hash(self._tuple())

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self._packed,)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._tuple()!r})"


class Tokens(_Packed[str]):
    """Tokens joined by :data:`SEPARATOR` (none of them empty)."""

    __slots__ = ()

    def _unpack(self) -> tuple[str, ...]:
        packed = self._packed
        if not isinstance(packed, str):
            raise TypeError("packed tokens are a str")
        return tuple(packed.split(SEPARATOR)) if packed else ()


class Hashes(_Packed[int]):
    """Unsigned 64-bit ints as their machine bytes (``array('Q')``: the worker and the
    server are processes of one machine)."""

    __slots__ = ()

    def _unpack(self) -> tuple[int, ...]:
        packed = self._packed
        if not isinstance(packed, bytes):
            raise TypeError("packed hashes are bytes")
        return tuple(array("Q", packed))


def row(features: Mapping[str, float]) -> Mapping[str, float]:
    """``features`` packed (see the module), or as they are (a name is empty or holds the
    separator, a value is not a float: an int would come back a float)."""
    if isinstance(features, Row):
        return features
    names = SEPARATOR.join(features)  # a name holding the separator: more than one a gap
    if "" in features or names.count(SEPARATOR) > max(len(features) - 1, 0):
        return features
    if not _FLOAT.issuperset(map(type, features.values())):
        return features
    return Row(names, array("d", features.values()).tobytes())


def tokens(values: Sequence[str]) -> Sequence[str]:
    """``values`` packed (see the module), or as they are (a token is empty or holds the
    separator)."""
    if isinstance(values, Tokens):
        return values
    joined = SEPARATOR.join(values)  # a token holding the separator: more than one a gap
    if "" in values or joined.count(SEPARATOR) > max(len(values) - 1, 0):
        return values
    return Tokens(joined)


def hashes(values: Sequence[int]) -> Sequence[int]:
    """``values`` packed (see the module), or as they are (one is not an unsigned 64-bit int)."""
    if isinstance(values, Hashes):
        return values
    try:
        return Hashes(array("Q", values).tobytes())
    except (OverflowError, TypeError):
        return values
