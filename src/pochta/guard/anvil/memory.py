"""Connection counts in dicts (``pochta.types.ConnectionTable``): one process.

``MemoryConnectionTable`` keeps the counts of ``mapped.MappedConnectionTable`` in dicts, for one
process (tests, an ``ImapServer`` built without a gate); ``MemoryConnections`` lets several of
them share, as the slots of a directory do.
"""

from __future__ import annotations

from pochta.guard.anvil import seen_from
from pochta.types import ConnectionTally


class MemoryConnections:
    """What several ``MemoryConnectionTable`` share, as the slots of a directory do."""

    def __init__(self) -> None:
        # one per table: key -> [window, connections, attempts now, attempts before]
        self.regions: list[dict[int, list[int]]] = []


class MemoryConnectionTable:
    """``ConnectionTable`` in dicts: one process (tests, an ``ImapServer`` without a gate).
    ``shared``: sum with the other tables made on it; ``capacity``: keys other than totals
    that one table holds at most (None: no bound)."""

    def __init__(
        self, shared: MemoryConnections | None = None, *, capacity: int | None = None
    ) -> None:
        self.shared = shared or MemoryConnections()
        self.capacity = capacity
        self._mine: dict[int, list[int]] = {}
        self._totals: set[int] = set()
        self._swept = -1  # the window of the last sweep
        self.shared.regions.append(self._mine)

    def read(self, key: int, window: int, *, total: bool = False) -> ConnectionTally:
        connections = current = previous = 0
        for region in self.shared.regions:
            entry = region.get(key)
            if entry is not None:
                now, before = seen_from(entry[0], entry[2], entry[3], window)
                connections += entry[1]
                current += now
                previous += before
        return ConnectionTally(max(0, connections), current, previous)

    def add(
        self,
        key: int,
        window: int,
        *,
        connections: int = 0,
        attempts: int = 0,
        total: bool = False,
    ) -> bool:
        entry = self._mine.get(key)
        if entry is None:
            if not total and not self._room(window):
                return False
            entry = self._mine[key] = [window, 0, 0, 0]
            if total:
                self._totals.add(key)
        window = max(window, entry[0])
        now, before = seen_from(entry[0], entry[2], entry[3], window)
        entry[:] = [window, entry[1] + connections, now + attempts, before]
        return True

    def _room(self, window: int) -> bool:
        """Whether a new key fits; when full, the entries that count nothing any more are
        dropped, once per window (only a window passing makes more of them)."""
        if self.capacity is None or len(self._mine) - len(self._totals) < self.capacity:
            return True
        if self._swept != window:
            self._swept = window
            for key, (written, open_, _, _) in list(self._mine.items()):
                if key not in self._totals and open_ <= 0 and written < window - 1:
                    del self._mine[key]
        return len(self._mine) - len(self._totals) < self.capacity

    def close(self) -> None:
        regions = self.shared.regions
        regions[:] = [r for r in regions if r is not self._mine]  # by identity, not equality
