"""Group commit for a local disk: many writers share one sync of the whole filesystem.

A writer that needs its earlier writes (a file's bytes, a rename, a new directory) to survive a
crash calls :meth:`GroupSync.wait`. It returns only after a sync that *started after the call*
has finished without error, so everything the caller did before calling is on the device. While
one sync runs, every caller that arrives joins the next batch; when the running sync ends, one
of them leads the next sync for all of them (the writer queue of LevelDB, no extra thread). With
``k`` writers waiting together the disk sees one sync instead of ``k`` fsyncs of files and ``k``
of directories.

The sync is Linux's ``syncfs(2)`` on a descriptor of the disk's root, opened before any write
it must cover: it writes back every dirty page and inode of the filesystem, commits the
journal and flushes the device cache (what ``sync -f`` does), and since Linux 5.8 it reports a
writeback error that happened anywhere on the filesystem since the previous ``syncfs`` on that
descriptor. A failed sync fails every caller of its batch (none of them is acknowledged), and
every caller that was writing or waiting while it ran (the error may be of its pages); a
filesystem where ``syncfs`` cannot report errors (older kernels) or that has none (not Linux)
gets no group: :func:`syncfs_of` says None and the disk fsyncs each file and directory itself.

A write that will want the next sync can say so first (:meth:`GroupSync.after`: the FileDB's
commit of a record whose copies the last sync made durable). A sync about to start waits for
the writes so announced, at most ``hold`` seconds, so that they ride it rather than miss it by
a fraction of a millisecond and wait for the whole of the sync after it.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import platform
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

HOLD = 0.002  # s a sync about to start waits for the writes announced to it, at most


class _Batch:
    __slots__ = ("done", "error", "returning")

    def __init__(self) -> None:
        self.done = False
        self.error: OSError | None = None
        self.returning = 0  # callers that will write again once this batch's sync ended


class GroupSync:
    """Callers of :meth:`wait` share calls of ``sync`` (see the module's docstring)."""

    def __init__(self, sync: Callable[[], None], *, hold: float = HOLD) -> None:
        self._sync = sync
        self._hold = hold
        self._cond = threading.Condition(threading.Lock())
        self._next = _Batch()  # the batch that the next sync will serve
        self._running = False  # a sync runs, or its leader holds it for announced writes
        self._coming = 0  # writes announced (``after``, ``wait(returning=True)``), not waiting
        self._owed = threading.local()  # ``owed``: this thread's return is counted in _coming
        self._failures = 0  # syncs that failed so far
        self._failure: OSError | None = None  # the last one's error
        self.syncs = 0  # how many syncs ran (for tests and benchmarks)

    def wait(self, *, returning: bool = False) -> None:
        """Return once a sync that started after this call has finished; OSError when it
        failed (then nothing written before the call may be counted on). ``returning``: this
        thread will call :meth:`after` right after (the record of the copies this sync makes
        durable): from the end of this sync it counts as announced, so the next sync holds for
        it; it must then call :meth:`after` or :meth:`forgo`."""
        with self._cond:
            self._arrive()
            failures = self._failures
            self._wait(returning)
            error = self._failed_since(failures)
            if error is not None and returning:
                self._coming -= 1  # counted at the sync's end: it will not come
                self._cond.notify_all()
        if error is not None:
            raise error
        if returning:
            self._owed.owed = True

    def announce(self) -> None:
        """This thread will call :meth:`wait` or :meth:`after` soon (an upload that has begun
        writing its copies): a sync about to start holds for it (at most ``hold``) until it
        does, or calls :meth:`forgo`."""
        if not getattr(self._owed, "owed", False):
            with self._cond:
                self._coming += 1
            self._owed.owed = True

    def _arrive(self) -> None:
        """With ``_cond`` held: this thread's announcement (if any) is kept by its arrival."""
        if getattr(self._owed, "owed", False):
            self._owed.owed = False
            self._coming -= 1
            if self._running and self._coming == 0:
                self._cond.notify_all()  # a leader holding for it

    def after(self, write: Callable[[], T]) -> T:
        """Run ``write``, then :meth:`wait`; a sync about to start meanwhile waits for the
        write to end (at most ``hold`` seconds) and carries it. ``write``'s error is raised
        without a wait."""
        with self._cond:
            if getattr(self._owed, "owed", False):
                self._owed.owed = False  # announced already (``announce``, ``wait``)
            else:
                self._coming += 1
            failures = self._failures
        try:
            value = write()
        except BaseException:
            with self._cond:
                self._coming -= 1
                self._cond.notify_all()
            raise
        with self._cond:
            self._coming -= 1
            if self._running and self._coming == 0:
                self._cond.notify_all()  # a leader holding for it
            self._wait(False)
            error = self._failed_since(failures)
        if error is not None:
            raise error
        return value

    @property
    def failures(self) -> int:
        """How many syncs failed so far (read without the lock: a caller's own failure was
        counted before it was woken)."""
        return self._failures

    def _failed_since(self, failures: int) -> OSError | None:
        """With ``_cond`` held: the error to raise when a sync failed after ``_failures`` was
        ``failures`` (a sync that ran while the caller wrote or waited). syncfs reports a
        writeback error once, to the first sync that ends after it, and that sync may have
        begun before the caller's write: the pages that failed may be the caller's own,
        though the later sync it waited for found nothing to report."""
        if self._failures == failures:
            return None
        return OSError(
            errno.EIO, f"a sync that ran while this write was made failed: {self._failure}"
        )

    def quiet(self) -> bool:
        """No sync runs and no other thread has announced a write: a caller alone, for whom a
        sync of its own few files is cheaper than one of the whole filesystem."""
        mine = 1 if getattr(self._owed, "owed", False) else 0
        with self._cond:
            return not self._running and self._coming == mine

    def forgo(self) -> None:
        """After :meth:`announce` or ``wait(returning=True)``: this thread will not come (its
        upload failed, or went elsewhere); nothing when it came already."""
        if getattr(self._owed, "owed", False):
            self._owed.owed = False
            with self._cond:
                self._coming -= 1
                self._cond.notify_all()

    def _wait(self, returning: bool) -> None:
        """``wait`` with ``_cond`` held."""
        batch = self._next
        if returning:
            batch.returning += 1
        while not batch.done:
            if self._running:
                self._cond.wait()
                continue
            self._running = True
            if self._coming:  # callers arriving meanwhile join this batch (sync "running")
                deadline = time.monotonic() + self._hold
                while self._coming and (left := deadline - time.monotonic()) > 0:
                    self._cond.wait(left)
            self._next = _Batch()  # who arrives from now on needs a later sync
            error: OSError | None = None
            self._cond.release()
            try:
                self._sync()
            except OSError as exc:
                error = exc
            except BaseException as exc:  # the leader is interrupted: nobody is covered
                error = OSError(errno.EIO, f"the sync was interrupted: {exc!r}")
                raise
            finally:
                self._cond.acquire()
                self.syncs += 1
                batch.error = error
                batch.done = True
                if error is not None:
                    self._failures += 1
                    self._failure = error
                if error is None:
                    self._coming += batch.returning  # they come back for the next sync
                self._running = False
                self._cond.notify_all()
        if batch.error is not None:
            raise batch.error


def _libc_syncfs() -> Callable[[int], int] | None:
    """libc's syncfs(2) where it reports writeback errors (Linux >= 5.8), else None."""
    if platform.system() != "Linux":
        return None
    try:
        major, minor = (int(p) for p in platform.release().split(".")[:2])
    except ValueError:
        return None
    if (major, minor) < (5, 8):
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).syncfs
    except (OSError, AttributeError):
        return None
    fn.argtypes = (ctypes.c_int,)
    fn.restype = ctypes.c_int
    call: Callable[[int], int] = fn
    return call


