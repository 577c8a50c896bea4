"""The history in SQLite (``<data_dir>/history.sqlite3``): the embedded default. Writes are a
batch of tallies every few seconds and a sample every few minutes: ``synchronous=normal``
(a power cut may lose the last of them, never corrupt the file)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

from pochta.sqlitedb import SQLiteDatabase
from pochta.types import AuditRecord, StorageSample, Tally

SCHEMA = """
CREATE TABLE IF NOT EXISTS samples (
    at REAL NOT NULL,
    letters INTEGER NOT NULL,
    logical_bytes INTEGER NOT NULL,
    stored_bytes INTEGER NOT NULL,
    physical_bytes INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS samples_by_time ON samples (at);
CREATE TABLE IF NOT EXISTS tallies (
    series TEXT NOT NULL,
    hour INTEGER NOT NULL,
    name TEXT NOT NULL,
    n INTEGER NOT NULL,
    PRIMARY KEY (series, hour, name)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS tallies_by_hour ON tallies (hour);
CREATE TABLE IF NOT EXISTS audits (
    at REAL NOT NULL,
    lines INTEGER NOT NULL,
    malformed INTEGER NOT NULL,
    unknown INTEGER NOT NULL,
    wrong INTEGER NOT NULL,
    valid INTEGER NOT NULL,
    reset INTEGER NOT NULL,
    seconds REAL NOT NULL
);
"""


class SQLiteHistory:
    def __init__(self, path: Path) -> None:
        self._db = SQLiteDatabase(path, SCHEMA, synchronous="normal")

    def add_sample(self, sample: StorageSample) -> None:
        def op(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO samples VALUES (?, ?, ?, ?, ?)",
                (
                    sample.at,
                    sample.letters,
                    sample.logical_bytes,
                    sample.stored_bytes,
                    sample.physical_bytes,
                ),
            )

        self._db.write(op)

    def samples(self, since: float, limit: int = 10_000) -> list[StorageSample]:
        rows = self._db.query(
            "SELECT * FROM (SELECT at, letters, logical_bytes, stored_bytes, physical_bytes"
            " FROM samples WHERE at >= ? ORDER BY at DESC LIMIT ?) ORDER BY at",
            (since, max(limit, 0)),
        )
        return [StorageSample(*r) for r in rows]

    def add_tallies(self, tallies: Sequence[Tally]) -> None:
        if not tallies:
            return
        rows = [(t.series, t.hour, t.name, t.n) for t in tallies]

        def op(conn: sqlite3.Connection) -> None:
            conn.executemany(
                "INSERT INTO tallies (series, hour, name, n) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (series, hour, name) DO UPDATE SET n = n + excluded.n",
                rows,
            )

        self._db.write(op)

    def tallies(self, series: str, since_hour: int, limit: int = 10_000) -> list[Tally]:
        rows = self._db.query(
            "SELECT hour, name, n FROM tallies WHERE series = ? AND hour >= ?"
            " ORDER BY hour, name LIMIT ?",
            (series, since_hour, max(limit, 0)),
        )
        return [Tally(int(hour), series, str(name), int(n)) for hour, name, n in rows]

    def top(self, series: str, since_hour: int, n: int = 10) -> list[tuple[str, int]]:
        rows = self._db.query(
            "SELECT name, SUM(n) AS total FROM tallies WHERE series = ? AND hour >= ?"
            " GROUP BY name ORDER BY total DESC, name LIMIT ?",
            (series, since_hour, max(n, 0)),
        )
        return [(str(name), int(total)) for name, total in rows]

    def add_audit(self, audit: AuditRecord) -> None:
        def op(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO audits VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    audit.at,
                    audit.lines,
                    audit.malformed,
                    audit.unknown,
                    audit.wrong,
                    audit.valid,
                    audit.reset,
                    audit.seconds,
                ),
            )

        self._db.write(op)

    def audits(self, limit: int = 20) -> list[AuditRecord]:
        rows = self._db.query(
            "SELECT at, lines, malformed, unknown, wrong, valid, reset, seconds FROM audits"
            " ORDER BY at DESC LIMIT ?",
            (max(limit, 0),),
        )
        return [AuditRecord(*r) for r in rows]

    def prune(self, before: float) -> int:
        hour = int(before // 3600)

        def op(conn: sqlite3.Connection) -> int:
            gone = conn.execute("DELETE FROM samples WHERE at < ?", (before,)).rowcount
            return gone + conn.execute("DELETE FROM tallies WHERE hour < ?", (hour,)).rowcount

        return self._db.write(op)

    def close(self) -> None:
        self._db.close()
