"""PairDB in a dict: the fake, for tests and single-process tools."""

from __future__ import annotations

import threading

from pochta.blobs.pairs import check_distinct
from pochta.errors import PairNotFound
from pochta.types import DiskSpec, Pair, PairFlag


class MemoryPairDB:
    def __init__(self) -> None:
        self._pairs: dict[int, Pair] = {}
        self._lock = threading.Lock()

    def add(self, disks: tuple[DiskSpec, DiskSpec], free: tuple[int, int]) -> Pair:
        with self._lock:
            check_distinct(disks, list(self._pairs.values()))
            pair = Pair(max(self._pairs, default=0) + 1, disks, PairFlag.NONE, free)
            self._pairs[pair.id] = pair
            return pair

    def get(self, pair_id: int) -> Pair:
        with self._lock:
            try:
                return self._pairs[pair_id]
            except KeyError:
                raise PairNotFound(f"no pair {pair_id}") from None

    def list(self) -> list[Pair]:
        with self._lock:
            return sorted(self._pairs.values(), key=lambda p: p.id)

    def set_flags(self, pair_id: int, flags: PairFlag) -> Pair:
        pair = self.get(pair_id)
        with self._lock:
            self._pairs[pair_id] = pair = Pair(pair.id, pair.disks, flags, pair.free)
        return pair

    def set_free(self, pair_id: int, free: tuple[int, int]) -> None:
        pair = self.get(pair_id)
        with self._lock:
            self._pairs[pair_id] = Pair(pair.id, pair.disks, pair.flags, free)

    def remove(self, pair_id: int) -> None:
        with self._lock:
            if self._pairs.pop(pair_id, None) is None:
                raise PairNotFound(f"no pair {pair_id}")

    def close(self) -> None:
        pass
