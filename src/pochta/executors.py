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
                 once share the disks' syncs and the FileDB's commits). A call handed here
                 costs the loop about a third of one through anyio's ``to_thread`` (37 against
                 110 us of the loop's CPU at load 9.5), which awaits a checkpoint and a
                 capacity limiter on the loop for each call

The loop's default pool is left to asyncio itself (``getaddrinfo``) and to code not moved
here. The other HTTP endpoints that read the database run on Starlette's own pool (anyio, 40
threads);
``/healthz`` reads none (:mod:`pochta.health`). A pool's threads start on first use; ``close``
lets running calls end and drops the waiting ones.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar, TypeVarTuple

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
            ThreadPoolExecutor(uploads, thread_name_prefix="pochta-upload"),
        )

    def close(self) -> None:
        for pool in (self.lookups, self.deliveries, self.local, self.checks, self.uploads):
            pool.shutdown(wait=False, cancel_futures=True)


async def run_in(executor: Executor | None, fn: Callable[[*Ts], T], *args: *Ts) -> T:
    """``fn(*args)`` in ``executor`` (None: the loop's default pool), with the caller's
    context variables (the log's ids), as ``asyncio.to_thread`` does."""
    return await submitted(executor, fn, *args)


def submitted(executor: Executor | None, fn: Callable[[*Ts], T], *args: *Ts) -> asyncio.Future[T]:
    """:func:`run_in`'s future, for a caller that needs one (to shield it, or to be told when
    it ends) without wrapping the call in a task of its own (a task costs the loop a step)."""
    loop = asyncio.get_running_loop()
    call = functools.partial(contextvars.copy_context().run, fn, *args)
    return loop.run_in_executor(executor, call)
