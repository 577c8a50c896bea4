"""Sender lists in SQLite: a table of the mailbox database (``<data_dir>/mailbox.sqlite3``),
beside the accounts they belong to, written by that database's one writer (the index's
:class:`~pochta.sqlitedb.SQLiteDatabase`, shared: group commits and no second writer on the
file). Given a path instead, the store opens a database of its own (tests, tools)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path

from pochta.errors import InvalidInput
from pochta.mailbox.lists.memory import full
from pochta.sqlitedb import SQLiteDatabase, Synchronous
from pochta.types import ListAction, ListEntry

SCHEMA = """
CREATE TABLE IF NOT EXISTS sender_lists (
    user_id INTEGER NOT NULL,
    value TEXT NOT NULL,
    action TEXT NOT NULL CHECK (action IN ('allow', 'block')),
    PRIMARY KEY (user_id, value)
) WITHOUT ROWID;
"""


def _entry(row: tuple[str, str]) -> ListEntry:
    action: ListAction = "block" if row[1] == "block" else "allow"
    return ListEntry(str(row[0]), action)


class SQLiteSenderLists:
    def __init__(self, db: SQLiteDatabase | Path, *, synchronous: Synchronous = "full") -> None:
        """``db``: the mailbox index's database (shared: ``close`` leaves it open), or a
        path to open one of this store's own."""
        self._owned = not isinstance(db, SQLiteDatabase)
        if isinstance(db, SQLiteDatabase):
            self._db = db
            self._db.write(lambda conn: conn.execute(SCHEMA).close())
        else:
            self._db = SQLiteDatabase(db, SCHEMA, synchronous=synchronous)

    def entries(self, user_id: int, limit: int) -> list[ListEntry]:
        rows = self._db.query(
            "SELECT value, action FROM sender_lists WHERE user_id = ? ORDER BY value LIMIT ?",
            (user_id, max(limit, 0)),
        )
        return [_entry(r) for r in rows]

    def lookup(self, user_ids: Sequence[int], values: Sequence[str]) -> dict[int, list[ListEntry]]:
        users = list(dict.fromkeys(user_ids))
        wanted = list(dict.fromkeys(values))
        out: dict[int, list[ListEntry]] = {}
        if not users or not wanted:
            return out
        rows = self._db.query(
            "SELECT user_id, value, action FROM sender_lists"
            " WHERE user_id IN (SELECT value FROM json_each(?))"
            " AND value IN (SELECT value FROM json_each(?)) ORDER BY user_id, value",
            (json.dumps(users), json.dumps(wanted)),
        )
        for user_id, value, action in rows:
            out.setdefault(int(user_id), []).append(_entry((value, action)))
        return out

    def add(self, user_id: int, entry: ListEntry, limit: int) -> bool:
        def op(conn: sqlite3.Connection) -> bool:
            known = conn.execute(
                "SELECT 1 FROM sender_lists WHERE user_id = ? AND value = ?",
                (user_id, entry.value),
            ).fetchone()
            if known is None:
                (count,) = conn.execute(
                    "SELECT count(*) FROM sender_lists WHERE user_id = ?", (user_id,)
                ).fetchone()
                if count >= limit:
                    raise InvalidInput(full(limit))
            conn.execute(
                "INSERT INTO sender_lists (user_id, value, action) VALUES (?, ?, ?)"
                " ON CONFLICT (user_id, value) DO UPDATE SET action = excluded.action",
                (user_id, entry.value, entry.action),
            ).close()
            return known is None

        return self._db.write(op)

    def remove(self, user_id: int, value: str) -> bool:
        return self._db.write(
            lambda conn: (
                conn.execute(
                    "DELETE FROM sender_lists WHERE user_id = ? AND value = ?", (user_id, value)
                ).rowcount
                > 0
            )
        )

    def forget(self, user_id: int) -> int:
        return self._db.write(
            lambda conn: (
                conn.execute("DELETE FROM sender_lists WHERE user_id = ?", (user_id,)).rowcount
            )
        )

    def close(self) -> None:
        if self._owned:
            self._db.close()
