"""A FileDB spread over several FileDBs by key: one installation's files on several primaries.

seed 004 sizes the store at 12 billion files; docs/sizing.md says how many PostgreSQL primaries
that takes. A key (a SHA-256 in hex) falls in one of ``BUCKETS`` buckets (its first three hex
digits), and the buckets are cut into as many contiguous ranges as there are shards: every step
on a key goes to its one shard, as one step there, so each shard keeps the whole FileDB contract
for its keys (one atomic step, its own journal and group commit).

What spans the shards:

- the operation journal: a step's op is journaled on the key's shard, in the step's
  transaction. ``applied``, ``forget_ops`` and ``journal`` ask every shard (recovery and fsck
  are rare). An op id reused on a key of *another shard* is not seen as a replay there: pochta's
  ids (a letter's id, its attachment number, the magic) never name two keys, and the contract
  suite's check of a reuse across keys holds per shard only (said in the suite);
- ``live_keys`` reads the shards' ascending pages in shard order (their ranges are
  ordered); ``count_live`` adds their counts.

The number of shards fixes where each key lives: an installation chooses it when it starts
(``[postgres] filedb_shards``); moving a range of buckets to a new primary (copy its rows while
its steps wait, then switch) is a tool not built yet.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Collection, Sequence

from pochta.blobs.keys import parse_key
from pochta.errors import InvalidInput
from pochta.types import FileDB, FileRecord, Key, Magic, Op

BUCKETS = 4096  # a key's first three hex digits


def bucket_of(key: Key) -> int:
    """The key's bucket: its first three hex digits (keys are SHA-256, so buckets fill evenly)."""
    return int(key[:3], 16)


def shard_of(key: Key, shards: int) -> int:
    """Which of ``shards`` contiguous ranges of buckets holds the key."""
    return bucket_of(key) * shards // BUCKETS


class ShardedFileDB:
    """``FileDB`` over ``shards`` (at least one; their order is part of the data's layout)."""

    def __init__(self, shards: Sequence[FileDB]) -> None:
        if not shards:
            raise InvalidInput("a sharded FileDB needs at least one shard")
        if len(shards) > BUCKETS:
            raise InvalidInput(f"at most {BUCKETS} shards (one bucket each)")
        self._shards = tuple(shards)

    def _of(self, key: Key) -> FileDB:
        return self._shards[shard_of(parse_key(key), len(self._shards))]

    # -- per key: the key's shard, one step there ------------------------------------------
    def inc(self, key: Key, magic: Magic, op: Op | None = None) -> FileRecord:
        return self._of(key).inc(key, magic, op)

    def upsert(self, key: Key, magic: Magic, pair_id: int, op: Op | None = None) -> FileRecord:
        return self._of(key).upsert(key, magic, pair_id, op)

    def dec(self, key: Key, magic: Magic, op: Op | None = None) -> FileRecord:
        return self._of(key).dec(key, magic, op)

    def get(self, key: Key) -> FileRecord | None:
        return self._of(key).get(key)

    def get_deleted(self, key: Key) -> FileRecord | None:
        return self._of(key).get_deleted(key)

    def forget_deleted(self, key: Key, moved_at: float) -> bool:
        return self._of(key).forget_deleted(key, moved_at)

    def repoint(self, key: Key, old_pair: int, new_pair: int) -> bool:
        return self._of(key).repoint(key, old_pair, new_pair)

    def revive(self, key: Key, pair_id: int) -> FileRecord:
        return self._of(key).revive(key, pair_id)

    # -- across the shards -----------------------------------------------------------------
    def applied(self, ops: Collection[Op]) -> set[Op]:
        ops = list(ops)
        found: set[Op] = set()
        for shard in self._shards:
            if not ops:
                break
            found |= shard.applied(ops)
            ops = [op for op in ops if op not in found]
        return found

    def forget_ops(self, ops: Collection[Op]) -> None:
        ops = list(ops)
        if not ops:
            return
        for shard in self._shards:
            shard.forget_ops(ops)

    def journal(self, after: Op = b"", limit: int = 1000) -> list[Op]:
        pages = [shard.journal(after, limit) for shard in self._shards]
        # an op journaled on two shards (reused on keys of both) is listed once
        merged = (op for op, _ in itertools.groupby(heapq.merge(*pages)))
        return list(itertools.islice(merged, max(limit, 0)))

    def live_keys(self, pair_id: int, after: Key | None = None, limit: int = 1000) -> list[Key]:
        # the shards hold ascending, disjoint ranges of keys: their pages, in shard order, are
        # one ascending list; a shard wholly below ``after`` is not asked
        first = 0 if after is None else shard_of(parse_key(after), len(self._shards))
        keys: list[Key] = []
        for shard in self._shards[first:]:
            if len(keys) >= limit:
                break
            keys += shard.live_keys(pair_id, after, limit - len(keys))
        return keys

    def count_live(self, pair_id: int) -> int:
        return sum(shard.count_live(pair_id) for shard in self._shards)

    def close(self) -> None:
        errors: list[BaseException] = []
        for shard in self._shards:
            try:
                shard.close()
            except Exception as exc:  # close every shard, then say what failed
                errors.append(exc)
        if errors:
            raise errors[0]
