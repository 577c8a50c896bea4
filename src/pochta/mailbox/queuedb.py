"""The incoming queue on disk: SQLite files under ``<data_dir>/queue``, one per server process.

Each ``pochta serve`` process owns one *slot*: ``queue/<n>.sqlite3``, held through an
exclusive ``flock`` of ``queue/<n>.lock`` for as long as the process lives (the kernel lets go
of it when the process dies, however it dies). A process takes the lowest free slot; a slot
whose process is gone and that still holds letters is *adopted* by a live process (its lock
taken), which delivers them and lets it go once it is empty. So ``serve --processes N`` has N
queues, and a letter a dead process left is delivered by whichever process comes first.

Beside the ``flock`` a server holds an open file description lock (``F_OFD_SETLK``, a write
lock) of the same file: that one tells a live server's slot without taking any lock
(:func:`owned`, ``F_OFD_GETLK``; ``pochta queue`` reads the slots so). A command holds the
``flock`` of a free slot for a moment only when it must (``pochta queue drop`` of a letter
waiting there: no server may adopt the slot meanwhile), with an OFD *read* lock beside it that
tells it is a command's (taken before the ``flock``, let go of after it); a server that finds
a slot's ``flock`` taken so tries it again for up to ``COMMAND_SECONDS`` before it passes on,
so a command never makes a starting server take another slot, nor an adoption wait for its
next round. A ``flock`` held with no OFD lock beside it is a server of an older pochta (or a
server taking or letting go of the slot this moment): passed on after ``SETTLE_SECONDS``, not
waited for ``COMMAND_SECONDS`` at each start and adoption round.

A letter of at most ``inline`` bytes is kept in its row (one write: the row's commit is its
fsync, and letters committed together share it: :mod:`pochta.sqlitedb`'s group commit). A
bigger one (the SMTP server spooled it to a file) is moved into ``queue/files/`` under the
slot's name, made durable there (bytes and name; one ``syncfs`` shared by the letters that end
together where Linux reports writeback errors, else ``fsync`` of the file and the directory)
before its row is written. The row holds the entry's record (:mod:`pochta.mailbox.queue`),
the letter (or NULL), how many tries failed and when the next is due.

A record that cannot be read (a damaged row; a big letter's file missing or cut short) is
moved aside: the file to ``queue/aside/`` (made durable there first), then the row to the
``aside`` table, with an error in the log, and never tried again (no crash loop). A slot's
database that SQLite cannot open is renamed aside the same way and a new one made (only when
SQLite finds it damaged or not a database: any other failure to open it is raised, and its
letters stay).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import sqlite3
import struct
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from pochta import metrics
from pochta.blobs.nodes.groupsync import GroupSync, fsync_path, syncfs_of
from pochta.errors import ConfigError, StorageError
from pochta.mailbox.queue import BadRecord, Entry, decode, encode
from pochta.sqlitedb import SQLiteDatabase
from pochta.types import Clock

log = logging.getLogger("pochta.queue")

SCHEMA = """
CREATE TABLE IF NOT EXISTS queue (
    id TEXT PRIMARY KEY,
    record BLOB NOT NULL,
    letter BLOB,
    size INTEGER NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    next_try REAL NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS queue_due ON queue (next_try);
CREATE TABLE IF NOT EXISTS aside (
    id TEXT NOT NULL,
    record BLOB,
    letter BLOB,
    why TEXT NOT NULL,
    at REAL NOT NULL
);
"""

HELD = float("inf")
"""``next_try`` of an entry that is kept but no longer tried (its letter can never be
delivered as it is; an operator looks at it)."""


@dataclass(frozen=True, slots=True)
class Due:
    """An entry due for a try: its record read back, its letter (bytes, or the file they are
    in), the slot it is in and how many tries failed."""

    entry: Entry
    letter: bytes | Path
    slot: int
    attempts: int


class Slot:
    """One slot's database and lock (see the module)."""

    def __init__(self, root: Path, n: int, lock_fd: int) -> None:
        self.root = root
        self.n = n
        self._lock_fd = lock_fd
        self.replaced = False  # its database was unreadable: moved aside, a new one made
        try:
            self.db = self._open(root / f"{n}.sqlite3")
        except BaseException:  # the slot's lock let go of: a later try may take it again
            self._unlock()
            raise

    def _open(self, path: Path) -> SQLiteDatabase:
        try:
            db = SQLiteDatabase(path, SCHEMA, synchronous="full")
            try:
                db.query("SELECT count(*), sum(size) FROM queue")  # every row's page
            except StorageError:
                db.close()
                raise
            return db
        except (ConfigError, StorageError) as exc:
            if not _damaged(exc):  # a failure that passes (no file handle left, I/O): the
                raise  # letters stay; the start fails, an adoption is tried again later
            aside = path.with_name(f"{path.name}.unreadable-{int(time.time())}")
            log.error("queue slot %d cannot be read (%s): moved aside as %s", self.n, exc, aside)
            for suffix in ("", "-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    Path(f"{path}{suffix}").rename(f"{aside}{suffix}")
            self.replaced = True
            return SQLiteDatabase(path, SCHEMA, synchronous="full")

    def file(self, queue_id: str) -> Path:
        return self.root / "files" / f"{self.n}-{queue_id}.letter"

    def close(self) -> None:
        self.db.close()
        self._unlock()

    def _unlock(self) -> None:
        """The OFD lock first, the ``flock`` after (as the kernel does when the process
        dies): whoever takes the ``flock`` next finds the OFD lock free and takes it too."""
        with contextlib.suppress(OSError):
            unlock = struct.pack(_FLOCK, fcntl.F_UNLCK, 0, 0, 0, 0)
            fcntl.fcntl(self._lock_fd, fcntl.F_OFD_SETLK, unlock)
        with contextlib.suppress(OSError):
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
        os.close(self._lock_fd)


def _damaged(exc: BaseException) -> bool:
    """Whether SQLite found the file damaged or not a database (then it is moved aside);
    any other failure (EMFILE, EIO, a lock) may pass, and must not lose the letters."""
    cause = exc.__cause__
    code = getattr(cause, "sqlite_errorcode", None)
    return isinstance(code, int) and code & 0xFF in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)


COMMAND_SECONDS = 2.0  # how long a slot whose flock a command holds is tried again
SETTLE_SECONDS = 0.05  # ... and one whose flock is held with no OFD lock (see the module)
_FLOCK = "hhqqi4x"  # struct flock: l_type, l_whence, l_start, l_len, l_pid (Linux, LP64)


def _try_lock(root: Path, n: int) -> int | None:
    """Slot ``n``'s locks (the ``flock``, then the OFD lock that tells it is a server's), or
    None when its ``flock`` is held."""
    fd = os.open(root / f"{n}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    try:
        fcntl.fcntl(fd, fcntl.F_OFD_SETLK, struct.pack(_FLOCK, fcntl.F_WRLCK, 0, 0, 0, 0))
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EACCES):  # a command's read lock: it is taking
            fcntl.flock(fd, fcntl.LOCK_UN)  # or letting go of the slot (see command_lock)
            os.close(fd)
            return None
        # no OFD locks here: commands then see it as free
    return fd


def _holder(root: Path, n: int) -> int:
    """The OFD lock held on slot ``n``'s lock file, read without taking any lock
    (``F_OFD_GETLK``): ``F_WRLCK`` a server's, ``F_RDLCK`` a command's, ``F_UNLCK`` none."""
    try:
        fd = os.open(root / f"{n}.lock", os.O_RDONLY)
    except FileNotFoundError:
        return fcntl.F_UNLCK  # never locked (a queue restored from a backup)
    try:
        query = struct.pack(_FLOCK, fcntl.F_WRLCK, 0, 0, 0, 0)
        got = fcntl.fcntl(fd, fcntl.F_OFD_GETLK, query)
    except OSError:
        return fcntl.F_WRLCK  # cannot tell: as if a server held it (nothing dropped under it)
    finally:
        os.close(fd)
    kind: int = struct.unpack(_FLOCK, got)[0]
    return kind


def owned(root: Path, n: int) -> bool:
    """Whether a server holds slot ``n``, read without taking any lock (``F_OFD_GETLK``):
    nobody starting or adopting meanwhile ever finds the slot taken by the question."""
    return _holder(root, n) == fcntl.F_WRLCK


def command_lock(fd: int) -> bool:
    """The OFD read lock a command takes on a slot's lock file (``fd``) before its ``flock``
    and lets go of after it (:func:`command_unlock`): a server finding the ``flock`` taken
    waits for a command, not for an older server, and one that gets the ``flock`` meanwhile
    gives it back (:func:`_try_lock`). False: a server holds the slot."""
    try:
        fcntl.fcntl(fd, fcntl.F_OFD_SETLK, struct.pack(_FLOCK, fcntl.F_RDLCK, 0, 0, 0, 0))
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EACCES):
            return False
        # no OFD locks here: a server waits less for the command
    return True


