"""One server-wide budget of bytes in flight: what the listeners hold in memory for clients.

Every connection may hold a little (a letter being received below ``smtp.spool_threshold``, an
IMAP command's literals), but many connections at once could together hold without end. So
each such holding is taken from one :class:`Budget` (``memory_budget`` bytes, one per server
process) before it is held, and given back when it is let go. When the budget is spent the
holder does without memory rather than growing it: SMTP writes the letter to its spool file at
once; IMAP spools an APPEND's letter and refuses any other literal (it must be parsed in
memory); ``POST /v1/scan`` answers 503.

Pure bookkeeping, no I/O; safe to use from the event loop and from threads alike. A
:class:`Share` is one holder's part: it remembers what it took, so that one ``release`` gives
back all of it, whatever way its holder ends.
"""

from __future__ import annotations

import threading


class Budget:
    """``total`` bytes, taken all-or-nothing and given back."""

    def __init__(self, total: int) -> None:
        if total < 0:
            raise ValueError("a budget cannot be negative")
        self.total = total
        self._used = 0
        self._lock = threading.Lock()

    @property
    def used(self) -> int:
        return self._used

    @property
    def free(self) -> int:
        return self.total - self._used

    def take(self, n: int) -> bool:
        """Take ``n`` bytes if that many are free (True), else nothing (False)."""
        if n < 0:
            raise ValueError("cannot take a negative amount")
        with self._lock:
            if self._used + n > self.total:
                return False
            self._used += n
            return True

    def give(self, n: int) -> None:
        """Give back ``n`` bytes taken before."""
        with self._lock:
            if n < 0 or n > self._used:
                raise ValueError(f"giving back {n} bytes of {self._used} taken")
            self._used -= n

    def share(self) -> Share:
        return Share(self)


class Share:
    """What one holder (a letter being received, an IMAP command) took from a budget."""

    __slots__ = ("budget", "held")

    def __init__(self, budget: Budget) -> None:
        self.budget = budget
        self.held = 0

    def take(self, n: int) -> bool:
        if self.budget.take(n):
            self.held += n
            return True
        return False

    def release(self) -> None:
        """Give back everything this share took. Idempotent."""
        held, self.held = self.held, 0
        if held:
            self.budget.give(held)
