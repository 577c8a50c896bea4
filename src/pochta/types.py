"""The contract at a glance: aliases, records and the Protocols every backend implements.

Backends (SQLite, in-memory, later PostgreSQL / Tarantool / WebDAV) implement these Protocols and
pass the same contract suite in ``tests/contract``. Nothing here does I/O.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

Key = str
"""A blob's content address: SHA-256 of the decoded content, 64 lowercase hex characters."""

Magic = int
"""A letter's random non-zero 32-bit number for one file; added on inc/upload, subtracted on dec."""

Clock = Callable[[], float]
"""Seconds since the epoch; injected so that pure logic and tests control time."""


class Space(enum.IntEnum):
    LIVE = 0  # space0: files in use
    DELETED = 1  # space1: the deletion queue Valkyrie works from


class FileFlag(enum.IntFlag):
    NONE = 0
    DO_NOT_DELETE = 1  # counters disagreed once; never deleted automatically again


class PairFlag(enum.IntFlag):
    NONE = 0
    READONLY = 1  # reads only; no new files
    SERVICE = 2  # a disk failed: read-only, waiting for evacuation
    LOCKED = 4  # an operator holds it: no new files

    @property
    def writable(self) -> bool:
        return not (self & (PairFlag.READONLY | PairFlag.SERVICE | PairFlag.LOCKED))


@dataclass(frozen=True, slots=True)
class FileRecord:
    """One FileDB record. In space1, ``moved_at`` is when it moved; counter and magic are 0."""

    key: Key
    counter: int
    magic: Magic
    flags: FileFlag
    pair_id: int
    space: Space = Space.LIVE
    moved_at: float | None = None


@dataclass(frozen=True, slots=True)
class DiskSpec:
    """Where a disk lives: ``node`` is ``local`` or a WebDAV base URL; ``root`` a path on it."""

    node: str
    root: str

    def __str__(self) -> str:
        return self.root if self.node == "local" else f"{self.node.rstrip('/')}/{self.root}"


@dataclass(frozen=True, slots=True)
class Pair:
    id: int
    disks: tuple[DiskSpec, DiskSpec]
    flags: PairFlag
    free: tuple[int, int]  # free bytes of each disk, as last measured


class FileDB(Protocol):
    """Key -> (counter, magic, flags, pair). Every method is one atomic step."""

    def inc(self, key: Key, magic: Magic) -> FileRecord:
        """counter += 1, magic += m on the live record; BlobNotFound when there is none."""

    def upsert(self, key: Key, magic: Magic, pair_id: int) -> FileRecord:
        """After an upload: insert with counter 1, or inc a live record that appeared meanwhile."""

    def dec(self, key: Key, magic: Magic) -> FileRecord:
        """counter -= 1, magic -= m; see ``pochta.blobs.counting.after_dec`` for the outcomes."""

    def get(self, key: Key) -> FileRecord | None:
        """The live record, else the space1 record, else None."""

    def close(self) -> None: ...


class PairDB(Protocol):
    """pair_id -> two disks, flags and free bytes."""

    def add(self, disks: tuple[DiskSpec, DiskSpec], free: tuple[int, int]) -> Pair: ...

    def get(self, pair_id: int) -> Pair:
        """The pair; PairNotFound when there is none."""

    def list(self) -> list[Pair]: ...

    def set_flags(self, pair_id: int, flags: PairFlag) -> Pair: ...

    def set_free(self, pair_id: int, free: tuple[int, int]) -> None: ...

    def close(self) -> None: ...


class BlobReader(Protocol):
    """An opened stored file: its size is known before the first byte is read."""

    size: int

    def __iter__(self) -> Iterator[bytes]: ...

    def close(self) -> None: ...


class BlobWriter(Protocol):
    """A temporary file being written on one disk."""

    def write(self, chunk: bytes) -> None: ...

    def commit(self) -> None:
        """Flush and fsync; after this the bytes survive a crash."""

    def abort(self) -> None:
        """Close and remove the temporary file; never raises."""


class Disk(Protocol):
    """One disk of a storage node (a local directory, or a WebDAV root). Names are relative."""

    spec: DiskSpec

    def create(self, name: str) -> BlobWriter: ...

    def publish(self, tmp_name: str, name: str) -> None:
        """Atomically rename (MOVE) a committed temporary file to its final name, durably."""

    def open(self, name: str, start: int = 0, end: int | None = None) -> BlobReader:
        """Open bytes [start, end) of a file; MissingFile when it is not there."""

    def size(self, name: str) -> int | None:
        """The file's size (HEAD), or None when it is not there."""

    def delete(self, name: str) -> None: ...

    def free_bytes(self) -> int: ...

    def probe(self) -> None:
        """Write and remove a small file; DiskError when the disk cannot take writes."""
