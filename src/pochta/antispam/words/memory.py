"""Learned words in process memory: tests, evaluation, and the reference the contract suite
holds every store to."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence

from pochta.antispam.words import WordStore

MAX = (1 << 63) - 1


class MemoryWordStore:
    def __init__(self) -> None:
        self._words: dict[int, tuple[int, int, int]] = {}  # hash -> (spam, ham, day)
        self._totals = (0, 0)
        self._lock = threading.Lock()

    def add(self, words: Mapping[int, tuple[int, int]], letters: tuple[int, int], day: int) -> None:
        with self._lock:
            for h, (ds, dh) in words.items():
                s, m, _ = self._words.get(h, (0, 0, day))
                self._words[h] = (_add(s, ds), _add(m, dh), day)
            self._totals = (_add(self._totals[0], letters[0]), _add(self._totals[1], letters[1]))

    def counts(self, words: Sequence[int]) -> dict[int, tuple[int, int]]:
        with self._lock:
            out = {}
            for h in words:
                v = self._words.get(h)
                if v is not None:
                    out[h] = (v[0], v[1])
            return out

    def totals(self) -> tuple[int, int]:
        return self._totals

    def size(self) -> int:
        return len(self._words)

    def prune(self, keep: int) -> int:
        with self._lock:
            excess = len(self._words) - keep
            if excess <= 0:
                return 0
            oldest = sorted(self._words.items(), key=lambda kv: (kv[1][2], kv[0]))[:excess]
            for h, _ in oldest:
                del self._words[h]
            return excess

    def close(self) -> None:
        pass


def _add(a: int, b: int) -> int:
    return min(MAX, max(0, a + b))


def _check(store: MemoryWordStore) -> WordStore:  # the Protocol, checked by mypy
    return store
