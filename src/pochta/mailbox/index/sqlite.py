"""The mailbox index in SQLite (WAL, one writer with group commit): the embedded default.

Letters of one delivery share one skeleton row (``refs`` counts its letters). Attachment
references are a WITHOUT ROWID table keyed by (letter, n), the 32-byte key stored raw and the
magic as a signed 32-bit integer, as in the FileDB.
"""

from __future__ import annotations

import functools
import sqlite3
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from pathlib import Path
from typing import Any

from pochta.errors import AlreadyExists, FolderNotFound, InvalidInput
from pochta.sqlitedb import SQLiteDatabase, Synchronous
from pochta.types import (
    KEPT_FLAGS,
    AttachmentRef,
    Clock,
    Folder,
    FolderEntry,
    IndexStats,
    LetterFlag,
    LetterMeta,
    LetterState,
    NewStoredLetter,
    StoredLetter,
    Updated,
    User,
)

DEFAULT_FOLDERS = ("Inbox", "Spam")

SCHEMA = """
CREATE TABLE IF NOT EXISTS users (
    id INTEGER PRIMARY KEY,
    email TEXT NOT NULL UNIQUE,
    password_hash TEXT NOT NULL,
    reset_required INTEGER NOT NULL DEFAULT 0,
    created REAL NOT NULL,
    admin INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS sessions (
    token_hash BLOB PRIMARY KEY,
    user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    expires REAL NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS folders (
    id INTEGER PRIMARY KEY,
    user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    uidvalidity INTEGER NOT NULL DEFAULT 0,
    uidnext INTEGER NOT NULL DEFAULT 1,
    UNIQUE (user_id, name)
);
CREATE TABLE IF NOT EXISTS skeletons (
    id INTEGER PRIMARY KEY,
    data BLOB NOT NULL,
    letters INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS letters (
    id INTEGER PRIMARY KEY,
    user_id INTEGER NOT NULL,
    folder_id INTEGER NOT NULL,
    skeleton_id INTEGER NOT NULL,
    state INTEGER NOT NULL,
    size INTEGER NOT NULL,
    received REAL NOT NULL,
    date REAL,
    sender TEXT NOT NULL,
    subject TEXT NOT NULL,
    seen INTEGER NOT NULL DEFAULT 0,
    flagged INTEGER NOT NULL DEFAULT 0,
    verdict TEXT,
    uid INTEGER NOT NULL DEFAULT 0,
    flags INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS letters_by_folder ON letters (folder_id, id);
CREATE INDEX IF NOT EXISTS letters_unfinished ON letters (state) WHERE state != 1;
CREATE TABLE IF NOT EXISTS refs (
    letter_id INTEGER NOT NULL,
    n INTEGER NOT NULL,
    key BLOB NOT NULL,
    size INTEGER NOT NULL,
    crc32 INTEGER NOT NULL,
    magic INTEGER NOT NULL,
    PRIMARY KEY (letter_id, n)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS queued (
    id TEXT PRIMARY KEY,
    at REAL NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS queued_by_time ON queued (at);
"""

_LETTER = """
SELECT l.id, l.user_id, f.name, l.size, l.received, l.date, l.sender, l.subject, l.seen,
       l.flagged, l.verdict, l.uid, l.flags
FROM letters l JOIN folders f ON f.id = l.folder_id
"""

_SKELETONS = """
SELECT l.id, l.user_id, f.name, l.size, l.received, l.date, l.sender, l.subject, l.seen,
       l.flagged, l.verdict, l.uid, l.flags,
       CASE WHEN ? < 0 OR length(s.data) <= ? THEN s.data END
FROM letters l JOIN folders f ON f.id = l.folder_id JOIN skeletons s ON s.id = l.skeleton_id
"""
IDS_PER_STATEMENT = 500  # letter ids bound to one statement (SQLite takes at least 999)

# letters.flags keeps the flags that have no column of their own; seen and flagged keep theirs
_OTHER_FLAGS = KEPT_FLAGS


@functools.lru_cache(maxsize=1024)  # a few dozen combinations in use; enum arithmetic is slow
def _flags(seen: object, flagged: object, other: object) -> LetterFlag:
    flags = LetterFlag(int(other) & _OTHER_FLAGS)  # type: ignore[call-overload]
    if seen:
        flags |= LetterFlag.SEEN
    if flagged:
        flags |= LetterFlag.FLAGGED
    return flags


