"""Leased locks for asyncio: ``pochta.guard.lock`` with tasks in place of threads.

One renewer task per ``AsyncLocks`` (started when the first lease is taken, ending when none is
left) extends the leases whose owner task is still running. ``hold()`` can cancel the critical
section when the lease is lost, and turns that cancellation into LeaseLost at the end of the
block, the way ``asyncio.timeout`` turns its own into TimeoutError:

    locks = AsyncLocks(backend)
    async with locks.hold("evacuate:pair-7", timeout=5.0) as lease:
        await evacuate(pair, token=lease.token)    # cancelled if the lease is lost
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from types import TracebackType

from pochta.errors import GuardUnavailable, InvalidInput, LeaseLost, LockTimeout
from pochta.guard._proc import new_owner
from pochta.guard.lock import (
    DEFAULT_TTL,
    RENEW_EVERY,
    RETRY_EVERY,
    SLACK,
    State,
    safety_margin,
)
from pochta.guard.names import check_name
from pochta.types import AsyncLockBackend

log = logging.getLogger(__name__)


class AsyncLease:
    """A held lock; ``token`` is its fencing token."""

    def __init__(
        self,
        locks: AsyncLocks,
        name: str,
        owner: str,
        token: int,
        ttl: float,
        sent: float,
        on_lost: Callable[[AsyncLease], None] | None,
    ) -> None:
        self.name = name
        self.token = token
        self.ttl = ttl
        self.owner = owner
        self.state = State.HELD
        self.lost_reason = ""
        self._locks = locks
        self._on_lost = on_lost
        self._task = asyncio.current_task()
        self._cancel: asyncio.Task[object] | None = None  # set by hold(cancel_on_lost=True)
        self._cancelled = False
        self.valid_until = sent + ttl - safety_margin(ttl)
        self.renew_at = sent + ttl * RENEW_EVERY

    def __repr__(self) -> str:
        return f"<AsyncLease {self.name!r} token={self.token} {self.state.value}>"

    def is_held(self) -> bool:
        return self.state is State.HELD and time.monotonic() < self.valid_until

    def check(self) -> None:
        if not self.is_held():
            raise LeaseLost(f"lease on {self.name!r} (token {self.token}) is no longer held")

    async def release(self) -> None:
        """Give the lock up; LeaseLost when it had been lost before. Idempotent."""
        if self.state in (State.RELEASED, State.ABANDONED):
            return
        was = self.state
        self.state = State.RELEASED
        self._locks._discard(self)
        released = await self._locks.backend.release(self.name, self.owner)
        if was is State.LOST or not released:
            reason = self.lost_reason or "it expired or was taken before release"
            raise LeaseLost(f"lease on {self.name!r} (token {self.token}) was lost: {reason}")

    def _extended(self, sent: float) -> None:
        if self.state is State.HELD:
            self.valid_until = sent + self.ttl - safety_margin(self.ttl)
            self.renew_at = sent + self.ttl * RENEW_EVERY

    def _lose(self, reason: str) -> None:
        if self.state is not State.HELD:
            return
        self.state = State.LOST
        self.lost_reason = reason
        log.warning("lease on %r (token %d) lost: %s", self.name, self.token, reason)
        if self._cancel is not None and not self._cancel.done():
            self._cancelled = True
            self._cancel.cancel(f"lease on {self.name!r} lost")
        if self._on_lost is not None:
            try:
                self._on_lost(self)
            except Exception:
                log.exception("on_lost callback of %r failed", self.name)

    def _owner_alive(self) -> bool:
        return self._task is None or not self._task.done()


class _Hold:
    """``async with locks.hold(...)``: acquire, run the block, release."""

    def __init__(
        self,
        locks: AsyncLocks,
        name: str,
        timeout: float | None,
        ttl: float | None,
        on_lost: Callable[[AsyncLease], None] | None,
        cancel_on_lost: bool,
    ) -> None:
        self._args = (locks, name, timeout, ttl, on_lost)
        self._cancel_on_lost = cancel_on_lost
        self._lease: AsyncLease | None = None

    async def __aenter__(self) -> AsyncLease:
        locks, name, timeout, ttl, on_lost = self._args
        lease = await locks.acquire(name, timeout=timeout, ttl=ttl, on_lost=on_lost)
        if self._cancel_on_lost:
            lease._cancel = asyncio.current_task()
        self._lease = lease
        return lease

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        lease = self._lease
        assert lease is not None
        lease._cancel = None  # from here on the renewer cancels nothing
        lost: LeaseLost | None = None
        try:
            await lease.release()
        except LeaseLost as err:
            lost = err
        except GuardUnavailable as err:
            if exc is None:
                raise
            log.warning("%s while leaving with %r", err, exc)
        except asyncio.CancelledError as err:
            if not lease._cancelled:
                raise
            exc = err  # the renewer's cancellation reached us only now
        if lease._cancelled and isinstance(exc, asyncio.CancelledError):
            task = asyncio.current_task()
            if task is not None and task.uncancel() == 0:  # nobody else cancelled the task
                raise lost or LeaseLost(f"lease on {lease.name!r} lost") from exc
        elif lost is not None:
            if exc is None:
                raise lost
            log.warning("%s while leaving with %r", lost, exc)


class AsyncLocks:
    """Leases on names from one async backend, renewed by one task."""

    def __init__(self, backend: AsyncLockBackend, *, ttl: float = DEFAULT_TTL) -> None:
        if ttl <= 0.01:
            raise InvalidInput("a lease lasts more than 10 ms")
        self.backend = backend
        self.ttl = ttl
        self._leases: dict[str, AsyncLease] = {}
        self._renewer: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._next_wake = float("inf")

    async def try_acquire(
        self,
        name: str,
        *,
        ttl: float | None = None,
        on_lost: Callable[[AsyncLease], None] | None = None,
    ) -> AsyncLease | None:
        ttl = self._ttl(ttl)
        owner = new_owner()
        sent = time.monotonic()
        grant = await self.backend.try_acquire(check_name(name), owner, ttl)
        if grant.token is None:
            return None
        return self._held(name, owner, grant.token, ttl, sent, on_lost)

    async def acquire(
        self,
        name: str,
        *,
        timeout: float | None = None,
        ttl: float | None = None,
        on_lost: Callable[[AsyncLease], None] | None = None,
    ) -> AsyncLease:
        """As ``Locks.acquire``: wait up to ``timeout`` (None: forever; 0: one try)."""
        ttl = self._ttl(ttl)
        check_name(name)
        owner = new_owner()
        deadline = None if timeout is None else time.monotonic() + timeout
        queue = timeout is None or timeout > 0
        sent = time.monotonic()
        grant = await self.backend.try_acquire(name, owner, ttl, queue)
        if grant.token is not None:
            return self._held(name, owner, grant.token, ttl, sent, on_lost)
        if not queue:
            raise LockTimeout(f"lock {name!r} is held")
        with contextlib.closing(self.backend.listen(name)) as listener:
            while True:
                sent = time.monotonic()
                grant = await self.backend.try_acquire(name, owner, ttl, queue=True)
                if grant.token is not None:
                    return self._held(name, owner, grant.token, ttl, sent, on_lost)
                wait = grant.holder_ttl + SLACK
                if deadline is not None:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise LockTimeout(f"lock {name!r} stayed held for {timeout} s")
                    wait = min(wait, left)
                await listener.wait(wait)

    def hold(
        self,
        name: str,
        *,
        timeout: float | None = None,
        ttl: float | None = None,
        on_lost: Callable[[AsyncLease], None] | None = None,
        cancel_on_lost: bool = True,
    ) -> _Hold:
        """``async with locks.hold(name) as lease:``. With ``cancel_on_lost`` the block is
        cancelled when the lease is lost, and the ``async with`` raises LeaseLost."""
        return _Hold(self, name, timeout, ttl, on_lost, cancel_on_lost)

    def held(self) -> list[AsyncLease]:
        return list(self._leases.values())

    async def close(self) -> None:
        """Stop renewing and release what is still held (best effort)."""
        if self._renewer is not None:
            self._renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._renewer
            self._renewer = None
        for lease in list(self._leases.values()):
            with contextlib.suppress(LeaseLost, GuardUnavailable):
                await lease.release()

    def _ttl(self, ttl: float | None) -> float:
        if ttl is None:
            return self.ttl
        if ttl <= 0.01:
            raise InvalidInput("a lease lasts more than 10 ms")
        return ttl

    def _held(
        self,
        name: str,
        owner: str,
        token: int,
        ttl: float,
        sent: float,
        on_lost: Callable[[AsyncLease], None] | None,
    ) -> AsyncLease:
        lease = AsyncLease(self, name, owner, token, ttl, sent, on_lost)
        self._leases[owner] = lease
        if self._renewer is None or self._renewer.done():
            self._wake = asyncio.Event()
            self._renewer = asyncio.get_running_loop().create_task(
                self._run(), name="pochta-lease-renewer"
            )
        elif lease.renew_at < self._next_wake:
            self._wake.set()
        return lease

    def _discard(self, lease: AsyncLease) -> None:
        self._leases.pop(lease.owner, None)

    async def _run(self) -> None:
        while self._leases:
            now = time.monotonic()
            due = [lease for lease in self._leases.values() if lease.renew_at <= now]
            if not due:
                self._next_wake = min(lease.renew_at for lease in self._leases.values())
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self._next_wake - now):
                        await self._wake.wait()
                continue
            self._next_wake = float("-inf")
            await self._renew(due)
        self._next_wake = float("inf")

    async def _renew(self, due: list[AsyncLease]) -> None:
        alive = []
        for lease in due:
            if lease._owner_alive():
                alive.append(lease)
                continue
            self._discard(lease)
            if lease.state is State.HELD:
                lease.state = State.ABANDONED
            log.warning("lease on %r abandoned: its task ended without releasing it", lease.name)
        if not alive:
            return
        sent = time.monotonic()
        try:
            results = await self.backend.extend([(x.name, x.owner, x.ttl) for x in alive])
        except GuardUnavailable as exc:
            now = time.monotonic()
            for lease in alive:
                if now >= lease.valid_until:
                    self._discard(lease)
                    lease._lose(f"the lock backend did not answer until the lease ran out: {exc}")
                else:
                    lease.renew_at = now + lease.ttl * RETRY_EVERY
            return
        except Exception:
            log.exception("renewing %d leases failed", len(alive))
            for lease in alive:
                lease.renew_at = time.monotonic() + lease.ttl * RETRY_EVERY
            return
        for lease, ok in zip(alive, results, strict=True):
            if ok:
                lease._extended(sent)
            else:
                self._discard(lease)
                lease._lose("the backend no longer has it (it expired or was taken)")
