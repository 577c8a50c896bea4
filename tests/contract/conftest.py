"""The backends every contract suite runs against: one fixture param per implementation.

A new backend (Tarantool, PostgreSQL, a WebDAV node) joins by adding its name to a ``*_KINDS``
list and a branch to the matching ``open_*`` function; the suites then run against it unchanged.
"""

from __future__ import annotations

import contextlib
import itertools
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from pochta.blobs.filedb.memory import MemoryFileDB
from pochta.blobs.filedb.postgres import PostgresFileDB
from pochta.blobs.filedb.sharded import ShardedFileDB
from pochta.blobs.filedb.sqlite import SQLiteFileDB
from pochta.blobs.nodes import DiskFactory
from pochta.blobs.nodes.client import NodeTimeouts
from pochta.blobs.nodes.local import LocalDisk
from pochta.blobs.nodes.report import write_report
from pochta.blobs.pairs.memory import MemoryPairDB
from pochta.blobs.pairs.postgres import PostgresPairDB
from pochta.blobs.pairs.sqlite import SQLitePairDB
from pochta.postgres.database import PoolSettings, Postgres
from pochta.types import Clock, Disk, DiskSpec, FileDB, PairDB
from tests.pgserver import NewDatabase

# sharded over PostgreSQL shards: tests/integration/test_filedb_shards.py, through the app (its
# state machine here took 41 s at load; the router is the same code as over memory shards)
FILEDB_KINDS = ["memory", "sqlite", "postgres", "sharded-memory"]
SHARED_FILEDB_KINDS = ["sqlite", "postgres"]  # several processes share one (cpupool.py)
PAIRDB_KINDS = ["memory", "sqlite", "postgres"]
DISK_KINDS = ["local", "local-fsync", "webdav"]  # local-fsync: no group sync
BROKEN_DISK_KINDS = [
    "local-root-is-a-file",
    "local-tmp-is-a-file",
    "webdav-root-is-a-file",
    "webdav-node-stopped",
]


