"""Group commit for steps sent to a server: concurrent callers' steps go out together.

``GroupCommit(run, max_batch, leaders)``: ``submit(step)`` returns the step's result (or
raises its error). Up to ``leaders`` callers at a time hold a slot; a caller that finds a
slot free takes it, else it waits in the queue. A slot holder sends its own step and the
oldest waiting ones (at most ``max_batch``) to ``run`` (one round trip, one transaction on
the server), gives every caller of the group its result, hands its slot to the oldest
caller still waiting (whose step leads the next group) or frees it, and wakes the callers
of its group. One caller alone pays one round trip per step;
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
    """One caller's step. ``wake`` is held from birth and released exactly once: when the
    step is done, or when the caller is handed a slot (its step then leads the next group)."""

    __slots__ = ("done", "error", "step", "value", "wake")

    def __init__(self, step: S) -> None:
        self.step = step
        self.done = False
        self.value: R | None = None
        self.error: BaseException | None = None
        self.wake = threading.Lock()
        self.wake.acquire()


class GroupCommit(Generic[S, R]):
    def __init__(
        self,
        run: Callable[[list[S]], Sequence[R | BaseException]],
        *,
        max_batch: int = 256,
        leaders: int = 8,
    ) -> None:
        """``run(steps)`` returns one outcome per step, in order: a result, or the error
        that step's caller must see. An exception from ``run`` itself fails every step."""
        if max_batch < 1 or leaders < 1:
            raise ValueError("max_batch and leaders must be at least 1")
        self._run = run
        self._max = max_batch
        self._mutex = threading.Lock()  # guards _queue, _free, _closed
        self._queue: deque[_Waiter[S, R]] = deque()  # waiting, not yet in a group
        self._free = leaders  # free slots; while any is free, nobody waits in _queue
        self._closed = False

    def submit(self, step: S) -> R:
        me: _Waiter[S, R] = _Waiter(step)
        with self._mutex:
            if self._closed:
                raise StorageError("the database is closed")
            lead = self._free > 0
            if lead:
                self._free -= 1
            else:
                self._queue.append(me)
        if not lead:
            me.wake.acquire()  # done by a slot holder, or handed a slot (then not done)
        if not me.done:
            self._lead(me)
        if me.error is not None:
            raise me.error
        return me.value  # type: ignore[return-value]

    def _lead(self, me: _Waiter[S, R]) -> None:
        """Send one group: this caller's step first, then the oldest waiting ones; then
        hand the slot to the oldest caller still waiting, or free it."""
        with self._mutex:
            n = min(len(self._queue), self._max - 1)
            batch = [me, *(self._queue.popleft() for _ in range(n))]
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
        with self._mutex:
            heir = self._queue.popleft() if self._queue else None
            if heir is None:
                self._free += 1
        if heir is not None:
            heir.wake.release()  # it leads the next group, its own step first
        for waiter in batch[1:]:
            waiter.wake.release()

    def close(self) -> None:
        """Refuse new steps; steps already queued still run."""
        with self._mutex:
            self._closed = True
