"""Learned words in one SQLite file (``pochta.sqlitedb``: WAL, one writer).

    learned        (owner, hash, spam, ham, day)  owner 0 the installation, else an account's
                                                  id; hash the word's signed 64-bit hash; day
                                                  its last day seen
    learned_totals (owner, spam, ham)             the letters each owner learned

A flush is one transaction; a read is one ``IN`` query of the letter's words (about a tenth of
a millisecond for 300 words), skipped for an owner with no word stored: each thread's read
connection remembers those until SQLite's ``PRAGMA data_version`` changes (a commit by any
other connection: this store's writer, another store, another process; the read connections
never write, so none of their own commits could go unseen). ``prune`` deletes an owner's words
with the oldest day first (an index on owner, day). A file of the single-table layout
(``words`` / ``totals``, before owners) is moved into owner 0 when it is opened.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

from pochta.errors import StorageError
from pochta.sqlitedb import SQLiteDatabase, Synchronous

SCHEMA = """
CREATE TABLE IF NOT EXISTS learned (
    owner INTEGER NOT NULL, hash INTEGER NOT NULL,
    spam INTEGER NOT NULL, ham INTEGER NOT NULL, day INTEGER NOT NULL,
    PRIMARY KEY (owner, hash)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS learned_by_day ON learned (owner, day);
CREATE TABLE IF NOT EXISTS learned_totals (
    owner INTEGER PRIMARY KEY, spam INTEGER NOT NULL, ham INTEGER NOT NULL
);
"""
# saturating at 2^63 - 1 (SQLite would turn an overflowing sum into a float), never below 0
_ADD = """
INSERT INTO learned (owner, hash, spam, ham, day) VALUES (?1, ?2, MAX(0, ?3), MAX(0, ?4), ?5)
ON CONFLICT DO UPDATE SET
  spam = CASE WHEN spam > 9223372036854775807 - ?3 THEN 9223372036854775807
              ELSE MAX(0, spam + ?3) END,
  ham = CASE WHEN ham > 9223372036854775807 - ?4 THEN 9223372036854775807
             ELSE MAX(0, ham + ?4) END,
  day = ?5
"""
_TOTALS = """
INSERT INTO learned_totals (owner, spam, ham) VALUES (?1, MAX(0, ?2), MAX(0, ?3))
ON CONFLICT DO UPDATE SET
  spam = CASE WHEN spam > 9223372036854775807 - ?2 THEN 9223372036854775807
              ELSE MAX(0, spam + ?2) END,
  ham = CASE WHEN ham > 9223372036854775807 - ?3 THEN 9223372036854775807
             ELSE MAX(0, ham + ?3) END
"""
_CHUNK = 500  # host parameters of one read
_EMPTY_OWNERS = 1024  # owners a read connection remembers having no words, per version


def _migrate(conn: sqlite3.Connection) -> None:
    """The single-table layout of a file written before owners, moved into owner 0."""
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "words" in tables:
        conn.execute(
            "INSERT OR IGNORE INTO learned (owner, hash, spam, ham, day)"
            " SELECT 0, hash, spam, ham, day FROM words"
        )
        conn.execute("DROP TABLE words")
    if "totals" in tables:
        conn.execute(
            "INSERT OR IGNORE INTO learned_totals (owner, spam, ham)"
            " SELECT 0, spam, ham FROM totals WHERE id = 0"
        )
        conn.execute("DROP TABLE totals")


def signed(h: int) -> int:
    return h - (1 << 64) if h >= 1 << 63 else h


def unsigned(h: int) -> int:
    return h + (1 << 64) if h < 0 else h


class SQLiteWordStore:
    def __init__(self, path: Path, *, synchronous: Synchronous = "normal") -> None:
        self.db = SQLiteDatabase(path, SCHEMA, synchronous=synchronous)
        self._local = threading.local()  # this thread's (connection, data_version, owners)
        try:
            self.db.write(_migrate)
        except sqlite3.Error as exc:
            raise StorageError(f"moving learned words to the owners' layout: {exc}") from exc

    def add(
        self,
        owner: int,
        words: Mapping[int, tuple[int, int]],
        letters: tuple[int, int],
        day: int,
    ) -> None:
        rows = [(owner, signed(h), s, m, day) for h, (s, m) in words.items()]

        def write(conn: sqlite3.Connection) -> None:
            conn.executemany(_ADD, rows)
            conn.execute(_TOTALS, (owner, *letters))

        try:
            self.db.write(write)
        except sqlite3.Error as exc:
            raise StorageError(f"writing learned words: {exc}") from exc

    def counts(self, owner: int, words: Sequence[int]) -> dict[int, tuple[int, int]]:
        out: dict[int, tuple[int, int]] = {}
        try:
            conn = self.db.reader()
            if not words or self._nothing_learned(conn, owner):
                return out
            for i in range(0, len(words), _CHUNK):
                part = [signed(h) for h in words[i : i + _CHUNK]]
                marks = ",".join("?" * len(part))
                sql = f"SELECT hash, spam, ham FROM learned WHERE owner = ? AND hash IN ({marks})"  # noqa: S608
                for h, s, m in conn.execute(sql, [owner, *part]):
                    out[unsigned(h)] = (s, m)
        except sqlite3.Error as exc:
            raise StorageError(f"reading learned words: {exc}") from exc
        return out

    def _nothing_learned(self, conn: sqlite3.Connection, owner: int) -> bool:
        """Whether ``owner`` has no word stored, as this thread's connection reads the file
        now. Remembered per connection until the file changes (SQLite's ``data_version``:
        another connection, of this process or another, committed): a letter's words are
        then not looked up one by one in a table where nothing was learned (~0.1 ms a
        letter). The version is read before the owner's words: a commit between the two
        leaves a newer answer under an older version, which the next read asks again."""
        (version,) = conn.execute("PRAGMA data_version").fetchone()
        seen: tuple[sqlite3.Connection, int, dict[int, bool]] | None
        seen = getattr(self._local, "empty", None)
        if seen is None or seen[0] is not conn or seen[1] != version:
            seen = self._local.empty = (conn, version, {})
        owners: dict[int, bool] = seen[2]
        empty = owners.get(owner)
        if empty is None:
            if len(owners) >= _EMPTY_OWNERS:
                owners.clear()
            (found,) = conn.execute(
                "SELECT EXISTS (SELECT 1 FROM learned WHERE owner = ?)", (owner,)
            ).fetchone()
            empty = owners[owner] = not found
        return empty

    def totals(self, owner: int) -> tuple[int, int]:
        try:
            row = (
                self.db.reader()
                .execute("SELECT spam, ham FROM learned_totals WHERE owner = ?", (owner,))
                .fetchone()
            )
        except sqlite3.Error as exc:
            raise StorageError(f"reading learned words: {exc}") from exc
        return (int(row[0]), int(row[1])) if row else (0, 0)

    def size(self, owner: int) -> int:
        try:
            (n,) = (
                self.db.reader()
                .execute("SELECT count(*) FROM learned WHERE owner = ?", (owner,))
                .fetchone()
            )
        except sqlite3.Error as exc:
            raise StorageError(f"reading learned words: {exc}") from exc
        return int(n)

    def prune(self, owner: int, keep: int) -> int:
        def write(conn: sqlite3.Connection) -> int:
            (n,) = conn.execute("SELECT count(*) FROM learned WHERE owner = ?", (owner,)).fetchone()
            excess = int(n) - keep
            if excess <= 0:
                return 0
            # on a tie the lower hash as an unsigned number, as every store
            conn.execute(
                "DELETE FROM learned WHERE owner = ?1 AND hash IN (SELECT hash FROM learned"
                " WHERE owner = ?1 ORDER BY day, hash < 0, hash LIMIT ?2)",
                (owner, excess),
            )
            return excess

        try:
            return self.db.write(write)
        except sqlite3.Error as exc:
            raise StorageError(f"pruning learned words: {exc}") from exc

    def forget(self, owner: int) -> None:
        def write(conn: sqlite3.Connection) -> None:
            conn.execute("DELETE FROM learned WHERE owner = ?", (owner,))
            conn.execute("DELETE FROM learned_totals WHERE owner = ?", (owner,))

        try:
            self.db.write(write)
        except sqlite3.Error as exc:
            raise StorageError(f"forgetting learned words: {exc}") from exc

    def owners(self) -> list[int]:
        rows = self.db.query("SELECT owner FROM learned_totals ORDER BY owner")
        return [int(r[0]) for r in rows]

    def all_totals(self) -> dict[int, tuple[int, int]]:
        rows = self.db.query("SELECT owner, spam, ham FROM learned_totals")
        return {int(o): (int(s), int(h)) for o, s, h in rows}

    def close(self) -> None:
        self.db.close()
