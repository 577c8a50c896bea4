"""Embedded counters: one SQLite file (``pochta.sqlitedb``: WAL, one writer).

Two tables, the day first in each primary key so that expiry is a range delete of old days
and a read is a few index seeks (``day IN (...)``) per shingle:

    shingle_day  (day, hash, type, kind)         -> n   day totals, kept 14 days
    shingle_slot (day, hash, type, kind, slot) -> n     10-minute buckets (slot of the day 0..143)

Hashes are stored as signed 64-bit integers. The ``Counters`` buffer in front of the store
adds increments up in memory and writes each flush round as one transaction, so the file sees
one commit per round, not one per letter. Old days go when ``expire`` runs (the flusher calls
it every few minutes).
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Sequence
from pathlib import Path

from pochta.antispam.shingles.counters import Batch, Ref
from pochta.antispam.shingles.counters.buckets import SLOTS_PER_DAY, Buckets, Span, expired_before
from pochta.errors import StorageError
from pochta.sqlitedb import SQLiteDatabase, Synchronous

SCHEMA = """
CREATE TABLE IF NOT EXISTS shingle_day (
    day INTEGER NOT NULL, hash INTEGER NOT NULL, type INTEGER NOT NULL, kind TEXT NOT NULL,
    n INTEGER NOT NULL,
    PRIMARY KEY (day, hash, type, kind)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS shingle_slot (
    day INTEGER NOT NULL, hash INTEGER NOT NULL, type INTEGER NOT NULL, kind TEXT NOT NULL,
    slot INTEGER NOT NULL, n INTEGER NOT NULL,
    PRIMARY KEY (day, hash, type, kind, slot)
) WITHOUT ROWID;
"""

# 64-bit and saturating: SQLite would turn an overflowing sum into a float
_ADD_DAY = (
    "INSERT INTO shingle_day (day, hash, type, kind, n) VALUES (?, ?, ?, ?, ?)"
    " ON CONFLICT DO UPDATE SET n = CASE WHEN n > 9223372036854775807 - excluded.n"
    " THEN 9223372036854775807 ELSE n + excluded.n END"
)
_ADD_SLOT = (
    "INSERT INTO shingle_slot (day, hash, type, kind, slot, n) VALUES (?, ?, ?, ?, ?, ?)"
    " ON CONFLICT DO UPDATE SET n = CASE WHEN n > 9223372036854775807 - excluded.n"
    " THEN 9223372036854775807 ELSE n + excluded.n END"
)


READ_CHUNK = 500
"""Hashes one read statement names (with at most 14 days: under SQLite's oldest limit of 999
parameters)."""


def signed(h: int) -> int:
    return h - (1 << 64) if h >= 1 << 63 else h


def unsigned(h: int) -> int:
    return h + (1 << 64) if h < 0 else h


class SQLiteStore:
    def __init__(self, path: Path, *, synchronous: Synchronous = "normal") -> None:
        self.db = SQLiteDatabase(path, SCHEMA, synchronous=synchronous)

    def apply(self, batches: Sequence[Batch]) -> list[Exception | None]:
        plain_days: list[tuple[int, int, int, str, int]] = []
        plain_slots: list[tuple[int, int, int, str, int, int]] = []
        pairs = []
        for _, cells in batches:
            for c in cells:
                type_, hash_, code, slot, n, unique = c
                day = slot // SLOTS_PER_DAY
                if unique is None:
                    h = signed(hash_)
                    plain_days.append((day, h, type_, code, n))
                    plain_slots.append((day, h, type_, code, slot - day * SLOTS_PER_DAY, n))
                else:
                    pairs.append(c)

        def write(conn: sqlite3.Connection) -> None:
            conn.executemany(_ADD_DAY, plain_days)
            conn.executemany(_ADD_SLOT, plain_slots)
            for type_, hash_, code, slot, n, unique in pairs:
                assert unique is not None
                day = slot // SLOTS_PER_DAY
                offset = slot - day * SLOTS_PER_DAY
                h, (utype, uhash) = signed(hash_), unique
                (d,) = conn.execute(_ADD_DAY + " RETURNING n", (day, h, type_, code, n)).fetchone()
                (s,) = conn.execute(
                    _ADD_SLOT + " RETURNING n", (day, h, type_, code, offset, n)
                ).fetchone()
                if d == n:
                    conn.execute(_ADD_DAY, (day, signed(uhash), utype, code, 1))
                if s == n:
                    conn.execute(_ADD_SLOT, (day, signed(uhash), utype, code, offset, 1))

        try:
            self.db.write(write)
        except StorageError as exc:
            return [exc for _ in batches]
        except sqlite3.Error as exc:
            error = StorageError(f"writing shingle counters: {exc}")
            return [error for _ in batches]
        return [None] * len(batches)

    def read(self, refs: Sequence[Ref], span: Span) -> list[Buckets]:
        """One statement for the day buckets and one for the 10-minute ones of up to
        :data:`READ_CHUNK` shingles (a letter's, usually all of them): ``day IN (...) AND
        hash IN (...)``, each (day, hash) one search of the primary key, the rows of types
        not asked for left out here (a value has one hash whatever its type); a shingle
        named twice gets its own equal buckets each time."""
        keys = [(signed(ref.hash), ref.type) for ref in refs]
        wanted = set(keys)
        slot_days = list(span.slot_days)
        days = list(span.days)
        found_days: dict[tuple[int, int], dict[tuple[str, int], int]] = {}
        found_slots: dict[tuple[int, int], dict[tuple[str, int], int]] = {}
        hashes = list(dict.fromkeys(h for h, _ in keys))
        try:
            conn = self.db.reader()
            conn.execute("BEGIN")  # one snapshot for every statement: another process's
            # commit between two of them could give a unique from before it and a pair after
        except sqlite3.Error as exc:
            raise StorageError(f"reading shingle counters: {exc}") from exc
        try:
            for at in range(0, len(hashes), READ_CHUNK):
                chunk = hashes[at : at + READ_CHUNK]
                # only "?" placeholders are formatted in
                named = ",".join("?" * len(chunk))
                if days:
                    day_sql = (
                        "SELECT hash, type, day, kind, n FROM shingle_day"  # noqa: S608
                        f" WHERE day IN ({','.join('?' * len(days))}) AND hash IN ({named})"
                    )
                    for h, t, day, code, n in conn.execute(day_sql, (*days, *chunk)):
                        if (h, t) in wanted:
                            found_days.setdefault((h, t), {})[(code, day)] = n
                if slot_days:
                    slot_sql = (
                        "SELECT hash, type, day, kind, slot, n FROM shingle_slot"  # noqa: S608
                        f" WHERE day IN ({','.join('?' * len(slot_days))}) AND hash IN ({named})"
                    )
                    for h, t, day, code, offset, n in conn.execute(slot_sql, (*slot_days, *chunk)):
                        slot = day * SLOTS_PER_DAY + offset
                        if (h, t) in wanted and span.slot_from <= slot <= span.slot_to:
                            found_slots.setdefault((h, t), {})[(code, slot)] = n
        except sqlite3.Error as exc:
            raise StorageError(f"reading shingle counters: {exc}") from exc
        finally:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("COMMIT")
        none: dict[tuple[str, int], int] = {}
        return [
            Buckets(dict(found_slots.get(key, none)), dict(found_days.get(key, none)))
            for key in keys
        ]

    def expire(self, now: float) -> int:
        first_slot, first_day = expired_before(now)
        first_slot_day = first_slot // SLOTS_PER_DAY

        def drop(conn: sqlite3.Connection) -> int:
            a = conn.execute("DELETE FROM shingle_day WHERE day < ?", (first_day,)).rowcount
            b = conn.execute("DELETE FROM shingle_slot WHERE day < ?", (first_slot_day,)).rowcount
            return int(a + b)

        return self.db.write(drop)

    def close(self) -> None:
        self.db.close()
