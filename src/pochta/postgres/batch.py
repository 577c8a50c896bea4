"""Group commit for steps sent to a server: concurrent callers' steps go out together.

``GroupCommit(run, max_batch, leaders)``: ``submit(step)`` queues a step and returns its
result (or raises its error). Up to ``leaders`` callers at a time hold a slot; a slot holder
takes the oldest queued steps (at most ``max_batch``), hands them to ``run`` (one round
trip, one transaction on the server), gives every caller of the group its result and wakes
it, and keeps taking groups until its own step is done; then it passes the slot to the
oldest caller still waiting, or frees it. One caller alone pays one round trip per step;
under load the groups grow by themselves (the steps that arrive during one round trip form
the next group), and ``leaders`` groups can be on the wire at once, so the server's own
WAL group commit can merge their flushes. Each caller is woken once per reason: its step
is done, or it is handed a slot (LevelDB's writer queue, as ``pochta.sqlitedb`` for SQLite,
with more than one writer).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from pochta.errors import StorageError

S = TypeVar("S")
R = TypeVar("R")


class _Waiter(Generic[S, R]):
    __slots__ = ("done", "error", "lead", "step", "value", "wake")

    def __init__(self, step: S) -> None:
        self.step = step
        self.done = False
        self.lead = False  # handed a slot while waiting
        self.value: R | None = None
        self.error: BaseException | None = None
        self.wake = threading.Semaphore(0)


class GroupCommit(Generic[S, R]):
    def __init__(
        self,
        run: Callable[[list[S]], Sequence[R | BaseException]],
        *,
        max_batch: int = 256,
        leaders: int = 2,
    ) -> None:
        """``run(steps)`` returns one outcome per step, in order: a result, or the error
        that step's caller must see. An exception from ``run`` itself fails every step."""
        if max_batch < 1 or leaders < 1:
            raise ValueError("max_batch and leaders must be at least 1")
        self._run = run
        self._max = max_batch
        self._mutex = threading.Lock()
        self._queue: deque[_Waiter[S, R]] = deque()
        self._free = leaders
        self._closed = False

    def submit(self, step: S) -> R:
        me: _Waiter[S, R] = _Waiter(step)
        with self._mutex:
            if self._closed:
                raise StorageError("the database is closed")
            self._queue.append(me)
            leading = self._free > 0
            if leading:
                self._free -= 1
        while True:
            if leading:
                batch: list[_Waiter[S, R]] = []
                heir = None
                with self._mutex:
                    if me.done or not self._queue:
                        leading = False  # pass the slot on, or free it
                        if self._queue:
                            heir = self._queue[0]
                            heir.lead = True
                        else:
                            self._free += 1
                    else:
                        for _ in range(min(len(self._queue), self._max)):
                            batch.append(self._queue.popleft())
                if heir is not None:
                    heir.wake.release()
                if batch:
                    self._group(batch, me)
                continue
            if me.done:
                break
            me.wake.acquire()  # done, or handed a slot
            with self._mutex:
                if me.lead:
                    me.lead = False
                    leading = True
        if me.error is not None:
            raise me.error
        return me.value  # type: ignore[return-value]

    def _group(self, batch: list[_Waiter[S, R]], me: _Waiter[S, R]) -> None:
        try:
            outcomes: Sequence[R | BaseException] = self._run([w.step for w in batch])
            if len(outcomes) != len(batch):
                raise AssertionError(f"{len(outcomes)} outcomes for {len(batch)} steps")
        except BaseException as exc:  # every caller of the group sees it
            outcomes = [exc] * len(batch)
        for waiter, outcome in zip(batch, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                waiter.error = outcome
            else:
                waiter.value = outcome
            waiter.done = True
            if waiter is not me:
                waiter.wake.release()

    def close(self) -> None:
        """Refuse new steps; steps already queued still run."""
        with self._mutex:
            self._closed = True
