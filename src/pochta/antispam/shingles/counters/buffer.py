"""The write buffer and the read cache of seed 002: plain data structures, no I/O, no threads.

``ShardBuffer`` adds up the increments of one shard: five times +1 and once +5 are the same
write. The service swaps a whole shard's buffer for an empty one and writes it as one batch;
while that batch is in flight its contributions still count in reads.

For reads, a buffer also says what it adds to each shingle: its own increments, and for a
unique shingle one per distinct buffered pair and bucket (an upper bound: the store may
already have counted that pair in that bucket; the flush settles it exactly). The service
does not use that bound: it asks ``pair_buckets`` which buffered (pair, bucket)s a unique
has and counts only those whose pair bucket is still zero in the store (and in no other
buffer), so a read equals what the store holds once everything is flushed.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pochta.antispam.shingles.counters import Cell
from pochta.antispam.shingles.counters.buckets import MAX_VALUE, SLOTS_PER_DAY, Buckets, Span

Id = tuple[int, int]  # (type, hash)


CellKey = tuple[int, int, str, int]  # (type, hash, kind code, 10-minute bucket)


class ShardBuffer:
    """One shard's increments: a flat dict (type, hash, code, slot) -> n, the fewest objects
    per cell (the buffer can hold millions, and the garbage collector walks them)."""

    __slots__ = ("buckets", "cells", "links", "pairs", "since", "unique_days", "unique_slots")

    def __init__(self) -> None:
        self.cells: dict[CellKey, int] = {}
        self.buckets: set[tuple[str, int]] = set()  # the (code, slot) pairs present
        self.links: dict[Id, Id] = {}  # paired shingle -> its unique
        self.pairs: dict[Id, set[Id]] = {}  # unique -> its paired shingles buffered here
        self.unique_slots: dict[Id, dict[tuple[str, int], int]] = {}
        self.unique_days: dict[Id, dict[tuple[str, int], int]] = {}
        self.since = 0.0  # monotonic time of the first add

    @property
    def size(self) -> int:
        return len(self.cells)

    def add(
        self, type_: int, hash_: int, code: str, slot: int, n: int, unique: Id | None = None
    ) -> int:
        """Add one increment; returns how many new cells it took (0 or 1)."""
        cells = self.cells
        k = (type_, hash_, code, slot)
        old = cells.get(k)
        if old is not None:
            cells[k] = min(old + n, MAX_VALUE)
            return 0
        if not cells:
            self.since = time.monotonic()
        if unique is not None:
            self.links[(type_, hash_)] = unique
            self.pairs.setdefault(unique, set()).add((type_, hash_))
            day = slot // SLOTS_PER_DAY
            key = (code, slot)
            us = self.unique_slots.setdefault(unique, {})
            us[key] = us.get(key, 0) + 1
            same_day = any(
                (type_, hash_, code, s) in cells
                for c, s in self.buckets
                if c == code and s // SLOTS_PER_DAY == day
            )
            if not same_day:
                ud = self.unique_days.setdefault(unique, {})
                dkey = (code, day)
                ud[dkey] = ud.get(dkey, 0) + 1
        cells[k] = n
        self.buckets.add((code, slot))
        return 1

    def add_cells(self, cells: Iterable[Cell]) -> int:
        return sum(self.add(*c) for c in cells)

    def drain(self) -> list[Cell]:
        links = self.links
        if not links:
            return [(t, h, code, slot, n, None) for (t, h, code, slot), n in self.cells.items()]
        return [
            (t, h, code, slot, n, links.get((t, h))) for (t, h, code, slot), n in self.cells.items()
        ]

    def contribution(self, id_: Id, out: Buckets, *, uniques: bool = True) -> None:
        """Add what this buffer holds for ``id_`` to ``out``: its increments and, unless
        ``uniques`` is false, the upper bound of its unique counts (see the module)."""
        cells = self.cells
        if cells:
            t, h = id_
            for code, slot in self.buckets:
                n = cells.get((t, h, code, slot))
                if n is not None:
                    out.add_slot(code, slot, n)
        if not uniques:
            return
        us = self.unique_slots.get(id_)
        if us:
            for k, n in us.items():
                out.slots[k] = out.slots.get(k, 0) + n
        ud = self.unique_days.get(id_)
        if ud:
            for k, n in ud.items():
                out.days[k] = out.days.get(k, 0) + n

    def pair_buckets(self, unique: Id) -> list[tuple[Id, str, int]]:
        """The (pair, kind code, slot) cells buffered here for the pairs of ``unique``."""
        pairs = self.pairs.get(unique)
        if not pairs:
            return []
        cells = self.cells
        return [
            (p, code, slot)
            for p in pairs
            for code, slot in self.buckets
            if (p[0], p[1], code, slot) in cells
        ]


@dataclass(slots=True)
class _Cached:
    buckets: Buckets
    span: Span
    at: float  # monotonic time of the store read


class ReadCache:
    """Recent store values of shingles, least recently used dropped first. A flush that
    completes adds its increments to the cached values it touched (so hot shingles stay
    cached); a unique's cached value is dropped instead (the flush decided it)."""

    def __init__(self, size: int, ttl: float) -> None:
        self.size = size
        self.ttl = ttl
        self._items: OrderedDict[Id, _Cached] = OrderedDict()

    def get(self, id_: Id, sp: Span, now: float) -> Buckets | None:
        item = self._items.get(id_)
        if item is None:
            return None
        if now - item.at > self.ttl or not (
            item.span.slot_from <= sp.slot_from
            and item.span.day_from <= sp.day_from
            and item.span.slot_to >= sp.slot_to
            and item.span.day_to >= sp.day_to
        ):
            return None
        self._items.move_to_end(id_)
        return item.buckets

    def put(self, id_: Id, buckets: Buckets, sp: Span, at: float) -> None:
        if self.size <= 0:
            return
        self._items[id_] = _Cached(buckets, sp, at)
        self._items.move_to_end(id_)
        while len(self._items) > self.size:
            self._items.popitem(last=False)

    def written(self, cells: Sequence[Cell]) -> None:
        """A batch reached the store: keep the cached values equal to the store's. A value
        ``get`` handed out is never changed (its reader goes on outside the lock: a key added
        to the dict it iterates would raise): a touched value is copied first, once a batch."""
        items = self._items
        if not items:
            return
        copied: set[Id] = set()
        for t, h, code, slot, n, unique in cells:
            item = items.get((t, h))
            if item is not None:
                if (t, h) not in copied:
                    item.buckets = item.buckets.copy()
                    copied.add((t, h))
                item.buckets.add_slot(code, slot, n)
            if unique is not None:
                items.pop(unique, None)

    def drop(self, ids: Iterable[Id]) -> None:
        for id_ in ids:
            self._items.pop(id_, None)

    def __len__(self) -> int:
        return len(self._items)
