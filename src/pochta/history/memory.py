"""The history in memory: the fake beside the SQLite store (tests, throwaway servers)."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from pochta.types import AuditRecord, StorageSample, Tally


class MemoryHistory:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._samples: list[StorageSample] = []
        self._tallies: dict[tuple[int, str, str], int] = {}
        self._audits: list[AuditRecord] = []

    def add_sample(self, sample: StorageSample) -> None:
        with self._lock:
            self._samples.append(sample)
            self._samples.sort(key=lambda s: s.at)

    def samples(self, since: float, limit: int = 10_000) -> list[StorageSample]:
        with self._lock:
            found = [s for s in self._samples if s.at >= since]
        return found[-limit:] if limit > 0 else []

    def add_tallies(self, tallies: Sequence[Tally]) -> None:
        with self._lock:
            for t in tallies:
                key = (t.hour, t.series, t.name)
                self._tallies[key] = self._tallies.get(key, 0) + t.n

    def tallies(self, series: str, since_hour: int, limit: int = 10_000) -> list[Tally]:
        with self._lock:
            found = sorted(
                (hour, name, n)
                for (hour, s, name), n in self._tallies.items()
                if s == series and hour >= since_hour
            )
        return [Tally(hour, series, name, n) for hour, name, n in found[:limit]]

    def top(self, series: str, since_hour: int, n: int = 10) -> list[tuple[str, int]]:
        sums: dict[str, int] = {}
        with self._lock:
            for (hour, s, name), count in self._tallies.items():
                if s == series and hour >= since_hour:
                    sums[name] = sums.get(name, 0) + count
        return sorted(sums.items(), key=lambda item: (-item[1], item[0]))[: max(n, 0)]

    def add_audit(self, audit: AuditRecord) -> None:
        with self._lock:
            self._audits.append(audit)

    def audits(self, limit: int = 20) -> list[AuditRecord]:
        with self._lock:
            return sorted(self._audits, key=lambda a: a.at, reverse=True)[:limit]

    def prune(self, before: float) -> int:
        hour = int(before // 3600)
        with self._lock:
            old = [s for s in self._samples if s.at < before]
            self._samples = [s for s in self._samples if s.at >= before]
            stale = [k for k in self._tallies if k[0] < hour]
            for k in stale:
                del self._tallies[k]
        return len(old) + len(stale)

    def close(self) -> None:
        pass
