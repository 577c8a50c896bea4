"""A shared word store whose reads on the mail's path answer in time or not at all.

Scoring a letter reads its words' learned counts (``counts``, ``totals``; deciding whose own
words count reads ``all_totals``). In one file on the machine that costs a tenth of a
millisecond; in a shared PostgreSQL or Redis it is a round trip to a server that can stall
(paused, failing over, partitioned), and then every letter, every ``POST /v1/scan`` would wait
with it. The learned words only refine a verdict (the shipped table scores alone when they are
missing, as the shingle counters' outage does), so a read that has not answered within
``timeout`` seconds raises StorageError and the letter goes on without them.

A read that timed out still waits for its server in one of ``threads`` reader threads; when
all of them wait, a new read is refused at once rather than queued: a stalled store costs a
letter nothing but ``timeout`` (the first ones) or nothing at all (the rest), and at most
``threads`` threads. Writes (the flusher's ``add``, ``prune``, ``forget``) go to the store as
they are: they run off the mail's path and keep what they could not write.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TypeVar

from pochta.antispam.words import WordStore
from pochta.errors import StorageError

T = TypeVar("T")


class BoundedReads:
    def __init__(self, store: WordStore, *, timeout: float = 0.5, threads: int = 4) -> None:
        self.store = store
        self.timeout = timeout
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="pochta-words-read")
        self._free = threading.BoundedSemaphore(threads)

    def _read(self, fn: Callable[[], T]) -> T:
        if not self._free.acquire(blocking=False):
            raise StorageError("learned words: every reader is still waiting for the store")

        def run() -> T:
            try:
                return fn()
            finally:
                self._free.release()

        future = self._pool.submit(run)
        try:
            return future.result(self.timeout)
        except FutureTimeout:
            raise StorageError(
                f"learned words: the store did not answer within {self.timeout:g} s"
            ) from None

    # reads on the mail's path: bounded

    def counts(self, owner: int, words: Sequence[int]) -> dict[int, tuple[int, int]]:
        return self._read(lambda: self.store.counts(owner, words))

    def totals(self, owner: int) -> tuple[int, int]:
        return self._read(lambda: self.store.totals(owner))

    def all_totals(self) -> dict[int, tuple[int, int]]:
        return self._read(self.store.all_totals)

    # the rest: as the store does them

    def add(
        self,
        owner: int,
        words: Mapping[int, tuple[int, int]],
        letters: tuple[int, int],
        day: int,
    ) -> None:
        self.store.add(owner, words, letters, day)

    def size(self, owner: int) -> int:
        return self.store.size(owner)

    def prune(self, owner: int, keep: int) -> int:
        return self.store.prune(owner, keep)

    def forget(self, owner: int) -> None:
        self.store.forget(owner)

    def owners(self) -> list[int]:
        return self.store.owners()

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.store.close()


def _check(store: BoundedReads) -> WordStore:  # the Protocol, checked by mypy
    return store
