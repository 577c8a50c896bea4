"""The incoming queue seen from outside its servers: ``pochta queue`` and ``pochta backup``.

A command reads and changes the slots' SQLite files (:mod:`pochta.mailbox.queuedb`) beside
the server processes that own them, as every other command reaches a running server's data
(SQLite's own locks order the writes). It lists read-only (each slot read without creating a
file: :func:`_read`; its server told by :func:`~pochta.mailbox.queuedb.owned`, which takes no
lock) and takes a slot's lock only to drop a waiting letter of a free slot, for the moment of
the removal (a server starting or adopting then waits for it: see
:mod:`pochta.mailbox.queuedb`). What it may change in a slot is bounded so that the runner's
state stays true:

- ``retry``: an entry's next try is made due now (held or waiting). The runner only learns
  of rows from its reads of the queue, so the command then touches ``queue/changed``; each
  runner looks at that file's time every ``CHANGES_SECONDS`` and, when it moved, counts its
  slot again, adopts the slots of processes that are gone (a held letter of a dead process is
  delivered by a live one once it is due) and reads the queue.
- ``drop``: a held entry (never tried by its runner) is removed with its file, no lock taken
  (the removal checks, in its transaction, that it is held still); an entry that waits for a
  try is removed only when no process owns its slot (the command takes the slot's lock for the
  time of the removal, so no server adopts it meanwhile). Removing a letter a
  runner may be delivering at that moment would not stop the delivery, and the file might go
  under its read: refused, with what to do instead.

``copy_queue`` is the backup's: each slot's database through SQLite's online backup API, then
the files its rows name (rows whose file was removed meanwhile were done: left out).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pochta.blobs.nodes.groupsync import fsync_path
from pochta.errors import InvalidInput, NotFound, StorageError
from pochta.mailbox.queue import BadRecord, Entry, decode, valid_id
from pochta.mailbox.queuedb import HELD, command_lock, command_unlock, owned, slots

CHANGES = "changed"  # the file a command touches after it changed a slot
BUSY_SECONDS = 30.0  # how long a command waits for a slot's write lock
READ_SECONDS = 2.0  # how long a listing asks again for a slot caught opening (see _read)


@dataclass(frozen=True, slots=True)
class Listed:
    """One entry of the queue as a command sees it: the slot it is in, whether that slot's
    process lives, its record (None: unreadable; its runner moves it aside at its next read),
    size, failed tries and next try (HELD: never)."""

    id: str
    slot: int
    live: bool
    entry: Entry | None
    size: int
    attempts: int
    next_try: float

    @property
    def held(self) -> bool:
        return self.next_try >= HELD

    def as_dict(self) -> dict[str, object]:
        e = self.entry
        return {
            "id": self.id,
            "slot": self.slot,
            "live": self.live,
            "held": self.held,
            "size": self.size,
            "attempts": self.attempts,
            "next_try": None if self.held else self.next_try,
            "queued_at": None if e is None else e.at,
            "sender": None if e is None else e.sender,
            "recipients": None if e is None else list(e.recipients),
            "client_ip": None if e is None else e.ip,
        }


@contextlib.contextmanager
def _connect(path: Path, *, readonly: str = "") -> Iterator[sqlite3.Connection]:
    """A connection to a slot's database; ``readonly``: the URI's parameters of a read-only
    one (see :func:`_read`)."""
    try:
        if readonly:
            uri = f"{path.resolve().as_uri()}?{readonly}"
            conn = sqlite3.connect(uri, uri=True, timeout=BUSY_SECONDS, isolation_level=None)
        else:
            conn = sqlite3.connect(path, timeout=BUSY_SECONDS, isolation_level=None)
    except sqlite3.Error as exc:
        raise StorageError(f"queue slot {path.name} cannot be opened: {exc}") from None
    try:
        yield conn
    except sqlite3.Error as exc:
        raise StorageError(f"queue slot {path.name}: {exc}") from None
    finally:
        conn.close()


@contextlib.contextmanager
def _free_slot(root: Path, n: int, held: bool = False) -> Iterator[bool]:
    """Whether no process owns slot ``n``; while it is free, this command holds its lock (no
    server adopts it meanwhile). ``held``: the letter is held (no runner tries it, adopted or
    not): no lock is taken, and the answer is :func:`owned`'s."""
    if held:
        yield not owned(root, n)
        return
    fd = os.open(root / f"{n}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        _keep_owner(fd, root)
        if not command_lock(fd):  # before the flock, let go of after it: a server starting
            yield False  # meanwhile sees a command's lock and waits for it
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            command_unlock(fd)
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            command_unlock(fd)
    finally:
        os.close(fd)


def _stamp(path: Path) -> tuple[int, int, int]:
    st = os.stat(path)
    return st.st_ino, st.st_size, st.st_mtime_ns


def _read(path: Path, sql: str) -> list[Any]:
    """The rows of ``sql`` in a slot's database, read without creating a file or changing one
    but SQLite's shared-memory index (``-shm``, which every reader writes). A WAL database
    opened ``mode=ro`` creates its ``-wal`` and ``-shm`` when they are missing, owned by the
    command's user: a server running as another user could then not open its slot. So:

    - both there (a server has the slot open, or one was killed): ``mode=ro``, which opens them;
    - no ``-wal`` (no connection has the slot open; the last one to close copied the WAL into
      the file and removed it): the file alone holds every commit, read ``immutable`` (no WAL,
      no lock, nothing created), and the read counts only if the file did not change under it
      and no ``-wal`` appeared meanwhile (a server opening the slot): else read again;
    - a ``-wal`` without its ``-shm`` (a server opening the slot this moment): asked again for
      up to ``READ_SECONDS``, then refused with what to do.

    (A server closing the slot between the look and the ``mode=ro`` open is the one moment
    SQLite may still create the two files; as root it gives them the database's owner.)"""
    wal, shm = Path(f"{path}-wal"), Path(f"{path}-shm")
    deadline = time.monotonic() + READ_SECONDS
    try:
        while True:
            if wal.exists() and shm.exists():
                with _connect(path, readonly="mode=ro") as conn:
                    return conn.execute(sql).fetchall()
            if not wal.exists():
                before = _stamp(path)
                rows: list[Any] | None
                try:
                    with _connect(path, readonly="mode=ro&immutable=1") as conn:
                        rows = conn.execute(sql).fetchall()
                except StorageError:  # a page changed under the read: read again
                    if not wal.exists() and _stamp(path) == before:
                        raise
                    rows = None
                if rows is not None and not wal.exists() and _stamp(path) == before:
                    return rows
            if time.monotonic() >= deadline:
                raise StorageError(
                    f"queue slot {path.name}: {wal.name} is there without {shm.name}, which"
                    " reading it would create, owned by this command's user; start the server"
                    " on this data directory (it opens the slot), or run the command as the"
                    f" slot's owner (uid {path.stat().st_uid})"
                )
            time.sleep(0.01)
    except OSError as exc:
        raise StorageError(f"queue slot {path.name} cannot be read: {exc}") from exc


def listing(root: Path) -> list[Listed]:
    """Every entry of every slot, the oldest first; read-only (no file created: see
    :func:`_read`), no lock taken."""
    out = []
    for n in slots(root):
        live = owned(root, n)
        rows = _read(
            root / f"{n}.sqlite3",
            "SELECT id, record, size, attempts, next_try FROM queue ORDER BY rowid",
        )
        for queue_id, record, size, attempts, next_try in rows:
            entry: Entry | None
            try:
                entry = decode(bytes(record))
            except BadRecord:
                entry = None
            out.append(Listed(queue_id, n, live, entry, size, attempts, float(next_try)))
    return sorted(out, key=lambda x: (x.entry is None, x.entry.at if x.entry else 0.0))


def find(root: Path, queue_id: str) -> Listed:
    return _found(listing(root), queue_id)


def _found(items: list[Listed], queue_id: str) -> Listed:
    if not valid_id(queue_id):
        raise InvalidInput(
            f"not a queue id: {queue_id!r} (16 hex digits, as in '250 ... queued as ID')"
        )
    for item in items:
        if item.id == queue_id:
            return item
    raise NotFound(
        f"no letter {queue_id} in the incoming queue (delivered, dropped, or never queued)"
    )


def retry(root: Path, ids: list[str] | None, now: float | None = None) -> list[str]:
    """Make entries due now (``ids``; None: every entry, held or waiting); the runners are
    told. The ids made due."""
    at = time.time() if now is None else now
    wanted = None if ids is None else set(ids)
    if wanted is not None:
        items = listing(root)  # read once: clear errors before any change
        for queue_id in wanted:
            _found(items, queue_id)
    done = []
    for n in slots(root):
        with _connect(root / f"{n}.sqlite3") as conn:
            rows = [r[0] for r in conn.execute("SELECT id FROM queue").fetchall()]
            chosen = [i for i in rows if wanted is None or i in wanted]
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(
                "UPDATE queue SET next_try = ? WHERE id = ?", [(at, i) for i in chosen]
            )
            conn.execute("COMMIT")
        done += chosen
    if done:
        tell(root)
    return done


def drop(root: Path, queue_id: str) -> Listed:
    """Remove a held entry, or any entry of a slot no process owns (see the module)."""
    item = find(root, queue_id)
    with _free_slot(root, item.slot, item.held) as free:
        if not free and not item.held:
            raise InvalidInput(
                f"letter {queue_id} waits for delivery by a running server (slot {item.slot},"
                f" {item.attempts} failed tries): only held letters are dropped while their"
                " server runs; stop it first, or wait until the letter is delivered or held"
            )
        with _connect(root / f"{item.slot}.sqlite3") as conn:
            conn.execute("BEGIN IMMEDIATE")
            # held still (a retry meanwhile makes it the runner's again): as checked above.
            # Any row goes only under the slot's lock: a held letter's drop holds none, and a
            # server may have taken the slot since owned() said it was free
            locked = free and not item.held
            gone = conn.execute(
                "DELETE FROM queue WHERE id = ? AND (? OR next_try >= 1e300)", (queue_id, locked)
            ).rowcount
            conn.execute("COMMIT")
        if not gone:
            raise InvalidInput(f"letter {queue_id} changed meanwhile (retried or delivered)")
        with contextlib.suppress(FileNotFoundError):
            (root / "files" / f"{item.slot}-{queue_id}.letter").unlink()
    tell(root)
    return item


def tell(root: Path) -> None:
    """The runners read the queue again (see the module)."""
    path = root / CHANGES
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        _keep_owner(fd, root)
    finally:
        os.close(fd)
    os.utime(path)


def _keep_owner(fd: int, root: Path) -> None:
    """A file a command made in the queue's directory (a slot's lock file, ``changed``)
    given the directory's owner when the command runs as root: the server, running as that
    user, must open them after (SQLite does the same for the ``-wal`` and ``-shm`` it makes
    as root)."""
    if os.geteuid() != 0:
        return
    owner = os.stat(root)
    if os.fstat(fd).st_uid != owner.st_uid:
        os.fchown(fd, owner.st_uid, owner.st_gid)


def changed(root: Path) -> int:
    """The time ``queue/changed`` was last touched (0: never)."""
    try:
        return os.stat(root / CHANGES).st_mtime_ns
    except FileNotFoundError:
        return 0


def copy_queue(root: Path, target: Path, *, durable: bool = True) -> int:
    """A backup of the queue under ``root`` into ``target`` (made): each slot's database at
    one instant (SQLite's backup API), then the files of its rows. A row whose file is gone
    by then was done meanwhile (the file goes after its row): left out of the copy. Durable
    on return: every file copied, ``files/``, ``target`` and its name in its parent are
    fsynced (a crash after the backup said it was done leaves no torn copy); not with
    ``durable=False``, for a caller that makes the copy durable itself later (the embedded
    backup copies the queue inside its cut, which holds every SQLite file's write lock, and
    syncs the whole backup after it). How many entries were copied."""
    target.mkdir(parents=True, exist_ok=True)
    (target / "files").mkdir(exist_ok=True)
    copied = 0
    for n in slots(root):
        src = root / f"{n}.sqlite3"
        dst = target / src.name
        try:
            with (
                contextlib.closing(sqlite3.connect(src, timeout=BUSY_SECONDS)) as a,
                contextlib.closing(sqlite3.connect(dst)) as b,
            ):
                a.backup(b)
            with contextlib.closing(sqlite3.connect(dst, isolation_level=None)) as conn:
                ids = conn.execute("SELECT id FROM queue WHERE letter IS NULL").fetchall()
                for (queue_id,) in ids:
                    name = f"{n}-{queue_id}.letter"
                    try:
                        shutil.copy2(root / "files" / name, target / "files" / name)
                    except FileNotFoundError:
                        conn.execute("DELETE FROM queue WHERE id = ?", (queue_id,))
                        continue
                    if durable:
                        fsync_path(target / "files" / name)
                copied += conn.execute("SELECT count(*) FROM queue").fetchone()[0]
                conn.execute("PRAGMA journal_mode=DELETE")  # one file, no -wal beside it
            if durable:
                fsync_path(dst)
        except sqlite3.Error as exc:
            raise StorageError(f"queue slot {n} could not be copied: {exc}") from None
        except OSError as exc:
            raise StorageError(f"queue slot {n} could not be copied: {exc}") from exc
    if not durable:
        return copied
    try:
        for directory in (target / "files", target, target.parent):
            fsync_path(directory)
    except OSError as exc:
        raise StorageError(
            f"the queue's copy in {target} could not be made durable: {exc}"
        ) from exc
    return copied
