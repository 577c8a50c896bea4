"""Jobs that run in one process at a time among all that share pochta's locks.

Every ``pochta serve`` (on one machine or many, sharing PostgreSQL + Redis, or on one machine
the SQLite files) starts the same background jobs: the deletion job, the journal sweep,
Valkyrie for each local disk. Each must run once, not once per process. A ``Singleton`` is a
thread that waits for the job's lock, ``job:<name>``, and runs the job's rounds while it holds
it (leader election by lease):

- waiting is a blocking acquire: it wakes when the holder releases, or when the holder's lease
  would have run out. A leader that dies (SIGKILL, a lost machine) stops renewing, and the
  next process takes over one lease length (``guard.lock_ttl``, 10 s) later at most (with
  the embedded locks, at its next try: the SQLite backend sees a holder's process gone);
- the lease is renewed while the thread lives (``Locks``); a round runs only while
  ``lease.is_held()``;
- every new leader writes its fencing token into the job's fence (``Fence.admit``) before its
  first round and again before each round. A leader that lost its lease without noticing (a
  pause past its end) is refused there (StaleToken) by the token of its successor, and steps
  down instead of running beside it;
- ``wake()`` runs a round now (when this process leads); otherwise rounds come every
  ``interval`` seconds. ``on_lead`` runs once per leadership, before the first round: the
  recovery a new leader owes to a predecessor that died halfway.

    job = Singleton(locks, "deletions", round_, interval=30.0, fence=fence)
    job.start(); ...; job.wake(); ...; job.stop()
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
import traceback
from collections.abc import Callable

from pochta.errors import GuardUnavailable, LeaseLost, LockTimeout, PochtaError, StaleToken
from pochta.guard.lock import Lease, Locks
from pochta.types import Fence

log = logging.getLogger(__name__)

WAIT_STEP = 1.0  # seconds one acquire waits before the thread looks at ``stop`` again
RETRY_AFTER = 1.0  # seconds before trying again when the lock backend did not answer

Round = Callable[[Lease], object]


def job_lock(name: str) -> str:
    return f"job:{name}"


class Singleton:
    def __init__(
        self,
        locks: Locks,
        name: str,
        round_: Round,
        *,
        interval: float,
        fence: Fence | None = None,
        on_lead: Round | None = None,
        thread_name: str | None = None,
    ) -> None:
        self.locks = locks
        self.name = name
        self.lock = job_lock(name)
        self.interval = interval
        self.fence = fence
        self._round = round_
        self._on_lead = on_lead
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._lease: Lease | None = None
        self.rounds = 0  # rounds run by this process (for tests and stats)
        self.terms = 0  # times this process became the leader
        self._thread = threading.Thread(
            target=self._run, name=thread_name or f"pochta-job-{name}", daemon=True
        )

    @property
    def leading(self) -> bool:
        lease = self._lease
        return lease is not None and lease.is_held()

    @property
    def token(self) -> int | None:
        """The fencing token of this process's leadership, None when it does not lead."""
        lease = self._lease
        return lease.token if lease is not None and lease.is_held() else None

    def start(self) -> None:
        self._thread.start()

    def wake(self) -> None:
        """Run a round soon (a no-op in a process that does not lead: the leader's rounds
        come every ``interval``)."""
        self._wake.set()

    def stop(self, timeout: float | None = None) -> bool:
        """Stop after the round in progress, release the lock (the next process takes over
        at once), join the thread (False: still running after ``timeout``)."""
        self.cancel()
        return self.join(timeout)

    def cancel(self) -> None:
        """Ask the thread to stop (``join`` waits for it): stopping many jobs at once."""
        self._stop.set()
        self._wake.set()

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the thread; False (and an error line with where it is stuck) when it is
        still running after ``timeout``: a stopping server goes on closing rather than be
        killed for a job that does not end."""
        if self._thread.is_alive():
            self._thread.join(timeout)
        if not self._thread.is_alive():
            return True
        frame = sys._current_frames().get(self._thread.ident or -1)
        where = "".join(traceback.format_stack(frame)[-6:]) if frame is not None else "?"
        log.error(
            "job %s did not stop in %.0f s; left running, at:\n%s", self.name, timeout or 0, where
        )
        return False

    @property
    def stopping(self) -> threading.Event:
        """Set when ``stop`` was called: long rounds look at it between steps."""
        return self._stop

    # -- the thread ------------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.is_set():
            lease = self._acquire()
            if lease is None:
                return
            self._lease = lease
            self.terms += 1
            try:
                self._lead(lease)
            except Exception:  # a bug: log it, step down, and try again later
                log.exception("job %s failed", self.name)
            finally:
                self._lease = None
                with contextlib.suppress(LeaseLost, GuardUnavailable):
                    lease.release()
            self._stop.wait(RETRY_AFTER)  # stepped down (lost, fenced off): not straight back

    def _acquire(self) -> Lease | None:
        while not self._stop.is_set():
            try:
                return self.locks.acquire(
                    self.lock, timeout=WAIT_STEP, on_lost=lambda _lease: self._wake.set()
                )
            except LockTimeout:
                continue  # another process leads
            except PochtaError as exc:  # the lock backend is down, or closed
                log.warning("job %s: cannot take its lock: %s", self.name, exc.message)
                self._stop.wait(RETRY_AFTER)
        return None

    def _admitted(self, lease: Lease) -> bool:
        if self.fence is None:
            return lease.is_held()
        try:
            self.fence.admit(self.lock, lease.token)
        except StaleToken:
            log.warning(
                "job %s: a newer leader's token is in the fence; token %d steps down",
                self.name,
                lease.token,
            )
            return False
        except PochtaError as exc:
            log.warning("job %s: fence unavailable (%s); skipping a round", self.name, exc.message)
            return False
        return lease.is_held()

    def _lead(self, lease: Lease) -> None:
        if not self._admitted(lease):
            return
        log.info("job %s: this process leads (token %d)", self.name, lease.token)
        if self._on_lead is not None:
            self._guarded(self._on_lead, lease)
        while not self._stop.is_set():
            # ``stop`` looked at again after the clear: a stop (or a wake) that comes while the
            # fence is asked (a write, slow under load) runs no round, or ends the wait below
            # at once. Looked at only before, it was cleared away, and the wait ran its whole
            # interval while ``stop`` waited out its timeout (10 s).
            self._wake.clear()
            if not self._admitted(lease) or self._stop.is_set():
                break
            self._guarded(self._round, lease)
            self.rounds += 1
            self._wake.wait(self.interval)
        if not self._stop.is_set():
            log.info("job %s: leadership (token %d) ended", self.name, lease.token)

    def _guarded(self, step: Round, lease: Lease) -> None:
        try:
            step(lease)
        except LeaseLost:
            pass  # the loop sees it next
        except PochtaError as exc:
            log.warning("job %s: %s; trying again later", self.name, exc.message)
