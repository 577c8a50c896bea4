"""FileDB in PostgreSQL: several loaders on several machines share one store.

Tables and functions are in ``pochta/postgres/migrations/0001_filedb.sql``:

    pochta.filedb_live    (key bytea PK, counter, magic, flags, pair)   -- space0
    pochta.filedb_deleted (key bytea PK, pair, moved_at)                -- space1
    pochta.filedb_ops     (op bytea PK)                                 -- the journal

Every counting step (inc, upsert, dec with the move to space1 and DO_NOT_DELETE, each with
its journal entry) is one call of the PL/pgSQL function ``pochta.filedb_steps``: one atomic
server-side step (see the migration for how each is atomic). Concurrent callers in one
process share round trips and commits (``pochta.blobs.filedb.group``): the steps waiting while
a group is on the wire go out together in one call (arrays in, one row per step out),
ordered by lock number so that groups never deadlock. ``batch_max = 1`` sends every step
alone.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Sequence
from typing import Any, NamedTuple

from pochta.blobs.filedb.group import GroupCommit
from pochta.blobs.keys import parse_key, parse_magic, parse_op
from pochta.errors import BlobNotFound, StorageError
from pochta.postgres.database import Postgres, retryable
from pochta.types import Clock, FileFlag, FileRecord, Key, Magic, Op, Space

RETRIES = 5

_STEPS = """
SELECT * FROM pochta.filedb_steps(%b::"char"[], %b::bytea[], %b::bigint[], %b::bigint[],
                                  %b::integer[], %b::bytea[], %b::float8[])
