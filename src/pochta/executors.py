"""Thread pools for the blocking calls the servers' event loop hands off, one per thing those
calls wait on, so that a dependency that stalls holds only the work that needs it.

``asyncio.to_thread`` runs everything on the loop's one default pool: min(32, cores + 4)
threads, six on two cores. With the index's database paused, six recipient lookups (each
waiting up to ``postgres.pool_timeout``) took all six, and every other call of every protocol
that went through that pool waited behind them, though it did not need the database. Here:

    lookups      the mailbox index alone: SMTP/LMTP recipient lookups (``smtp.lookup_threads``)
    deliveries   storing a letter: the index, the FileDB, the storage nodes, the shingles'
                 counters (``smtp.delivery_threads``); and the verdict's decision, which reads
                 the counters and the learned words (Redis or PostgreSQL, possibly): SMTP's in
                 ``Mailbox.deliver_prepared``, the scan API's on its own
    local        this machine alone, no network: reading a spooled letter, analysis when
                 there are no worker processes, the scan API's explanation (the model)
                 (:data:`LOCAL_THREADS`)
    checks       the runs of SPF and DMARC on a letter's DNS answers (pure CPU, a few
                 milliseconds at most: :mod:`pochta.antispam.auth.replay`), off the event loop
                 whatever a sender's records hold (:data:`CHECK_THREADS`)
    uploads      a small file uploaded over HTTP (``PUT /v1/blobs/{key}`` of at most one
                 chunk), stored in one call: the disks and the FileDB (:data:`UPLOAD_THREADS`,
                 as many as Starlette's pool that served them before: the uploads waiting at
                 once share the disks' syncs and the FileDB's commits). A :class:`HandOff`
                 pool: a call handed here costs the loop a queue's put and, when it ends, one
                 ``call_soon_threadsafe`` (24 against 63 us of the loop's CPU through a
                 ``ThreadPoolExecutor``'s futures, at load 8; anyio's ``to_thread``, which
                 awaits a checkpoint and a capacity limiter on the loop, cost ~110)

The loop's default pool is left to asyncio itself (``getaddrinfo``) and to code not moved
here. The other HTTP endpoints that read the database run on Starlette's own pool (anyio, 40
threads);
``/healthz`` reads none (:mod:`pochta.health`). A pool's threads start on first use; ``close``
lets running calls end and drops the waiting ones.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar, TypeVarTuple

T = TypeVar("T")
Ts = TypeVarTuple("Ts")

LOCAL_THREADS = 4
"""Threads of the ``local`` pool: its calls wait on nothing remote, so a few suffice."""
CHECK_THREADS = 2
"""Threads of the ``checks`` pool: pure Python CPU under the GIL, so more would not run more."""
UPLOAD_THREADS = 40
"""Threads of the ``uploads`` pool: as many as anyio's default limiter (Starlette's pool)."""


@dataclass(frozen=True)
class Executors:
    lookups: Executor
    deliveries: Executor
    local: Executor
    checks: Executor
    uploads: Executor

    @classmethod
    def start(
        cls,
        *,
        lookups: int,
        deliveries: int,
        local: int = LOCAL_THREADS,
        checks: int = CHECK_THREADS,
        uploads: int = UPLOAD_THREADS,
    ) -> Executors:
        """Pools of these sizes (their threads start when first used)."""
        return cls(
            ThreadPoolExecutor(lookups, thread_name_prefix="pochta-lookup"),
            ThreadPoolExecutor(deliveries, thread_name_prefix="pochta-deliver"),
            ThreadPoolExecutor(local, thread_name_prefix="pochta-local"),
            ThreadPoolExecutor(checks, thread_name_prefix="pochta-check"),
            HandOff(uploads, thread_name_prefix="pochta-upload"),
        )

    def close(self) -> None:
        for pool in (self.lookups, self.deliveries, self.local, self.checks, self.uploads):
            pool.shutdown(wait=False, cancel_futures=True)


async def run_in(executor: Executor | None, fn: Callable[[*Ts], T], *args: *Ts) -> T:
    """``fn(*args)`` in ``executor`` (None: the loop's default pool), with the caller's
    context variables (the log's ids), as ``asyncio.to_thread`` does."""
    if isinstance(executor, HandOff):
        return await executor.call(fn, *args)
    loop = asyncio.get_running_loop()
    call = functools.partial(contextvars.copy_context().run, fn, *args)
    return await loop.run_in_executor(executor, call)


# a job: (the loop to answer on, or None; the asyncio or concurrent future; the caller's
# context; the function; its arguments)
_Job = tuple[
    asyncio.AbstractEventLoop | None,
    "asyncio.Future[Any] | Future[Any]",
    contextvars.Context,
    Callable[..., Any],
    tuple[Any, ...],
]


class HandOff(Executor):
    """A thread pool for calls from an event loop (:meth:`call`, which ``run_in`` uses):
    the loop puts a job on a queue and a thread of the pool runs it and answers with one
    ``loop.call_soon_threadsafe``: no ``concurrent.futures.Future`` (a lock and a condition
    each) and no chaining of two futures' callbacks, as ``loop.run_in_executor`` makes.
    ``submit`` serves other callers the usual way.

    As ``ThreadPoolExecutor``: at most ``max_workers`` threads, each started when a call
    finds every started one busy; a call whose caller was cancelled before a thread took it
    is not run; ``shutdown`` lets running calls end and cancels the waiting ones. Its
    threads are daemons: a call still running when the interpreter exits (past the server's
    graceful shutdown) is cut as by a crash, never acknowledged."""

    def __init__(self, max_workers: int, thread_name_prefix: str = "handoff") -> None:
        if max_workers < 1:
            raise ValueError("max_workers must be at least 1")
        self._max = max_workers
        self._prefix = thread_name_prefix
        self._queue: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._idle = 0  # threads waiting for a job that no call has counted on yet
        self._backlog = 0  # jobs queued while every thread was busy
        self._closed = False

    async def call(self, fn: Callable[[*Ts], T], *args: *Ts) -> T:
        """``fn(*args)`` in a thread of the pool, with the caller's context variables."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._put((loop, future, contextvars.copy_context(), fn, args))
        return await future

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        future: Future[T] = Future()
        self._put((None, future, contextvars.copy_context(), functools.partial(fn, **kwargs), args))
        return future

    def _put(self, job: _Job) -> None:
        with self._lock:
            if self._closed:
                raise RuntimeError("cannot schedule new calls after shutdown")
            if self._idle:
                self._idle -= 1
            elif len(self._threads) < self._max:
                name = f"{self._prefix}_{len(self._threads)}"
                thread = threading.Thread(target=self._work, name=name, daemon=True)
                thread.start()  # raising (no thread left to start): not counted, not queued
                self._threads.append(thread)
            else:
                self._backlog += 1
            self._queue.put(job)

    def _work(self) -> None:
        while (job := self._queue.get()) is not None:
            answer = _run(job)
            submitted = job[0] is None
            del job
            if submitted and answer is not None:
                # a concurrent future's callbacks run here and may wait on this pool: the
                # thread is free once they have returned (as ThreadPoolExecutor's)
                answer()
                answer = None
            with self._lock:  # free for the next call before answering a loop's
                if self._backlog:
                    self._backlog -= 1
                else:
                    self._idle += 1
            if answer is not None:
                answer()
            del answer

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            self._closed = True
            threads = list(self._threads)
        if cancel_futures:
            while True:
                try:
                    job = self._queue.get_nowait()
                except queue.Empty:
                    break
                if job is not None:
                    _cancel(job)
        for _ in threads:
            self._queue.put(None)
        if wait:
            for thread in threads:
                thread.join()


def _run(job: _Job) -> Callable[[], None] | None:
    """Run a job; what answers its caller (None: it was cancelled before it ran)."""
    loop, future, context, fn, args = job
    if loop is None:
        done: Future[Any] = future  # type: ignore[assignment]
        if not done.set_running_or_notify_cancel():
            return None
        try:
            result = context.run(fn, *args)
        except BaseException as exc:
            return functools.partial(done.set_exception, exc)
        return functools.partial(done.set_result, result)
    waiting: asyncio.Future[Any] = future  # type: ignore[assignment]
    if waiting.cancelled():
        return None
    try:
        result = context.run(fn, *args)
    except BaseException as exc:
        return functools.partial(_answer, loop, _fail, waiting, exc)
    return functools.partial(_answer, loop, _succeed, waiting, result)


def _answer(
    loop: asyncio.AbstractEventLoop,
    how: Callable[[asyncio.Future[Any], Any], None],
    future: asyncio.Future[Any],
    value: object,
) -> None:
    with contextlib.suppress(RuntimeError):  # the loop was closed: nobody waits any more
        loop.call_soon_threadsafe(how, future, value)


def _succeed(future: asyncio.Future[Any], result: object) -> None:
    if not future.done():
        future.set_result(result)


def _fail(future: asyncio.Future[Any], exc: BaseException) -> None:
    if future.done():
        return
    if isinstance(exc, StopIteration):  # an asyncio future refuses it: its caller would hang
        error = RuntimeError("the call raised StopIteration")
        error.__cause__ = exc
        exc = error
    future.set_exception(exc)


def _cancel(job: _Job) -> None:
    loop, future, *_ = job
    if loop is None:
        future.cancel()
        return
    with contextlib.suppress(RuntimeError):  # the loop was closed
        loop.call_soon_threadsafe(future.cancel)
