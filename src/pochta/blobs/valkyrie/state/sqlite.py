"""Valkyrie's position and totals in a small SQLite file, ``valkyrie.sqlite3`` in the data
directory (the embedded default)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from pochta.blobs.valkyrie.report import COUNT_NAMES, Counts
from pochta.blobs.valkyrie.state import summarize
from pochta.sqlitedb import SQLiteDatabase

STATE_FILE = "valkyrie.sqlite3"

_COLS = ", ".join(f"{n} INTEGER NOT NULL DEFAULT 0" for n in COUNT_NAMES)
SCHEMA = f"""
CREATE TABLE IF NOT EXISTS disks (
    disk TEXT PRIMARY KEY,
    position TEXT NOT NULL DEFAULT '',
    passes INTEGER NOT NULL DEFAULT 0,
    last_pass REAL,
    {_COLS}
);
"""


class ValkyrieState:
    """Each disk's position and running totals, in a small SQLite file (``valkyrie.sqlite3``
    in the data directory). Writes are short; nothing is held open during a scan."""

    def __init__(self, path: Path) -> None:
        self._db = SQLiteDatabase(path, SCHEMA, synchronous="normal")

    def position(self, disk: str) -> str:
        rows = self._db.query("SELECT position FROM disks WHERE disk = ?", (disk,))
        return str(rows[0][0]) if rows else ""

    def save(self, disk: str, position: str, delta: Counts, *, finished_at: float | None) -> None:
        """Store the position (``""`` after a finished pass) and add ``delta`` to the totals."""
        values = [delta.as_dict()[n] for n in COUNT_NAMES]
        sets = ", ".join(f"{n} = {n} + ?" for n in COUNT_NAMES)

        def step(conn: sqlite3.Connection) -> None:
            conn.execute("INSERT OR IGNORE INTO disks (disk) VALUES (?)", (disk,))
            conn.execute(
                f"UPDATE disks SET position = ?, {sets} WHERE disk = ?",  # noqa: S608
                (position, *values, disk),
            )
            if finished_at is not None:
                conn.execute(
                    "UPDATE disks SET passes = passes + 1, last_pass = ? WHERE disk = ?",
                    (finished_at, disk),
                )

        self._db.write(step)

    def summary(self) -> dict[str, Any]:
        """Totals over every disk, and each disk's own (for ``pochta stats``)."""
        rows = self._db.query(
            f"SELECT disk, position, passes, last_pass, {', '.join(COUNT_NAMES)}"  # noqa: S608
            " FROM disks ORDER BY disk"
        )
        return summarize(rows)

    def close(self) -> None:
        self._db.close()