_syncfs = _libc_syncfs()


_groups: weakref.WeakValueDictionary[int, GroupSync] = weakref.WeakValueDictionary()
_groups_lock = threading.Lock()


def fsync_path(path: Path, *, data_only: bool = False) -> None:
    """fsync (``data_only``: fdatasync) of a file or a directory named by ``path``."""
    fd = os.open(path, os.O_RDONLY)
    try:
        (os.fdatasync if data_only else os.fsync)(fd)
    finally:
        os.close(fd)


def syncfs_of(root: Path) -> GroupSync | None:
    """The group sync of the filesystem holding ``root`` (which must exist), shared by every
    disk on that filesystem while any of them uses it (one syncfs covers all of them); None
    where syncfs cannot be trusted. Its descriptor is closed when the group is collected."""
    if _syncfs is None:
        return None
    syncfs = _syncfs
    with _groups_lock:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            group = _groups.get(os.fstat(fd).st_dev)
        except OSError:
            os.close(fd)
            raise
        if group is not None:
            os.close(fd)
            return group
        device = os.fstat(fd).st_dev

        def sync() -> None:
            if syncfs(fd) != 0:
                err = ctypes.get_errno()
                raise OSError(err, os.strerror(err))

        group = _groups[device] = GroupSync(sync)
        weakref.finalize(group, _close_quietly, fd)
        return group


def _close_quietly(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)