def command_unlock(fd: int) -> None:
    with contextlib.suppress(OSError):
        fcntl.fcntl(fd, fcntl.F_OFD_SETLK, struct.pack(_FLOCK, fcntl.F_UNLCK, 0, 0, 0, 0))


def _take(root: Path, n: int, clock: Callable[[], float] = time.monotonic) -> int | None:
    """Slot ``n``'s locks; when a command holds its ``flock`` for a moment (told by its OFD
    read lock), tried again for up to ``COMMAND_SECONDS``; when nobody holds an OFD lock
    beside the ``flock`` (an older pochta's server, or a lock being taken or let go of this
    moment), for ``SETTLE_SECONDS``. None: a server owns it, or it was not let go in time."""
    start = clock()
    while (fd := _try_lock(root, n)) is None:
        holder, waited = _holder(root, n), clock() - start
        if holder == fcntl.F_WRLCK or waited >= COMMAND_SECONDS:
            return None
        if holder == fcntl.F_UNLCK and waited >= SETTLE_SECONDS:
            return None
        time.sleep(0.01)
    return fd


def slots(root: Path) -> list[int]:
    """The slots that have a database under ``root`` (the queue directory), in order."""
    found = []
    if root.is_dir():
        for path in root.glob("*.sqlite3"):
            with contextlib.suppress(ValueError):
                found.append(int(path.stem))
    return sorted(found)


