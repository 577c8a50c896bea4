"""PairDB in SQLite: the embedded default."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from pochta.blobs.pairs import check_distinct
from pochta.errors import PairNotFound
from pochta.sqlitedb import SQLiteDatabase, Synchronous
from pochta.types import DiskSpec, Pair, PairFlag

SCHEMA = """
CREATE TABLE IF NOT EXISTS pairs (
    id INTEGER PRIMARY KEY,
    node_a TEXT NOT NULL, root_a TEXT NOT NULL,
    node_b TEXT NOT NULL, root_b TEXT NOT NULL,
    flags INTEGER NOT NULL DEFAULT 0,
    free_a INTEGER NOT NULL DEFAULT 0,
    free_b INTEGER NOT NULL DEFAULT 0
);
"""


def _pair(row: tuple[int, str, str, str, str, int, int, int]) -> Pair:
    return Pair(
        row[0],
        (DiskSpec(row[1], row[2]), DiskSpec(row[3], row[4])),
        PairFlag(row[5]),
        (row[6], row[7]),
    )


_COLUMNS = "id, node_a, root_a, node_b, root_b, flags, free_a, free_b"


class SQLitePairDB:
    def __init__(self, path: Path, *, synchronous: Synchronous = "full") -> None:
        self._db = SQLiteDatabase(path, SCHEMA, synchronous=synchronous)

    def add(self, disks: tuple[DiskSpec, DiskSpec], free: tuple[int, int]) -> Pair:
        def step(conn: sqlite3.Connection) -> Pair:
            rows = conn.execute(f"SELECT {_COLUMNS} FROM pairs").fetchall()  # noqa: S608
            check_distinct(disks, [_pair(r) for r in rows])
            cur = conn.execute(
                "INSERT INTO pairs (node_a, root_a, node_b, root_b, free_a, free_b)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (disks[0].node, disks[0].root, disks[1].node, disks[1].root, *free),
            )
            assert cur.lastrowid is not None
            return Pair(cur.lastrowid, disks, PairFlag.NONE, free)

        return self._db.write(step)

    def get(self, pair_id: int) -> Pair:
        rows = self._db.query(f"SELECT {_COLUMNS} FROM pairs WHERE id = ?", (pair_id,))  # noqa: S608
        if not rows:
            raise PairNotFound(f"no pair {pair_id}")
        return _pair(rows[0])

    def list(self) -> list[Pair]:
        return [_pair(r) for r in self._db.query(f"SELECT {_COLUMNS} FROM pairs ORDER BY id")]  # noqa: S608

    def set_flags(self, pair_id: int, flags: PairFlag) -> Pair:
        def step(conn: sqlite3.Connection) -> None:
            cur = conn.execute("UPDATE pairs SET flags = ? WHERE id = ?", (int(flags), pair_id))
            if cur.rowcount == 0:
                raise PairNotFound(f"no pair {pair_id}")

        self._db.write(step)
        return self.get(pair_id)

    def set_free(self, pair_id: int, free: tuple[int, int]) -> None:
        def step(conn: sqlite3.Connection) -> None:
            cur = conn.execute(
                "UPDATE pairs SET free_a = ?, free_b = ? WHERE id = ?", (*free, pair_id)
            )
            if cur.rowcount == 0:
                raise PairNotFound(f"no pair {pair_id}")

        self._db.write(step)

    def remove(self, pair_id: int) -> None:
        def step(conn: sqlite3.Connection) -> None:
            cur = conn.execute("DELETE FROM pairs WHERE id = ?", (pair_id,))
            if cur.rowcount == 0:
                raise PairNotFound(f"no pair {pair_id}")

        self._db.write(step)

    def close(self) -> None:
        self._db.close()
