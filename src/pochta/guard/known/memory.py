"""Known clients in a dict: one process, for tests and single-process tools."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from pochta.types import Clock


class MemoryKnownClients:
    """``KnownClientsBackend`` in a dict: one process, for tests and single-process tools."""

    SWEEP_EVERY = 4096  # marks between sweeps of expired ones

    def __init__(self, clock: Clock = time.time) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._until: dict[str, float] = {}
        self._writes = 0

    def known(self, keys: Sequence[str]) -> list[bool]:
        with self._lock:
            now = self._clock()
            return [self._until.get(key, now) > now for key in keys]

    def remember(self, keys: Sequence[str], ttl: float) -> None:
        with self._lock:
            now = self._clock()
            for key in keys:
                self._until[key] = now + ttl
            self._writes += 1
            if self._writes % self.SWEEP_EVERY == 0:
                self._until = {k: v for k, v in self._until.items() if v > now}

    def forget(self, keys: Sequence[str]) -> None:
        with self._lock:
            for key in keys:
                self._until.pop(key, None)

    def close(self) -> None:
        pass
