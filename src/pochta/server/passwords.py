"""The password checks of every door (IMAP, ``POST /v1/session``, the webmail) share one
bound per process.

A password is checked with argon2 as pochta hashes it: 64 MiB of memory and tens of
milliseconds of CPU per check. Without one bound for all doors, a flood of wrong passwords
costs the server 64 MiB per check in flight (40 HTTP threads: 2.5 GB); with it, at most
``at_once`` x 64 MiB, and the rest wait their turn on the event loop, holding no thread.
A waiting check of a client the account knows (``Admission.known``: its device, its address
or network) goes before every stranger's, so that the owner is not queued behind a guesser.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator


class PasswordSlots:
    """At most ``at_once`` checks at a time; waiters of known clients first, each queue first
    come, first served. Used from one event loop."""

    def __init__(self, at_once: int) -> None:
        if at_once < 1:
            raise ValueError("at least one password check must be able to run")
        self.free = at_once
        self._known: deque[asyncio.Future[None]] = deque()
        self._strangers: deque[asyncio.Future[None]] = deque()

    @property
    def waiting(self) -> int:
        return sum(not f.done() for f in (*self._known, *self._strangers))

    @contextlib.asynccontextmanager
    async def slot(self, known: bool) -> AsyncIterator[None]:
        """Hold one of the slots while the block runs (waiting for it first if need be)."""
        if self.free > 0 and not self.waiting:
            self.free -= 1
        else:
            turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            (self._known if known else self._strangers).append(turn)
            try:
                await turn
            except asyncio.CancelledError:
                if turn.done() and not turn.cancelled():  # handed a slot as it was cancelled
                    self._release()
                raise
        try:
            yield
        finally:
            self._release()

    def _release(self) -> None:
        for queue in (self._known, self._strangers):
            while queue:
                turn = queue.popleft()
                if not turn.done():  # a cancelled waiter is skipped
                    turn.set_result(None)
                    return
        self.free += 1
