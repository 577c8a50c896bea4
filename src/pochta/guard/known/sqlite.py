"""Embedded known clients: one SQLite file shared by the threads and processes of one host.

A mark is a row (key, until) on the host's wall clock; reads never wait for the writer (WAL),
a mark is one ``BEGIN IMMEDIATE`` transaction, and expired rows are swept now and then.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from pochta.errors import GuardUnavailable, StorageError
from pochta.sqlitedb import SQLiteDatabase
from pochta.types import Clock

SCHEMA = """
CREATE TABLE IF NOT EXISTS known (
    key TEXT PRIMARY KEY,      -- a keyed hash of (account, password binding, client)
    until REAL NOT NULL        -- when the mark expires
) WITHOUT ROWID;
"""

SWEEP_EVERY = 1024  # marks of one process between sweeps


class SqliteKnownClients:
    """``KnownClientsBackend`` in the SQLite file ``path``."""

    def __init__(self, path: Path, *, clock: Clock = time.time) -> None:
        self.db = SQLiteDatabase(path, SCHEMA, synchronous="normal", busy_timeout=5.0)
        self._clock = clock
        self._writes = 0

    def known(self, keys: Sequence[str]) -> list[bool]:
        if not keys:
            return []
        marks = ", ".join("?" * len(keys))
        try:
            rows = self.db.query(
                f"SELECT key FROM known WHERE key IN ({marks}) AND until > ?",  # noqa: S608 (marks: ?s)
                (*keys, self._clock()),
            )
        except StorageError as exc:
            raise GuardUnavailable(f"known-clients store {self.db.path}: {exc.message}") from exc
        found = {row[0] for row in rows}
        return [key in found for key in keys]

    def remember(self, keys: Sequence[str], ttl: float) -> None:
        def step(conn: sqlite3.Connection) -> None:
            now = self._clock()
            conn.executemany(
                "INSERT OR REPLACE INTO known (key, until) VALUES (?, ?)",
                [(key, now + ttl) for key in keys],
            )
            self._writes += 1
            if self._writes % SWEEP_EVERY == 0:
                conn.execute("DELETE FROM known WHERE until <= ?", (now,))

        self._write(step)

    def forget(self, keys: Sequence[str]) -> None:
        def step(conn: sqlite3.Connection) -> None:
            conn.executemany("DELETE FROM known WHERE key = ?", [(key,) for key in keys])

        self._write(step)

    def _write(self, step: Callable[[sqlite3.Connection], None]) -> None:
        try:
            self.db.write(step)
        except StorageError as exc:
            raise GuardUnavailable(f"known-clients store {self.db.path}: {exc.message}") from exc

    def close(self) -> None:
        self.db.close()
