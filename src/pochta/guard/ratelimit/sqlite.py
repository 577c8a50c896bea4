"""Embedded rolling rate limits and schedules: one SQLite file shared by the threads and
processes of one host.

Each check is one ``BEGIN IMMEDIATE`` transaction that reads the usage of every limit, applies
``pochta.guard.ratelimit.decide`` and writes all or nothing, on the host's wall clock (read
inside the transaction, so every process agrees; a clock stepping back refills nothing). A
reservation on a schedule is one such transaction too (``pochta.guard.schedule.reserve``).
Rows of limits that have refilled, and of schedules that say nothing any more, are swept now
and then.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path

from pochta.errors import GuardUnavailable, StorageError
from pochta.guard import schedule as schedules
from pochta.guard.ratelimit import Usage, decide, refilled_in
from pochta.guard.schedule import SlotState
from pochta.sqlitedb import SQLiteDatabase
from pochta.types import Clock, Limit, RateDecision, Schedule, Slot

SCHEMA = """
CREATE TABLE IF NOT EXISTS rate (
    key TEXT PRIMARY KEY,
    used REAL NOT NULL,
    at REAL NOT NULL,
    full_at REAL NOT NULL      -- when the limit has refilled and the row can go
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS slots (
    key TEXT PRIMARY KEY,
    checks REAL NOT NULL,      -- checks counted at `at` (pochta.guard.schedule)
    at REAL NOT NULL,
    next REAL NOT NULL,        -- the next free slot
    expires REAL NOT NULL      -- when the row says nothing any more and can go
) WITHOUT ROWID;
"""

SWEEP_EVERY = 1024  # commits of one process between sweeps


class SqliteRateLimitBackend:
    """``RateLimitBackend`` in the SQLite file ``path``."""

    def __init__(self, path: Path, *, clock: Clock = time.time) -> None:
        self.db = SQLiteDatabase(path, SCHEMA, synchronous="normal", busy_timeout=5.0)
        self._clock = clock
        self._commits = 0

    def hit(
        self, checks: Sequence[tuple[str, Limit]], cost: float, commit: bool = True
    ) -> RateDecision:
        def step(conn: sqlite3.Connection) -> RateDecision:
            now = self._clock()
            usages: list[Usage | None] = []
            for key, _ in checks:
                row = conn.execute(
                    "SELECT used, at, full_at FROM rate WHERE key = ?", (key,)
                ).fetchone()
                usages.append(None if row is None or row[2] <= now else Usage(row[0], row[1]))
            decision, new = decide(
                [(limit, u) for (_, limit), u in zip(checks, usages, strict=True)], cost, now
            )
            if decision.allowed and commit:
                conn.executemany(
                    "INSERT OR REPLACE INTO rate (key, used, at, full_at) VALUES (?, ?, ?, ?)",
                    [
                        (key, u.used, u.at, u.at + refilled_in(limit, u))
                        for (key, limit), u in zip(checks, new, strict=True)
                        if u is not None
                    ],
                )
                self._commits += 1
                if self._commits % SWEEP_EVERY == 0:
                    conn.execute("DELETE FROM rate WHERE full_at <= ?", (now,))
            return decision

        try:
            return self.db.write(step)
        except StorageError as exc:
            raise GuardUnavailable(f"rate-limit store {self.db.path}: {exc.message}") from exc

    def reserve(self, key: str, schedule: Schedule, commit: bool = True) -> Slot:
        def step(conn: sqlite3.Connection) -> Slot:
            now = self._clock()
            row = conn.execute(
                "SELECT checks, at, next, expires FROM slots WHERE key = ?", (key,)
            ).fetchone()
            state = None if row is None or row[3] <= now else SlotState(row[0], row[1], row[2])
            slot, new = schedules.reserve(schedule, state, now)
            if slot.granted and commit and new is not None:
                conn.execute(
                    "INSERT OR REPLACE INTO slots (key, checks, at, next, expires)"
                    " VALUES (?, ?, ?, ?, ?)",
                    (key, new.checks, new.at, new.next, schedules.expires(schedule, new)),
                )
                self._commits += 1
                if self._commits % SWEEP_EVERY == 0:
                    conn.execute("DELETE FROM slots WHERE expires <= ?", (now,))
            return slot

        try:
            return self.db.write(step)
        except StorageError as exc:
            raise GuardUnavailable(f"rate-limit store {self.db.path}: {exc.message}") from exc

    def reset(self, keys: Sequence[str]) -> None:
        def step(conn: sqlite3.Connection) -> None:
            conn.executemany("DELETE FROM rate WHERE key = ?", [(key,) for key in keys])
            conn.executemany("DELETE FROM slots WHERE key = ?", [(key,) for key in keys])

        try:
            self.db.write(step)
        except StorageError as exc:
            raise GuardUnavailable(f"rate-limit store {self.db.path}: {exc.message}") from exc

    def close(self) -> None:
        self.db.close()
