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
descriptor. A failed sync fails every caller of its batch (none of them is acknowledged); a
filesystem where ``syncfs`` cannot report errors (older kernels) or that has none (not Linux)
gets no group: :func:`syncfs_of` says None and the disk fsyncs each file and directory itself.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import platform
import threading
import weakref
from collections.abc import Callable
from pathlib import Path


class _Batch:
    __slots__ = ("done", "error")

    def __init__(self) -> None:
        self.done = False
        self.error: OSError | None = None


class GroupSync:
    """Callers of :meth:`wait` share calls of ``sync`` (see the module's docstring)."""

    def __init__(self, sync: Callable[[], None]) -> None:
        self._sync = sync
        self._cond = threading.Condition(threading.Lock())
        self._next = _Batch()  # the batch that the next sync will serve
        self._running = False
        self.syncs = 0  # how many syncs ran (for tests and benchmarks)

    def wait(self) -> None:
        """Return once a sync that started after this call has finished; OSError when it
        failed (then nothing written before the call may be counted on)."""
        with self._cond:
            batch = self._next
            while not batch.done:
                if self._running:
                    self._cond.wait()
                    continue
                self._running = True
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
