"""Sender lists in PostgreSQL (``pochta.sender_lists``, migration 0008): every loader of a
several-machines installation reads the same lists."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from pochta.errors import InvalidInput
from pochta.mailbox.lists.memory import full
from pochta.postgres.database import Postgres
from pochta.types import ListAction, ListEntry

LOCK = 0x6C697374  # pg_advisory_xact_lock(LOCK, account): one writer of an account's list


def _entry(value: Any, action: Any) -> ListEntry:
    act: ListAction = "block" if action == "block" else "allow"
    return ListEntry(str(value), act)


class PostgresSenderLists:
    def __init__(self, db: Postgres) -> None:
        """``db`` is this store's: it closes it (``db.share()`` to keep using it)."""
        self._db = db

    def entries(self, user_id: int, limit: int) -> list[ListEntry]:
        rows = self._db.query(
            "SELECT value, action FROM pochta.sender_lists WHERE user_id = %s"
            ' ORDER BY value COLLATE "C" LIMIT %s',
            (user_id, max(limit, 0)),
        )
        return [_entry(v, a) for v, a in rows]

    def lookup(self, user_ids: Sequence[int], values: Sequence[str]) -> dict[int, list[ListEntry]]:
        users = list(dict.fromkeys(user_ids))
        wanted = list(dict.fromkeys(values))
        out: dict[int, list[ListEntry]] = {}
        if not users or not wanted:
            return out
        rows = self._db.query(
            "SELECT user_id, value, action FROM pochta.sender_lists"
            " WHERE user_id = ANY(%s::bigint[]) AND value = ANY(%s::text[])"
            ' ORDER BY user_id, value COLLATE "C"',
            (users, wanted),
        )
        for user_id, value, action in rows:
            out.setdefault(int(user_id), []).append(_entry(value, action))
        return out

    def add(self, user_id: int, entry: ListEntry, limit: int) -> bool:
        def op(conn: psycopg.Connection[Any]) -> bool:
            conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (LOCK, user_id % 2**31))
            known = conn.execute(
                "SELECT 1 FROM pochta.sender_lists WHERE user_id = %s AND value = %s",
                (user_id, entry.value),
            ).fetchone()
            if known is None:
                row = conn.execute(
                    "SELECT count(*) FROM pochta.sender_lists WHERE user_id = %s", (user_id,)
                ).fetchone()
                if row is not None and int(row[0]) >= limit:
                    raise InvalidInput(full(limit))
            conn.execute(
                "INSERT INTO pochta.sender_lists (user_id, value, action) VALUES (%s, %s, %s)"
                " ON CONFLICT (user_id, value) DO UPDATE SET action = excluded.action",
                (user_id, entry.value, entry.action),
            )
            return known is None

        return self._db.transaction(op)

    def remove(self, user_id: int, value: str) -> bool:
        n = self._db.execute(
            "DELETE FROM pochta.sender_lists WHERE user_id = %s AND value = %s", (user_id, value)
        )
        return n > 0

    def forget(self, user_id: int) -> int:
        return self._db.execute("DELETE FROM pochta.sender_lists WHERE user_id = %s", (user_id,))

    def close(self) -> None:
        self._db.close()
