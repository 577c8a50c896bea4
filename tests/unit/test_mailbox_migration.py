"""An index made before IMAP (no UIDs) is brought up to date when it is opened."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from pochta.mailbox.index.sqlite import SQLiteIndex
from pochta.types import LetterFlag

OLD_SCHEMA = """
CREATE TABLE users (id INTEGER PRIMARY KEY, email TEXT NOT NULL UNIQUE,
    password_hash TEXT NOT NULL, reset_required INTEGER NOT NULL DEFAULT 0, created REAL NOT NULL);
CREATE TABLE folders (id INTEGER PRIMARY KEY, user_id INTEGER NOT NULL, name TEXT NOT NULL,
    UNIQUE (user_id, name));
CREATE TABLE skeletons (id INTEGER PRIMARY KEY, data BLOB NOT NULL, letters INTEGER NOT NULL);
CREATE TABLE letters (id INTEGER PRIMARY KEY, user_id INTEGER NOT NULL,
    folder_id INTEGER NOT NULL, skeleton_id INTEGER NOT NULL, state INTEGER NOT NULL,
    size INTEGER NOT NULL, received REAL NOT NULL, date REAL, sender TEXT NOT NULL,
    subject TEXT NOT NULL, seen INTEGER NOT NULL DEFAULT 0, flagged INTEGER NOT NULL DEFAULT 0,
    verdict TEXT);
INSERT INTO users VALUES (1, 'a@example.org', 'h', 0, 0), (2, 'b@example.org', 'h', 0, 0);
INSERT INTO folders VALUES (1, 1, 'Inbox'), (2, 1, 'Spam'), (3, 2, 'Inbox'), (4, 2, 'Spam');
INSERT INTO skeletons VALUES (1, X'00', 6);
INSERT INTO letters VALUES
    (10, 1, 1, 1, 1, 5, 1.0, NULL, 'x', 's', 1, 0, NULL),
    (11, 1, 2, 1, 1, 5, 1.0, NULL, 'x', 's', 0, 1, NULL),
    (12, 2, 3, 1, 1, 5, 1.0, NULL, 'x', 's', 0, 0, NULL),
    (13, 1, 1, 1, 1, 5, 1.0, NULL, 'x', 's', 0, 0, NULL),
    (14, 1, 1, 1, 2, 5, 1.0, NULL, 'x', 's', 0, 0, NULL),
    (15, 1, 1, 1, 1, 5, 1.0, NULL, 'x', 's', 0, 0, NULL);
"""


def test_an_old_index_gets_uids_in_arrival_order_and_keeps_them(tmp_path: Path) -> None:
    path = tmp_path / "mailbox.sqlite3"
    with sqlite3.connect(path) as conn:
        conn.executescript(OLD_SCHEMA)
    conn.close()
    index = SQLiteIndex(path, clock=lambda: 1_700_000_000.0)
    inbox = index.entries(1, "Inbox")
    assert [(e.uid, e.letter_id, e.flags) for e in inbox] == [
        (1, 10, LetterFlag.SEEN),
        (2, 13, LetterFlag.NONE),
        (4, 15, LetterFlag.NONE),  # 14 is being deleted: it kept UID 3
    ]
    assert [(e.uid, e.letter_id) for e in index.entries(1, "Spam")] == [(1, 11)]
    assert [(e.uid, e.letter_id) for e in index.entries(2, "Inbox")] == [(1, 12)]
    folders = {f.name: (f.uidvalidity, f.uidnext) for f in index.folders(1)}
    assert folders == {"Inbox": (1_700_000_000, 5), "Spam": (1_700_000_000, 2)}
    index.close()
    # opening it again changes nothing (UIDVALIDITY stays, UIDs stay)
    again = SQLiteIndex(path, clock=lambda: 1_800_000_000.0)
    assert {f.name: (f.uidvalidity, f.uidnext) for f in again.folders(1)} == folders
    assert again.entries(1, "Inbox") == inbox
    again.close()
