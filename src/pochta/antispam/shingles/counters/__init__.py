"""The shingler's counters (seed 002): per (shingle, type) and kind, in time buckets.

    Counters (service.py)       update / query / flush / close; what callers use
      ├── ShardBuffer (buffer.py)   per-shard increments added up in memory, swapped out by a
      │                             background flusher and written one batch per shard
      ├── ReadCache (buffer.py)     recent store values of hot shingles
      └── CounterStore              this Protocol; one atomic step per shard batch
            ├── MemoryStore (memory.py)   in-process dicts: tests, and the reference model
            ├── SQLiteStore (sqlite.py)   embedded: one file, one writer (pochta.sqlitedb)
            └── RedisStore (redis.py)     Redis (server, Sentinel, Cluster): Lua, tag per shard

Time buckets, windows and key names are pure functions in ``buckets.py``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from pochta.antispam.shingles.counters.buckets import Buckets, Span, shard_of


@dataclass(frozen=True, slots=True)
class Ref:
    """A counted shingle: its type number and 64-bit hash. A paired shingle (hash(a, b))
    names its ``unique`` (hash(a)): the unique's counter goes up by one when the pair's
    counter of a bucket goes from zero, and both live on the unique's shard."""

    type: int
    hash: int
    unique: Ref | None = None

    @property
    def shard(self) -> int:
        return shard_of(self.unique.hash if self.unique is not None else self.hash)

    @property
    def id(self) -> tuple[int, int]:
        return (self.type, self.hash)


Packed = tuple[int, int, "tuple[int, int] | None"]
"""A :class:`Ref` as plain numbers, (type, hash, (unique's type, hash) or None): what a
worker's answer carries of a letter's shingles (``pochta.mailbox.intake.for_the_server``).
Tuples of ints read back ~20x cheaper than as many frozen dataclasses."""


def pack(refs: Iterable[Ref]) -> tuple[Packed, ...]:
    """``refs`` as numbers; a unique has no unique of its own (ValueError if one has)."""
    refs = tuple(refs)
    if any(r.unique is not None and r.unique.unique is not None for r in refs):
        raise ValueError("a shingle's unique names a unique of its own")
    return tuple(
        (r.type, r.hash, None if r.unique is None else (r.unique.type, r.unique.hash)) for r in refs
    )


def unpack(packed: Iterable[Packed]) -> list[Ref]:
    return [Ref(t, h, None if u is None else Ref(*u)) for t, h, u in packed]


Cell = tuple[int, int, str, int, int, "tuple[int, int] | None"]
"""One buffered increment, (type, hash, code, slot, n, unique): ``n`` more of kind ``code``
in 10-minute bucket ``slot`` (and so in its day) of shingle (type, hash). ``unique`` is
(type, hash) of its unique when the shingle is paired, else None. A plain tuple: the buffer
makes hundreds of thousands a second."""


Batch = tuple[int, Sequence[Cell]]
"""One shard's increments: (shard, cells). Every cell's shingle lives on that shard."""


class CounterStore(Protocol):
    """Where the counters live. Values are 64-bit; a bucket nobody incremented reads as 0."""

    def apply(self, batches: Sequence[Batch]) -> list[Exception | None]:
        """Add each batch in one atomic step (a paired cell: the pair's buckets, and the
        unique's by one for each of the pair's buckets that was zero). For each batch: None
        when it was written, or the StorageError that kept it out (nothing of it written)."""

    def read(self, refs: Sequence[Ref], span: Span) -> list[Buckets]:
        """The stored buckets of each ref inside ``span``; StorageError when the store did
        not answer."""

    def expire(self, now: float) -> int:
        """Drop buckets no window can reach any more; how many (stores whose buckets expire
        by themselves return 0)."""

    def close(self) -> None: ...
