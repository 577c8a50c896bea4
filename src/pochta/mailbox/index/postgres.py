"""The mailbox index in PostgreSQL: several ``pochta serve`` processes share one mailbox.

Tables in ``pochta/postgres/migrations/0003_mailbox.sql``, as in the SQLite index: letters of
one delivery share one skeleton row, references keyed by (letter, n) with the raw 32-byte key
and the magic (as a bigint in 0..2^32-1). Each write is one transaction on a pooled
connection (retried when the server rolls it back for a deadlock); concurrent writers'
commits share WAL flushes on the server (its own group commit). A read that needs several
rows that must agree (a letter's skeleton and references, pending letters with theirs) is one
statement, or a REPEATABLE READ snapshot.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import Any, TypeVar

import psycopg

from pochta.errors import AlreadyExists, FolderNotFound, InvalidInput, StorageError
from pochta.mailbox.index.sqlite import DEFAULT_FOLDERS, _folder_name, normalize_email
from pochta.postgres.database import Postgres, lost
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

T = TypeVar("T")
log = logging.getLogger("pochta.mailbox")
Conn = psycopg.Connection[Any]

_LETTER = """
SELECT l.id, l.user_id, f.name, l.size, l.received, l.date, l.sender, l.subject, l.seen,
       l.flagged, l.verdict, l.uid, l.flags
FROM pochta.letters l JOIN pochta.folders f ON f.id = l.folder_id
"""
_SKELETONS = """
SELECT l.id, l.user_id, f.name, l.size, l.received, l.date, l.sender, l.subject, l.seen,
       l.flagged, l.verdict, l.uid, l.flags,
       CASE WHEN %s::bigint IS NULL OR octet_length(s.data) <= %s::bigint THEN s.data END
FROM pochta.letters l JOIN pochta.folders f ON f.id = l.folder_id
     JOIN pochta.skeletons s ON s.id = l.skeleton_id
"""
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


def _uidvalidity(now: float) -> int:
    """A folder's UIDVALIDITY: the time it was made, in seconds (as Dovecot does), non-zero."""
    return max(1, int(now) % 2**32)


_COMMITTED_PAUSE = 0.2  # seconds between looks for a delivery whose commit's answer was lost
_USER = "SELECT id, email, password_hash, reset_required, admin FROM pochta.users"
_REFS = "r.n, r.key, r.size, r.crc32, r.magic"
# finish a delivery whose first answer was lost: the letters still PENDING, plus those
# DELIVERED already (the snapshot the second count reads is the one before the UPDATE)
_QUEUED = "INSERT INTO pochta.queued (id, at) VALUES (%s, %s) ON CONFLICT DO NOTHING"

_FINISH = """
WITH done AS (
    UPDATE pochta.letters SET state = 1 WHERE id = ANY(%(ids)s::bigint[]) AND state = 0
    RETURNING id
)
SELECT (SELECT count(*) FROM done)
     + (SELECT count(*) FROM pochta.letters WHERE id = ANY(%(ids)s::bigint[]) AND state = 1)
"""


def _one(cur: psycopg.Cursor[Any]) -> int:
    row = cur.fetchone()
    assert row is not None
    return int(row[0])


def _letter(row: Sequence[Any]) -> StoredLetter:
    (id_, user_id, folder, size, received, date, sender, subject, seen, flagged, verdict) = row[:11]
    return StoredLetter(
        id=int(id_),
        user_id=int(user_id),
        folder=str(folder),
        size=int(size),
        received=float(received),
        date=None if date is None else float(date),
        sender=str(sender),
        subject=str(subject),
        seen=bool(seen),
        flagged=bool(flagged),
        verdict=None if verdict is None else str(verdict),
        uid=int(row[11]),
        flags=_flags(seen, flagged, row[12]),
    )


def _ref(row: Sequence[Any]) -> AttachmentRef:
    n, key, size, crc32, magic = row
    return AttachmentRef(int(n), bytes(key).hex(), int(size), int(crc32), int(magic))


