"""Group commit for steps sent to a server: concurrent callers' steps go out together.

``GroupCommit(run, max_batch, leaders, spread)``: ``submit(step)`` returns the step's result
(or raises its error). Up to ``leaders`` callers at a time hold a slot. A caller that finds
no group on the wire takes a slot at once; one that finds a group on the wire and a slot
free takes it only when ``spread`` steps (its own included) would go in the new group, else
it waits in the queue (so 8 callers share groups rather than send 8 groups of one, and many
callers still keep several groups on the wire). A slot holder sends its own step and the
oldest waiting ones (at most ``max_batch``) to ``run`` (one round trip, one transaction on
the server), gives every caller of the group its result, hands its slot to the oldest
caller still waiting (whose step leads the next group) or frees it, and wakes the callers
of its group. One caller alone pays one round trip per step;
under load the groups grow by themselves (the steps that arrive during one round trip form
the next group), and ``leaders`` groups can be on the wire at once, so the server's own
WAL group commit can merge their flushes. Each caller is woken once per reason: its step
is done, or it is handed a slot (LevelDB's writer queue, as ``pochta.sqlitedb`` for SQLite,
with more than one writer).

Gathering (client-side ``commit_delay``): a caller answered by a group goes back to its own
work before it submits again, so the first of them to come back would lead a group of one
while the others, a moment later, form the next group: groups alternate between one step and
all the others, and every other round trip carries almost nothing. So a leader whose group
would be smaller than the last one sent waits, at most ``gather`` times the last round trip
(and never more than ``max_gather`` seconds), for the steps of that many callers to arrive.
One caller alone never waits (its last group held one step); when callers go away, the next
group is smaller and so is what its successor waits for. ``gather=0`` never waits: for a
server whose step costs CPU rather than a round trip (the embedded FileDB), where waiting
only idles the writer.
"""

from __future__ import annotations

import threading
import time
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
        spread: int = 8,
        gather: float = 0.5,
        max_gather: float = 0.002,
    ) -> None:
        """``run(steps)`` returns one outcome per step, in order: a result, or the error
        that step's caller must see. An exception from ``run`` itself fails every step."""
        if max_batch < 1 or leaders < 1 or spread < 1:
            raise ValueError("max_batch, leaders and spread must be at least 1")
        self._run = run
        self._max = max_batch
        self._mutex = threading.Lock()  # guards _queue, _free, _closed
        self._queue: deque[_Waiter[S, R]] = deque()  # waiting, not yet in a group
        self._leaders = leaders
        self._spread = spread
        self._free = leaders  # free slots
        self._closed = False
        self._gather = gather
        self._max_gather = max_gather
        self._last = 1  # steps in the last group sent
        self._trip = 0.0  # seconds the last group's run took
        self._arrived = threading.Condition(self._mutex)  # a step queued while leaders gather
        self._want = 0  # the least queue length a gathering leader waits for (0: none)
        self._gathering = 0  # leaders gathering now

    def submit(self, step: S) -> R:
        me: _Waiter[S, R] = _Waiter(step)
        with self._mutex:
            if self._closed:
                raise StorageError("the database is closed")
            # no group on the wire: lead at once; else a new group only for ``spread`` steps
            lead = self._free == self._leaders or (
                self._free > 0 and len(self._queue) + 1 >= self._spread
            )
            if lead:
                self._free -= 1
            else:
                self._queue.append(me)
                if self._want and len(self._queue) >= self._want:
                    self._arrived.notify_all()
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
            want = min(self._last, self._max) - 1  # steps of others this group waits for
            if self._gather > 0 and len(self._queue) < want and self._trip > 0:
                self._gather_for(want)
            n = min(len(self._queue), self._max - 1)
            batch = [me, *(self._queue.popleft() for _ in range(n))]
            self._last = len(batch)
        start = time.perf_counter()
        try:
            outcomes: Sequence[R | BaseException] = self._run([w.step for w in batch])
            if len(outcomes) != len(batch):
                raise AssertionError(f"{len(outcomes)} outcomes for {len(batch)} steps")
        except BaseException as exc:  # every caller of the group sees it
            outcomes = [exc] * len(batch)
        self._trip = time.perf_counter() - start
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

    def _gather_for(self, want: int) -> None:
        """Wait (holding ``_mutex`` through the condition) until ``want`` steps are queued or
        the gathering time is over."""
        deadline = time.perf_counter() + min(self._trip * self._gather, self._max_gather)
        self._want = want if not self._gathering else min(self._want, want)
        self._gathering += 1
        try:
            while len(self._queue) < want:
                left = deadline - time.perf_counter()
                if left <= 0 or self._closed:
                    break
                self._arrived.wait(left)
        finally:
            self._gathering -= 1
            if not self._gathering:
                self._want = 0

    def close(self) -> None:
        """Refuse new steps; steps already queued still run."""
        with self._mutex:
            self._closed = True
