"""The login of every door (IMAP, ``POST /v1/session``, the webmail): one sequence, and one
bound per process on the password checks they share.

:meth:`PasswordSlots.log_in` is that sequence: who is asking (the guard's ``Admission``, in a
thread), the wait the guard asks for (an account under attack) slept on the event loop,
holding no thread, no slot and no connection, then the password checked in a thread within
the bound.

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
import functools
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from pochta.guard.logins import Admission

T = TypeVar("T")
Run = Callable[[Callable[[], Any]], Awaitable[Any]]
"""Runs a blocking call in a thread and awaits it (IMAP's pool, Starlette's)."""


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

    async def log_in(
        self, run: Run, admit: Callable[[], Admission], check: Callable[[Admission], T]
    ) -> T:
        """The login sequence: ``admit`` (RateLimited when the client may not try now), its
        wait slept here, then ``check(admission)`` (argon2, the outcome charged) in a slot,
        the clients the account knows first. Both calls run through ``run``."""
        admission: Admission = await run(admit)
        if admission.wait > 0:
            await asyncio.sleep(admission.wait)
        async with self.slot(admission.known is not None):
            checked: T = await run(functools.partial(check, admission))
            return checked

    def _release(self) -> None:
        for queue in (self._known, self._strangers):
            while queue:
                turn = queue.popleft()
                if not turn.done():  # a cancelled waiter is skipped
                    turn.set_result(None)
                    return
        self.free += 1
