"""An in-memory FileDB: the reference fake, for tests and for one-process experiments."""

from __future__ import annotations

import threading
import time

from pochta.blobs import counting
from pochta.blobs.keys import parse_key, parse_magic
from pochta.types import Clock, FileRecord, Key, Magic, Space


class MemoryFileDB:
    def __init__(self, clock: Clock = time.time) -> None:
        self._clock = clock
        self._live: dict[Key, FileRecord] = {}
        self._deleted: dict[Key, FileRecord] = {}
        self._lock = threading.Lock()

    def inc(self, key: Key, magic: Magic) -> FileRecord:
        key, magic = parse_key(key), parse_magic(magic)
        with self._lock:
            record = counting.after_inc(self._live.get(key), key, magic)
            self._live[key] = record
            return record

    def upsert(self, key: Key, magic: Magic, pair_id: int) -> FileRecord:
        key, magic = parse_key(key), parse_magic(magic)
        with self._lock:
            record = counting.after_upsert(self._live.get(key), key, magic, pair_id)
            self._live[key] = record
            return record

    def dec(self, key: Key, magic: Magic) -> FileRecord:
        key, magic = parse_key(key), parse_magic(magic)
        with self._lock:
            before = self._live.get(key) or self._deleted.get(key)
            record = counting.after_dec(before, key, magic, self._clock())
            if record.space is Space.DELETED:
                del self._live[key]
                self._deleted[key] = record
            else:
                self._deleted.pop(key, None)
                self._live[key] = record
            return record

    def get(self, key: Key) -> FileRecord | None:
        key = parse_key(key)
        with self._lock:
            return self._live.get(key) or self._deleted.get(key)

    def close(self) -> None:
        pass
