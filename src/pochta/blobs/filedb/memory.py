"""An in-memory FileDB: the reference fake, for tests and for one-process experiments."""

from __future__ import annotations

import threading
import time
from collections.abc import Collection

from pochta.blobs import counting
from pochta.blobs.keys import parse_key, parse_magic, parse_op
from pochta.errors import BlobNotFound
from pochta.types import Clock, FileFlag, FileRecord, Key, Magic, Op, Space


class MemoryFileDB:
    def __init__(self, clock: Clock = time.time) -> None:
        self._clock = clock
        self._live: dict[Key, FileRecord] = {}
        self._deleted: dict[Key, FileRecord] = {}
        self._ops: set[Op] = set()
        self._lock = threading.Lock()

    def _replayed(self, key: Key, op: Op | None) -> FileRecord | None:
        """The record as it is when ``op`` is journaled already (caller holds the lock)."""
        if op is None or op not in self._ops:
            return None
        record = self._live.get(key) or self._deleted.get(key)
        if record is None:
            raise BlobNotFound(f"no record for {key}")
        return record

    def inc(self, key: Key, magic: Magic, op: Op | None = None) -> FileRecord:
        key, magic = parse_key(key), parse_magic(magic)
        op = None if op is None else parse_op(op)
        with self._lock:
            if (same := self._replayed(key, op)) is not None:
                return same
            record = counting.after_inc(self._live.get(key), key, magic)
            self._live[key] = record
            if op is not None:
                self._ops.add(op)
            return record

    def upsert(self, key: Key, magic: Magic, pair_id: int, op: Op | None = None) -> FileRecord:
        key, magic = parse_key(key), parse_magic(magic)
        op = None if op is None else parse_op(op)
        with self._lock:
            if (same := self._replayed(key, op)) is not None:
                return same
            record = counting.after_upsert(self._live.get(key), key, magic, pair_id)
            self._live[key] = record
            if op is not None:
                self._ops.add(op)
            return record

    def dec(self, key: Key, magic: Magic, op: Op | None = None) -> FileRecord:
        key, magic = parse_key(key), parse_magic(magic)
        op = None if op is None else parse_op(op)
        with self._lock:
            if (same := self._replayed(key, op)) is not None:
                return same
            before = self._live.get(key) or self._deleted.get(key)
            record = counting.after_dec(before, key, magic, self._clock())
            if op is not None:
                self._ops.add(op)
            if record.space is Space.DELETED:
                del self._live[key]
                self._deleted[key] = record
            else:
                self._deleted.pop(key, None)
                self._live[key] = record
            return record

    def applied(self, ops: Collection[Op]) -> set[Op]:
        with self._lock:
            return {op for op in ops if op in self._ops}

    def forget_ops(self, ops: Collection[Op]) -> None:
        with self._lock:
            self._ops.difference_update(ops)

    def journal(self, after: Op = b"", limit: int = 1000) -> list[Op]:
        with self._lock:
            return sorted(op for op in self._ops if op > after)[:limit]

    def get(self, key: Key) -> FileRecord | None:
        key = parse_key(key)
        with self._lock:
            return self._live.get(key) or self._deleted.get(key)

    def get_deleted(self, key: Key) -> FileRecord | None:
        key = parse_key(key)
        with self._lock:
            return self._deleted.get(key)

    def forget_deleted(self, key: Key, moved_at: float) -> bool:
        key = parse_key(key)
        with self._lock:
            record = self._deleted.get(key)
            if record is None or record.moved_at != moved_at:
                return False
            del self._deleted[key]
            return True

    def repoint(self, key: Key, old_pair: int, new_pair: int) -> bool:
        key = parse_key(key)
        with self._lock:
            record = self._live.get(key)
            if record is None or record.pair_id != old_pair:
                return False
            self._live[key] = FileRecord(key, record.counter, record.magic, record.flags, new_pair)
            return True

    def live_keys(self, pair_id: int, after: Key | None = None, limit: int = 1000) -> list[Key]:
        with self._lock:
            keys = sorted(
                k for k, r in self._live.items() if r.pair_id == pair_id and k > (after or "")
            )
        return keys[:limit]

    def count_live(self, pair_id: int) -> int:
        with self._lock:
            return sum(1 for r in self._live.values() if r.pair_id == pair_id)

    def revive(self, key: Key, pair_id: int) -> FileRecord:
        key = parse_key(key)
        with self._lock:
            self._deleted.pop(key, None)
            record = self._live.get(key)
            if record is None:
                record = FileRecord(key, 0, 0, FileFlag.DO_NOT_DELETE, pair_id)
                self._live[key] = record
            return record

    def close(self) -> None:
        pass
