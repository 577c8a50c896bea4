"""SQLite done once: WAL, one writer with group commit, reads on per-thread connections.

Writes are functions of a connection. A caller that finds the writer idle becomes the leader:
it takes every write queued so far, runs them in one ``BEGIN IMMEDIATE`` transaction (each in
its own savepoint, so one failing write does not undo the others) and commits once. Callers
that arrive meanwhile wait for the next leader. One client pays one commit per write; N
concurrent clients share one commit (and one fsync) between them. Other processes on the same
file are serialized by SQLite's own lock (``busy_timeout``).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar

from pochta.errors import ConfigError, StorageError

T = TypeVar("T")
Synchronous = Literal["full", "normal", "off"]

_MAX_BATCH = 512


class _Op(Generic[T]):
    __slots__ = ("done", "error", "fn", "value")

    def __init__(self, fn: Callable[[sqlite3.Connection], T]) -> None:
        self.fn = fn
        self.done = False
        self.value: T | None = None
        self.error: BaseException | None = None


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
            self._writer.execute("PRAGMA journal_mode=WAL")
            self._writer.executescript(f"BEGIN IMMEDIATE;\n{schema}\nCOMMIT;")
        except (OSError, sqlite3.Error) as exc:
            raise ConfigError(f"cannot open database {path}: {exc}") from exc
        self._leader = threading.Lock()
        self._cond = threading.Condition()
        self._pending: list[_Op[Any]] = []
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()
        self._closed = False

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
        with self._cond:
            if self._closed:
                raise StorageError(f"database {self.path} is closed")
            self._pending.append(op)
        while not op.done:
            if self._leader.acquire(blocking=False):
                try:
                    while not op.done:
                        with self._cond:
                            batch = self._pending[:_MAX_BATCH]
                            del self._pending[:_MAX_BATCH]
                        if batch:
                            self._run(batch)
                finally:
                    self._leader.release()
                    with self._cond:
                        self._cond.notify_all()
            else:
                with self._cond:
                    while not op.done and self._leader.locked():
                        self._cond.wait(timeout=0.05)
        if op.error is not None:
            raise op.error
        return op.value  # type: ignore[return-value]

    def _run(self, batch: list[_Op[Any]]) -> None:
        conn = self._writer
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            self._finish(batch, StorageError(f"writing {self.path.name}: {exc}"))
            return
        for op in batch:
            conn.execute("SAVEPOINT op")
            try:
                op.value = op.fn(conn)
            except BaseException as exc:  # the caller re-raises it; others' writes stand
                op.error = exc
                conn.execute("ROLLBACK TO op")
            conn.execute("RELEASE op")
        try:
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            self._finish(batch, StorageError(f"committing {self.path.name}: {exc}"))
            return
        self._finish(batch, None)

    def _finish(self, batch: list[_Op[Any]], error: BaseException | None) -> None:
        with self._cond:
            for op in batch:
                if error is not None and op.error is None:
                    op.error = error
                op.done = True
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            if self._closed:
                return
            self._closed = True
        with self._leader:
            self._writer.close()
        with self._readers_lock:
            for conn in self._readers:
                conn.close()
            self._readers.clear()
