"""What ``/healthz`` reports, kept by a background check, so that answering never waits for a
database.

``/healthz`` read the PairDB on every request: with PostgreSQL paused, each request waited for
a connection up to ``postgres.pool_timeout`` (30 s), and a load balancer's checks piled up on
the HTTP threads. Now a thread (started by ``Pochta.start``) reads the pairs every
``interval`` seconds and keeps what it found; ``report`` reads only that, with the clock:

    ok         the last check answered less than ``stale_after`` seconds ago and at least
               one pair takes writes (200)
    degraded   no pair takes writes, or the pair database has not answered for
               ``stale_after`` seconds (a check is stuck or failing), or none has answered
               yet (503); ``problem`` says which, with the last error if there was one

With ``smtp.answer = "queued"`` the same check asks the queue's runner how it is doing
(:meth:`pochta.mailbox.queuerunner.QueueRunner.watch`, a :class:`pochta.mailbox.queue.Watch`,
which says itself when it is a problem): degraded when it has made no progress for
``queue_stalled_after`` seconds while letters are due (a try stuck, its loop ended, the queue
unreadable); ``queue_stalled_seconds`` and ``queue_oldest_seconds`` are reported
either way (the age of the oldest letter waiting, also the gauge
``pochta_queue_oldest_seconds``).

The check of a stalled database stays stuck in its own thread; the next starts when it ends.
It watches the parts (the blob store's pairs, the mailbox's queue): it imports them, never the
other way round.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from pochta.errors import PochtaError
from pochta.mailbox.queue import Watch
from pochta.types import Pair

log = logging.getLogger("pochta.health")


@dataclass(frozen=True, slots=True)
class Health:
    status: Literal["ok", "degraded"]
    pairs: int  # as the last check that answered found them
    writable_pairs: int
    checked_seconds_ago: float | None  # since that check; None: none has answered yet
    problem: str | None = None  # why degraded
    queue_stalled_seconds: float | None = None  # None: no incoming queue (or not read yet)
    queue_oldest_seconds: float | None = None  # None: no letter waiting (or no queue)


class HealthCheck:
    """``pairs``: reads the pairs (the PairDB); ``interval``: seconds between two checks;
    ``stale_after``: seconds without an answer after which the service is degraded."""

    def __init__(
        self,
        pairs: Callable[[], list[Pair]],
        *,
        interval: float = 5.0,
        stale_after: float = 20.0,
        clock: Callable[[], float] = time.monotonic,
        queue: Callable[[], Watch | None] | None = None,
        queue_stalled_after: float = 120.0,
    ) -> None:
        self._pairs = pairs
        self._queue = queue
        self.queue_stalled_after = queue_stalled_after
        self._watch: Watch | None = None
        self.interval = interval
        self.stale_after = stale_after
        self.clock = clock
        self._found: tuple[int, int] | None = None  # pairs, writable
        self._answered: float | None = None
        self._error: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def watch_queue(self, queue: Callable[[], Watch | None], stalled_after: float) -> None:
        """Report the incoming queue's runner too (``Pochta.start`` builds it after this)."""
        self._queue = queue
        self.queue_stalled_after = stalled_after

    def check(self) -> None:
        """Read the pairs once (in the caller's thread) and keep what was found; then ask
        the incoming queue's runner, when there is one."""
        self._check_pairs()
        if self._queue is not None:
            try:
                self._watch = self._queue()
            except Exception as exc:  # its database unreadable: the runner makes no progress
                log.warning("health check: the incoming queue could not be read: %s", exc)

    def _check_pairs(self) -> None:
        try:
            pairs = self._pairs()
        except (PochtaError, OSError) as exc:
            self._error = str(exc) or type(exc).__name__
            log.warning("health check: the pair database did not answer: %s", self._error)
            return
        except Exception as exc:  # a bug must not stop the checks; it shows as degraded
            self._error = repr(exc)
            log.exception("health check failed")
            return
        self._found = (len(pairs), sum(1 for p in pairs if p.flags.writable))
        self._answered = self.clock()
        self._error = None

    def report(self) -> Health:
        """What the last checks found, as of now. Never blocks."""
        found, answered, error = self._found, self._answered, self._error
        pairs, writable = found if found is not None else (0, 0)
        if answered is None:
            why = "the pair database has not answered yet"
            return Health("degraded", 0, 0, None, f"{why}: {error}" if error else why)
        ago = max(0.0, self.clock() - answered)
        if ago > self.stale_after:
            why = f"the pair database has not answered for {ago:.0f} s"
            return Health("degraded", pairs, writable, ago, f"{why}: {error}" if error else why)
        watch = self._watch
        problem = None
        if not writable:
            problem = "no pair takes writes"
        elif watch is not None:
            problem = watch.problem(self.queue_stalled_after)
        return Health(
            "ok" if problem is None else "degraded",
            pairs,
            writable,
            ago,
            problem,
            queue_stalled_seconds=None if watch is None else watch.stalled,
            queue_oldest_seconds=None if watch is None else watch.oldest,
        )

    def start(self) -> None:
        """One check now, then one every ``interval`` seconds in a thread of its own."""
        if self._thread is not None:
            return
        self.check()
        self._thread = threading.Thread(target=self._run, name="pochta-health", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.check()

    def stop(self) -> None:
        """Stop the checks; a check stuck in the database is not waited for (daemon)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1.0)
