"""Sender lists in memory: the fake beside the SQLite and PostgreSQL stores."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from pochta.errors import InvalidInput
from pochta.types import ListEntry


class MemorySenderLists:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lists: dict[int, dict[str, ListEntry]] = {}

    def entries(self, user_id: int, limit: int) -> list[ListEntry]:
        with self._lock:
            own = list(self._lists.get(user_id, {}).values())
        return sorted(own, key=lambda e: e.value)[: max(limit, 0)]

    def lookup(self, user_ids: Sequence[int], values: Sequence[str]) -> dict[int, list[ListEntry]]:
        out: dict[int, list[ListEntry]] = {}
        with self._lock:
            for user_id in dict.fromkeys(user_ids):
                own = self._lists.get(user_id, {})
                found = [own[v] for v in dict.fromkeys(values) if v in own]
                if found:
                    out[user_id] = sorted(found, key=lambda e: e.value)
        return out

    def add(self, user_id: int, entry: ListEntry, limit: int) -> bool:
        with self._lock:
            own = self._lists.setdefault(user_id, {})
            new = entry.value not in own
            if new and len(own) >= limit:
                raise InvalidInput(full(limit))
            own[entry.value] = entry
            return new

    def remove(self, user_id: int, value: str) -> bool:
        with self._lock:
            return self._lists.get(user_id, {}).pop(value, None) is not None

    def forget(self, user_id: int) -> int:
        with self._lock:
            return len(self._lists.pop(user_id, {}))

    def close(self) -> None:
        pass


def full(limit: int) -> str:
    return f"the list is full: at most {limit} entries (remove some first)"