class FakeClock:
    """A clock that moves only when told to."""

    def __init__(self, now: float = 1_700_000_000.25) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def busy_switching() -> Iterator[None]:
    """Switch threads every few microseconds instead of every 5 ms, so that a step that is not
    atomic gets interrupted in the middle and a concurrency test can catch it."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    yield
    sys.setswitchinterval(before)


def postgres(request: pytest.FixtureRequest) -> Postgres:
    """A pool on an empty, migrated database of the session's PostgreSQL server: a fresh
    one, or one whose earlier pool this test closed, emptied (a property test makes one
    store per example; TRUNCATE is much faster than CREATE DATABASE)."""
    new_db: NewDatabase = request.getfixturevalue("new_postgres_db")
    used: list[Postgres] = request.node.stash.setdefault(_PG_USED, [])
    dsn = None
    for i, old in enumerate(used):
        if old.closed:
            dsn = old.dsn
            del used[i]
            break
    db = Postgres.connect(dsn or new_db(), PoolSettings(min_size=1, max_size=8))
    if dsn is not None:
        db.execute(f"TRUNCATE {', '.join(PG_TABLES)}")
    used.append(db)
    return db


PG_TABLES = (
    "pochta.filedb_live",
    "pochta.filedb_deleted",
    "pochta.filedb_ops",
    "pochta.pairs",
    "pochta.valkyrie_disks",
    "pochta.model_promotions",
    "pochta.model_files",
    "pochta.model_versions",
    "pochta.learned_words",
    "pochta.learned_totals",
    "pochta.history_samples",
    "pochta.history_tallies",
    "pochta.history_audits",
    "pochta.sender_lists",
)
_PG_USED = pytest.StashKey[list[Postgres]]()


# -- FileDB ---------------------------------------------------------------------------------
def open_filedb(kind: str, where: Path, clock: Clock, request: pytest.FixtureRequest) -> FileDB:
    """A new, empty FileDB of ``kind`` keeping its data under ``where`` (or, for a server,
    in a fresh database of its own)."""
    if kind == "memory":
        return MemoryFileDB(clock=clock)
    if kind == "sqlite":
        return SQLiteFileDB(where / "filedb.sqlite3", clock=clock)
    if kind == "postgres":
        return PostgresFileDB(postgres(request), clock=clock)
    if kind == "sharded-memory":  # three shards: keys, journal and pages cut three ways
        return ShardedFileDB([MemoryFileDB(clock=clock) for _ in range(3)])
    raise ValueError(kind)


NewFileDB = Callable[[], FileDB]


@pytest.fixture(params=FILEDB_KINDS)
def new_filedb(
    request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock
) -> Iterator[NewFileDB]:
    """Makes empty FileDBs of one kind (a property test needs one per example); all are
    closed at teardown."""
    opened: list[FileDB] = []
    serial = itertools.count()

    def make() -> FileDB:
        where = tmp_path / f"filedb-{next(serial)}"
        where.mkdir()
        db = open_filedb(request.param, where, clock, request)
        opened.append(db)
        return db

    yield make
    for db in opened:
        db.close()


@pytest.fixture
def filedb(new_filedb: NewFileDB) -> FileDB:
    return new_filedb()


@dataclass(frozen=True)
class SharedFileDB:
    """A FileDB that other processes can open: ``workers.open_filedb(kind, location)``."""

    kind: str
    location: str


@pytest.fixture(params=SHARED_FILEDB_KINDS)
def shared_filedb(request: pytest.FixtureRequest, tmp_path: Path) -> SharedFileDB:
    if request.param == "sqlite":
        return SharedFileDB("sqlite", str(tmp_path / "shared-filedb.sqlite3"))
    if request.param == "postgres":
        new_db: NewDatabase = request.getfixturevalue("new_postgres_db")
        return SharedFileDB("postgres", new_db())
    raise ValueError(request.param)


# -- PairDB ---------------------------------------------------------------------------------
def open_pairdb(kind: str, where: Path, request: pytest.FixtureRequest) -> PairDB:
    if kind == "memory":
        return MemoryPairDB()
    if kind == "sqlite":
        return SQLitePairDB(where / "pairdb.sqlite3")
    if kind == "postgres":
        return PostgresPairDB(postgres(request))
    raise ValueError(kind)


@pytest.fixture(params=PAIRDB_KINDS)
def pairdb(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[PairDB]:
    db = open_pairdb(request.param, tmp_path, request)
    yield db
    db.close()


# -- Disk -----------------------------------------------------------------------------------
@pytest.fixture
def disk_factory() -> Iterator[DiskFactory]:
    """Opens WebDAV disks with short timeouts; their connections are closed at teardown."""
    with contextlib.closing(DiskFactory(NodeTimeouts(connect=2.0, read=10.0))) as factory:
        yield factory


@pytest.fixture(params=DISK_KINDS)
def disk(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    disk_factory: DiskFactory,
) -> Disk:
    """An empty disk at ``tmp_path/disk``: the directory itself, or the same directory behind
    a real nginx WebDAV node (its free-space report written once, as its host would)."""
    (tmp_path / "disk").mkdir()
    if request.param == "local":
        return LocalDisk(tmp_path / "disk")
    if request.param == "local-fsync":
        return LocalDisk(tmp_path / "disk", group_sync=False)
    if request.param == "webdav":
        node = request.getfixturevalue("nginx_factory")(served=tmp_path)
        write_report(tmp_path / "disk")
        return disk_factory(node.disk("disk"))
    raise ValueError(request.param)


@pytest.fixture(params=BROKEN_DISK_KINDS)
def broken_disk(request: pytest.FixtureRequest, tmp_path: Path, disk_factory: DiskFactory) -> Disk:
    """A disk that cannot take writes. Root ignores permissions, so the local variants put a
    regular file where a directory must be; a WebDAV node can also be stopped."""
    root = tmp_path / "disk"
    if request.param.startswith("webdav-"):
        node = request.getfixturevalue("nginx_factory")(served=tmp_path)
        if request.param == "webdav-root-is-a-file":
            root.write_bytes(b"not a directory\n")
        else:
            node.disk("disk")
            node.stop()
        return disk_factory(node.disk("disk") if root.is_dir() else DiskSpec(node.url, "disk"))
    if request.param == "local-root-is-a-file":
        root.write_bytes(b"not a directory\n")
        return LocalDisk(root)
    if request.param == "local-tmp-is-a-file":
        root.mkdir()
        (root / "tmp").write_bytes(b"not a directory\n")
        return LocalDisk(root)
    raise ValueError(request.param)
