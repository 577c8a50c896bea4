"""The spool's disk reserve: new letters are refused while its file system runs short.

Postfix's rule: the SMTP server refuses MAIL FROM (``452 4.3.1 Insufficient system storage``)
while the queue's file system has less free space than 1.5 x ``message_size_limit``, or than
``queue_minfree`` when that is larger. A letter then stays with its sender, who retries,
rather than being half-received into a full disk. pochta applies it to the file system of
``<data_dir>/spool``, where letters being received go (``smtp.spool_min_free`` is
queue_minfree).

``DiskReserve`` decides and does no I/O itself: the free space comes from an injected reader
(``free_bytes`` is the real one, ``statvfs``), asked at most once per ``every`` seconds, so a
flood of MAIL commands costs no system call each.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path

from pochta.types import Clock

RULE = 1.5  # x the largest letter: Postfix's reserve


def reserve_for(max_message_size: int, min_free: int = 0) -> int:
    """The free bytes to keep: the larger of ``min_free`` and 1.5 x ``max_message_size``."""
    return max(min_free, int(RULE * max_message_size))


class DiskReserve:
    """Whether the file system is below ``reserve`` bytes free; ``free()`` gives its free
    bytes (OSError: unknown, the last reading stands; none yet: not low)."""

    def __init__(
        self, reserve: int, free: Callable[[], int], *, clock: Clock, every: float = 1.0
    ) -> None:
        self.reserve = reserve
        self._free = free
        self._clock = clock
        self._every = every
        self._read_at = -float("inf")
        self.free: int | None = None  # bytes, as last read

    def low(self) -> bool:
        now = self._clock()
        if now - self._read_at >= self._every:
            self._read_at = now
            with contextlib.suppress(OSError):
                self.free = self._free()
        return self.free is not None and self.free < self.reserve


def free_bytes(path: Path) -> int:
    """Free bytes that an unprivileged process may use on the file system of ``path`` (or of
    its nearest existing parent: the spool is made with the first letter)."""
    while not path.exists() and path.parent != path:
        path = path.parent
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize
