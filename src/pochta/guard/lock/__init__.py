"""Leased locks with fencing tokens (seed 003's MasterLock, without its silent failures).

A lock is a named lease with a short expiry (``ttl``, 10 s by default). While the thread that
took it is alive and has not released it, one background thread per ``Locks`` (the renewer)
extends the lease every ``ttl / 3``, all due leases at once (one pipelined round trip on a
single Redis); when the owner thread dies, renewal stops and the lease expires. Release and
extension happen only for the holder (compare-and-delete in the backend). Every acquire gets
a fencing token, strictly increasing per lock name; a protected resource that remembers the
highest token it has seen (``pochta.types.Fence``) refuses a holder that lost its lease
without noticing.

The holder learns that a lease was lost:

- ``lease.is_held()`` is False as soon as the lease may have expired by the local clock (a
  process paused past its lease sees this first thing when it resumes), or the backend said
  the lease is gone, or the backend stayed unreachable past the lease's end;
- the ``on_lost`` callback runs (in the renewer thread; keep it short) when that is detected;
- ``release()`` and the end of a ``with`` block raise LeaseLost.

A blocking acquire does not poll: it listens for the release (Redis: BLPOP on a per-lock key;
embedded: a FIFO per lock) and retries when woken, and otherwise when the holder's lease
would have run out, so a crashed holder is noticed when its lease expires. On Redis a release
hands the lock to the waiters, about in the order they came, before newcomers (and before the
releasing client itself); see ``pochta.guard.lock.redis``.

    locks = Locks(backend, ttl=10.0)
    with locks.acquire("valkyrie:disk-3", timeout=5.0) as lease:
        fence.write("disk-3/state", lease.token, b"...")   # refused if a newer holder wrote
"""

from __future__ import annotations

import contextlib
import enum
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable
from types import TracebackType

from pochta import metrics
from pochta.errors import GuardUnavailable, InvalidInput, LeaseLost, LockTimeout
from pochta.guard._proc import new_owner, pid
from pochta.guard.names import check_name
from pochta.types import LockBackend

log = logging.getLogger(__name__)

DEFAULT_TTL = 10.0
RENEW_EVERY = 1 / 3  # of the ttl
RETRY_EVERY = 1 / 10  # of the ttl, while the backend does not answer
SLACK = 0.001  # seconds a waiter adds to the holder's remaining lease before it retries


def safety_margin(ttl: float) -> float:
    """How much earlier than the backend the holder considers its lease over: clock-rate drift
    (1%) plus 2 ms, as in Redlock."""
    return ttl * 0.01 + 0.002


class State(enum.Enum):
    HELD = "held"
    RELEASED = "released"
    LOST = "lost"
    ABANDONED = "abandoned"  # the owner thread or task ended without releasing


