"""Learned words in one SQLite file (``pochta.sqlitedb``: WAL, one writer).

    words  (hash, spam, ham, day)   hash the word's signed 64-bit hash; day its last day seen
    totals (id = 0, spam, ham)      the letters learned

A flush is one transaction; a read is one ``IN`` query of the letter's words (about a tenth of
a millisecond for 300 words). ``prune`` deletes the words with the oldest day first (an index
on day).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path

from pochta.errors import StorageError
from pochta.sqlitedb import SQLiteDatabase, Synchronous

SCHEMA = """
CREATE TABLE IF NOT EXISTS words (
    hash INTEGER PRIMARY KEY, spam INTEGER NOT NULL, ham INTEGER NOT NULL, day INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS words_by_day ON words (day);
CREATE TABLE IF NOT EXISTS totals (
    id INTEGER PRIMARY KEY CHECK (id = 0), spam INTEGER NOT NULL, ham INTEGER NOT NULL
);
INSERT OR IGNORE INTO totals (id, spam, ham) VALUES (0, 0, 0);
"""
# saturating at 2^63 - 1 (SQLite would turn an overflowing sum into a float), never below 0
_ADD = """
INSERT INTO words (hash, spam, ham, day) VALUES (?1, MAX(0, ?2), MAX(0, ?3), ?4)
ON CONFLICT DO UPDATE SET
  spam = CASE WHEN spam > 9223372036854775807 - ?2 THEN 9223372036854775807
              ELSE MAX(0, spam + ?2) END,
  ham = CASE WHEN ham > 9223372036854775807 - ?3 THEN 9223372036854775807
             ELSE MAX(0, ham + ?3) END,
  day = ?4
"""
_TOTALS = """
UPDATE totals SET
  spam = CASE WHEN spam > 9223372036854775807 - ?1 THEN 9223372036854775807
              ELSE MAX(0, spam + ?1) END,
  ham = CASE WHEN ham > 9223372036854775807 - ?2 THEN 9223372036854775807
             ELSE MAX(0, ham + ?2) END
WHERE id = 0
"""
_CHUNK = 500  # host parameters of one read


def signed(h: int) -> int:
    return h - (1 << 64) if h >= 1 << 63 else h


def unsigned(h: int) -> int:
    return h + (1 << 64) if h < 0 else h


class SQLiteWordStore:
    def __init__(self, path: Path, *, synchronous: Synchronous = "normal") -> None:
        self.db = SQLiteDatabase(path, SCHEMA, synchronous=synchronous)

    def add(self, words: Mapping[int, tuple[int, int]], letters: tuple[int, int], day: int) -> None:
        rows = [(signed(h), s, m, day) for h, (s, m) in words.items()]

        def write(conn: sqlite3.Connection) -> None:
            conn.executemany(_ADD, rows)
            conn.execute(_TOTALS, letters)

        try:
            self.db.write(write)
        except sqlite3.Error as exc:
            raise StorageError(f"writing learned words: {exc}") from exc

    def counts(self, words: Sequence[int]) -> dict[int, tuple[int, int]]:
        out: dict[int, tuple[int, int]] = {}
        try:
            conn = self.db.reader()
            for i in range(0, len(words), _CHUNK):
                part = [signed(h) for h in words[i : i + _CHUNK]]
                sql = (
                    f"SELECT hash, spam, ham FROM words WHERE hash IN ({','.join('?' * len(part))})"  # noqa: S608
                )
                for h, s, m in conn.execute(sql, part):
                    out[unsigned(h)] = (s, m)
        except sqlite3.Error as exc:
            raise StorageError(f"reading learned words: {exc}") from exc
        return out

    def totals(self) -> tuple[int, int]:
        try:
            row = self.db.reader().execute("SELECT spam, ham FROM totals WHERE id = 0").fetchone()
        except sqlite3.Error as exc:
            raise StorageError(f"reading learned words: {exc}") from exc
        return (int(row[0]), int(row[1])) if row else (0, 0)

    def size(self) -> int:
        try:
            (n,) = self.db.reader().execute("SELECT count(*) FROM words").fetchone()
        except sqlite3.Error as exc:
            raise StorageError(f"reading learned words: {exc}") from exc
        return int(n)

    def prune(self, keep: int) -> int:
        def write(conn: sqlite3.Connection) -> int:
            (n,) = conn.execute("SELECT count(*) FROM words").fetchone()
            excess = int(n) - keep
            if excess <= 0:
                return 0
            conn.execute(
                "DELETE FROM words WHERE hash IN"
                " (SELECT hash FROM words ORDER BY day, hash LIMIT ?)",
                (excess,),
            )
            return excess

        try:
            return self.db.write(write)
        except sqlite3.Error as exc:
            raise StorageError(f"pruning learned words: {exc}") from exc

    def close(self) -> None:
        self.db.close()
