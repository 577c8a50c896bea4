"""A disk that is a local directory: files at ``root/ab/cd/<key>``, durable renames.

Durability: a committed file's bytes and a published file's name are on the device before
``commit`` / ``publish`` return. Where the kernel allows (Linux >= 5.8), concurrent writers share
one ``syncfs`` of the disk's filesystem per batch (:mod:`pochta.blobs.nodes.groupsync`): a
writer's call returns only after a sync that started after its own writes (bytes, mkdirs,
rename) has finished, so the same order holds as with one ``fsync`` per file and per directory
(bytes durable before the rename that names them; the rename durable before the caller is
answered); elsewhere each file and directory is fsynced on its own.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import secrets
import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from pochta.blobs.nodes.groupsync import GroupSync, fsync_path, syncfs_of
from pochta.errors import DiskError, MissingFile
from pochta.types import DiskEntry, DiskSpec

CHUNK = 1 << 20
PROBE = b"pochta probe\n"
SYNC_FILE_RANGE_WRITE = 2
# link(2) errors of a filesystem without hard links: commit_as renames instead
_NO_LINKS = {errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EMLINK, errno.ENOSYS}
# a new file of an upload, as open(path, "xb") makes it (mode 0o666 less the umask)
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC


def _writeback_starter() -> Callable[[int, int, int, int], object] | None:
    """Linux's sync_file_range(2): start writing a range of a file to the device without
    waiting for it (SYNC_FILE_RANGE_WRITE). None where the C library has no such call."""
    try:
        fn = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):
        return None
    fn.argtypes = (ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint)
    fn.restype = ctypes.c_int
    start: Callable[[int, int, int, int], object] = fn
    return start


_start_writeback = _writeback_starter()


def _makedirs_durable(path: Path, *, fsync: bool = True) -> None:
    """mkdir -p, fsyncing the parent of each directory created so the entries survive a crash
    (``fsync=False``: the caller's group sync will make them durable)."""
    missing: list[Path] = []
    while not path.is_dir():
        missing.append(path)
        path = path.parent
    for directory in reversed(missing):
        try:
            directory.mkdir()
        except FileExistsError:
            continue
        if fsync:
            fsync_path(directory.parent)


def _disk_error(spec: DiskSpec, action: str, exc: OSError) -> DiskError:
    if exc.errno == errno.ENOSPC:
        return DiskError(f"disk {spec} is full ({action})")
    return DiskError(f"disk {spec}: {action} failed: {exc.strerror or exc}")


class LocalWriter:
    """One new file of a :class:`LocalDisk`, written through its raw descriptor (no Python
    file object: a small upload's copy is a handful of system calls, and their Python around
    them is a good part of its CPU)."""

    def __init__(self, disk: LocalDisk, path: str) -> None:
        self._disk = disk
        self._name = path  # the temporary file's full path, as a string
        self._fd = -1
        try:
            try:  # the directories are there but for the first file (no stat of them each time)
                self._group = disk.group()  # before the first byte: its sync must cover them
                self._fd = os.open(path, _CREATE, 0o666)
            except FileNotFoundError:
                _makedirs_durable(Path(path).parent)
                self._group = disk.group()
                self._fd = os.open(path, _CREATE, 0o666)
            self._written = 0  # bytes written so far
            self._flushed = 0  # bytes already sent on their way to the device
        except OSError as exc:
            raise _disk_error(disk.spec, "creating a file", exc) from exc

    @property
    def _path(self) -> Path:
        return Path(self._name)

    def _close(self) -> None:
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)

    def __del__(self) -> None:  # a writer dropped without commit or abort: no descriptor kept
        with contextlib.suppress(OSError, AttributeError):
            self._close()

    def probe(self) -> None:
        """The probe bytes into the new file, then removed again (no content yet)."""
        try:
            os.pwrite(self._fd, PROBE, 0)
            os.ftruncate(self._fd, 0)
        except OSError as exc:
            raise _disk_error(self._disk.spec, "probing", exc) from exc

    def write(self, chunk: bytes) -> None:
        try:
            if self._written > self._flushed and _start_writeback is not None:
                # a file of several chunks: the earlier ones start for the device now, while
                # this one arrives, so that commit's fsync finds little left to write (a
                # file of one chunk pays nothing); advisory, errors surface at fsync
                done = self._flushed
                _start_writeback(self._fd, done, self._written - done, SYNC_FILE_RANGE_WRITE)
                self._flushed = self._written
            written = os.write(self._fd, chunk)
            self._written += written
            if written < len(chunk):  # a short write (a signal, a full disk): the rest
                view = memoryview(chunk)[written:]
                while view:
                    written = os.write(self._fd, view)
                    view = view[written:]
                    self._written += written
        except OSError as exc:
            raise _disk_error(self._disk.spec, "writing", exc) from exc

    def commit(self) -> None:
        try:
            if self._group is not None:
                self._group.wait()
            else:
                os.fsync(self._fd)
            self._close()
        except OSError as exc:
            raise _disk_error(self._disk.spec, "fsync", exc) from exc

    @property
    def shares_syncs(self) -> bool:
        """True when this copy is made durable by its filesystem's group sync: then
        :meth:`place` and :meth:`wait_durable` do what :meth:`commit_as` does, and the
        copies placed on one filesystem need one wait between them."""
        return self._group is not None

    def commit_as(self, name: str) -> None:
        """Without a group sync: fsync the file, rename it, fsync the directory. With one,
        :meth:`place` then a wait for the group's next sync (one sync makes the bytes and
        the name durable together)."""
        if self._group is None:
            self.commit()
            self._disk.publish(self._disk.relative(self._path), name)
            return
        self.place(name)
        self.wait_durable()

    def wait_durable(self, *, returning: bool = False) -> None:
        """After :meth:`place`: return once the group's next sync has made the copy and its
        name durable (the copies placed on one filesystem need one such wait). ``returning``:
        see ``GroupSync.wait``."""
        try:
            self._sync().wait(returning=returning)
        except OSError as exc:
            raise _disk_error(self._disk.spec, "committing into place", exc) from exc

    def _sync(self) -> GroupSync:
        if self._group is None:
            raise AssertionError("only for a writer that shares syncs")
        return self._group

    def place(self, name: str) -> GroupSync:
        """For a writer that shares syncs (:attr:`shares_syncs`): put the file under
        ``name`` without waiting for the device, and return the group whose next sync
        makes the bytes and the name durable together (:meth:`wait_durable` of any writer
        placed on that filesystem waits for it: the loader places both copies of a pair,
        then waits once, and answers only after that wait).

        When the name is new the file is hard-linked to ``name`` (which never replaces
        anything) and the temporary name removed. A crash before the sync may leave ``name``
        with bytes that never reached the device, but nobody was answered and no record
        names it (Valkyrie's orphan). When ``name`` exists already (another loader's copy,
        or such a leftover) it is replaced only once our bytes are durable, as ``publish``
        does: a name is never pointed at bytes that are not on the device, so an answered
        upload is never undone by a later or concurrent one."""
        group = self._sync()
        final = self._disk.path_of(name)
        try:
            self._close()
            try:
                try:
                    os.link(self._name, final)
                except FileNotFoundError:  # a new ab/cd/ (made durable by the group's sync)
                    _makedirs_durable(Path(final).parent, fsync=False)
                    os.link(self._name, final)
            except OSError as exc:
                if not isinstance(exc, FileExistsError) and exc.errno not in _NO_LINKS:
                    raise
                group.wait()  # our bytes first: only durable bytes may replace a name
                os.replace(self._name, final)
            else:
                os.unlink(self._name)
        except OSError as exc:
            raise _disk_error(self._disk.spec, "committing into place", exc) from exc
        return group

    def abort(self) -> None:
        with contextlib.suppress(OSError):
            self._close()
        with contextlib.suppress(OSError):
            os.unlink(self._name)


