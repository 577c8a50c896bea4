"""Small frozen dataclasses that cross the worker processes' pipe, pickled cheaply.

Every letter a worker decides comes back to the server process as a pickle
(:func:`pochta.mailbox.intake.for_the_server`), and the server, the process that saturates
first, reads it under its GIL. A ``slots=True`` dataclass pickles through the ``__getstate__``
/ ``__setstate__`` that ``dataclasses`` writes in Python, which call ``dataclasses.fields``
for every object; :func:`by_fields` pickles it as a call of the class with its fields' values
instead, which ``pickle.loads`` runs through the generated ``__init__`` (~3x faster a rule
hit or a sign read).
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable
from inspect import Parameter, signature
from typing import Any, TypeVar

T = TypeVar("T")


def by_fields(cls: type[T]) -> type[T]:
    """``cls``, pickled as ``cls(*values of its fields)``. Only for a dataclass whose
    ``__init__`` takes every field, by position, and does nothing else (no ``__post_init__``,
    no ``init=False``, ``kw_only`` field, no ``InitVar``): then the object read back is the
    one pickled."""
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls.__name__} is not a dataclass")
    names = [f.name for f in dataclasses.fields(cls)]
    params = signature(cls).parameters.values()
    positional = all(p.kind is Parameter.POSITIONAL_OR_KEYWORD for p in params)
    if hasattr(cls, "__post_init__") or not names or [p.name for p in params] != names:
        raise TypeError(f"{cls.__name__}'s __init__ does more than set every field")
    if not positional:  # a keyword-only field: cls(*values) would fail when read back
        raise TypeError(f"{cls.__name__}'s __init__ does not take every field by position")
    values: Callable[[Any], tuple[Any, ...]]
    if len(names) == 1:
        name = names[0]

        def values(obj: object) -> tuple[Any, ...]:
            return (getattr(obj, name),)

    else:
        values = operator.attrgetter(*names)

    def __reduce__(self: T) -> tuple[type[T], tuple[Any, ...]]:
        return cls, values(self)

    cls.__reduce__ = __reduce__  # type: ignore[assignment,method-assign]
    return cls
