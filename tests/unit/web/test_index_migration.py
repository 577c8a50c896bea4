"""A mailbox database made before the admin role opens, gains the column, keeps its data."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from pochta.mailbox.index.sqlite import SQLiteIndex

OLD_USERS = """
CREATE TABLE users (
    id INTEGER PRIMARY KEY,
    email TEXT NOT NULL UNIQUE,
    password_hash TEXT NOT NULL,
    reset_required INTEGER NOT NULL DEFAULT 0,
    created REAL NOT NULL
);
INSERT INTO users (email, password_hash, reset_required, created)
VALUES ('old@example.org', 'hash-old', 1, 1.0);
"""


def old_database(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.executescript(OLD_USERS)
    conn.close()


def test_an_old_database_gains_the_admin_column(tmp_path: Path) -> None:
    path = tmp_path / "mailbox.sqlite3"
    old_database(path)
    index = SQLiteIndex(path)
    try:
        old = index.user("old@example.org")
        assert old is not None
        assert (old.password_hash, old.reset_required, old.admin) == ("hash-old", True, False)
        assert index.set_admin(old.id, True)
        assert index.user_by_id(old.id).admin  # type: ignore[union-attr]
    finally:
        index.close()
    again = SQLiteIndex(path)  # opening a migrated file changes nothing
    try:
        assert again.user("old@example.org").admin  # type: ignore[union-attr]
    finally:
        again.close()


def test_two_processes_opening_an_old_file_at_once_both_succeed(tmp_path: Path) -> None:
    path = tmp_path / "mailbox.sqlite3"
    old_database(path)
    opened: list[SQLiteIndex] = []
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def open_it() -> None:
        start.wait()
        try:
            opened.append(SQLiteIndex(path))
        except BaseException as exc:  # pragma: no cover - the failure this test looks for
            errors.append(exc)

    threads = [threading.Thread(target=open_it) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for index in opened:
        index.close()
    assert errors == []
    conn = sqlite3.connect(path)
    columns = [r[1] for r in conn.execute("PRAGMA table_info(users)")]
    conn.close()
    assert columns.count("admin") == 1
