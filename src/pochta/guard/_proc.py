"""This process's id and unique owner strings, without a system call per use (a lock cycle
needs both; ``os.getpid`` and ``os.urandom`` are each a system call). Renewed after fork."""

from __future__ import annotations

import itertools
import os


class _Process:
    def __init__(self) -> None:
        self.pid = os.getpid()
        self.prefix = os.urandom(9).hex()  # 72 random bits per process
        self.serial = itertools.count(1)  # next() is atomic under the GIL


_current = _Process()


def _after_fork() -> None:
    global _current
    _current = _Process()


os.register_at_fork(after_in_child=_after_fork)


def pid() -> int:
    return _current.pid


def new_owner() -> str:
    """A string no other lease, in any process or on any host, will be given."""
    return f"{_current.prefix}.{next(_current.serial)}"