"""
_GET = """
SELECT counter, magic, flags, pair, 0, NULL::float8 FROM pochta.filedb_live WHERE key = %s
UNION ALL
SELECT 0, 0, 0, pair, 1, moved_at FROM pochta.filedb_deleted WHERE key = %s
ORDER BY 5
"""  # live first: both come from one snapshot, so a record moving between them is never lost


class Step(NamedTuple):
    kind: str  # 'i' inc, 'u' upsert, 'd' dec
    key: Key
    raw: bytes  # the key's 32 bytes
    lock: int  # the advisory lock number of the key
    magic: Magic
    pair: int | None
    op: Op | None
    now: float | None


def lock_number(raw: bytes) -> int:
    """The advisory lock of a key: its first 8 bytes as a signed 64-bit integer."""
    return int.from_bytes(raw[:8], "big", signed=True)


def _record(key: Key, row: Sequence[Any]) -> FileRecord:
    status, counter, magic, flags, pair, space, moved_at = row
    if status != 0:
        raise AssertionError("not a record")
    if space == Space.DELETED:
        return FileRecord(key, 0, 0, FileFlag(flags), pair, Space.DELETED, moved_at)
    return FileRecord(key, counter, magic, FileFlag(flags), pair)


def _outcome(step: Step, row: Sequence[Any]) -> FileRecord | BaseException:
    if row[0] == 1:
        what = "live record" if step.kind == "i" else "record"
        return BlobNotFound(f"no {what} for {step.key}")
    return _record(step.key, row)


class PostgresFileDB:
    def __init__(
        self,
        db: Postgres,
        *,
        clock: Clock = time.time,
        batch_max: int = 256,
        leaders: int = 8,
    ) -> None:
        """``db`` is this FileDB's: it closes it (``db.share()`` to keep using it)."""
        self._db = db
        self._clock = clock
        self._batch_max = batch_max
        self._group: GroupCommit[Step, FileRecord] | None = None
        if batch_max > 1:
            self._group = GroupCommit(self._run, max_batch=batch_max, leaders=leaders)

    # -- the counting steps --------------------------------------------------------------
    def _step(
        self, kind: str, key: Key, magic: Magic, op: Op | None, pair: int | None = None
    ) -> FileRecord:
        key, magic = parse_key(key), parse_magic(magic)
        op = None if op is None else parse_op(op)
        now = self._clock() if kind == "d" else None
        raw = bytes.fromhex(key)
        step = Step(kind, key, raw, lock_number(raw), magic, pair, op, now)
        if self._group is None:
            outcome = self._run([step])[0]
            if isinstance(outcome, BaseException):
                raise outcome
            return outcome
        return self._group.submit(step)

    def _run(self, steps: list[Step]) -> list[FileRecord | BaseException]:
        """One round trip: one step alone, or a group in lock order (one transaction)."""
        order = sorted(range(len(steps)), key=lambda i: steps[i].lock)
        ordered = [steps[i] for i in order]
        params = (
            [s.kind for s in ordered],
            [s.raw for s in ordered],
            [s.lock for s in ordered],
            [s.magic for s in ordered],
            [s.pair for s in ordered],
            [s.op for s in ordered],
            [s.now for s in ordered],
        )
        for attempt in range(RETRIES):
            try:
                with self._db.connection() as conn:
                    rows = conn.execute(_STEPS, params, prepare=True, binary=True).fetchall()
                break
            except StorageError as exc:
                if not retryable(exc.__cause__) or attempt == RETRIES - 1:
                    raise
        row_of = dict(zip(order, rows, strict=True))
        return [_outcome(step, row_of[i]) for i, step in enumerate(steps)]

    def inc(self, key: Key, magic: Magic, op: Op | None = None) -> FileRecord:
        return self._step("i", key, magic, op)

    def upsert(self, key: Key, magic: Magic, pair_id: int, op: Op | None = None) -> FileRecord:
        return self._step("u", key, magic, op, pair_id)

    def dec(self, key: Key, magic: Magic, op: Op | None = None) -> FileRecord:
        return self._step("d", key, magic, op)

    # -- the journal ---------------------------------------------------------------------
    def applied(self, ops: Collection[Op]) -> set[Op]:
        if not ops:
            return set()
        rows = self._db.query(
            "SELECT op FROM pochta.filedb_ops WHERE op = ANY(%s::bytea[])", (list(ops),)
        )
        return {bytes(r[0]) for r in rows}

    def forget_ops(self, ops: Collection[Op]) -> None:
        if ops:
            self._db.execute(
                "DELETE FROM pochta.filedb_ops WHERE op = ANY(%s::bytea[])", (list(ops),)
            )

    def journal(self, after: Op = b"", limit: int = 1000) -> list[Op]:
        rows = self._db.query(
            "SELECT op FROM pochta.filedb_ops WHERE op > %s ORDER BY op LIMIT %s",
            (after, limit),
        )
        return [bytes(r[0]) for r in rows]

    # -- reading -------------------------------------------------------------------------
    def get(self, key: Key) -> FileRecord | None:
        key = parse_key(key)
        raw = bytes.fromhex(key)
        rows = self._db.query(_GET, (raw, raw))
        return _record(key, (0, *rows[0])) if rows else None

    def get_deleted(self, key: Key) -> FileRecord | None:
        key = parse_key(key)
        rows = self._db.query(
            "SELECT pair, moved_at FROM pochta.filedb_deleted WHERE key = %s",
            (bytes.fromhex(key),),
        )
        if not rows:
            return None
        return FileRecord(key, 0, 0, FileFlag.NONE, rows[0][0], Space.DELETED, rows[0][1])

    # -- for Valkyrie, evacuation and restore ------------------------------------------
    # forget_deleted and repoint are one compare-and-set statement each (the row's lock
    # orders them with the steps); revive takes the key's lock, as a step does.
    def forget_deleted(self, key: Key, moved_at: float) -> bool:
        raw = bytes.fromhex(parse_key(key))
        return bool(
            self._db.execute(
                "DELETE FROM pochta.filedb_deleted WHERE key = %s AND moved_at = %s",
                (raw, moved_at),
            )
        )

    def repoint(self, key: Key, old_pair: int, new_pair: int) -> bool:
        raw = bytes.fromhex(parse_key(key))
        return bool(
            self._db.execute(
                "UPDATE pochta.filedb_live SET pair = %s WHERE key = %s AND pair = %s",
                (new_pair, raw, old_pair),
            )
        )

    def live_keys(self, pair_id: int, after: Key | None = None, limit: int = 1000) -> list[Key]:
        start = bytes.fromhex(parse_key(after)) if after is not None else b""
        rows = self._db.query(
            "SELECT key FROM pochta.filedb_live WHERE pair = %s AND key > %s ORDER BY key LIMIT %s",
            (pair_id, start, limit),
        )
        return [bytes(r[0]).hex() for r in rows]

    def count_live(self, pair_id: int) -> int:
        rows = self._db.query("SELECT count(*) FROM pochta.filedb_live WHERE pair = %s", (pair_id,))
        return int(rows[0][0])

    def revive(self, key: Key, pair_id: int) -> FileRecord:
        key = parse_key(key)
        raw = bytes.fromhex(key)

        def step(conn: Any) -> FileRecord:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_number(raw),))
            conn.execute("DELETE FROM pochta.filedb_deleted WHERE key = %s", (raw,))
            row = conn.execute(
                "INSERT INTO pochta.filedb_live AS l (key, counter, magic, flags, pair)"
                " VALUES (%s, 0, 0, %s, %s)"
                " ON CONFLICT (key) DO UPDATE SET key = l.key"
                " RETURNING l.counter, l.magic, l.flags, l.pair",
                (raw, int(FileFlag.DO_NOT_DELETE), pair_id),
            ).fetchone()
            return FileRecord(key, row[0], row[1], FileFlag(row[2]), row[3])

        return self._db.transaction(step)

    def close(self) -> None:
        if self._group is not None:
            self._group.close()
        self._db.close()
