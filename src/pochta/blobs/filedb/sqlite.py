"""FileDB in SQLite (WAL): the embedded default.

Layout, chosen for bytes per record: two WITHOUT ROWID tables keyed by the raw 32-byte
SHA-256, magic stored as a signed 32-bit integer (always 4 bytes in SQLite's record format),
so a live record costs 45 bytes in a leaf page: 46 in a full one (after ``compact``), about 51
in leaves filled by random inserts (89 %; benchmarks/filedb_size.py).

    live    (key BLOB PK, counter INT, magic INT, flags INT, pair INT)   -- space0
    deleted (key BLOB PK, pair INT, moved_at REAL)                       -- space1
    ops     (op BLOB PK)      -- the journal of exactly-once counts: only those in flight

Each step reads the record, applies ``pochta.blobs.counting`` and writes it back inside the
writer's ``BEGIN IMMEDIATE`` transaction: atomic against threads and other processes.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Collection
from pathlib import Path

from pochta.blobs import counting
from pochta.blobs.keys import parse_key, parse_magic, parse_op
from pochta.errors import BlobNotFound
from pochta.sqlitedb import SQLiteDatabase, Synchronous
from pochta.types import Clock, FileFlag, FileRecord, Key, Magic, Op, Space

SCHEMA = """
CREATE TABLE IF NOT EXISTS live (
    key BLOB PRIMARY KEY,
    counter INTEGER NOT NULL,
    magic INTEGER NOT NULL,
    flags INTEGER NOT NULL,
    pair INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS deleted (
    key BLOB PRIMARY KEY,
    pair INTEGER NOT NULL,
    moved_at REAL NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS ops (op BLOB PRIMARY KEY) WITHOUT ROWID;
"""


def _to_db(magic: Magic) -> int:
    return magic - 2**32 if magic >= 2**31 else magic


def _from_db(value: int) -> Magic:
    return value % 2**32


def _live(conn: sqlite3.Connection, key: Key) -> FileRecord | None:
    row = conn.execute(
        "SELECT counter, magic, flags, pair FROM live WHERE key = ?", (bytes.fromhex(key),)
    ).fetchone()
    if row is None:
        return None
    return FileRecord(key, row[0], _from_db(row[1]), FileFlag(row[2]), row[3])


def _deleted(conn: sqlite3.Connection, key: Key) -> FileRecord | None:
    row = conn.execute(
        "SELECT pair, moved_at FROM deleted WHERE key = ?", (bytes.fromhex(key),)
    ).fetchone()
    if row is None:
        return None
    return FileRecord(key, 0, 0, FileFlag.NONE, row[0], Space.DELETED, row[1])


def _put_live(conn: sqlite3.Connection, r: FileRecord) -> None:
    conn.execute(
        "INSERT OR REPLACE INTO live (key, counter, magic, flags, pair) VALUES (?, ?, ?, ?, ?)",
        (bytes.fromhex(r.key), r.counter, _to_db(r.magic), int(r.flags), r.pair_id),
    )


def _journal(conn: sqlite3.Connection, key: Key, op: Op | None) -> FileRecord | None:
    """Journal ``op``; when it was journaled already, the record as it is (a replay)."""
    if op is None:
        return None
    if conn.execute("INSERT OR IGNORE INTO ops (op) VALUES (?)", (op,)).rowcount:
        return None
    record = _live(conn, key) or _deleted(conn, key)
    if record is None:
        raise BlobNotFound(f"no record for {key}")
    return record


def _exec_many(sql: str, rows: list[tuple[object, ...]]) -> Callable[[sqlite3.Connection], None]:
    def op(conn: sqlite3.Connection) -> None:
        conn.executemany(sql, rows).close()  # the cursor never leaves the writer thread

    return op


class SQLiteFileDB:
    def __init__(
        self, path: Path, *, synchronous: Synchronous = "full", clock: Clock = time.time
    ) -> None:
        self._db = SQLiteDatabase(path, SCHEMA, synchronous=synchronous)
        self._clock = clock

    def inc(self, key: Key, magic: Magic, op: Op | None = None) -> FileRecord:
        key, magic = parse_key(key), parse_magic(magic)
        op = None if op is None else parse_op(op)

        def step(conn: sqlite3.Connection) -> FileRecord:
            if (same := _journal(conn, key, op)) is not None:
                return same
            record = counting.after_inc(_live(conn, key), key, magic)
            conn.execute(
                "UPDATE live SET counter = ?, magic = ? WHERE key = ?",
                (record.counter, _to_db(record.magic), bytes.fromhex(key)),
            )
            return record

        return self._db.write(step)

    def upsert(self, key: Key, magic: Magic, pair_id: int, op: Op | None = None) -> FileRecord:
        key, magic = parse_key(key), parse_magic(magic)
        op = None if op is None else parse_op(op)

        def step(conn: sqlite3.Connection) -> FileRecord:
            if (same := _journal(conn, key, op)) is not None:
                return same
            record = counting.after_upsert(_live(conn, key), key, magic, pair_id)
            _put_live(conn, record)
            return record

        return self._db.write(step)

    def dec(self, key: Key, magic: Magic, op: Op | None = None) -> FileRecord:
        key, magic = parse_key(key), parse_magic(magic)
        op = None if op is None else parse_op(op)
        now = self._clock()

        def step(conn: sqlite3.Connection) -> FileRecord:
            if (same := _journal(conn, key, op)) is not None:
                return same
            before = _live(conn, key) or _deleted(conn, key)
            record = counting.after_dec(before, key, magic, now)
            raw = bytes.fromhex(key)
            if record.space is Space.DELETED:
                conn.execute("DELETE FROM live WHERE key = ?", (raw,))
                conn.execute(
                    "INSERT OR REPLACE INTO deleted (key, pair, moved_at) VALUES (?, ?, ?)",
                    (raw, record.pair_id, record.moved_at),
                )
            else:
                if before is not None and before.space is Space.DELETED:
                    conn.execute("DELETE FROM deleted WHERE key = ?", (raw,))
                _put_live(conn, record)
            return record

        return self._db.write(step)

    def applied(self, ops: Collection[Op]) -> set[Op]:
        conn = self._db.reader()
        return {
            op for op in ops if conn.execute("SELECT 1 FROM ops WHERE op = ?", (op,)).fetchone()
        }

    def forget_ops(self, ops: Collection[Op]) -> None:
        rows: list[tuple[object, ...]] = [(op,) for op in ops]
        if rows:
            self._db.write(_exec_many("DELETE FROM ops WHERE op = ?", rows))

    def journal(self, after: Op = b"", limit: int = 1000) -> list[Op]:
        rows = self._db.query("SELECT op FROM ops WHERE op > ? ORDER BY op LIMIT ?", (after, limit))
        return [bytes(row[0]) for row in rows]

    def get(self, key: Key) -> FileRecord | None:
        key = parse_key(key)
        conn = self._db.reader()
        return _live(conn, key) or _deleted(conn, key)

    def compact(self) -> None:
        """Pack the records into full pages (VACUUM); see ``SQLiteDatabase.vacuum``."""
        self._db.vacuum()

    # -- for Valkyrie, evacuation and restore --------------------------------------------
    def get_deleted(self, key: Key) -> FileRecord | None:
        key = parse_key(key)
        return _deleted(self._db.reader(), key)

    def forget_deleted(self, key: Key, moved_at: float) -> bool:
        raw = bytes.fromhex(parse_key(key))

        def step(conn: sqlite3.Connection) -> bool:
            cur = conn.execute(
                "DELETE FROM deleted WHERE key = ? AND moved_at = ?", (raw, moved_at)
            )
            return cur.rowcount > 0

        return self._db.write(step)

    def repoint(self, key: Key, old_pair: int, new_pair: int) -> bool:
        raw = bytes.fromhex(parse_key(key))

        def step(conn: sqlite3.Connection) -> bool:
            cur = conn.execute(
                "UPDATE live SET pair = ? WHERE key = ? AND pair = ?", (new_pair, raw, old_pair)
            )
            return cur.rowcount > 0

        return self._db.write(step)

    def live_keys(self, pair_id: int, after: Key | None = None, limit: int = 1000) -> list[Key]:
        start = bytes.fromhex(parse_key(after)) if after is not None else b""
        rows = self._db.query(
            "SELECT key FROM live WHERE pair = ? AND key > ? ORDER BY key LIMIT ?",
            (pair_id, start, limit),
        )
        return [bytes(row[0]).hex() for row in rows]

    def count_live(self, pair_id: int) -> int:
        rows = self._db.query("SELECT count(*) FROM live WHERE pair = ?", (pair_id,))
        return int(rows[0][0])

    def revive(self, key: Key, pair_id: int) -> FileRecord:
        key = parse_key(key)

        def step(conn: sqlite3.Connection) -> FileRecord:
            conn.execute("DELETE FROM deleted WHERE key = ?", (bytes.fromhex(key),))
            record = _live(conn, key)
            if record is None:
                record = FileRecord(key, 0, 0, FileFlag.DO_NOT_DELETE, pair_id)
                _put_live(conn, record)
            return record

        return self._db.write(step)

    def close(self) -> None:
        self._db.close()
