"""In-process counters: dicts under a lock. The fake beside the real stores, and their model."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from pochta.antispam.shingles.counters import Batch, Cell, Ref
from pochta.antispam.shingles.counters.buckets import (
    MAX_VALUE,
    SLOTS_PER_DAY,
    Buckets,
    Span,
    expired_before,
)
from pochta.errors import StorageError

Id = tuple[int, int]  # (type, hash)


class MemoryStore:
    def __init__(self) -> None:
        self._slots: dict[Id, dict[tuple[str, int], int]] = {}
        self._days: dict[Id, dict[tuple[str, int], int]] = {}
        self._lock = threading.Lock()
        self._closed = False

    def _add(
        self, table: dict[Id, dict[tuple[str, int], int]], id_: Id, key: tuple[str, int], n: int
    ) -> int:
        cells = table.setdefault(id_, {})
        value = min(cells.get(key, 0) + n, MAX_VALUE)
        cells[key] = value
        return value

    def _apply_cell(self, c: Cell) -> None:
        type_, hash_, code, slot, n, unique = c
        id_ = (type_, hash_)
        day = slot // SLOTS_PER_DAY
        s = self._add(self._slots, id_, (code, slot), n)
        d = self._add(self._days, id_, (code, day), n)
        if unique is not None:
            if s == n:
                self._add(self._slots, unique, (code, slot), 1)
            if d == n:
                self._add(self._days, unique, (code, day), 1)

    def apply(self, batches: Sequence[Batch]) -> list[Exception | None]:
        with self._lock:
            if self._closed:
                return [StorageError("counter store is closed") for _ in batches]
            for _, cells in batches:
                for c in cells:
                    self._apply_cell(c)
        return [None] * len(batches)

    def read(self, refs: Sequence[Ref], span: Span) -> list[Buckets]:
        out = []
        with self._lock:
            if self._closed:
                raise StorageError("counter store is closed")
            for ref in refs:
                slots = self._slots.get(ref.id, {})
                days = self._days.get(ref.id, {})
                out.append(
                    Buckets(
                        {k: n for k, n in slots.items() if span.slot_from <= k[1] <= span.slot_to},
                        {k: n for k, n in days.items() if span.day_from <= k[1] <= span.day_to},
                    )
                )
        return out

    def expire(self, now: float) -> int:
        first_slot, first_day = expired_before(now)
        dropped = 0
        with self._lock:
            for table, first in ((self._slots, first_slot), (self._days, first_day)):
                for id_ in list(table):
                    cells = table[id_]
                    old = [k for k in cells if k[1] < first]
                    for k in old:
                        del cells[k]
                    dropped += len(old)
                    if not cells:
                        del table[id_]
        return dropped

    def close(self) -> None:
        with self._lock:
            self._closed = True
