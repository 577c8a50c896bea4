"""A disk that is a local directory: files at ``root/ab/cd/<key>``, durable renames."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import secrets
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

from pochta.errors import DiskError, MissingFile
from pochta.types import DiskEntry, DiskSpec

CHUNK = 1 << 20
SYNC_FILE_RANGE_WRITE = 2


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


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _makedirs_durable(path: Path) -> None:
    """mkdir -p, fsyncing the parent of each directory created so the entries survive a crash."""
    missing: list[Path] = []
    while not path.is_dir():
        missing.append(path)
        path = path.parent
    for directory in reversed(missing):
        try:
            directory.mkdir()
        except FileExistsError:
            continue
        _fsync_dir(directory.parent)


def _disk_error(spec: DiskSpec, action: str, exc: OSError) -> DiskError:
    if exc.errno == errno.ENOSPC:
        return DiskError(f"disk {spec} is full ({action})")
    return DiskError(f"disk {spec}: {action} failed: {exc.strerror or exc}")


class LocalWriter:
    def __init__(self, disk: LocalDisk, path: Path) -> None:
        self._disk = disk
        self._path = path
        try:
            _makedirs_durable(path.parent)
            self._file = open(path, "xb", buffering=0)  # noqa: SIM115 - closed in commit/abort
            self._written = 0  # bytes written so far
            self._flushed = 0  # bytes already sent on their way to the device
        except OSError as exc:
            raise _disk_error(disk.spec, "creating a file", exc) from exc

    def write(self, chunk: bytes) -> None:
        try:
            if self._written > self._flushed and _start_writeback is not None:
                # a file of several chunks: the earlier ones start for the device now, while
                # this one arrives, so that commit's fsync finds little left to write (a
                # file of one chunk pays nothing); advisory, errors surface at fsync
                fd, done = self._file.fileno(), self._flushed
                _start_writeback(fd, done, self._written - done, SYNC_FILE_RANGE_WRITE)
                self._flushed = self._written
            view = memoryview(chunk)
            while view:
                written = self._file.write(view) or 0
                view = view[written:]
                self._written += written
        except OSError as exc:
            raise _disk_error(self._disk.spec, "writing", exc) from exc

    def commit(self) -> None:
        try:
            os.fsync(self._file.fileno())
            self._file.close()
        except OSError as exc:
            raise _disk_error(self._disk.spec, "fsync", exc) from exc

    def abort(self) -> None:
        with contextlib.suppress(OSError):
            self._file.close()
        with contextlib.suppress(OSError):
            self._path.unlink(missing_ok=True)


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
    def __init__(self, root: Path, spec: DiskSpec | None = None) -> None:
        self.root = root
        self.spec = spec or DiskSpec("local", str(root))

    def _path(self, name: str) -> Path:
        return self.root / name

    def create(self, name: str) -> LocalWriter:
        return LocalWriter(self, self._path(name))

    def publish(self, tmp_name: str, name: str) -> None:
        final = self._path(name)
        try:
            _makedirs_durable(final.parent)
            os.replace(self._path(tmp_name), final)
            _fsync_dir(final.parent)
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
            writer.write(b"pochta probe\n")
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
            entries = sorted(it, key=lambda e: e.name + ('/' if e.is_dir() else ''))
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
