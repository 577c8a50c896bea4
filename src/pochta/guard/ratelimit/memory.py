"""Rolling rate limits and schedules in dicts: one process, for tests and single-process
tools."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from pochta.guard import schedule as schedules
from pochta.guard.ratelimit import Usage, decide, refilled_in
from pochta.guard.schedule import SlotState
from pochta.types import Clock, Limit, RateDecision, Schedule, Slot


class MemoryRateLimitBackend:
    """``RateLimitBackend`` in a dict: one process, for tests and single-process tools."""

    SWEEP_EVERY = 4096  # commits between sweeps of full (forgettable) states

    def __init__(self, clock: Clock = time.time) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._usage: dict[str, tuple[Usage, float]] = {}  # key -> usage, when it is full again
        self._slots: dict[str, tuple[SlotState, float]] = {}  # key -> state, when it expires
        self._commits = 0

    def hit(
        self, checks: Sequence[tuple[str, Limit]], cost: float, commit: bool = True
    ) -> RateDecision:
        with self._lock:
            now = self._clock()
            found = [self._usage.get(key) for key, _ in checks]
            usages = [None if f is None or f[1] <= now else f[0] for f in found]
            decision, new = decide(
                [(limit, u) for (_, limit), u in zip(checks, usages, strict=True)], cost, now
            )
            if decision.allowed and commit:
                for (key, limit), usage in zip(checks, new, strict=True):
                    assert usage is not None
                    self._usage[key] = (usage, usage.at + refilled_in(limit, usage))
                self._commits += 1
                if self._commits % self.SWEEP_EVERY == 0:
                    self._usage = {k: v for k, v in self._usage.items() if v[1] > now}
            return decision

    def reserve(self, key: str, schedule: Schedule, commit: bool = True) -> Slot:
        with self._lock:
            now = self._clock()
            found = self._slots.get(key)
            state = None if found is None or found[1] <= now else found[0]
            slot, new = schedules.reserve(schedule, state, now)
            if slot.granted and commit and new is not None:
                self._slots[key] = (new, schedules.expires(schedule, new))
                self._commits += 1
                if self._commits % self.SWEEP_EVERY == 0:
                    self._slots = {k: v for k, v in self._slots.items() if v[1] > now}
            return slot

    def reset(self, keys: Sequence[str]) -> None:
        with self._lock:
            for key in keys:
                self._usage.pop(key, None)
                self._slots.pop(key, None)

    def close(self) -> None:
        pass
