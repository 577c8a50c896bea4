"""FileDB in SQLite (WAL): the embedded default.

Layout, chosen for bytes per record: two WITHOUT ROWID tables keyed by the raw 32-byte
SHA-256, magic stored as a signed 32-bit integer (always 4 bytes in SQLite's record format),
so a live record costs 45 bytes in a leaf page: 46 in a full one (after ``compact``), about 51
in leaves filled by random inserts (89 %; benchmarks/filedb_size.py).

    live    (key BLOB PK, counter INT, magic INT, flags INT, pair INT)   -- space0
    deleted (key BLOB PK, pair INT, moved_at REAL)                       -- space1
    ops     (op BLOB PK)      -- the journal of exactly-once counts: only those in flight

Group commit: the counting steps (inc, upsert, dec, each with its journal entry) that
callers submit while a group is being written form the next group (``GroupCommit`` with one
writer, up to ``batch_max`` steps): one ``BEGIN IMMEDIATE`` transaction, one commit (one fsync
with sync=full), each caller answered after that commit. Inside it the steps run in arrival
order, each mostly one statement returning the record it wrote (``UPDATE ... RETURNING``; the
rare dec that moves a record to space1 or back goes through ``pochta.blobs.counting``). A step
that fails (no record) writes nothing, not even its journal entry, so the others of its group
stand; a group SQLite refuses as a whole (nothing of it is written) is tried again step by
step, so a refused step fails only its own caller. Other processes on the file are ordered by
SQLite's own lock.

Durability (sync=full) by the filesystem's group sync: where the file's filesystem has a
trustworthy ``syncfs`` (``pochta.blobs.nodes.groupsync``), a commit writes the WAL without
its own fsync (SQLite's ``synchronous=NORMAL``: consistent after a crash, the last commits may
be lost) and each caller is answered only after the filesystem's next group sync, one that
started after the commit returned, so the answer still means "on the device". The local disks
of the loader share that sync when they share the filesystem (the embedded default): an
upload's copies wait for one sync, its record is committed, and the record rides the next
sync, which also carries the copies of the uploads that arrived meanwhile: one device flush
per group of uploads where there were two (the copies' ``syncfs`` and the WAL's
``fdatasync``). A caller alone (no sync running, no other writer announced to the group)
fdatasyncs the WAL itself instead: a sync of a few pages costs less than one of the whole
filesystem when there is nobody to share it with. A record is visible to readers between its
commit and that sync; whoever acts on it (an inc of a live key, a dec) is answered after a
later sync, which covers it too. A sync that fails fails its callers (StorageError) though
their steps stand committed: nobody is answered, and a count repeated with its op is applied
once. Elsewhere (not Linux >= 5.8,
``group_sync=False``, sync=normal or off) each commit is as SQLite's ``synchronous`` says.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import NamedTuple, TypeVar

from pochta.blobs import counting
from pochta.blobs.filedb.group import GroupCommit
from pochta.blobs.keys import parse_key, parse_magic, parse_op
from pochta.blobs.nodes.groupsync import GroupSync, syncfs_of
from pochta.errors import BlobNotFound, StorageError
from pochta.sqlitedb import SQLiteDatabase, Synchronous
from pochta.types import Clock, FileFlag, FileRecord, Key, Magic, Op, Space

SCHEMA = """
CREATE TABLE IF NOT EXISTS live (
    key BLOB PRIMARY KEY,
    counter INTEGER NOT NULL,
    magic INTEGER NOT NULL,
    flags INTEGER NOT NULL,
    pair INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS deleted (
    key BLOB PRIMARY KEY,
    pair INTEGER NOT NULL,
    moved_at REAL NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS ops (op BLOB PRIMARY KEY) WITHOUT ROWID;
"""


T = TypeVar("T")


def _to_db(magic: Magic) -> int:
    return magic - 2**32 if magic >= 2**31 else magic


def _from_db(value: int) -> Magic:
    return value % 2**32


def _live(conn: sqlite3.Connection, key: Key) -> FileRecord | None:
    row = conn.execute(
        "SELECT counter, magic, flags, pair FROM live WHERE key = ?", (bytes.fromhex(key),)
    ).fetchone()
    if row is None:
        return None
    return FileRecord(key, row[0], _from_db(row[1]), FileFlag(row[2]), row[3])


def _deleted(conn: sqlite3.Connection, key: Key) -> FileRecord | None:
    row = conn.execute(
        "SELECT pair, moved_at FROM deleted WHERE key = ?", (bytes.fromhex(key),)
    ).fetchone()
    if row is None:
        return None
    return FileRecord(key, 0, 0, FileFlag.NONE, row[0], Space.DELETED, row[1])


_RECORD = """
SELECT 0, counter, magic, flags, pair, NULL FROM live WHERE key = ?1
UNION ALL
SELECT 1, 0, 0, 0, pair, moved_at FROM deleted WHERE key = ?1
ORDER BY 1 LIMIT 1
"""


def _record(conn: sqlite3.Connection, key: Key) -> FileRecord | None:
    """The live record, else the deleted one: one statement (one snapshot, one trip into
    SQLite; an upload asks this of every key before it writes)."""
    row = conn.execute(_RECORD, (bytes.fromhex(key),)).fetchone()
    if row is None:
        return None
    deleted, counter, magic, flags, pair, moved_at = row
    if deleted:
        return FileRecord(key, 0, 0, FileFlag.NONE, pair, Space.DELETED, moved_at)
    return FileRecord(key, counter, _from_db(magic), FileFlag(flags), pair)


def _put_live(conn: sqlite3.Connection, r: FileRecord) -> None:
    conn.execute(
        "INSERT OR REPLACE INTO live (key, counter, magic, flags, pair) VALUES (?, ?, ?, ?, ?)",
        (bytes.fromhex(r.key), r.counter, _to_db(r.magic), int(r.flags), r.pair_id),
    )


# Each counting step is one statement ending in RETURNING the record it wrote. ?1 the raw
# key, ?2 the magic (1..2^32-1), ?3 the uploading pair, ?4 the magic as stored. The magic is
# stored as a signed 32-bit integer: a sum is taken modulo 2^32 (``& 0xFFFFFFFF``), then
# 2^31..2^32-1 is mapped to -2^31..-1 (``- ((x & 0x80000000) << 1)``).
_INC = """
UPDATE live SET counter = counter + 1,
    magic = ((magic + ?2) & 0xFFFFFFFF) - (((magic + ?2) & 0x80000000) << 1)
WHERE key = ?1
RETURNING counter, magic, flags, pair
"""
_UPSERT = """
INSERT INTO live (key, counter, magic, flags, pair) VALUES (?1, 1, ?4, 0, ?3)
ON CONFLICT (key) DO UPDATE SET counter = counter + 1,
    magic = ((magic + ?2) & 0xFFFFFFFF) - (((magic + ?2) & 0x80000000) << 1)
RETURNING counter, magic, flags, pair
"""
# A dec that leaves the record live, with the sticky DO_NOT_DELETE of ``counting.after_dec``
# (the counter goes below zero, or reaches zero while the magic does not). No row when the
# record is not live or would move to space1: ``_dec_slowly`` takes those.
_DEC_LIVE = """
UPDATE live SET counter = counter - 1,
    magic = ((magic - ?2) & 0xFFFFFFFF) - (((magic - ?2) & 0x80000000) << 1),
    flags = flags | (counter < 1 OR (counter = 1 AND ((magic - ?2) & 0xFFFFFFFF) <> 0))
WHERE key = ?1 AND NOT (counter = 1 AND ((magic - ?2) & 0xFFFFFFFF) = 0 AND (flags & 1) = 0)
RETURNING counter, magic, flags, pair
"""


class Step(NamedTuple):
    kind: str  # 'i' inc, 'u' upsert, 'd' dec
    key: Key
    raw: bytes  # the key's 32 bytes
    magic: Magic
    pair: int | None
    op: Op | None
    now: float | None


Outcome = FileRecord | BlobNotFound


def _returned(
    conn: sqlite3.Connection, key: Key, sql: str, params: tuple[object, ...]
) -> FileRecord | None:
    """The record a statement ending in ``RETURNING counter, magic, flags, pair`` wrote."""
    rows = conn.execute(sql, params).fetchall()  # to the end: the statement is done
    if not rows:
        return None
    counter, magic, flags, pair = rows[0]
    return FileRecord(key, counter, _from_db(magic), FileFlag(flags), pair)


def _replayed(conn: sqlite3.Connection, step: Step) -> Outcome | None:
    """Journal the step's op; when it was journaled already, the record as it is (a replay)."""
    if step.op is None:
        return None
    if conn.execute("INSERT OR IGNORE INTO ops (op) VALUES (?)", (step.op,)).rowcount:
        return None
    record = _live(conn, step.key) or _deleted(conn, step.key)
    return record or BlobNotFound(f"no record for {step.key}")


def _dec_slowly(conn: sqlite3.Connection, step: Step) -> Outcome:
    """The dec that moves a record to space1, or brings one back from it, or finds none."""
    key, raw = step.key, step.raw
    before = _live(conn, key) or _deleted(conn, key)
    if before is None:
        return BlobNotFound(f"no record for {key}")
    if step.now is None:
        raise AssertionError("a dec carries its time")
    record = counting.after_dec(before, key, step.magic, step.now)
    if record.space is Space.DELETED:
        conn.execute("DELETE FROM live WHERE key = ?", (raw,))
        conn.execute(
            "INSERT OR REPLACE INTO deleted (key, pair, moved_at) VALUES (?, ?, ?)",
            (raw, record.pair_id, record.moved_at),
        )
    else:
        if before.space is Space.DELETED:
            conn.execute("DELETE FROM deleted WHERE key = ?", (raw,))
        _put_live(conn, record)
    return record


def _apply(conn: sqlite3.Connection, step: Step) -> Outcome:
    """One step inside the group's transaction. A step that fails (not found) writes
    nothing, not even its journal entry, so the other steps of the group stand."""
    if (same := _replayed(conn, step)) is not None:
        return same
    outcome: Outcome | None
    if step.kind == "i":
        outcome = _returned(conn, step.key, _INC, (step.raw, step.magic))
        outcome = outcome or BlobNotFound(f"no live record for {step.key}")
    elif step.kind == "u":
        params = (step.raw, step.magic, step.pair, _to_db(step.magic))
        outcome = _returned(conn, step.key, _UPSERT, params)
        if outcome is None:
            raise AssertionError("an upsert always writes its record")
    else:
        outcome = _returned(conn, step.key, _DEC_LIVE, (step.raw, step.magic))
        outcome = outcome or _dec_slowly(conn, step)
    if isinstance(outcome, BlobNotFound) and step.op is not None:
        conn.execute("DELETE FROM ops WHERE op = ?", (step.op,))
    return outcome


def _apply_all(steps: list[Step], conn: sqlite3.Connection) -> list[Outcome]:
    return [_apply(conn, step) for step in steps]


def _exec_many(sql: str, rows: list[tuple[object, ...]]) -> Callable[[sqlite3.Connection], None]:
    def op(conn: sqlite3.Connection) -> None:
        conn.executemany(sql, rows).close()  # the cursor never leaves the writer thread

    return op


class SQLiteFileDB:
    def __init__(
        self,
        path: Path,
        *,
        synchronous: Synchronous = "full",
        clock: Clock = time.time,
        batch_max: int = 1024,
        group_sync: GroupSync | bool = True,
    ) -> None:
        """``group_sync``: with sync=full, commits made durable by the filesystem's group sync
        (the module's docstring) where it is trustworthy, or by the one given; False: an fsync
        at each commit."""
        self._sync: GroupSync | None = None
        # where SQLite writes: it follows a symlinked file, its WAL is next to the target
        real = path.resolve()
        self._wal = Path(f"{real}-wal")
        if isinstance(group_sync, GroupSync):
            self._sync = group_sync if synchronous == "full" else None
        elif synchronous == "full" and group_sync:
            real.parent.mkdir(parents=True, exist_ok=True)
            try:
                self._sync = syncfs_of(real.parent)
            except OSError as exc:
                raise StorageError(f"cannot open {real.parent} for its syncs: {exc}") from exc
        if self._sync is not None:
            synchronous = "normal"
        self._db = SQLiteDatabase(path, SCHEMA, synchronous=synchronous)
        self._wal_fd = -1  # the WAL's descriptor for its own fdatasyncs (see _sync_wal)
        if self._sync is not None:
            try:
                self._wal_fd = os.open(self._wal, os.O_RDONLY | os.O_CLOEXEC)
            except OSError as exc:
                self._db.close()
                raise StorageError(f"cannot open {self._wal} for its syncs: {exc}") from exc
        self._wal_failures = 0  # the WAL's own fdatasyncs that failed (a count made alone)
        self._settled = 0 if self._sync is None else self._sync.failures  # see _settle
        self._settling = threading.Lock()
        self._clock = clock
        # no gathering (``gather=0``): a leader does not wait for the callers its last group
        # answered. A step here costs the writer CPU, not a round trip; waiting idles the
        # writer while they come back (alternating runs against main, 8 and 64 callers,
        # sync=full and normal: gathering was no faster, often slower; BENCHMARKS.md).
        self._group: GroupCommit[Step, FileRecord] = GroupCommit(
            self._run, max_batch=batch_max, leaders=1, gather=0.0
        )

    @property
    def group_sync(self) -> GroupSync | None:
        """The group sync that makes this FileDB's commits durable, or None (its own fsyncs)."""
        return self._sync

    # -- the counting steps --------------------------------------------------------------
    def _step(
        self, kind: str, key: Key, magic: Magic, op: Op | None, pair: int | None = None
    ) -> FileRecord:
        key, magic = parse_key(key), parse_magic(magic)
        op = None if op is None else parse_op(op)
        now = self._clock() if kind == "d" else None
        step = Step(kind, key, bytes.fromhex(key), magic, pair, op, now)
        if self._sync is None:
            return self._group.submit(step)
        if not self._sync.quiet():
            # the wait outside the group commit (the next group commits during this sync); a
            # sync about to start waits for this commit (``GroupSync.after``) rather than
            # leave it for the sync after
            submit = functools.partial(self._group.submit, step)
            return self._durably(functools.partial(self._sync.after, submit))
        self._sync.forgo()  # alone: the WAL's own fdatasync costs less than a syncfs

        def alone() -> FileRecord:
            record = self._group.submit(step)
            try:
                self._sync_wal()
            except OSError:
                with self._settling:  # as a failed sync: settled (``_settle``)
                    self._wal_failures += 1
                raise
            return record

        return self._durably(alone)

    def _durably(self, call: Callable[[], T]) -> T:
        """``call()``, whose OSError is a failed sync (settled for the callers after,
        raised as StorageError), and settled after a failure before it is answered."""
        try:
            value = call()
        except OSError as exc:
            self._settle_quietly()
            raise StorageError(f"syncing {self._db.path.name}: {exc}") from exc
        self._settle()
        return value

    def _settle(self) -> None:
        """After a failed sync of the group or of the WAL (any since the last settling): the
        committed steps in the database file itself before anyone is answered. A page whose
        writeback failed is clean in the cache, so no later sync writes it again, and a hole
        in the WAL on the device loses every commit after it at a crash, though the steps
        stand committed (a count sent again with its op is answered from its journal entry).
        SQLite's checkpoint reads the WAL from the cache, writes and fsyncs the database file
        and empties the WAL (made durable here: no old frame replayed after a crash). Its
        first fsync of the WAL may report the failure again: tried twice."""
        assert self._sync is not None
        if self._sync.failures + self._wal_failures == self._settled:
            return
        with self._settling:
            failures = self._sync.failures + self._wal_failures
            if failures == self._settled:
                return
            try:
                self._db.checkpoint()
            except StorageError:
                self._db.checkpoint()  # the error, now seen, is not reported twice
            try:
                self._sync_wal()
            except OSError as exc:
                raise StorageError(f"syncing {self._db.path.name}-wal: {exc}") from exc
            self._settled = failures

    def _settle_quietly(self) -> None:
        """``_settle`` when the caller fails anyway: a later caller tries again."""
        with contextlib.suppress(StorageError):
            self._settle()

    def _sync_wal(self) -> None:
        """fdatasync the WAL: every commit returned before this call is on the device (what
        sync=full does at each commit). Through one descriptor kept open since the FileDB
        opened: Linux reports a writeback error of a file once to each open file description
        that was open before the error, and one opened after another descriptor saw it (SQLite
        fsyncs the WAL through its own at a checkpoint) never hears of it. The WAL stays the
        same file while the FileDB is open: SQLite removes it only when the last connection
        to the database closes (the writer's is open until :meth:`close`, and the shared lock
        it holds keeps another process's last close from removing it); a checkpoint empties
        it in place."""
        os.fdatasync(self._wal_fd)

    def _durable(self) -> None:
        """With the group sync: return once a sync that started now has ended (what this
        thread committed is on the device); else nothing to wait for."""
        if self._sync is None:
            return
        try:
            self._sync.wait()
        except OSError as exc:
            raise StorageError(f"syncing {self._db.path.name}: {exc}") from exc

    def _write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """``SQLiteDatabase.write``, durable on return (``GroupSync.after``: a sync that fails
        while the write is made fails it too)."""
        if self._sync is None:
            return self._db.write(fn)
        return self._durably(
            functools.partial(self._sync.after, functools.partial(self._db.write, fn))
        )

    def _run(self, steps: list[Step]) -> list[Outcome | BaseException]:
        """The steps that arrived together: one transaction, one commit. When it fails as a
        whole (nothing of it is written), each step is tried again alone, so that a step
        SQLite refuses fails only its own caller."""
        try:
            return list(self._db.write(functools.partial(_apply_all, steps)))
        except StorageError:
            if len(steps) == 1:
                raise
        outcomes: list[Outcome | BaseException] = []
        for step in steps:
            try:
                outcomes.extend(self._db.write(functools.partial(_apply_all, [step])))
            except StorageError as exc:
                outcomes.append(exc)
        return outcomes

    def inc(self, key: Key, magic: Magic, op: Op | None = None) -> FileRecord:
        return self._step("i", key, magic, op)

    def upsert(self, key: Key, magic: Magic, pair_id: int, op: Op | None = None) -> FileRecord:
        return self._step("u", key, magic, op, pair_id)

    def dec(self, key: Key, magic: Magic, op: Op | None = None) -> FileRecord:
        return self._step("d", key, magic, op)

    def applied(self, ops: Collection[Op]) -> set[Op]:
        conn = self._db.reader()
        return {
            op for op in ops if conn.execute("SELECT 1 FROM ops WHERE op = ?", (op,)).fetchone()
        }

    def forget_ops(self, ops: Collection[Op]) -> None:
        rows: list[tuple[object, ...]] = [(op,) for op in ops]
        if rows:
            self._write(_exec_many("DELETE FROM ops WHERE op = ?", rows))

    def journal(self, after: Op = b"", limit: int = 1000) -> list[Op]:
        rows = self._db.query("SELECT op FROM ops WHERE op > ? ORDER BY op LIMIT ?", (after, limit))
        return [bytes(row[0]) for row in rows]

    def get(self, key: Key) -> FileRecord | None:
        return _record(self._db.reader(), parse_key(key))

    def compact(self) -> None:
        """Pack the records into full pages (VACUUM); see ``SQLiteDatabase.vacuum``."""
        self._db.vacuum()
        self._durable()

    # -- for Valkyrie, evacuation and restore --------------------------------------------
    def get_deleted(self, key: Key) -> FileRecord | None:
        key = parse_key(key)
        return _deleted(self._db.reader(), key)

    def forget_deleted(self, key: Key, moved_at: float) -> bool:
        raw = bytes.fromhex(parse_key(key))

        def step(conn: sqlite3.Connection) -> bool:
            cur = conn.execute(
                "DELETE FROM deleted WHERE key = ? AND moved_at = ?", (raw, moved_at)
            )
            return cur.rowcount > 0

        return self._write(step)

    def repoint(self, key: Key, old_pair: int, new_pair: int) -> bool:
        raw = bytes.fromhex(parse_key(key))

        def step(conn: sqlite3.Connection) -> bool:
            cur = conn.execute(
                "UPDATE live SET pair = ? WHERE key = ? AND pair = ?", (new_pair, raw, old_pair)
            )
            return cur.rowcount > 0

        return self._write(step)

    def live_keys(self, pair_id: int, after: Key | None = None, limit: int = 1000) -> list[Key]:
        start = bytes.fromhex(parse_key(after)) if after is not None else b""
        rows = self._db.query(
            "SELECT key FROM live WHERE pair = ? AND key > ? ORDER BY key LIMIT ?",
            (pair_id, start, limit),
        )
        return [bytes(row[0]).hex() for row in rows]

    def count_live(self, pair_id: int) -> int:
        rows = self._db.query("SELECT count(*) FROM live WHERE pair = ?", (pair_id,))
        return int(rows[0][0])

    def revive(self, key: Key, pair_id: int) -> FileRecord:
        key = parse_key(key)

        def step(conn: sqlite3.Connection) -> FileRecord:
            conn.execute("DELETE FROM deleted WHERE key = ?", (bytes.fromhex(key),))
            record = _live(conn, key)
            if record is None:
                record = FileRecord(key, 0, 0, FileFlag.DO_NOT_DELETE, pair_id)
                _put_live(conn, record)
            return record

        return self._write(step)

    def close(self) -> None:
        self._group.close()
        self._db.close()
        if self._wal_fd >= 0:
            os.close(self._wal_fd)
            self._wal_fd = -1