class QueueStore:
    """This process's slot, and the slots it adopted (see the module). Thread-safe."""

    def __init__(self, root: Path, *, inline: int, clock: Clock = time.time) -> None:
        self.root = root
        self.inline = inline
        self._clock = clock
        for sub in ("files", "aside"):
            (root / sub).mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        # done, their rows not deleted yet: id -> (slot, whether the letter is in a file)
        self._finished: dict[str, tuple[int, bool]] = {}
        # this process's slot's rows being written, counted once written (put), and rows
        # being held or moved aside, counted until then: :meth:`recount` leaves both to them
        self._writing: set[str] = set()
        self._leaving: dict[str, int] = {}  # id -> size
        self._sync: GroupSync | None = syncfs_of(root)
        n = 0
        while (fd := _take(root, n)) is None:
            n += 1
        self.own = Slot(root, n, fd)
        self._slots: dict[int, Slot] = {n: self.own}
        self._drop_orphans(self.own)
        self.letters, self.bytes = self._count(self.own)
        metrics.queue_depth(self.letters, self.bytes)

    # -- writing -------------------------------------------------------------------------
    def put(self, entry: Entry, letter: bytes | Path) -> None:
        """``entry`` and its letter made durable in this process's slot (bytes in its row, a
        file moved into the queue's ``files``); only then may the letter be answered 250."""
        record = encode(entry)
        blob: bytes | None
        if isinstance(letter, Path):
            target = self.own.file(entry.id)
            letter.rename(target)
            try:
                self._durable(target)
            except BaseException:
                with contextlib.suppress(OSError):
                    target.unlink()
                raise
            blob = None
        else:
            blob = letter

        gone = self._finished_in(self.own.n)

        def op(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO queue (id, record, letter, size) VALUES (?, ?, ?, ?)",
                (entry.id, record, blob, entry.size),
            ).close()
            _delete(conn, gone)

        with self._lock:
            self._writing.add(entry.id)
        try:
            self.own.db.write(op)
        except BaseException:
            with self._lock:
                self._writing.discard(entry.id)
            if blob is None:
                with contextlib.suppress(OSError):
                    self.own.file(entry.id).unlink()
            raise
        with self._lock:
            self._writing.discard(entry.id)
            self.letters += 1
            self.bytes += entry.size
            metrics.queue_depth(self.letters, self.bytes)
        self._removed(gone)

    def _durable(self, path: Path) -> None:
        if self._sync is not None:
            self._sync.wait()  # the file's bytes and its name in the directory, shared
            return
        fsync_path(path)
        fsync_path(path.parent)

    def done(self, due: Due, *, wait: bool = True) -> bool:
        """The entry was delivered (or dropped): its row is removed with the next letter's
        (one commit for both) or by :meth:`flush`, its file after that. Until then it is
        never read back here; after a crash it may be, and the index knows it delivered.
        ``wait=False`` (the runner's loop): only if the store's lock is free at once, which
        :meth:`recount` holds while it reads every row of the slot; False: nothing done."""
        if not self._lock.acquire(blocking=wait):
            return False
        try:  # one hold: a recount sees the entry both done and counted out, or neither
            again = due.entry.id in self._finished  # a stale read of the queue tried it too
            self._finished[due.entry.id] = (due.slot, isinstance(due.letter, Path))
            if not again and due.slot == self.own.n:
                self.letters -= 1
                self.bytes -= due.entry.size
                metrics.queue_depth(self.letters, self.bytes)
        finally:
            self._lock.release()
        return True

    def flush(self) -> None:
        """Remove the rows (and files) of the entries done since the last letter queued."""
        for n in {slot for slot, _ in list(self._finished.values())}:
            gone = self._finished_in(n)
            if n in self._slots and gone:
                self._slots[n].db.write(lambda conn, gone=gone: _delete(conn, gone))  # type: ignore[misc]
                self._removed(gone)

    def pending_removals(self) -> int:
        return len(self._finished)

    def _finished_in(self, n: int) -> list[str]:
        with self._lock:
            return [i for i, (slot, _) in self._finished.items() if slot == n]

    def _removed(self, gone: list[str]) -> None:
        """The rows of ``gone`` are deleted: their files go, and they are forgotten."""
        for queue_id in gone:
            with self._lock:
                slot, in_file = self._finished.pop(queue_id, (0, False))
            if in_file and slot in self._slots:
                with contextlib.suppress(FileNotFoundError):
                    self._slots[slot].file(queue_id).unlink()

    def retry(self, due: Due, at: float) -> None:
        """The try failed: one more failure counted, the next try at ``at`` (HELD: never; a
        held letter no longer counts toward the queue's limits, so that letters held cannot
        stop the mail; the spool's disk reserve still bounds them)."""

        def op(conn: sqlite3.Connection) -> None:
            conn.execute(
                "UPDATE queue SET attempts = attempts + 1, next_try = ? WHERE id = ?",
                (at, due.entry.id),
            ).close()

        if at == HELD:
            self._leave(
                due.slot, due.entry.id, due.entry.size, lambda: self._slots[due.slot].db.write(op)
            )
        else:
            self._slots[due.slot].db.write(op)

    def _leave(self, slot: int, queue_id: str, size: int, write: Callable[[], None]) -> None:
        """``write`` takes the entry out of the count (held, or moved aside); it is counted
        out once written (:meth:`recount` meanwhile counts it as this count does)."""
        own = slot == self.own.n
        if own:
            with self._lock:
                self._leaving[queue_id] = size
        try:
            write()
        except BaseException:
            with self._lock:
                self._leaving.pop(queue_id, None)
            raise
        with self._lock:  # out of both at once: a recount sees it in one of them
            self._leaving.pop(queue_id, None)
            if own:
                self.letters -= 1
                self.bytes -= size
                metrics.queue_depth(self.letters, self.bytes)

    # -- reading -------------------------------------------------------------------------
    def due(self, now: float, limit: int, skip: set[str]) -> list[Due]:
        """Up to ``limit`` entries whose next try is due by ``now``, the oldest tries first,
        none of ``skip`` (being tried); the unreadable ones are moved aside on the way."""
        out: list[Due] = []
        for slot in list(self._slots.values()):
            ids = slot.db.query(
                "SELECT id FROM queue WHERE next_try <= ? ORDER BY next_try LIMIT ?",
                (now, limit + len(skip) + len(self._finished)),
            )
            for (queue_id,) in ids:  # the letters of those skipped are not read
                if queue_id in skip or queue_id in self._finished:
                    continue
                rows = slot.db.query(
                    "SELECT record, letter, size, attempts FROM queue WHERE id = ?", (queue_id,)
                )
                if not rows:
                    continue  # removed meanwhile
                ((record, blob, size, attempts),) = rows
                due = self._read(slot, queue_id, record, blob, size, attempts)
                if due is not None:
                    out.append(due)
                if len(out) >= limit:
                    return out
        return out

    def next_due(self, skip: set[str]) -> float | None:
        """When the earliest entry not in ``skip`` is due (None: none, or all held)."""
        times = []
        for slot in list(self._slots.values()):
            rows = slot.db.query(
                "SELECT id, next_try FROM queue WHERE next_try < 1e300 ORDER BY next_try LIMIT ?",
                (len(skip) + len(self._finished) + 1,),
            )
            times += [float(t) for i, t in rows if i not in skip and i not in self._finished][:1]
        return min(times) if times else None

    def _read(
        self, slot: Slot, queue_id: str, record: bytes, blob: bytes | None, size: int, attempts: int
    ) -> Due | None:
        try:
            entry = decode(bytes(record))
            if entry.id != queue_id:
                raise BadRecord(f"the record is of {entry.id}, its row of {queue_id}")
            letter: bytes | Path
            if blob is None:
                letter = slot.file(queue_id)
                try:
                    have = letter.stat().st_size
                except FileNotFoundError:
                    if (self.root / "aside" / letter.name).exists():
                        why = "its move aside was cut short: the letter's file is aside already"
                        raise BadRecord(why) from None
                    raise BadRecord("the letter's file is missing") from None
                if have != entry.size:
                    raise BadRecord(f"the letter's file has {have} bytes, not {entry.size}")
            else:
                letter = bytes(blob)
                if len(letter) != entry.size:
                    raise BadRecord(f"the letter has {len(letter)} bytes, not {entry.size}")
        except BadRecord as exc:
            self._aside(slot, queue_id, record, blob, size, str(exc))
            return None
        return Due(entry, letter, slot.n, attempts)

    def _aside(
        self, slot: Slot, queue_id: str, record: bytes, blob: bytes | None, size: int, why: str
    ) -> None:
        """The file first, durably, then the row: a crash between the two leaves the row in
        the queue and its file aside (the next read finds the file missing and moves the row
        aside, the file kept). The other order lost the file: a row gone from the queue
        makes its file an orphan that the next start deletes."""
        log.error("queue entry %r cannot be read (%s): moved aside, not delivered", queue_id, why)
        if blob is None:
            self._file_aside(slot.file(queue_id))

        def op(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO aside (id, record, letter, why, at) VALUES (?, ?, ?, ?, ?)",
                (queue_id, record, blob, why, self._clock()),
            ).close()
            conn.execute("DELETE FROM queue WHERE id = ?", (queue_id,)).close()

        self._leave(slot.n, queue_id, size, lambda: slot.db.write(op))

    def _file_aside(self, path: Path) -> None:
        """``path`` renamed into ``aside/``, its new name durable (before the row may go).
        A file that cannot be moved stays where it is, kept by its ``aside`` row (see
        :meth:`_drop_orphans`)."""
        try:
            path.rename(self.root / "aside" / path.name)
        except FileNotFoundError:
            return  # missing (the reason it is moved aside), or moved by a try cut short
        except OSError as exc:
            log.error("queue file %s could not be moved aside (%s): kept there", path, exc)
            return
        try:
            fsync_path(self.root / "aside")
        except OSError as exc:  # its row still goes aside: it keeps the file either way
            log.error("queue directory aside/ could not be made durable: %s", exc)

    # -- slots ---------------------------------------------------------------------------
    def adopt(self) -> int:
        """Take the slots of processes that are gone and still hold letters (their letters
        are then tried here); let go of adopted slots that are empty. How many letters the
        newly adopted slots hold."""
        found = 0
        self.flush()  # an adopted slot's rows of letters done are gone before it is counted
        # by its database, not its lock file: a queue restored from a backup has no lock files
        for n in slots(self.root):
            if n in self._slots:
                continue
            fd = _take(self.root, n)
            if fd is None:
                continue  # its process lives
            slot = Slot(self.root, n, fd)
            self._drop_orphans(slot)
            letters, _ = self._count(slot)
            if not letters:
                slot.close()
                continue
            log.info("queue slot %d of a process that is gone: %d letter(s) taken over", n, letters)
            self._slots[n] = slot
            found += letters
        for n, slot in list(self._slots.items()):
            if n != self.own.n and not self._count(slot)[0]:
                del self._slots[n]
                slot.close()
        return found

    def recount(self) -> None:
        """Count this process's slot again (a command changed it: ``pochta queue retry``
        makes held letters count; see :mod:`pochta.mailbox.queueadmin`)."""
        self.flush()
        with self._lock:  # the rows as the count sees them (each change counted with its row)
            finished = {i for i, (slot, _) in self._finished.items() if slot == self.own.n}
            skip = finished | self._writing | self._leaving.keys()
            rows = self.own.db.query("SELECT id, size FROM queue WHERE next_try < 1e300")
            kept = [int(size) for queue_id, size in rows if queue_id not in skip]
            self.letters = len(kept) + len(self._leaving)
            self.bytes = sum(kept) + sum(self._leaving.values())
            metrics.queue_depth(self.letters, self.bytes)

    def oldest(self) -> float | None:
        """When the oldest letter waiting in this process's slots (held ones left out) was
        queued (None: none). Rows are read in the order they were written (rowid), so the
        first one not held and not done is it."""
        found = []
        for slot in list(self._slots.values()):
            for queue_id, record in slot.db.query(
                "SELECT id, record FROM queue WHERE next_try < 1e300 ORDER BY rowid LIMIT ?",
                (len(self._finished) + 1,),
            ):
                if queue_id in self._finished:
                    continue
                with contextlib.suppress(BadRecord):
                    found.append(decode(bytes(record)).at)
                break
        return min(found) if found else None

    def _count(self, slot: Slot) -> tuple[int, int]:
        ((letters, size),) = slot.db.query(
            "SELECT count(*), coalesce(sum(size), 0) FROM queue WHERE next_try < 1e300"
        )  # held letters are not counted (see retry)
        return int(letters), int(size)

    def _drop_orphans(self, slot: Slot) -> None:
        """Files of a slot's letters whose row was never written (the process died between
        the two: the letter was not answered 250). A file whose row is aside is kept (it
        could not be moved aside). A slot whose database was unreadable (moved aside, a new
        one made) has its rows in the old one: its files go aside with it, none is deleted.
        Only for a slot this process has just locked: nobody else writes into it."""
        rows = slot.db.query("SELECT id FROM queue UNION SELECT id FROM aside")
        names = {slot.file(r[0]).name for r in rows}
        for path in (self.root / "files").glob(f"{slot.n}-*.letter"):
            if path.name in names:
                continue
            if slot.replaced:
                self._file_aside(path)
                continue
            with contextlib.suppress(OSError):
                path.unlink()

    def entries(self) -> Iterator[tuple[str, int, float]]:
        """Every entry of this process's slots not done: (id, failed tries, next try)."""
        for slot in list(self._slots.values()):
            for row in slot.db.query("SELECT id, attempts, next_try FROM queue ORDER BY id"):
                if row[0] not in self._finished:
                    yield row

    def close(self) -> None:
        with contextlib.suppress(Exception):  # left: read back at the next start, known done
            self.flush()
        for slot in self._slots.values():
            slot.close()
        self._slots.clear()


def _delete(conn: sqlite3.Connection, ids: list[str]) -> None:
    conn.executemany("DELETE FROM queue WHERE id = ?", [(i,) for i in ids]).close()