def _user(row: Sequence[Any]) -> User:
    return User(int(row[0]), str(row[1]), str(row[2]), bool(row[3]), bool(row[4]))


def _grouped(rows: list[tuple[Any, ...]]) -> dict[int, list[AttachmentRef]]:
    """Rows of (letter id, n, key, size, crc32, magic) - n NULL for a letter without
    references - as {letter id: its references in order}, letters in the rows' order."""
    out: dict[int, list[AttachmentRef]] = {}
    for row in rows:
        refs = out.setdefault(int(row[0]), [])
        if row[1] is not None:
            refs.append(_ref(row[1:]))
    return out


class PostgresIndex:
    def __init__(self, db: Postgres, *, clock: Clock = time.time) -> None:
        """``db`` is this index's: it closes it (``db.share()`` to keep using it)."""
        self._db = db
        self._clock = clock

    def _snapshot(self, fn: Callable[[Conn], T]) -> T:
        """Several reads that see one state of the database."""
        with self._db.connection() as conn, conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            return fn(conn)

    # -- users and sessions ----------------------------------------------------------------
    def add_user(self, email: str, password_hash: str, *, admin: bool = False) -> User:
        email = normalize_email(email)

        def op(conn: Conn) -> User:
            row = conn.execute(
                "INSERT INTO pochta.users (email, password_hash, created, admin)"
                " VALUES (%s, %s, %s, %s) ON CONFLICT (email) DO NOTHING RETURNING id",
                (email, password_hash, self._clock(), admin),
            ).fetchone()
            if row is None:
                raise AlreadyExists(f"user {email} already exists")
            conn.execute(
                "INSERT INTO pochta.folders (user_id, name, uidvalidity)"
                " SELECT %s, t.name, %s FROM unnest(%s::text[]) WITH ORDINALITY AS t(name, i)"
                " ORDER BY t.i",
                (row[0], _uidvalidity(self._clock()), list(DEFAULT_FOLDERS)),
            )
            return User(int(row[0]), email, password_hash, admin=admin)

        return self._db.transaction(op)

    def set_admin(self, user_id: int, admin: bool) -> bool:
        def op(conn: Conn) -> bool:
            return (
                conn.execute(
                    "UPDATE pochta.users SET admin = %s WHERE id = %s", (admin, user_id)
                ).rowcount
                == 1
            )

        return self._db.transaction(op)

    def delete_user(self, user_id: int) -> int | None:
        def op(conn: Conn) -> int | None:
            row = conn.execute(
                "SELECT 1 FROM pochta.users WHERE id = %s FOR UPDATE", (user_id,)
            ).fetchone()
            if row is None:
                return None
            # a delivery takes its folders' rows (their uidnext): wait for those under way
            conn.execute("SELECT id FROM pochta.folders WHERE user_id = %s FOR UPDATE", (user_id,))
            pending = conn.execute(
                "SELECT count(*) FROM pochta.letters WHERE user_id = %s AND state = 0",
                (user_id,),
            ).fetchone()
            if pending is not None and pending[0]:
                raise InvalidInput(
                    f"{pending[0]} letter(s) are being delivered to this account: try again"
                    " in a minute"
                )
            marked = conn.execute(
                "UPDATE pochta.letters SET state = 2 WHERE user_id = %s AND state = 1",
                (user_id,),
            ).rowcount
            conn.execute("DELETE FROM pochta.sessions WHERE user_id = %s", (user_id,))
            conn.execute("DELETE FROM pochta.folders WHERE user_id = %s", (user_id,))
            conn.execute("DELETE FROM pochta.users WHERE id = %s", (user_id,))
            return int(marked)

        return self._db.transaction(op)

    def user(self, email: str) -> User | None:
        try:
            email = normalize_email(email)
        except InvalidInput:
            return None
        rows = self._db.query(_USER + " WHERE email = %s", (email,))
        return _user(rows[0]) if rows else None

    def user_by_id(self, user_id: int) -> User | None:
        rows = self._db.query(_USER + " WHERE id = %s", (user_id,))
        return _user(rows[0]) if rows else None

    def users(self) -> list[User]:
        return [_user(r) for r in self._db.query(_USER + " ORDER BY email")]

    def set_password(self, user_id: int, password_hash: str) -> None:
        self._db.execute(
            "UPDATE pochta.users SET password_hash = %s, reset_required = false WHERE id = %s",
            (password_hash, user_id),
        )

    def require_reset(self, emails: Collection[str]) -> int:
        lowered = sorted({e.lower() for e in emails})

        def op(conn: Conn) -> int:
            count = conn.execute(
                "UPDATE pochta.users SET reset_required = true WHERE email = ANY(%s::text[])",
                (lowered,),
            ).rowcount
            conn.execute(
                "DELETE FROM pochta.sessions WHERE user_id IN"
                " (SELECT id FROM pochta.users WHERE reset_required)"
            )
            return count

        return self._db.transaction(op)

    def add_session(self, token_hash: bytes, user_id: int, expires: float) -> None:
        now = self._clock()

        def op(conn: Conn) -> None:
            conn.execute("DELETE FROM pochta.sessions WHERE expires < %s", (now,))
            conn.execute(
                "INSERT INTO pochta.sessions (token_hash, user_id, expires) VALUES (%s, %s, %s)",
                (token_hash, user_id, expires),
            )

        self._db.transaction(op)

    def session_user(self, token_hash: bytes, now: float) -> int | None:
        rows = self._db.query(
            "SELECT user_id FROM pochta.sessions WHERE token_hash = %s AND expires >= %s",
            (token_hash, now),
        )
        return int(rows[0][0]) if rows else None

    def drop_session(self, token_hash: bytes) -> None:
        self._db.execute("DELETE FROM pochta.sessions WHERE token_hash = %s", (token_hash,))

    # -- folders ---------------------------------------------------------------------------
    def folders(self, user_id: int) -> list[Folder]:
        rows = self._db.query(
            """
            SELECT f.id, f.name, count(l.id), count(l.id) FILTER (WHERE NOT l.seen),
                   f.uidvalidity, f.uidnext
            FROM pochta.folders f
            LEFT JOIN pochta.letters l ON l.folder_id = f.id AND l.state = 1
            WHERE f.user_id = %s
            GROUP BY f.id ORDER BY f.id
            """,
            (user_id,),
        )
        return [
            Folder(int(r[0]), str(r[1]), int(r[2]), int(r[3]), int(r[4]), int(r[5])) for r in rows
        ]

    def add_folder(self, user_id: int, name: str) -> Folder:
        name = _folder_name(name)
        uidvalidity = _uidvalidity(self._clock())
        rows = self._db.query(
            "INSERT INTO pochta.folders (user_id, name, uidvalidity) VALUES (%s, %s, %s)"
            " ON CONFLICT (user_id, name) DO NOTHING RETURNING id",
            (user_id, name, uidvalidity),
        )
        if not rows:
            raise AlreadyExists(f"folder {name!r} already exists")
        return Folder(int(rows[0][0]), name, 0, 0, uidvalidity, 1)

    @staticmethod
    def _folder_id(conn: Conn, user_id: int, name: str) -> int:
        row = conn.execute(
            "SELECT id FROM pochta.folders WHERE user_id = %s AND name = %s", (user_id, name)
        ).fetchone()
        if row is None:
            raise FolderNotFound(f"no folder {name!r}")
        return int(row[0])

    @staticmethod
    def _next_uids(conn: Conn, folder_ids: Sequence[int]) -> list[int]:
        """One new UID of each folder in ``folder_ids`` (a folder named n times gets n UIDs,
        in order); the folders' rows stay locked to the end of the transaction."""
        counts: dict[int, int] = {}
        for f in folder_ids:
            counts[f] = counts.get(f, 0) + 1
        firsts: dict[int, int] = {}
        for f in sorted(counts):  # in id order: two deliveries never wait on each other
            (first,) = conn.execute(
                "UPDATE pochta.folders SET uidnext = uidnext + %s WHERE id = %s"
                " RETURNING uidnext - %s",
                (counts[f], f, counts[f]),
            ).fetchone() or (0,)
            firsts[f] = int(first)
        out = []
        for f in folder_ids:
            out.append(firsts[f])
            firsts[f] += 1
        return out

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
        sent: list[tuple[int, list[int]]] = []  # the backend and the ids, once all was written

        def op(conn: Conn) -> list[int]:
            sent.clear()
            if queued is not None:
                conn.execute(_QUEUED, (queued, self._clock()))
            wanted = sorted({(new.user_id, new.folder) for new in letters})
            rows = conn.execute(
                "SELECT f.user_id, f.name, f.id FROM pochta.folders f"
                " JOIN unnest(%s::bigint[], %s::text[]) AS w(user_id, name)"
                " ON f.user_id = w.user_id AND f.name = w.name",
                ([u for u, _ in wanted], [n for _, n in wanted]),
            ).fetchall()
            folders = {(int(r[0]), str(r[1])): int(r[2]) for r in rows}
            for new in letters:
                if (new.user_id, new.folder) not in folders:
                    raise FolderNotFound(f"no folder {new.folder!r}")
            got = conn.execute(
                "INSERT INTO pochta.skeletons (data, letters) VALUES (%s, %s) RETURNING id",
                (skeleton, len(letters)),
            ).fetchone()
            assert got is not None
            skeleton_id = int(got[0])
            ids = sorted(
                int(r[0])
                for r in conn.execute(
                    "SELECT nextval(pg_get_serial_sequence('pochta.letters', 'id'))"
                    " FROM generate_series(1, %s)",
                    (len(letters),),
                ).fetchall()
            )
            folder_ids = [folders[(new.user_id, new.folder)] for new in letters]
            conn.execute(
                """
                INSERT INTO pochta.letters (id, user_id, folder_id, skeleton_id, state, size,
                                            received, date, sender, subject, verdict, uid,
                                            seen, flagged, flags)
                SELECT t.id, t.user_id, t.folder_id, %s, %s, %s, %s, %s, %s, %s, t.verdict,
                       t.uid, t.seen, t.flagged, t.flags
                FROM unnest(%s::bigint[], %s::bigint[], %s::bigint[], %s::text[], %s::bigint[],
                            %s::boolean[], %s::boolean[], %s::integer[])
                     AS t(id, user_id, folder_id, verdict, uid, seen, flagged, flags)
                """,
                (
                    skeleton_id,
                    state,
                    meta.size,
                    meta.received,
                    meta.date,
                    meta.sender,
                    meta.subject,
                    ids,
                    [new.user_id for new in letters],
                    folder_ids,
                    [new.verdict for new in letters],
                    self._next_uids(conn, folder_ids),
                    [LetterFlag.SEEN in new.flags for new in letters],
                    [LetterFlag.FLAGGED in new.flags for new in letters],
                    [int(new.flags & _OTHER_FLAGS) for new in letters],
                ),
            )
            refs = [(i, r) for i, new in zip(ids, letters, strict=True) for r in new.refs]
            if refs:
                conn.execute(
                    """
                    INSERT INTO pochta.refs (letter_id, n, key, size, crc32, magic)
                    SELECT * FROM unnest(%s::bigint[], %s::integer[], %s::bytea[],
                                         %s::bigint[], %s::bigint[], %s::bigint[])
                    """,
                    (
                        [i for i, _ in refs],
                        [r.n for _, r in refs],
                        [bytes.fromhex(r.key) for _, r in refs],
                        [r.size for _, r in refs],
                        [r.crc32 for _, r in refs],
                        [r.magic for _, r in refs],
                    ),
                )
            sent.append((conn.info.backend_pid, ids))
            return ids

        try:
            return self._db.transaction(op)
        except StorageError as exc:
            # only the COMMIT's answer is missing: a letter written DELIVERED at once (no
            # finishing step to ask again) may be kept although its delivery answers 451
            if not delivered or not sent or not lost(exc.__cause__):
                raise
            backend, ids = sent[-1]
            if not self._committed(backend, ids):
                raise
            log.warning("delivery %s: the commit's answer was lost; it was made", ids[:1])
            return ids

    def _committed(self, backend: int, ids: list[int]) -> bool:
        """Whether the transaction of server process ``backend``, whose COMMIT's answer was
        lost, wrote the letters ``ids``: they are there (ids come from a sequence, never
        given twice), or they are not and that process is gone (while it lives, its commit
        may still be made: held by the synchronous standby, or by a frozen server). Asked
        again, on new connections when answers are lost, until ``failover_timeout`` seconds
        have passed; a look begun just before then may still wait ``pool_timeout`` for a
        connection and ``answer_timeout`` for its answer (defaults: 30 + 30 + 60 s at most,
        after the first ``answer_timeout``). False when still unknown: the delivery answers
        451, and a sender's retry may store the letter twice, never lose it."""
        deadline = time.monotonic() + self._db.settings.failover_timeout
        ask = (
            "SELECT EXISTS (SELECT 1 FROM pochta.letters WHERE id = ANY(%s::bigint[])),"
            " EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = %s)"
        )
        while True:
            try:
                ((found, alive),) = self._db.query(ask, (ids, backend))
            except StorageError as exc:
                if not lost(exc.__cause__) or time.monotonic() >= deadline:
                    log.warning("delivery %s: unknown whether it was made: %s", ids[:1], exc)
                    return False
                found, alive = False, True
            if found or not alive or time.monotonic() >= deadline:
                return bool(found)
            time.sleep(_COMMITTED_PAUSE)

    def finish_delivery(self, ids: Sequence[int], *, queued: str | None = None) -> int:
        finish = "UPDATE pochta.letters SET state = 1 WHERE id = ANY(%s::bigint[]) AND state = 0"

        def op(conn: Conn) -> int:
            done = conn.execute(finish, (list(ids),)).rowcount
            if done == len(ids):
                conn.execute(_QUEUED, (queued, self._clock()))
            return done

        try:
            if queued is None:
                return self._db.execute(finish, (list(ids),))
            return self._db.transaction(op)
        except StorageError as exc:
            if not lost(exc.__cause__):
                raise
            log.warning("finishing delivery %s: the answer was lost: %s", ids[:1], exc.message)
        # it may have been committed (a primary lost after its commit, before its answer:
        # the synchronous standby has it). Only this delivery finishes its letters, so those
        # DELIVERED now were finished by it; finish the rest, and count both. The queue
        # entry's id is recorded in the same transaction (both steps are safe to run again):
        # its letters are DELIVERED if and only if the id is there, so a crash, or an answer
        # lost once more, never leaves a delivery the queue's runner would make again
        params = {"ids": list(ids)}

        def again(conn: Conn) -> int:
            with conn.transaction():
                done = _one(conn.execute(_FINISH, params))
                if queued is not None and done == len(ids):
                    conn.execute(_QUEUED, (queued, self._clock()))
                return done

        return self._db.until_answered(again)

    def was_queued(self, queued: str) -> bool:
        return bool(self._db.query("SELECT 1 FROM pochta.queued WHERE id = %s", (queued,)))

    def forget_queued(self, before: float) -> int:
        return self._db.execute("DELETE FROM pochta.queued WHERE at < %s", (before,))

    def pending(
        self, ids: Sequence[int] | None = None, before: float | None = None
    ) -> list[tuple[int, list[AttachmentRef]]]:
        limit = float("inf") if before is None else before
        where = "l.state = 0 AND l.received < %s"
        params: list[Any] = [limit]
        if ids is not None:
            where += " AND l.id = ANY(%s::bigint[])"
            params.append(list(ids))
        rows = self._db.query(
            f"SELECT l.id, {_REFS} FROM pochta.letters l"  # noqa: S608
            f" LEFT JOIN pochta.refs r ON r.letter_id = l.id WHERE {where} ORDER BY l.id, r.n",
            params,
        )
        found = _grouped(rows)
        order = list(ids) if ids is not None else list(found)
        return [(i, found[i]) for i in dict.fromkeys(order) if i in found]

    def abandon(self, ids: Sequence[int], uncounted: Collection[tuple[int, int]]) -> int:
        drop = sorted(set(uncounted))

        def op(conn: Conn) -> int:
            changed = [
                int(r[0])
                for r in conn.execute(
                    "UPDATE pochta.letters SET state = 2 WHERE id = ANY(%s::bigint[])"
                    " AND state = 0 RETURNING id",
                    (list(ids),),
                ).fetchall()
            ]
            if changed and drop:  # only a PENDING letter's references may be dropped
                conn.execute(
                    "DELETE FROM pochta.refs r USING unnest(%s::bigint[], %s::integer[])"
                    " AS d(letter_id, n)"
                    " WHERE r.letter_id = d.letter_id AND r.n = d.n"
                    " AND r.letter_id = ANY(%s::bigint[])",
                    ([lid for lid, _ in drop], [n for _, n in drop], changed),
                )
            return len(changed)

        return self._db.transaction(op)

    # -- reading ---------------------------------------------------------------------------
    def letters(
        self, user_id: int, folder: str, limit: int, before: int | None = None
    ) -> list[StoredLetter]:
        rows = self._db.query(
            "SELECT id FROM pochta.folders WHERE user_id = %s AND name = %s", (user_id, folder)
        )
        if not rows:
            raise FolderNotFound(f"no folder {folder!r}")
        rows = self._db.query(
            _LETTER + "WHERE l.folder_id = %s AND l.state = 1 AND l.id < %s"
            " ORDER BY l.id DESC LIMIT %s",
            (rows[0][0], before if before is not None else 2**63 - 1, limit),
        )
        return [_letter(r) for r in rows]

    def letter(self, user_id: int, letter_id: int) -> StoredLetter | None:
        rows = self._db.query(
            _LETTER + "WHERE l.id = %s AND l.user_id = %s AND l.state = 1", (letter_id, user_id)
        )
        return _letter(rows[0]) if rows else None

    def content(self, letter_id: int) -> tuple[bytes, list[AttachmentRef]]:
        def read(conn: Conn) -> tuple[Any, list[tuple[Any, ...]]]:
            row = conn.execute(
                "SELECT s.data FROM pochta.letters l"
                " JOIN pochta.skeletons s ON s.id = l.skeleton_id WHERE l.id = %s",
                (letter_id,),
            ).fetchone()
            refs = conn.execute(
                f"SELECT {_REFS} FROM pochta.refs r WHERE r.letter_id = %s ORDER BY r.n",  # noqa: S608
                (letter_id,),
            ).fetchall()
            return row, refs

        row, refs = self._snapshot(read)
        if row is None:
            raise InvalidInput(f"no letter {letter_id}")
        return bytes(row[0]), [_ref(r) for r in refs]

    def skeletons(
        self, user_id: int, letter_ids: Sequence[int], max_size: int | None = None
    ) -> dict[int, tuple[StoredLetter, bytes | None]]:
        rows = self._db.query(
            _SKELETONS + "WHERE l.id = ANY(%s::bigint[]) AND l.user_id = %s AND l.state = 1",
            (max_size, max_size, list(letter_ids), user_id),
        )
        return {int(r[0]): (_letter(r), None if r[-1] is None else bytes(r[-1])) for r in rows}

    def update(
        self,
        user_id: int,
        letter_id: int,
        *,
        seen: bool | None = None,
        flagged: bool | None = None,
        folder: str | None = None,
    ) -> Updated | None:
        def op(conn: Conn) -> Updated | None:
            # the letter's row alone is locked first: a FOR UPDATE over the join with folders
            # re-checks a row another transaction just moved against the folder it left
            # (PostgreSQL's EvalPlanQual), and would not find it
            locked = conn.execute(
                "SELECT folder_id FROM pochta.letters"
                " WHERE id = %s AND user_id = %s AND state = 1 FOR UPDATE",
                (letter_id, user_id),
            ).fetchone()
            if locked is None:
                return None
            current = locked[0]
            row = conn.execute(_LETTER + "WHERE l.id = %s", (letter_id,)).fetchone()
            assert row is not None
            folder_id = None if folder is None else self._folder_id(conn, user_id, folder)
            uid = None
            if folder_id is not None and folder_id != current:  # a move: the folder's next UID
                (uid,) = self._next_uids(conn, [folder_id])
            else:
                folder_id = None
            conn.execute(
                "UPDATE pochta.letters SET seen = coalesce(%s, seen),"
                " flagged = coalesce(%s, flagged), folder_id = coalesce(%s, folder_id),"
                " uid = coalesce(%s, uid) WHERE id = %s",
                (seen, flagged, folder_id, uid, letter_id),
            )
            got = conn.execute(_LETTER + "WHERE l.id = %s", (letter_id,)).fetchone()
            assert got is not None
            return Updated(_letter(row), _letter(got))

        return self._db.transaction(op)

    # -- IMAP: UIDs and flags ----------------------------------------------------------------
    def entries(self, user_id: int, folder: str) -> list[FolderEntry]:
        def read(conn: Conn) -> list[FolderEntry]:
            folder_id = self._folder_id(conn, user_id, folder)
            rows = conn.execute(
                "SELECT uid, id, seen, flagged, flags FROM pochta.letters"
                " WHERE folder_id = %s AND state = 1 ORDER BY uid",
                (folder_id,),
            ).fetchall()
            return [FolderEntry(int(r[0]), int(r[1]), _flags(r[2], r[3], r[4])) for r in rows]

        return self._snapshot(read)

    def set_flags(
        self, user_id: int, letter_ids: Sequence[int], add: LetterFlag, remove: LetterFlag
    ) -> list[tuple[LetterFlag, FolderEntry]]:
        def op(conn: Conn) -> list[tuple[LetterFlag, FolderEntry]]:
            rows = conn.execute(
                "SELECT id, uid, seen, flagged, flags FROM pochta.letters"
                " WHERE id = ANY(%s::bigint[]) AND user_id = %s AND state = 1"
                " ORDER BY id FOR UPDATE",
                (list(letter_ids), user_id),
            ).fetchall()
            uids = {int(r[0]): int(r[1]) for r in rows}
            now = {int(r[0]): _flags(r[2], r[3], r[4]) for r in rows}
            out = []
            for letter_id in letter_ids:
                if letter_id not in now:
                    continue
                before = now[letter_id]
                after = (before | add) & ~remove
                if after != before:
                    conn.execute(
                        "UPDATE pochta.letters SET seen = %s, flagged = %s, flags = %s"
                        " WHERE id = %s",
                        (
                            LetterFlag.SEEN in after,
                            LetterFlag.FLAGGED in after,
                            int(after & _OTHER_FLAGS),
                            letter_id,
                        ),
                    )
                    now[letter_id] = after
                out.append((before, FolderEntry(uids[letter_id], letter_id, after)))
            return out

        return self._db.transaction(op)

    # -- deletion --------------------------------------------------------------------------
    def delete(self, user_id: int, letter_id: int) -> bool:
        changed = self._db.execute(
            "UPDATE pochta.letters SET state = 2 WHERE id = %s AND user_id = %s AND state = 1",
            (letter_id, user_id),
        )
        return changed == 1

    def deletions(self, limit: int) -> list[tuple[int, list[AttachmentRef]]]:
        rows = self._db.query(
            "WITH d AS (SELECT id FROM pochta.letters WHERE state = 2 ORDER BY id LIMIT %s)"
            " SELECT d.id, r.n, r.key, r.size, r.crc32, r.magic"
            " FROM d LEFT JOIN pochta.refs r ON r.letter_id = d.id ORDER BY d.id, r.n",
            (limit,),
        )
        return list(_grouped(rows).items())

    def ref_done(self, letter_id: int, n: int) -> None:
        self._db.execute("DELETE FROM pochta.refs WHERE letter_id = %s AND n = %s", (letter_id, n))

    def ref_states(self, refs: Collection[tuple[int, int]]) -> dict[tuple[int, int], LetterState]:
        if not refs:
            return {}
        wanted = list(refs)
        rows = self._db.query(
            "SELECT r.letter_id, r.n, l.state FROM pochta.refs r"
            " JOIN unnest(%s::bigint[], %s::integer[]) AS w(letter_id, n)"
            " ON r.letter_id = w.letter_id AND r.n = w.n"
            " JOIN pochta.letters l ON l.id = r.letter_id",
            ([lid for lid, _ in wanted], [n for _, n in wanted]),
        )
        return {(int(r[0]), int(r[1])): LetterState(r[2]) for r in rows}

    def finish_deletion(self, letter_id: int) -> None:
        def op(conn: Conn) -> None:
            row = conn.execute(
                "DELETE FROM pochta.letters WHERE id = %s RETURNING skeleton_id", (letter_id,)
            ).fetchone()
            if row is None:
                return
            conn.execute("DELETE FROM pochta.refs WHERE letter_id = %s", (letter_id,))
            conn.execute(
                "UPDATE pochta.skeletons SET letters = letters - 1 WHERE id = %s", (row[0],)
            )
            conn.execute("DELETE FROM pochta.skeletons WHERE id = %s AND letters <= 0", (row[0],))

        self._db.transaction(op)

    # -- checks ----------------------------------------------------------------------------
    def all_refs(self) -> Iterator[tuple[int, LetterState, AttachmentRef]]:
        """Streamed through a server-side cursor (a pooled connection is held until the
        iteration ends: for as long as the consumer takes, so no ``answer_timeout``)."""
        with self._db.connection(deadline=False) as conn, conn.transaction():
            cursor = conn.cursor(name="pochta_all_refs")
            cursor.itersize = 2000
            cursor.execute(
                f"SELECT r.letter_id, l.state, {_REFS} FROM pochta.refs r"  # noqa: S608
                " JOIN pochta.letters l ON l.id = r.letter_id ORDER BY r.letter_id, r.n"
            )
            for row in cursor:
                yield int(row[0]), LetterState(row[1]), _ref(row[2:])
            cursor.close()

    def stats(self) -> IndexStats:
        (row,) = self._db.query(
            """
            SELECT (SELECT count(*) FROM pochta.users),
                   (SELECT count(*) FROM pochta.letters WHERE state = 1),
                   (SELECT coalesce(sum(size), 0) FROM pochta.letters WHERE state = 1)::bigint,
                   (SELECT coalesce(sum(length(data)), 0) FROM pochta.skeletons)::bigint,
                   (SELECT count(*) FROM pochta.refs),
                   count(*), coalesce(sum(size), 0)::bigint,
                   (SELECT count(*) FROM pochta.letters WHERE state = 2)
            FROM (SELECT max(size) AS size FROM pochta.refs GROUP BY key) s
            """
        )
        return IndexStats(*(int(v) for v in row))

    def close(self) -> None:
        self._db.close()