def _migrate(now: float) -> Callable[[sqlite3.Connection], None]:
    """Bring a database made before IMAP up to date (UIDs, UIDVALIDITY, more flags): the
    letters of each folder get UIDs 1, 2, ... in the order they arrived."""

    def op(conn: sqlite3.Connection) -> None:
        letters = {r[1] for r in conn.execute("PRAGMA table_info(letters)")}
        if "uid" not in letters:
            conn.execute("ALTER TABLE letters ADD COLUMN uid INTEGER NOT NULL DEFAULT 0")
            conn.execute("ALTER TABLE letters ADD COLUMN flags INTEGER NOT NULL DEFAULT 0")
            conn.execute(
                "UPDATE letters SET uid = r.n FROM (SELECT id, row_number() OVER"
                " (PARTITION BY folder_id ORDER BY id) AS n FROM letters) AS r"
                " WHERE letters.id = r.id"
            )
        folders = {r[1] for r in conn.execute("PRAGMA table_info(folders)")}
        if "uidnext" not in folders:
            conn.execute("ALTER TABLE folders ADD COLUMN uidvalidity INTEGER NOT NULL DEFAULT 0")
            conn.execute("ALTER TABLE folders ADD COLUMN uidnext INTEGER NOT NULL DEFAULT 1")
            conn.execute(
                "UPDATE folders SET uidvalidity = ?, uidnext = 1 + coalesce("
                "(SELECT max(uid) FROM letters WHERE folder_id = folders.id), 0)",
                (_uidvalidity(now),),
            )
        conn.execute("CREATE INDEX IF NOT EXISTS letters_by_uid ON letters (folder_id, uid)")

    return op


def _uidvalidity(now: float) -> int:
    """A folder's UIDVALIDITY: the time it was made, in seconds (as Dovecot does), non-zero."""
    return max(1, int(now) % 2**32)


def _to_db(magic: int) -> int:
    return magic - 2**32 if magic >= 2**31 else magic


def _letter(row: tuple[Any, ...]) -> StoredLetter:
    """A ``_LETTER`` row (or a longer one that begins with it) as a StoredLetter. The
    columns' types (INTEGER, REAL, TEXT; see SCHEMA) are those of its fields already, so
    only the flags are converted: many rows are read at once (a FETCH's batch)."""
    seen, flagged = row[8], row[9]
    return StoredLetter(
        row[0],
        row[1],
        row[2],
        row[3],
        row[4],
        row[5],
        row[6],
        row[7],
        bool(seen),
        bool(flagged),
        row[10],
        row[11],
        _flags(seen, flagged, row[12]),
    )


def _ref(row: tuple[int, bytes, int, int, int]) -> AttachmentRef:
    n, key, size, crc32, magic = row
    return AttachmentRef(n, key.hex(), size, crc32, magic % 2**32)


_USER = "SELECT id, email, password_hash, reset_required, admin FROM users"


def _user(row: tuple[int, str, str, int, int]) -> User:
    return User(row[0], row[1], row[2], bool(row[3]), bool(row[4]))