class Lease:
    """A held lock. ``token`` is its fencing token. Use it as a context manager, or call
    ``release()``; it is not reentrant."""

    def __init__(
        self,
        locks: Locks,
        name: str,
        owner: str,
        token: int,
        ttl: float,
        sent: float,
        on_lost: Callable[[Lease], None] | None,
    ) -> None:
        self.name = name
        self.token = token
        self.ttl = ttl
        self.owner = owner
        self.state = State.HELD
        self.lost_reason = ""
        self._locks = locks
        self._on_lost = on_lost
        self._thread = threading.current_thread()
        self._pid = pid()
        self._mutex = threading.Lock()
        self.valid_until = sent + ttl - safety_margin(ttl)
        self.renew_at = sent + ttl * RENEW_EVERY

    def __repr__(self) -> str:
        return f"<Lease {self.name!r} token={self.token} {self.state.value}>"

    def is_held(self) -> bool:
        """True while the lease is certainly ours: not released, not lost, not past its end by
        the local clock, and in the process that took it."""
        return (
            self.state is State.HELD and time.monotonic() < self.valid_until and pid() == self._pid
        )

    def check(self) -> None:
        """Raise LeaseLost unless ``is_held()``."""
        if not self.is_held():
            raise LeaseLost(f"lease on {self.name!r} (token {self.token}) is no longer held")

    def release(self) -> None:
        """Give the lock up. LeaseLost when it had been lost before (the backend's copy is
        dropped all the same if it is still ours). A second call does nothing."""
        with self._mutex:
            if self.state in (State.RELEASED, State.ABANDONED) or pid() != self._pid:
                return  # a forked child's copy is not ours to release
            was = self.state
            self.state = State.RELEASED
        self._locks._renewer.discard(self)
        released = self._locks.backend.release(self.name, self.owner)
        if was is State.LOST or not released:
            reason = self.lost_reason or "it expired or was taken before release"
            raise LeaseLost(f"lease on {self.name!r} (token {self.token}) was lost: {reason}")

    def __enter__(self) -> Lease:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is None:
            self.release()
            return
        try:
            self.release()
        except (LeaseLost, GuardUnavailable) as lost:
            log.warning("%s while leaving with %r", lost, exc)

    # -- called by the renewer ----------------------------------------------------------------
    def _extended(self, sent: float) -> None:
        with self._mutex:
            if self.state is State.HELD:
                self.valid_until = sent + self.ttl - safety_margin(self.ttl)
                self.renew_at = sent + self.ttl * RENEW_EVERY

    def _lose(self, reason: str) -> None:
        with self._mutex:
            if self.state is not State.HELD:
                return
            self.state = State.LOST
            self.lost_reason = reason
        log.warning("lease on %r (token %d) lost: %s", self.name, self.token, reason)
        metrics.lease_lost(self.name)
        if self._on_lost is not None:
            try:
                self._on_lost(self)
            except Exception:
                log.exception("on_lost callback of %r failed", self.name)

    def _owner_alive(self) -> bool:
        return self._thread.is_alive()


class _Renewer:
    """The one thread of a ``Locks`` that extends its leases."""

    def __init__(self, backend: LockBackend, idle: float) -> None:
        self._backend = backend
        # With no lease due sooner, the thread wakes every ``idle`` seconds anyway (the
        # default ttl's renewal interval), so a lease of the default ttl never has to wake it:
        # waking a sleeping thread costs about as much as the lock's own work on loopback.
        self._idle = idle
        self._reset()
        # a forked child must not renew (or even know of) its parent's leases
        ref = weakref.ref(self)

        def forget() -> None:
            renewer = ref()
            if renewer is not None:
                renewer._reset()

        os.register_at_fork(after_in_child=forget)

    def _reset(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._leases: dict[str, Lease] = {}
        self._thread: threading.Thread | None = None
        self._next_wake = float("inf")
        self._closed = False

    def add(self, lease: Lease) -> None:
        with self._cond:
            self._leases[lease.owner] = lease
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="pochta-lease-renewer", daemon=True
                )
                self._thread.start()
            elif lease.renew_at < self._next_wake:
                self._cond.notify()

    def discard(self, lease: Lease) -> None:
        with self._cond:
            self._leases.pop(lease.owner, None)

    def leases(self) -> list[Lease]:
        with self._cond:
            return list(self._leases.values())

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    if self._closed:
                        return
                    now = time.monotonic()
                    due = [lease for lease in self._leases.values() if lease.renew_at <= now]
                    if due:
                        self._next_wake = float("-inf")  # busy: add() need not notify
                        break
                    self._next_wake = min(
                        (lease.renew_at for lease in self._leases.values()),
                        default=now + self._idle,
                    )
                    self._cond.wait(self._next_wake - now)
            self._renew(due)

    def _renew(self, due: list[Lease]) -> None:
        alive = []
        for lease in due:
            if lease._owner_alive():
                alive.append(lease)
                continue
            self.discard(lease)
            with lease._mutex:
                if lease.state is State.HELD:
                    lease.state = State.ABANDONED
            log.warning(
                "lease on %r (token %d) abandoned: its thread ended without releasing it; "
                "it expires in %.1f s",
                lease.name,
                lease.token,
                lease.ttl,
            )
        if not alive:
            return
        sent = time.monotonic()
        try:
            results = self._backend.extend([(x.name, x.owner, x.ttl) for x in alive])
        except GuardUnavailable as exc:
            now = time.monotonic()
            for lease in alive:
                if now >= lease.valid_until:
                    self.discard(lease)
                    lease._lose(f"the lock backend did not answer until the lease ran out: {exc}")
                else:
                    lease.renew_at = now + lease.ttl * RETRY_EVERY
            return
        except Exception:  # a bug or a foreign error: keep the thread, retry soon
            log.exception("renewing %d leases failed", len(alive))
            for lease in alive:
                lease.renew_at = time.monotonic() + lease.ttl * RETRY_EVERY
            return
        for lease, ok in zip(alive, results, strict=True):
            if ok:
                lease._extended(sent)
            else:
                self.discard(lease)
                lease._lose("the backend no longer has it (it expired or was taken)")


class Locks:
    """Leases on names from one backend, renewed by one thread.

    ``ttl`` is the default lease length: the longest a dead holder keeps others waiting.
    """

    def __init__(self, backend: LockBackend, *, ttl: float = DEFAULT_TTL) -> None:
        if ttl <= 0.01:
            raise InvalidInput("a lease lasts more than 10 ms")
        self.backend = backend
        self.ttl = ttl
        self._renewer = _Renewer(backend, idle=ttl * RENEW_EVERY)

    def try_acquire(
        self,
        name: str,
        *,
        ttl: float | None = None,
        on_lost: Callable[[Lease], None] | None = None,
    ) -> Lease | None:
        """The lease if ``name`` is free now, else None."""
        ttl = self._ttl(ttl)
        owner = new_owner()
        sent = time.monotonic()
        grant = self.backend.try_acquire(check_name(name), owner, ttl)
        if grant.token is None:
            return None
        return self._held(name, owner, grant.token, ttl, sent, on_lost)

    def acquire(
        self,
        name: str,
        *,
        timeout: float | None = None,
        ttl: float | None = None,
        on_lost: Callable[[Lease], None] | None = None,
    ) -> Lease:
        """The lease on ``name``, waiting for it up to ``timeout`` seconds (None: as long as
        it takes; 0: one try). LockTimeout when it stayed taken."""
        ttl = self._ttl(ttl)
        check_name(name)
        owner = new_owner()
        deadline = None if timeout is None else time.monotonic() + timeout
        queue = timeout is None or timeout > 0
        sent = time.monotonic()
        grant = self.backend.try_acquire(name, owner, ttl, queue)
        if grant.token is not None:
            return self._held(name, owner, grant.token, ttl, sent, on_lost)
        if not queue:
            raise LockTimeout(f"lock {name!r} is held")
        waiting = time.monotonic()
        with contextlib.closing(self.backend.listen(name)) as listener:
            while True:
                sent = time.monotonic()
                grant = self.backend.try_acquire(name, owner, ttl, queue=True)
                if grant.token is not None:
                    metrics.lock_waited(name, time.monotonic() - waiting, acquired=True)
                    return self._held(name, owner, grant.token, ttl, sent, on_lost)
                wait = grant.holder_ttl + SLACK
                if deadline is not None:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        metrics.lock_waited(name, time.monotonic() - waiting, acquired=False)
                        raise LockTimeout(f"lock {name!r} stayed held for {timeout} s")
                    wait = min(wait, left)
                listener.wait(wait)

    hold = acquire  # ``with locks.hold(name, timeout=5) as lease:`` reads well too

    def held(self) -> list[Lease]:
        """The leases being renewed now."""
        return self._renewer.leases()

    def close(self) -> None:
        """Stop renewing and release every lease still held (best effort)."""
        self._renewer.close()
        for lease in self._renewer.leases():
            with contextlib.suppress(LeaseLost, GuardUnavailable):
                lease.release()

    def __enter__(self) -> Locks:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _ttl(self, ttl: float | None) -> float:
        if self._renewer.closed:
            raise InvalidInput("these Locks are closed")
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
        on_lost: Callable[[Lease], None] | None,
    ) -> Lease:
        lease = Lease(self, name, owner, token, ttl, sent, on_lost)
        self._renewer.add(lease)
        return lease
