"""Learned words in process memory: tests, evaluation, and the reference the contract suite
holds every store to."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence

from pochta.antispam.words import WordStore

MAX = (1 << 63) - 1


class MemoryWordStore:
    def __init__(self) -> None:
        # owner -> hash -> (spam, ham, day)
        self._words: dict[int, dict[int, tuple[int, int, int]]] = {}
        self._totals: dict[int, tuple[int, int]] = {}
        self._lock = threading.Lock()

    def add(
        self,
        owner: int,
        words: Mapping[int, tuple[int, int]],
        letters: tuple[int, int],
        day: int,
    ) -> None:
        with self._lock:
            table = self._words.setdefault(owner, {})
            for h, (ds, dh) in words.items():
                s, m, _ = table.get(h, (0, 0, day))
                table[h] = (_add(s, ds), _add(m, dh), day)
            t = self._totals.get(owner, (0, 0))
            self._totals[owner] = (_add(t[0], letters[0]), _add(t[1], letters[1]))

    def counts(self, owner: int, words: Sequence[int]) -> dict[int, tuple[int, int]]:
        with self._lock:
            table = self._words.get(owner, {})
            out = {}
            for h in words:
                v = table.get(h)
                if v is not None:
                    out[h] = (v[0], v[1])
            return out

    def totals(self, owner: int) -> tuple[int, int]:
        with self._lock:
            return self._totals.get(owner, (0, 0))

    def size(self, owner: int) -> int:
        with self._lock:
            return len(self._words.get(owner, {}))

    def prune(self, owner: int, keep: int) -> int:
        with self._lock:
            table = self._words.get(owner, {})
            excess = len(table) - keep
            if excess <= 0:
                return 0
            oldest = sorted(table.items(), key=lambda kv: (kv[1][2], kv[0]))[:excess]
            for h, _ in oldest:
                del table[h]
            return excess

    def forget(self, owner: int) -> None:
        with self._lock:
            self._words.pop(owner, None)
            self._totals.pop(owner, None)

    def owners(self) -> list[int]:
        with self._lock:
            return sorted(self._totals)

    def all_totals(self) -> dict[int, tuple[int, int]]:
        with self._lock:
            return dict(self._totals)

    def close(self) -> None:
        pass


def _add(a: int, b: int) -> int:
    return min(MAX, max(0, a + b))


def _check(store: MemoryWordStore) -> WordStore:  # the Protocol, checked by mypy
    return store