class LocalReader:
    def __init__(self, spec: DiskSpec, path: Path, start: int, end: int | None) -> None:
        self._spec = spec
        try:
            self._file = open(path, "rb", buffering=0)  # noqa: SIM115 - closed by close()
            self.size = os.fstat(self._file.fileno()).st_size
            self._file.seek(start)
        except FileNotFoundError:
            raise MissingFile(f"{path.name} is not on disk {spec}") from None
        except OSError as exc:
            raise _disk_error(spec, "opening", exc) from exc
        self._left = (self.size if end is None else min(end, self.size)) - start

    def __iter__(self) -> Iterator[bytes]:
        try:
            while self._left > 0:
                chunk = self._file.read(min(CHUNK, self._left))
                if not chunk:
                    raise DiskError(f"disk {self._spec}: file shrank while being read")
                self._left -= len(chunk)
                yield chunk
        except OSError as exc:
            raise _disk_error(self._spec, "reading", exc) from exc
        finally:
            self.close()

    def close(self) -> None:
        self._file.close()


class LocalDisk:
    """``group_sync=False`` fsyncs every file and directory on its own (the pattern of one
    writer); by default concurrent writers share syncs of the filesystem (module docstring)."""

    def __init__(
        self, root: Path, spec: DiskSpec | None = None, *, group_sync: bool = True
    ) -> None:
        self.root = root
        self._root = os.fspath(root)
        self.spec = spec or DiskSpec("local", str(root))
        self._group_sync = group_sync
        self._group: GroupSync | None = None
        self._group_lock = threading.Lock()

    def group(self) -> GroupSync | None:
        """The group sync of this disk's filesystem (made on first use, once the root
        exists), or None when each file is fsynced on its own."""
        if not self._group_sync:
            return None
        with self._group_lock:
            if self._group is None:
                self._group = syncfs_of(self.root)
                if self._group is None:
                    self._group_sync = False  # not available here: fsync each
            return self._group

    def _path(self, name: str) -> Path:
        return self.root / name

    def path_of(self, name: str) -> str:
        """``root / name`` as a string (the upload path's system calls take strings; no
        Path is built for them)."""
        return f"{self._root}/{name}"

    def relative(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    def create(self, name: str) -> LocalWriter:
        return LocalWriter(self, self.path_of(name))

    def publish(self, tmp_name: str, name: str) -> None:
        final = self._path(name)
        try:
            group = self.group()
            _makedirs_durable(final.parent, fsync=group is None)
            os.replace(self._path(tmp_name), final)
            if group is not None:
                group.wait()  # the new directories and the rename, with everyone else's
            else:
                fsync_path(final.parent)
        except OSError as exc:
            raise _disk_error(self.spec, "renaming into place", exc) from exc

    def open(self, name: str, start: int = 0, end: int | None = None) -> LocalReader:
        return LocalReader(self.spec, self._path(name), start, end)

    def size(self, name: str) -> int | None:
        try:
            return self._path(name).stat().st_size
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise _disk_error(self.spec, "stat", exc) from exc

    def delete(self, name: str) -> None:
        try:
            self._path(name).unlink(missing_ok=True)
        except OSError as exc:
            raise _disk_error(self.spec, "deleting", exc) from exc

    def free_bytes(self) -> int:
        try:
            return shutil.disk_usage(self.root).free
        except OSError as exc:
            raise _disk_error(self.spec, "measuring free space", exc) from exc

    def probe(self) -> None:
        writer = self.create(f"tmp/probe-{secrets.token_hex(8)}.part")
        try:
            writer.probe()
        finally:
            writer.abort()

    def walk(self, after: str = "") -> Iterator[DiskEntry]:
        if not self.root.is_dir():
            raise DiskError(f"disk {self.spec}: its root {self.root} is not there")
        yield from _walk(self.spec, self.root, "", after)


def _walk(spec: DiskSpec, directory: Path, prefix: str, after: str) -> Iterator[DiskEntry]:
    """Files under ``directory`` in ascending order of their relative names, ``> after``."""
    try:
        with os.scandir(directory) as it:
            entries = sorted(it, key=lambda e: e.name + ("/" if e.is_dir() else ""))
    except FileNotFoundError:
        return
    except OSError as exc:
        raise _disk_error(spec, "listing", exc) from exc
    for entry in entries:
        name = prefix + entry.name
        if not prefix and entry.name.startswith("."):
            continue  # the storage host's own (nginx's temporary bodies, the free report)
        try:
            if entry.is_dir(follow_symlinks=False):
                if name < after and not after.startswith(name + "/"):
                    continue  # everything below sorts before ``after``
                yield from _walk(spec, Path(entry.path), name + "/", after)
            elif name > after:
                st = entry.stat(follow_symlinks=False)
                yield DiskEntry(name, st.st_size, st.st_mtime)
        except FileNotFoundError:
            continue  # removed while we looked
