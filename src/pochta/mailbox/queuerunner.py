"""The incoming queue's runner: letters answered 250 at the queue are delivered from it.

``smtp.answer = "queued"`` (SMTP only; LMTP's answer per recipient means delivered, so LMTP
stays synchronous): at the end of DATA the SMTP handler writes the letter and its envelope to
the queue (:mod:`pochta.mailbox.queuedb`) and answers 250 once they are durable. The runner
then delivers it through the handler's own path (the worker's prepare, then
``Mailbox.deliver_prepared`` in a delivery thread: the same code as ``answer = "delivered"``),
at most ``smtp.queue_deliveries`` letters at once. A letter just queued is handed over at once
when there is room (its bytes still in memory); when every try is busy it waits in memory
(at most ``WAITING_LETTERS`` letters and ``WAITING_BYTES`` bytes, oldest first) and is handed
over as soon as a try ends, never read back nor looked up (it was never tried). The others
(past those limits, retries, letters of a start or of an adopted slot) are read back from the
queue; once one letter went that way, the next ones follow it until the queue's reads catch
up (mostly in order: a letter queued while a try is free, or while the queue is being read,
may go before letters read back).

Exactly once: the delivery records the entry's id in the index, in the transaction that makes
its letters DELIVERED; an entry found in the queue that way (a crash between that commit and
the queue row's removal) is removed, not delivered again. Every entry read back from the
queue (after a failure, at start-up, adopted from a dead process's slot) is looked up first.

A try that fails for a reason that passes (the index or the blob store unreachable, workers
busy, on_timeout = "defer") is tried again after ``smtp.queue_retry_seconds``, doubled at each
failure up to ``smtp.queue_retry_max_seconds`` (Postfix's deferred queue); nothing that got 250
is dropped for that. A letter none of whose recipients has a mailbox any more is dropped with a
log line (pochta sends no bounces anywhere; the sender got 250). A letter pochta cannot take
as it is (refused by the delivery itself) is held: kept in the queue, logged, never retried.

At start-up the runner first delivers what the queue holds (this process's slot and the slots
of processes that are gone); new letters are queued meanwhile and delivered as room allows.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from pochta import metrics
from pochta.errors import StorageError
from pochta.executors import run_in, submitted
from pochta.mailbox.queue import Entry, Outcome, Watch, backoff, over
from pochta.mailbox.queueadmin import changed
from pochta.mailbox.queuedb import HELD, Due, QueueStore
from pochta.types import Clock

log = logging.getLogger("pochta.queue")

ADOPT_SECONDS = 60.0  # how often slots of processes that are gone are looked for
FORGET_SECONDS = 3600.0  # how often the index forgets entries delivered long ago
STOP_SECONDS = 10.0  # tries under way get this long to end when the server stops
FLUSH_SECONDS = 1.0  # rows of letters done wait at most this long for a letter to go with
CHANGES_SECONDS = 2.0  # how often queue/changed is looked at (``pochta queue`` touched it)
WAITING_LETTERS = 256  # letters queued while every try is busy, kept in memory for the next
WAITING_BYTES = 16 << 20  # their bytes at most (a letter spooled to a file counts none)

Attempt = Callable[[Due], Awaitable[Outcome]]


class QueueRunner:
    """Delivers the queue's letters (see the module). Built by ``app`` for a server; the SMTP
    listener starts it with the handler's ``attempt`` on its loop."""

    def __init__(
        self,
        store: QueueStore,
        *,
        deliveries: int,
        retry_first: float,
        retry_most: float,
        max_letters: int,
        max_bytes: int,
        was_delivered: Callable[[str], bool],
        forget: Callable[[float], int] | None = None,
        remember_seconds: float = 30 * 86400.0,
        clock: Clock = time.time,
    ) -> None:
        self.store = store
        self.deliveries = deliveries
        self.retry_first = retry_first
        self.retry_most = retry_most
        self.max_letters = max_letters
        self.max_bytes = max_bytes
        self._was_delivered = was_delivered
        self._forget = forget
        self.remember_seconds = remember_seconds
        self._clock = clock
        self._io = ThreadPoolExecutor(max_workers=4, thread_name_prefix="pochta-queue")
        self._attempt: Attempt | None = None
        self._task: asyncio.Task[None] | None = None
        self._tries: dict[str, asyncio.Task[None]] = {}
        self._reserved: set[str] = set()  # being queued by put: not the loop's to try
        # queued (durable) while every try was busy: the next ones tried, in this order
        self._waiting: dict[str, Due] = {}  # by queue id, in the order queued
        self._waiting_bytes = 0
        self._unread = True  # the queue may hold letters due that no try has: read it
        self._next: float | None = None  # when the earliest letter waiting is due
        self._last_put = 0.0  # time.monotonic() of the last letter queued
        self._wake: asyncio.Event | None = None
        self._stopping = False
        self._progress = time.monotonic()  # when a try last ended or the queue was last read
        self._failing = False  # the last read of the queue failed (it is read again later)
        self._changed = changed(store.root)  # queue/changed as last seen

    # -- the SMTP handler's side ---------------------------------------------------------
    def full(self, more: int = 0) -> bool:
        """Whether the queue is at its limits (``more``: bytes of a letter about to come)."""
        s = self.store
        return over(
            s.letters, s.bytes + more, max_letters=self.max_letters, max_bytes=self.max_bytes
        )

    async def put(self, entry: Entry, letter: bytes | Path) -> None:
        """``entry`` durable in the queue (then the letter may be answered 250), and handed
        to a try at once when there is room."""
        if self._stopping:  # its threads are shut down: a temporary failure, never a 5xx
            raise StorageError("the server is stopping: the incoming queue takes no letter")
        # reserved before its row exists: the loop's reads of the queue leave it alone
        # until it is handed over here, or let go of (then read back and looked up first)
        self._reserved.add(entry.id)
        writing = submitted(self._io, self.store.put, entry, letter)
        try:
            await asyncio.shield(writing)
        except asyncio.CancelledError:
            # the client went away (aiosmtpd cancels the handler): the thread goes on and
            # may commit the row; once it ends the loop reads the queue (looked up first)
            writing.add_done_callback(lambda f: self._let_go(entry.id, f))
            raise
        except BaseException:
            self._reserved.discard(entry.id)
            raise
        self._reserved.discard(entry.id)
        self._last_put = time.monotonic()
        if isinstance(letter, Path):
            letter = self.store.own.file(entry.id)
        due = Due(entry, letter, self.store.own.n, 0)
        if self._stopping or not self._attempt:
            pass
        elif len(self._tries) < self.deliveries and not self._waiting:
            self._begin(due, fresh=True)
            return
        elif self._keep(due):
            return
        self._unread = True
        if self._wake is not None:
            self._wake.set()

    def _keep(self, due: Due) -> bool:
        """``due`` (just queued, every try busy) waits in memory for one, unless the limits
        are reached or letters queued before it wait in the queue's rows (read back first)."""
        size = len(due.letter) if isinstance(due.letter, bytes) else 0
        if self._unread or len(self._waiting) >= WAITING_LETTERS:
            return False
        if self._waiting and self._waiting_bytes + size > WAITING_BYTES:
            return False
        self._waiting[due.entry.id] = due
        self._waiting_bytes += size
        return True

    def _fill(self) -> None:
        """Tries of the letters waiting in memory while there is room."""
        while self._waiting and len(self._tries) < self.deliveries and not self._stopping:
            due = self._waiting.pop(next(iter(self._waiting)))
            if isinstance(due.letter, bytes):
                self._waiting_bytes -= len(due.letter)
            self._begin(due, fresh=True)

    def _let_go(self, queue_id: str, writing: asyncio.Future[None]) -> None:
        """A letter whose :meth:`put` was cancelled, once its write ended: it may be in the
        queue (never answered 250; delivered all the same, as Postfix would): read it back."""
        if not writing.cancelled() and writing.exception() is not None:
            log.warning("letter %s could not be queued: %s", queue_id, writing.exception())
        self._reserved.discard(queue_id)
        self._unread = True
        if self._wake is not None:
            self._wake.set()

    # -- running -------------------------------------------------------------------------
    def start(self, attempt: Attempt) -> None:
        """Start delivering on the running loop with ``attempt`` (a letter's one try)."""
        self._attempt = attempt
        self._wake = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._run(), name="pochta-queue")

    async def stop(self) -> None:
        """Stop taking letters; give the tries under way ``STOP_SECONDS`` to end (one cut
        short stays queued: delivered at the next start, once)."""
        self._stopping = True
        self._let_waiting_go()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        tries = list(self._tries.values())
        if tries:
            _, pending = await asyncio.wait(tries, timeout=STOP_SECONDS)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending)
        self._io.shutdown(wait=True)

    def close(self) -> None:
        self._io.shutdown(wait=True)
        self.store.close()

    def _let_waiting_go(self) -> None:
        """The letters waiting in memory are left to the queue's reads (their rows are there:
        delivered at the next start, or once read back)."""
        if self._waiting:
            self._waiting.clear()
            self._waiting_bytes = 0
            self._unread = True

    async def _run(self) -> None:
        """Reads the queue only when it may hold letters that are not being tried: at start,
        after a letter was queued without being handed over, when a retry is due, and when
        slots are adopted; rows of letters done are removed with the next letter queued, or
        after ``FLUSH_SECONDS`` without one."""
        assert self._wake is not None
        adopted = -1e300
        # not at once: a restart after a long stop first reads what its slot holds (a row a
        # crash left after its delivery is looked up before its id may be forgotten)
        forgotten = time.monotonic()
        failures = 0  # reads of the queue failed in a row
        looked = time.monotonic()
        paused = 0.0  # self._clock() until which a failed read pauses the reads
        while not self._stopping:
            now = time.monotonic()
            try:
                if now - looked >= CHANGES_SECONDS:
                    looked = now
                    mark = await run_in(self._io, changed, self.store.root)
                    if mark != self._changed:  # a command changed the slots: read them again
                        self._changed = mark
                        self._let_waiting_go()
                        await run_in(self._io, self.store.recount)
                        adopted = -1e300
                        self._unread = True
                if now - adopted >= ADOPT_SECONDS:
                    adopted = now
                    if await run_in(self._io, self.store.adopt):
                        self._unread = True
                if self._forget is not None and now - forgotten >= FORGET_SECONDS:
                    forgotten = now
                    before = self._clock() - self.remember_seconds
                    await run_in(self._io, self._forget, before)
                if self.store.pending_removals() and now - self._last_put >= FLUSH_SECONDS:
                    await run_in(self._io, self.store.flush)
                room = self.deliveries - len(self._tries)
                due_now = self._next is not None and self._next <= self._clock()
                if room > 0 and (self._unread or due_now):
                    self._unread = False  # a letter queued from now on sets it again
                    skip = self._busy()
                    got = await run_in(self._io, self.store.due, self._clock(), room, skip)
                    for due in got:
                        self._begin(due, fresh=False)
                    if len(got) >= room:
                        self._unread = True  # more may be due: read on when a try ends
                    # cleared first: a try that ends during the read (in a thread) sets its
                    # retry's time, which the read, skipping it as busy, does not see
                    self._next = None
                    found = await run_in(self._io, self.store.next_due, self._busy())
                    self._soonest(found)
                    self._progress = time.monotonic()
                if self._clock() >= paused:  # not a wake within the pause: the reads are fine
                    failures = 0
                    self._failing = False
            except Exception as exc:
                # a damaged page fails every read: 1 s, doubled up to ADOPT_SECONDS, and one
                # traceback, not one a second for as long as it lasts
                failures += 1
                self._failing = True  # the watch counts the time without progress from now
                pause = backoff(failures, 1.0, ADOPT_SECONDS)
                if failures == 1:
                    log.exception("the incoming queue could not be read; again in %.0f s", pause)
                else:
                    log.error(
                        "the incoming queue could not be read (%d times in a row): %s; again in"
                        " %.0f s",
                        failures,
                        exc,
                        pause,
                    )
                self._unread = False  # read again when the pause is over
                self._next = paused = self._clock() + pause
            wait = CHANGES_SECONDS
            if self._next is not None:
                wait = min(wait, max(0.0, self._next - self._clock()))
            if self.store.pending_removals():
                wait = min(wait, FLUSH_SECONDS)
            if len(self._tries) >= self.deliveries:
                wait = max(wait, 0.05)  # a try that ends wakes the loop
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), wait)

    def watch(self) -> Watch:
        """How the runner is doing (see :class:`Watch`); from any thread (the health check's:
        one read of the queue)."""
        task = self._task
        stalled = 0.0
        if task is not None:
            due = self._next is not None and self._next <= self._clock()
            busy = self._tries or self._waiting or self._unread
            if task.done() or busy or due or self._failing:
                stalled = max(0.0, time.monotonic() - self._progress)
        try:
            at = self.store.oldest()
        except Exception as exc:  # unreadable: the stall above is what /healthz must see
            log.warning("the incoming queue's oldest letter could not be read: %s", exc)
            at = None
        oldest = None if at is None else max(0.0, self._clock() - at)
        metrics.queue_oldest(oldest or 0.0)
        return Watch(stalled, oldest)

    def _soonest(self, at: float | None) -> None:
        """The loop wakes by ``at`` too (None: no change)."""
        if at is not None:
            self._next = at if self._next is None else min(self._next, at)

    def _busy(self) -> set[str]:
        return set(self._tries) | self._reserved | self._waiting.keys()

    def _begin(self, due: Due, *, fresh: bool) -> None:
        """A try of ``due``, unless one is under way or :meth:`put` is queueing it or it waits
        in memory (the loop's read of the queue, in a thread, may return a letter committed
        meanwhile).
        ``fresh``: handed over by :meth:`put` (never tried: not looked up in the index)."""
        busy = due.entry.id in self._reserved or due.entry.id in self._waiting
        if due.entry.id in self._tries or (not fresh and busy):
            return
        task = asyncio.get_running_loop().create_task(self._try(due, fresh))
        self._tries[due.entry.id] = task

    async def _try(self, due: Due, fresh: bool) -> None:
        assert self._attempt is not None
        queue_id = due.entry.id
        try:
            outcome: Outcome
            if not fresh and await run_in(self._io, self._was_delivered, queue_id):
                log.info("queue entry %s was delivered before a restart; removed", queue_id)
                outcome = "done"
            else:
                outcome = await self._attempt(due)
        except asyncio.CancelledError:
            self._tries.pop(queue_id, None)
            raise
        except Exception:
            log.exception("queue entry %s: the try failed", queue_id)
            outcome = "retry"
        try:
            if outcome in ("done", "drop"):
                # no I/O (its row goes with the next write): on the loop, unless a recount
                # holds the store's lock while it reads the slot (the loop never waits for it)
                if not self.store.done(due, wait=False):
                    await run_in(self._io, self.store.done, due)
            elif outcome == "hold":
                await run_in(self._io, self.store.retry, due, HELD)
            else:
                wait = backoff(due.attempts + 1, self.retry_first, self.retry_most)
                at = self._clock() + wait
                await run_in(self._io, self.store.retry, due, at)
                self._soonest(at)
                log.info("queue entry %s deferred: tried again in %.0f s", queue_id, wait)
            metrics.queued(outcome)
        except Exception:
            log.exception(
                "queue entry %s: its outcome (%s) could not be written", queue_id, outcome
            )
            # its row is as it was (due): read again after a pause, never forgotten (the
            # loop learns of rows from such reads only) nor tried again at once
            self._soonest(self._clock() + self.retry_first)
        finally:
            self._tries.pop(queue_id, None)
            self._progress = time.monotonic()
            self._fill()
            if self._wake is not None and not self._waiting:
                self._wake.set()
