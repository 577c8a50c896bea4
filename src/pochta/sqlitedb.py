"""SQLite done once: WAL, one writer with group commit, reads on per-thread connections.

Writes are functions of a connection. Callers queue their writes; the first caller to find the
writer idle becomes the leader: it takes every write queued so far, runs them in one
``BEGIN IMMEDIATE`` transaction (each in its own savepoint when there are several, so one
failing write does not undo the others), commits once, wakes each caller whose write it ran,
and hands the lead to the oldest caller still waiting (LevelDB's writer queue). One client
pays one commit per write; N concurrent clients share one commit (and one fsync) between
them, and every caller is woken exactly once. Other processes on the same file are serialized
by SQLite's own lock (``busy_timeout``).
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar

from pochta.errors import ConfigError, StorageError

T = TypeVar("T")
Synchronous = Literal["full", "normal", "off"]

_MAX_BATCH = 1024
WAL_RETRY = 0.005  # s between two tries to switch a file to WAL (SQLiteDatabase._to_wal)


class _Op(Generic[T]):
    """One queued write. ``wake`` is held from birth and released once: when the write is
    done, or when its caller must lead the next batch."""

    __slots__ = ("done", "error", "fn", "value", "wake")

    def __init__(self, fn: Callable[[sqlite3.Connection], T]) -> None:
        self.fn = fn
        self.done = False
        self.value: T | None = None
        self.error: BaseException | None = None
        self.wake = threading.Lock()
        self.wake.acquire()


def _translated(exc: BaseException, path: Path) -> BaseException:
    """A write's own error as its caller sees it: SQLite's errors become StorageError."""
    if isinstance(exc, sqlite3.Error):
        error = StorageError(f"writing {path.name}: {exc}")
        error.__cause__ = exc
        return error
    return exc


class SQLiteDatabase:
    def __init__(
        self,
        path: Path,
        schema: str,
        *,
        synchronous: Synchronous = "full",
        busy_timeout: float = 60.0,
    ) -> None:
        self.path = path
        self._synchronous = synchronous
        self._busy_timeout = busy_timeout
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._writer = self._connect(check_same_thread=False)
            self._to_wal()
            self._writer.executescript(f"BEGIN IMMEDIATE;\n{schema}\nCOMMIT;")
        except (OSError, sqlite3.Error) as exc:
            raise ConfigError(f"cannot open database {path}: {exc}") from exc
        self._mutex = threading.Lock()  # guards _queue, _busy, _closed
        self._queue: deque[_Op[Any]] = deque()
        self._busy = False  # a leader is running a batch
        self._writing = threading.Lock()  # held while the write connection is in use
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()
        self._closed = False

    def _to_wal(self) -> None:
        """The file in WAL mode. Switching an old (rollback-journal) file needs it alone, and
        when several processes open it at once SQLite refuses all but one at once, without
        waiting (two shared locks that would both grow into the exclusive one: SQLITE_BUSY
        past the busy handler); the others ask again until the busy timeout."""
        deadline = time.monotonic() + self._busy_timeout
        while True:
            try:
                self._writer.execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError as exc:
                busy = exc.sqlite_errorcode == sqlite3.SQLITE_BUSY
                if not busy or time.monotonic() >= deadline:
                    raise
            time.sleep(WAL_RETRY)

    def _connect(self, *, check_same_thread: bool) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self.path,
            timeout=self._busy_timeout,
            isolation_level=None,
            check_same_thread=check_same_thread,
        )
        conn.execute(f"PRAGMA synchronous={self._synchronous}")
        conn.execute("PRAGMA foreign_keys=ON")
        return conn

    # -- reads --------------------------------------------------------------------------
    def reader(self) -> sqlite3.Connection:
        """This thread's read connection (WAL: reads never wait for the writer)."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            if self._closed:
                raise StorageError(f"database {self.path} is closed")
            conn = self._connect(check_same_thread=False)  # closed by close(), elsewhere
            self._local.conn = conn
            with self._readers_lock:
                self._readers.append(conn)
        return conn

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        try:
            return self.reader().execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise StorageError(f"reading {self.path.name}: {exc}") from exc

    # -- writes -------------------------------------------------------------------------
    def write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` inside a write transaction shared with concurrent writers; return its
        result or raise its exception. Durable on return (per ``synchronous``)."""
        op: _Op[T] = _Op(fn)
        with self._mutex:
            if self._closed:
                raise StorageError(f"database {self.path} is closed")
            self._queue.append(op)
            lead = not self._busy
            self._busy = True
        if not lead:
            op.wake.acquire()  # done by another leader, or told to lead
        if not op.done:
            self._lead(op)
        if op.error is not None:
            raise op.error
        return op.value  # type: ignore[return-value]

    def _lead(self, mine: _Op[Any]) -> None:
        """Run one batch (the oldest queued writes, this caller's first), then pass the lead
        to the oldest write still waiting, or leave the writer idle."""
        with self._mutex:
            n = min(len(self._queue), _MAX_BATCH)
            batch = [self._queue.popleft() for _ in range(n)]
        try:
            with self._writing:
                self._run(batch)
        finally:
            with self._mutex:
                for op in batch:
                    if not op.done:  # _run was interrupted (KeyboardInterrupt and the like)
                        op.error = op.error or StorageError(f"writing {self.path.name} failed")
                        op.done = True
                if self._queue:
                    self._queue[0].wake.release()  # the next leader
                else:
                    self._busy = False
            for op in batch:
                if op is not mine:
                    op.wake.release()

    def _run(self, batch: list[_Op[Any]]) -> None:
        conn = self._writer
        try:
            conn.execute("BEGIN IMMEDIATE")
            if len(batch) == 1:  # alone: a failing write rolls the whole transaction back
                op = batch[0]
                try:
                    op.value = op.fn(conn)
                except BaseException as exc:  # the caller re-raises it
                    op.error = _translated(exc, self.path)
                    self._rollback(conn)
                    op.done = True
                    return
            else:
                for op in batch:
                    conn.execute("SAVEPOINT op")
                    try:
                        op.value = op.fn(conn)
                    except BaseException as exc:  # the caller re-raises it; others' stand
                        op.error = _translated(exc, self.path)
                        conn.execute("ROLLBACK TO op")
                    conn.execute("RELEASE op")
            conn.execute("COMMIT")
        except sqlite3.Error as exc:  # BEGIN, SAVEPOINT or COMMIT failed: nothing written
            self._rollback(conn)
            for op in batch:
                op.value = None
                op.error = StorageError(f"writing {self.path.name}: {exc}")
                op.done = True
            return
        except BaseException:
            self._rollback(conn)
            raise
        for op in batch:
            op.done = True

    @staticmethod
    def _rollback(conn: sqlite3.Connection) -> None:
        with contextlib.suppress(sqlite3.Error):
            if conn.in_transaction:
                conn.execute("ROLLBACK")

    # -- maintenance --------------------------------------------------------------------
    def vacuum(self) -> None:
        """Rewrite the file with full pages (VACUUM) and truncate the WAL: an operator's step
        after mass deletions. Writers wait meanwhile (0.6 s for a 50 MB file in
        benchmarks/filedb_size.py); readers go on. Random inserts split full pages again, so
        a growing table soon loses the gain (see BENCHMARKS.md)."""
        with self._mutex:
            if self._closed:
                raise StorageError(f"database {self.path} is closed")
        with self._writing:
            try:
                self._writer.execute("VACUUM")
                self._writer.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.Error as exc:
                raise StorageError(f"compacting {self.path.name}: {exc}") from exc

    def checkpoint(self) -> None:
        """Copy the WAL into the database file and empty the WAL (``wal_checkpoint(TRUNCATE)``,
        with SQLite's own fsyncs of both files); writers wait meanwhile. StorageError when it
        could not finish (readers kept it from the end of the WAL, or an I/O error)."""
        with self._mutex:
            if self._closed:
                raise StorageError(f"database {self.path} is closed")
        with self._writing:
            try:
                busy, _, _ = self._writer.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            except sqlite3.Error as exc:
                raise StorageError(f"checkpointing {self.path.name}: {exc}") from exc
        if busy:
            raise StorageError(f"checkpointing {self.path.name}: readers kept it from finishing")

    def close(self) -> None:
        with self._mutex:
            if self._closed:
                return
            self._closed = True
        with self._writing:
            self._writer.close()
        with self._readers_lock:
            for conn in self._readers:
                conn.close()
            self._readers.clear()