def _migrate_admin(conn: sqlite3.Connection) -> None:
    """Bring a database made by an older pochta up to this schema (each step checks first,
    so two processes opening one old file at once both succeed)."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(users)")}
    if "admin" not in columns:  # added with the admin pages
        conn.execute("ALTER TABLE users ADD COLUMN admin INTEGER NOT NULL DEFAULT 0")


def _outdated(db: SQLiteDatabase) -> bool:
    return "admin" not in {row[1] for row in db.query("PRAGMA table_info(users)")}


def normalize_email(email: str) -> str:
    email = email.strip()
    local, at, domain = email.rpartition("@")
    if not at or not local or not domain or any(c.isspace() for c in email):
        raise InvalidInput(f"not an e-mail address: {email!r}")
    return f"{local}@{domain.lower()}".lower()


def _folder_name(name: str) -> str:
    name = name.strip()
    if not name or len(name) > 200 or any(ord(c) < 32 for c in name):
        raise InvalidInput(f"not a folder name: {name!r}")
    return name


def _exec(sql: str, params: tuple[object, ...]) -> Callable[[sqlite3.Connection], None]:
    """A write of one statement. It returns nothing: a cursor must never leave the writer
    thread (finalizing it elsewhere races with the writer's use of the connection)."""

    def op(conn: sqlite3.Connection) -> None:
        conn.execute(sql, params).close()

    return op


class SQLiteIndex:
    def __init__(
        self, path: Path, *, synchronous: Synchronous = "full", clock: Clock = time.time
    ) -> None:
        self._db = SQLiteDatabase(path, SCHEMA, synchronous=synchronous)
        self._clock = clock
        try:
            if _outdated(self._db):
                self._db.write(_migrate_admin)
            self._db.write(_migrate(clock()))
        except BaseException:
            self._db.close()
            raise

    @property
    def database(self) -> SQLiteDatabase:
        """The file's one writer, for a store that keeps its table in the same file (the
        sender lists, :mod:`pochta.mailbox.lists.sqlite`)."""
        return self._db

    # -- users and sessions ----------------------------------------------------------------
    def add_user(self, email: str, password_hash: str, *, admin: bool = False) -> User:
        email = normalize_email(email)

        def op(conn: sqlite3.Connection) -> User:
            try:
                cur = conn.execute(
                    "INSERT INTO users (email, password_hash, created, admin) VALUES (?, ?, ?, ?)",
                    (email, password_hash, self._clock(), int(admin)),
                )
            except sqlite3.IntegrityError:
                raise AlreadyExists(f"user {email} already exists") from None
            user_id = int(cur.lastrowid or 0)
            conn.executemany(
                "INSERT INTO folders (user_id, name, uidvalidity) VALUES (?, ?, ?)",
                [(user_id, name, _uidvalidity(self._clock())) for name in DEFAULT_FOLDERS],
            )
            return User(user_id, email, password_hash, admin=admin)

        return self._db.write(op)

    def user(self, email: str) -> User | None:
        try:
            email = normalize_email(email)
        except InvalidInput:
            return None
        rows = self._db.query(_USER + " WHERE email = ?", (email,))
        return _user(rows[0]) if rows else None

    def user_by_id(self, user_id: int) -> User | None:
        rows = self._db.query(_USER + " WHERE id = ?", (user_id,))
        return _user(rows[0]) if rows else None

    def users(self) -> list[User]:
        rows = self._db.query(_USER + " ORDER BY email")
        return [_user(r) for r in rows]

    def set_password(self, user_id: int, password_hash: str) -> None:
        self._db.write(
            _exec(
                "UPDATE users SET password_hash = ?, reset_required = 0 WHERE id = ?",
                (password_hash, user_id),
            )
        )

    def require_reset(self, emails: Collection[str]) -> int:
        def op(conn: sqlite3.Connection) -> int:
            count = 0
            for email in emails:
                count += conn.execute(
                    "UPDATE users SET reset_required = 1 WHERE email = ?", (email.lower(),)
                ).rowcount
            conn.execute(
                "DELETE FROM sessions WHERE user_id IN"
                " (SELECT id FROM users WHERE reset_required = 1)"
            )
            return count

        return self._db.write(op)

    def set_admin(self, user_id: int, admin: bool) -> bool:
        return self._db.write(
            lambda conn: (
                conn.execute(
                    "UPDATE users SET admin = ? WHERE id = ?", (int(admin), user_id)
                ).rowcount
                == 1
            )
        )

    def delete_user(self, user_id: int) -> int | None:
        def op(conn: sqlite3.Connection) -> int | None:
            if conn.execute("SELECT 1 FROM users WHERE id = ?", (user_id,)).fetchone() is None:
                return None
            pending = conn.execute(
                "SELECT count(*) FROM letters WHERE user_id = ? AND state = 0", (user_id,)
            ).fetchone()[0]
            if pending:
                raise InvalidInput(
                    f"{pending} letter(s) are being delivered to this account: try again"
                    " in a minute"
                )
            marked = conn.execute(
                "UPDATE letters SET state = 2 WHERE user_id = ? AND state = 1", (user_id,)
            ).rowcount
            conn.execute("DELETE FROM sessions WHERE user_id = ?", (user_id,))
            conn.execute("DELETE FROM folders WHERE user_id = ?", (user_id,))
            conn.execute("DELETE FROM users WHERE id = ?", (user_id,))
            return int(marked)

        return self._db.write(op)

    def add_session(self, token_hash: bytes, user_id: int, expires: float) -> None:
        now = self._clock()

        def op(conn: sqlite3.Connection) -> None:
            conn.execute("DELETE FROM sessions WHERE expires < ?", (now,))
            conn.execute(
                "INSERT INTO sessions (token_hash, user_id, expires) VALUES (?, ?, ?)",
                (token_hash, user_id, expires),
            )

        self._db.write(op)

    def session_user(self, token_hash: bytes, now: float) -> int | None:
        rows = self._db.query(
            "SELECT user_id FROM sessions WHERE token_hash = ? AND expires >= ?",
            (token_hash, now),
        )
        return int(rows[0][0]) if rows else None

    def drop_session(self, token_hash: bytes) -> None:
        self._db.write(_exec("DELETE FROM sessions WHERE token_hash = ?", (token_hash,)))

    # -- folders ---------------------------------------------------------------------------
    def folders(self, user_id: int) -> list[Folder]:
        rows = self._db.query(
            """
            SELECT f.id, f.name,
                   count(l.id), coalesce(sum(l.seen = 0), 0), f.uidvalidity, f.uidnext
            FROM folders f LEFT JOIN letters l ON l.folder_id = f.id AND l.state = 1
            WHERE f.user_id = ?
            GROUP BY f.id ORDER BY f.id
            """,
            (user_id,),
        )
        return [Folder(*r) for r in rows]

    def add_folder(self, user_id: int, name: str) -> Folder:
        name = _folder_name(name)

        def op(conn: sqlite3.Connection) -> Folder:
            uidvalidity = _uidvalidity(self._clock())
            try:
                cur = conn.execute(
                    "INSERT INTO folders (user_id, name, uidvalidity) VALUES (?, ?, ?)",
                    (user_id, name, uidvalidity),
                )
            except sqlite3.IntegrityError:
                raise AlreadyExists(f"folder {name!r} already exists") from None
            return Folder(int(cur.lastrowid or 0), name, 0, 0, uidvalidity, 1)

        return self._db.write(op)

    @staticmethod
    def _folder_id(conn: sqlite3.Connection, user_id: int, name: str) -> int:
        row = conn.execute(
            "SELECT id FROM folders WHERE user_id = ? AND name = ?", (user_id, name)
        ).fetchone()
        if row is None:
            raise FolderNotFound(f"no folder {name!r}")
        return int(row[0])

    @staticmethod
    def _next_uid(conn: sqlite3.Connection, folder_id: int) -> int:
        (uid,) = conn.execute(
            "UPDATE folders SET uidnext = uidnext + 1 WHERE id = ? RETURNING uidnext - 1",
            (folder_id,),
        ).fetchone()
        return int(uid)

    # -- delivery --------------------------------------------------------------------------
    def begin_delivery(
        self,
        skeleton: bytes,
        meta: LetterMeta,
        letters: Sequence[NewStoredLetter],
        *,
        delivered: bool = False,
        queued: str | None = None,
    ) -> list[int]:
        state = int(LetterState.DELIVERED if delivered else LetterState.PENDING)
        if queued is not None and not delivered:
            raise InvalidInput("a queue entry is recorded when its letters are delivered")

        def op(conn: sqlite3.Connection) -> list[int]:
            if queued is not None:
                self._record_queued(conn, queued)
            cur = conn.execute(
                "INSERT INTO skeletons (data, letters) VALUES (?, ?)", (skeleton, len(letters))
            )
            skeleton_id = cur.lastrowid
            ids = []
            for new in letters:
                folder_id = self._folder_id(conn, new.user_id, new.folder)
                cur = conn.execute(
                    """
                    INSERT INTO letters (user_id, folder_id, skeleton_id, state, size, received,
                                         date, sender, subject, verdict, uid, seen, flagged,
                                         flags)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                    (
                        new.user_id,
                        folder_id,
                        skeleton_id,
                        state,
                        meta.size,
                        meta.received,
                        meta.date,
                        meta.sender,
                        meta.subject,
                        new.verdict,
                        self._next_uid(conn, folder_id),
                        int(LetterFlag.SEEN in new.flags),
                        int(LetterFlag.FLAGGED in new.flags),
                        int(new.flags & _OTHER_FLAGS),
                    ),
                )
                letter_id = int(cur.lastrowid or 0)
                conn.executemany(
                    "INSERT INTO refs (letter_id, n, key, size, crc32, magic)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    [
                        (letter_id, r.n, bytes.fromhex(r.key), r.size, r.crc32, _to_db(r.magic))
                        for r in new.refs
                    ],
                )
                ids.append(letter_id)
            return ids

        return self._db.write(op)

    def finish_delivery(self, ids: Sequence[int], *, queued: str | None = None) -> int:
        def op(conn: sqlite3.Connection) -> int:
            done = sum(
                conn.execute(
                    "UPDATE letters SET state = 1 WHERE id = ? AND state = 0", (i,)
                ).rowcount
                for i in ids
            )
            if queued is not None and done == len(ids):
                self._record_queued(conn, queued)
            return done

        return self._db.write(op)

    def _record_queued(self, conn: sqlite3.Connection, queued: str) -> None:
        conn.execute(
            "INSERT OR IGNORE INTO queued (id, at) VALUES (?, ?)", (queued, self._clock())
        ).close()

    def was_queued(self, queued: str) -> bool:
        return bool(self._db.query("SELECT 1 FROM queued WHERE id = ?", (queued,)))

    def forget_queued(self, before: float) -> int:
        def op(conn: sqlite3.Connection) -> int:
            return conn.execute("DELETE FROM queued WHERE at < ?", (before,)).rowcount

        return self._db.write(op)

    def pending(
        self, ids: Sequence[int] | None = None, before: float | None = None
    ) -> list[tuple[int, list[AttachmentRef]]]:
        limit = float("inf") if before is None else before
        conn = self._db.reader()
        with conn:
            conn.execute("BEGIN")
            if ids is None:
                found = [
                    r[0]
                    for r in conn.execute(
                        "SELECT id FROM letters WHERE state = 0 AND received < ? ORDER BY id",
                        (limit,),
                    )
                ]
            else:
                found = [
                    i
                    for i in ids
                    if conn.execute(
                        "SELECT 1 FROM letters WHERE id = ? AND state = 0 AND received < ?",
                        (i, limit),
                    ).fetchone()
                ]
            out = [(letter_id, self._refs(conn, letter_id)) for letter_id in found]
        return out

    def abandon(self, ids: Sequence[int], uncounted: Collection[tuple[int, int]]) -> int:
        def op(conn: sqlite3.Connection) -> int:
            changed = 0
            drop = set(uncounted)
            for letter_id in ids:
                cur = conn.execute(
                    "UPDATE letters SET state = 2 WHERE id = ? AND state = 0", (letter_id,)
                )
                if cur.rowcount:  # only a PENDING letter's references may be dropped
                    changed += 1
                    conn.executemany(
                        "DELETE FROM refs WHERE letter_id = ? AND n = ?",
                        [(lid, n) for lid, n in drop if lid == letter_id],
                    )
            return changed

        return self._db.write(op)

    @staticmethod
    def _refs(conn: sqlite3.Connection, letter_id: int) -> list[AttachmentRef]:
        rows = conn.execute(
            "SELECT n, key, size, crc32, magic FROM refs WHERE letter_id = ? ORDER BY n",
            (letter_id,),
        ).fetchall()
        return [_ref(r) for r in rows]

    # -- reading ---------------------------------------------------------------------------
    def letters(
        self, user_id: int, folder: str, limit: int, before: int | None = None
    ) -> list[StoredLetter]:
        rows = self._db.query(
            "SELECT id FROM folders WHERE user_id = ? AND name = ?", (user_id, folder)
        )
        if not rows:
            raise FolderNotFound(f"no folder {folder!r}")
        rows = self._db.query(
            _LETTER + "WHERE l.folder_id = ? AND l.state = 1 AND l.id < ? ORDER BY l.id DESC"
            " LIMIT ?",
            (rows[0][0], before if before is not None else 2**63 - 1, limit),
        )
        return [_letter(r) for r in rows]

    def letter(self, user_id: int, letter_id: int) -> StoredLetter | None:
        rows = self._db.query(
            _LETTER + "WHERE l.id = ? AND l.user_id = ? AND l.state = 1", (letter_id, user_id)
        )
        return _letter(rows[0]) if rows else None

    def content(self, letter_id: int) -> tuple[bytes, list[AttachmentRef]]:
        conn = self._db.reader()
        with conn:  # one read transaction: skeleton and refs from the same snapshot
            conn.execute("BEGIN")
            row = conn.execute(
                "SELECT s.data FROM letters l JOIN skeletons s ON s.id = l.skeleton_id"
                " WHERE l.id = ?",
                (letter_id,),
            ).fetchone()
            refs = conn.execute(
                "SELECT n, key, size, crc32, magic FROM refs WHERE letter_id = ? ORDER BY n",
                (letter_id,),
            ).fetchall()
        if row is None:
            raise InvalidInput(f"no letter {letter_id}")
        return bytes(row[0]), [_ref(r) for r in refs]

    def skeletons(
        self, user_id: int, letter_ids: Sequence[int], max_size: int | None = None
    ) -> dict[int, tuple[StoredLetter, bytes | None]]:
        out: dict[int, tuple[StoredLetter, bytes | None]] = {}
        limit = -1 if max_size is None else max_size
        ids = list(dict.fromkeys(letter_ids))
        conn = self._db.reader()
        many = len(ids) > IDS_PER_STATEMENT
        with conn:  # one read transaction, however many statements the ids take
            if many:  # (one statement is one on its own)
                conn.execute("BEGIN")
            for at in range(0, len(ids), IDS_PER_STATEMENT):
                part = ids[at : at + IDS_PER_STATEMENT]
                marks = ",".join("?" * len(part))
                rows = conn.execute(
                    _SKELETONS + f"WHERE l.id IN ({marks}) AND l.user_id = ? AND l.state = 1",
                    (limit, limit, *part, user_id),
                ).fetchall()
                for row in rows:
                    data = row[-1]
                    out[int(row[0])] = (_letter(row), None if data is None else bytes(data))
        return out

    def update(
        self,
        user_id: int,
        letter_id: int,
        *,
        seen: bool | None = None,
        flagged: bool | None = None,
        folder: str | None = None,
    ) -> Updated | None:
        def op(conn: sqlite3.Connection) -> Updated | None:
            row = conn.execute(
                _LETTER + "WHERE l.id = ? AND l.user_id = ? AND l.state = 1", (letter_id, user_id)
            ).fetchone()
            if row is None:
                return None
            (current,) = conn.execute(
                "SELECT folder_id FROM letters WHERE id = ?", (letter_id,)
            ).fetchone()
            if seen is not None:
                conn.execute("UPDATE letters SET seen = ? WHERE id = ?", (int(seen), letter_id))
            if flagged is not None:
                conn.execute(
                    "UPDATE letters SET flagged = ? WHERE id = ?", (int(flagged), letter_id)
                )
            if folder is not None:
                folder_id = self._folder_id(conn, user_id, folder)
                if folder_id != current:
                    conn.execute(
                        "UPDATE letters SET folder_id = ?, uid = ? WHERE id = ?",
                        (folder_id, self._next_uid(conn, folder_id), letter_id),
                    )
            got = conn.execute(_LETTER + "WHERE l.id = ?", (letter_id,)).fetchone()
            return Updated(_letter(row), _letter(got))

        return self._db.write(op)

    # -- IMAP: UIDs and flags ----------------------------------------------------------------
    def entries(self, user_id: int, folder: str) -> list[FolderEntry]:
        conn = self._db.reader()
        with conn:
            conn.execute("BEGIN")
            row = conn.execute(
                "SELECT id FROM folders WHERE user_id = ? AND name = ?", (user_id, folder)
            ).fetchone()
            if row is None:
                raise FolderNotFound(f"no folder {folder!r}")
            rows = conn.execute(
                "SELECT uid, id, seen, flagged, flags FROM letters"
                " WHERE folder_id = ? AND state = 1 ORDER BY uid",
                (row[0],),
            ).fetchall()
        return [FolderEntry(r[0], r[1], _flags(r[2], r[3], r[4])) for r in rows]

    def set_flags(
        self, user_id: int, letter_ids: Sequence[int], add: LetterFlag, remove: LetterFlag
    ) -> list[tuple[LetterFlag, FolderEntry]]:
        def op(conn: sqlite3.Connection) -> list[tuple[LetterFlag, FolderEntry]]:
            out = []
            for letter_id in letter_ids:
                row = conn.execute(
                    "SELECT uid, seen, flagged, flags FROM letters"
                    " WHERE id = ? AND user_id = ? AND state = 1",
                    (letter_id, user_id),
                ).fetchone()
                if row is None:
                    continue
                before = _flags(row[1], row[2], row[3])
                after = (before | add) & ~remove
                if after != before:
                    conn.execute(
                        "UPDATE letters SET seen = ?, flagged = ?, flags = ? WHERE id = ?",
                        (
                            int(LetterFlag.SEEN in after),
                            int(LetterFlag.FLAGGED in after),
                            int(after & _OTHER_FLAGS),
                            letter_id,
                        ),
                    )
                out.append((before, FolderEntry(row[0], letter_id, after)))
            return out

        return self._db.write(op)

    # -- deletion --------------------------------------------------------------------------
    def delete(self, user_id: int, letter_id: int) -> bool:
        return self._db.write(
            lambda conn: (
                conn.execute(
                    "UPDATE letters SET state = 2 WHERE id = ? AND user_id = ? AND state = 1",
                    (letter_id, user_id),
                ).rowcount
                == 1
            )
        )

    def deletions(self, limit: int) -> list[tuple[int, list[AttachmentRef]]]:
        conn = self._db.reader()
        with conn:
            conn.execute("BEGIN")
            ids = [
                r[0]
                for r in conn.execute(
                    "SELECT id FROM letters WHERE state = 2 ORDER BY id LIMIT ?", (limit,)
                )
            ]
            out = [(letter_id, self._refs(conn, letter_id)) for letter_id in ids]
        return out

    def ref_done(self, letter_id: int, n: int) -> None:
        self._db.write(_exec("DELETE FROM refs WHERE letter_id = ? AND n = ?", (letter_id, n)))

    def ref_states(self, refs: Collection[tuple[int, int]]) -> dict[tuple[int, int], LetterState]:
        conn = self._db.reader()
        out = {}
        for letter_id, n in refs:
            row = conn.execute(
                "SELECT l.state FROM refs r JOIN letters l ON l.id = r.letter_id"
                " WHERE r.letter_id = ? AND r.n = ?",
                (letter_id, n),
            ).fetchone()
            if row is not None:
                out[(letter_id, n)] = LetterState(row[0])
        return out

    def finish_deletion(self, letter_id: int) -> None:
        self._db.write(lambda conn: self._remove(conn, letter_id))

    @staticmethod
    def _remove(conn: sqlite3.Connection, letter_id: int) -> None:
        row = conn.execute("SELECT skeleton_id FROM letters WHERE id = ?", (letter_id,)).fetchone()
        if row is None:
            return
        conn.execute("DELETE FROM refs WHERE letter_id = ?", (letter_id,))
        conn.execute("DELETE FROM letters WHERE id = ?", (letter_id,))
        conn.execute("UPDATE skeletons SET letters = letters - 1 WHERE id = ?", (row[0],))
        conn.execute("DELETE FROM skeletons WHERE id = ? AND letters <= 0", (row[0],))

    # -- checks ----------------------------------------------------------------------------
    def all_refs(self) -> Iterator[tuple[int, LetterState, AttachmentRef]]:
        conn = self._db.reader()
        cur = conn.execute(
            "SELECT r.letter_id, l.state, r.n, r.key, r.size, r.crc32, r.magic"
            " FROM refs r JOIN letters l ON l.id = r.letter_id ORDER BY r.letter_id, r.n"
        )
        for row in cur:
            yield row[0], LetterState(row[1]), _ref(row[2:])

    def stats(self) -> IndexStats:
        (row,) = self._db.query(
            """
            SELECT (SELECT count(*) FROM users),
                   (SELECT count(*) FROM letters WHERE state = 1),
                   (SELECT coalesce(sum(size), 0) FROM letters WHERE state = 1),
                   (SELECT coalesce(sum(length(data)), 0) FROM skeletons),
                   (SELECT count(*) FROM refs),
                   count(*), coalesce(sum(size), 0),
                   (SELECT count(*) FROM letters WHERE state = 2)
            FROM (SELECT max(size) AS size FROM refs GROUP BY key)
            """
        )
        return IndexStats(*row)

    def close(self) -> None:
        self._db.close()
