"""Embedded locks and fences: one SQLite file shared by the threads and processes of one host.

Leases are rows (name, owner, boot, expires) changed in ``BEGIN IMMEDIATE`` transactions, so
every step is atomic across processes. Expiry uses CLOCK_MONOTONIC, which on Linux is one
clock for the whole host and does not jump with the wall clock; a row written before the
last reboot (another boot id) counts as expired, and so does the lease of a process that has
ended (``lease_holder``: its pid, start time and pid namespace; SIGKILLed, crashed, a zombie;
a paused process keeps its lease): a job's next leader on this host takes over at its next
try, not a lease length later. Fencing tokens are ``max(last + 1, wall
clock in µs)``, like the Redis backend's: they keep increasing even if the file's last
transactions are lost to a power cut (``synchronous=normal``).

Waiters do not poll (nor are they served in order: the embedded backend hands no lock over).
A waiter opens a FIFO named after the lock (``<file>.bells/<hash>``,
read-write so it never sees a hang-up) before trying; a release opens it for writing without
blocking and writes one byte, which wakes one waiter. When nobody is listening the open fails
(ENXIO) and nothing is written, so no stale wake-ups pile up. Linux semantics (FIFOs opened
O_RDWR, host-wide CLOCK_MONOTONIC); the FIFO files stay (one per name that ever had a
waiter). A process paused inside a transaction (SIGSTOP) blocks the others' writes until
``busy_timeout``.

Open the backend after forking, not before.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hashlib
import logging
import os
import select
import sqlite3
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from pochta.errors import GuardUnavailable, StaleToken, StorageError
from pochta.guard import _proc
from pochta.guard.names import check_name
from pochta.sqlitedb import SQLiteDatabase
from pochta.types import Grant

T = TypeVar("T")
log = logging.getLogger(__name__)
MAX_WAIT = 60.0  # seconds one wait may take; the caller tries again after it
RECHECK = 1.0  # seconds a waiter waits before it asks whether a living holder still lives

SCHEMA = """
CREATE TABLE IF NOT EXISTS lease (
    name TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    boot TEXT NOT NULL,        -- the boot id the expiry's clock belongs to
    expires REAL NOT NULL      -- CLOCK_MONOTONIC seconds
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS lease_holder (
    name TEXT PRIMARY KEY,
    owner TEXT NOT NULL,       -- the lease's owner when it was granted
    pid INTEGER NOT NULL,      -- the process it was granted to,
    started INTEGER NOT NULL,  -- that process's start time (ticks after boot),
    namespace INTEGER NOT NULL -- and the pid namespace its pid belongs to
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS lease_token (
    name TEXT PRIMARY KEY,
    token INTEGER NOT NULL     -- the last fencing token handed out for the name
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS fence (
    resource TEXT PRIMARY KEY,
    token INTEGER NOT NULL,    -- the highest token seen
    value BLOB
) WITHOUT ROWID;
"""


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


BOOT = _boot_id()
NAMESPACE = _proc.namespace()


def _now() -> float:
    return time.monotonic() if BOOT else time.time()


def _open_db(path: Path) -> SQLiteDatabase:
    return SQLiteDatabase(path, SCHEMA, synchronous="normal", busy_timeout=5.0)


def _write(db: SQLiteDatabase, fn: Callable[[sqlite3.Connection], T]) -> T:
    try:
        return db.write(fn)
    except StorageError as exc:
        raise GuardUnavailable(f"lock store {db.path}: {exc.message}") from exc


def _acquire(conn: sqlite3.Connection, name: str, owner: str, ttl: float) -> Grant:
    now = _now()
    row = conn.execute("SELECT owner, boot, expires FROM lease WHERE name = ?", (name,)).fetchone()
    if row is not None and row[1] == BOOT and row[2] > now:
        if row[0] == owner:
            mine = conn.execute("SELECT token FROM lease_token WHERE name = ?", (name,)).fetchone()
            if mine is not None:  # a retried call of the holder
                return Grant(int(mine[0]))
        elif not (gone := _holder_gone(conn, name, row[0])):
            # a holder this host can see is asked about again within a second: a waiter
            # is not woken when it dies (only a release rings), nor kept for its whole lease
            left = row[2] - now
            return Grant(None, min(left, RECHECK) if gone is False else left)
        else:
            log.info("lock %s: its holder has ended; taken before its lease ran out", name)
    last = conn.execute("SELECT token FROM lease_token WHERE name = ?", (name,)).fetchone()
    token = max((last[0] if last else 0) + 1, time.time_ns() // 1000)
    conn.execute(
        "INSERT INTO lease_token (name, token) VALUES (?, ?)"
        " ON CONFLICT (name) DO UPDATE SET token = excluded.token",
        (name, token),
    )
    conn.execute(
        "INSERT OR REPLACE INTO lease (name, owner, boot, expires) VALUES (?, ?, ?, ?)",
        (name, owner, BOOT, now + ttl),
    )
    conn.execute(
        "INSERT OR REPLACE INTO lease_holder (name, owner, pid, started, namespace)"
        " VALUES (?, ?, ?, ?, ?)",
        (name, owner, _proc.pid(), _proc.started(), NAMESPACE),
    )
    return Grant(token)


def _holder_gone(conn: sqlite3.Connection, name: str, owner: str) -> bool | None:
    """The process that holds ``name``'s lease (``owner``) is known to have ended (True): a
    holder that was SIGKILLed or crashed frees the lease at once instead of one lease length
    later. False: it lives. None: it cannot be judged here, only a holder seen in this pid
    namespace can (a file shared between containers: a pid means another process there);
    any doubt keeps the lease."""
    holder = conn.execute(
        "SELECT pid, started, namespace FROM lease_holder WHERE name = ? AND owner = ?",
        (name, owner),
    ).fetchone()
    if holder is None or not NAMESPACE or holder[2] != NAMESPACE:
        return None  # cannot be judged here
    return _proc.gone(holder[0], holder[1])


def _extend(conn: sqlite3.Connection, leases: Sequence[tuple[str, str, float]]) -> list[bool]:
    now = _now()
    return [
        conn.execute(
            "UPDATE lease SET expires = ? WHERE name = ? AND owner = ? AND boot = ?"
            " AND expires > ?",
            (now + ttl, name, owner, BOOT, now),
        ).rowcount
        == 1
        for name, owner, ttl in leases
    ]


def _release(conn: sqlite3.Connection, name: str, owner: str) -> bool:
    found = conn.execute(
        "SELECT boot, expires FROM lease WHERE name = ? AND owner = ?", (name, owner)
    ).fetchone()
    if found is None:
        return False
    conn.execute("DELETE FROM lease WHERE name = ?", (name,))
    conn.execute("DELETE FROM lease_holder WHERE name = ?", (name,))
    return bool(found[0] == BOOT and found[1] > _now())


class SqliteLockBackend:
    """``LockBackend`` in the SQLite file ``path``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.bells = path.parent / (path.name + ".bells")
        self.bells.mkdir(parents=True, exist_ok=True)
        self.db = _open_db(path)

    def bell(self, name: str) -> Path:
        return self.bells / hashlib.sha256(name.encode()).hexdigest()[:32]

    def try_acquire(self, name: str, owner: str, ttl: float, queue: bool = False) -> Grant:
        return _write(self.db, lambda c: _acquire(c, name, owner, ttl))

    def extend(self, leases: Sequence[tuple[str, str, float]]) -> list[bool]:
        return _write(self.db, lambda c: _extend(c, leases))

    def release(self, name: str, owner: str) -> bool:
        released = _write(self.db, lambda c: _release(c, name, owner))
        ring(self.bell(name))
        return released

    def listen(self, name: str) -> FifoListener:
        return FifoListener(self.bell(name))

    def close(self) -> None:
        self.db.close()


class AsyncSqliteLockBackend:
    """``AsyncLockBackend`` over ``SqliteLockBackend``: steps run in worker threads, waits on
    the event loop."""

    def __init__(self, path: Path) -> None:
        self.sync = SqliteLockBackend(path)

    async def try_acquire(self, name: str, owner: str, ttl: float, queue: bool = False) -> Grant:
        return await asyncio.to_thread(self.sync.try_acquire, name, owner, ttl)

    async def extend(self, leases: Sequence[tuple[str, str, float]]) -> list[bool]:
        return await asyncio.to_thread(self.sync.extend, leases)

    async def release(self, name: str, owner: str) -> bool:
        return await asyncio.to_thread(self.sync.release, name, owner)

    def listen(self, name: str) -> AsyncFifoListener:
        return AsyncFifoListener(self.sync.bell(name))

    async def close(self) -> None:
        self.sync.close()


def ring(bell: Path) -> None:
    """Wake one listener of ``bell``, if there is any."""
    try:
        fd = os.open(bell, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as exc:  # ENXIO: nobody listens; ENOENT: nobody ever did
        if exc.errno in (errno.ENXIO, errno.ENOENT):
            return
        raise
    try:
        with contextlib.suppress(BlockingIOError):  # full: plenty of wake-ups already queued
            os.write(fd, b"\0")
    finally:
        os.close(fd)


def _open_bell(bell: Path) -> int:
    with contextlib.suppress(FileExistsError):
        os.mkfifo(bell, 0o600)
    return os.open(bell, os.O_RDWR | os.O_NONBLOCK)


def _take_one(fd: int) -> None:
    """Take one wake-up, unless another listener took it first."""
    with contextlib.suppress(BlockingIOError):
        os.read(fd, 1)


class FifoListener:
    def __init__(self, bell: Path) -> None:
        self.fd = _open_bell(bell)
        self._poll = select.poll()
        self._poll.register(self.fd, select.POLLIN)

    def wait(self, timeout: float) -> None:
        if timeout > 0 and self._poll.poll(min(timeout, MAX_WAIT) * 1000):
            _take_one(self.fd)

    def close(self) -> None:
        os.close(self.fd)


class AsyncFifoListener:
    def __init__(self, bell: Path) -> None:
        self.fd = _open_bell(bell)

    async def wait(self, timeout: float) -> None:
        if timeout <= 0:
            return
        timeout = min(timeout, MAX_WAIT)
        loop = asyncio.get_running_loop()
        ready = loop.create_future()

        def wake() -> None:
            if not ready.done():
                ready.set_result(None)

        loop.add_reader(self.fd, wake)
        try:
            async with asyncio.timeout(timeout):
                await ready
        except TimeoutError:
            return
        finally:
            loop.remove_reader(self.fd)
        _take_one(self.fd)

    def close(self) -> None:
        os.close(self.fd)


class SqliteFence:
    """``Fence`` in the SQLite file ``path`` (may be the lock backend's file)."""

    def __init__(self, path: Path) -> None:
        self.db = _open_db(path)

    def _set(self, resource: str, token: int, value: bytes | None, store: bool) -> None:
        check_name(resource, "resource name")

        def step(conn: sqlite3.Connection) -> bool:
            row = conn.execute("SELECT token FROM fence WHERE resource = ?", (resource,))
            top = row.fetchone()
            if top is not None and token < top[0]:
                return False
            if top is None:
                conn.execute(
                    "INSERT INTO fence (resource, token, value) VALUES (?, ?, ?)",
                    (resource, token, value),
                )
            elif store:
                conn.execute(
                    "UPDATE fence SET token = ?, value = ? WHERE resource = ?",
                    (token, value, resource),
                )
            else:
                conn.execute("UPDATE fence SET token = ? WHERE resource = ?", (token, resource))
            return True

        if not _write(self.db, step):
            raise StaleToken(f"fencing token {token} for {resource!r} is older than one seen")

    def admit(self, resource: str, token: int) -> None:
        self._set(resource, token, None, store=False)

    def write(self, resource: str, token: int, value: bytes) -> None:
        self._set(resource, token, value, store=True)

    def read(self, resource: str) -> tuple[int, bytes | None]:
        try:
            rows = self.db.query("SELECT token, value FROM fence WHERE resource = ?", (resource,))
        except StorageError as exc:
            raise GuardUnavailable(f"fence store {self.db.path}: {exc.message}") from exc
        return (int(rows[0][0]), rows[0][1]) if rows else (0, None)

    def close(self) -> None:
        self.db.close()
