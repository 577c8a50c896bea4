"""The embedded FileDB made durable by its filesystem's group sync (sync=full where syncfs can be
trusted): a commit without its own fsync, its caller answered only after a sync that began
after the commit; and, with the loader's local disks on that filesystem, the order a crash
may keep: a record is never on the device before both of its copies are."""

from __future__ import annotations

import errno
import os
import random
import shutil
import sqlite3
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pochta.blobs.filedb.sqlite import SQLiteFileDB
from pochta.blobs.keys import blob_path, key_of
from pochta.blobs.nodes import groupsync
from pochta.blobs.nodes.groupsync import GroupSync
from pochta.blobs.nodes.local import LocalDisk
from pochta.blobs.pairs.sqlite import SQLitePairDB
from pochta.blobs.store import BlobStore
from pochta.errors import InvalidInput, StorageError
from pochta.types import Disk, DiskSpec, PairFlag

KEY = key_of(b"a record made durable by the group sync")


def _visible(path: Path, key: str) -> bool:
    """Whether ``key``'s live record is committed (seen by a connection of its own)."""
    conn = sqlite3.connect(path)
    try:
        row = conn.execute("SELECT 1 FROM live WHERE key = ?", (bytes.fromhex(key),)).fetchone()
    finally:
        conn.close()
    return row is not None


class Gated:
    """A sync that waits for the test's gate; it notes whether the record was committed when
    it began."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.started = threading.Semaphore(0)
        self.gate = threading.Semaphore(0)
        self.saw_record: list[bool] = []
        self.fail_next: OSError | None = None

    def __call__(self) -> None:
        self.saw_record.append(_visible(self.path, KEY))
        self.started.release()
        assert self.gate.acquire(timeout=10)
        if self.fail_next is not None:
            error, self.fail_next = self.fail_next, None
            raise error


def _not_alone(group: GroupSync) -> None:
    """Another thread announces a write it never makes: the FileDB's caller is not alone."""
    thread = threading.Thread(target=group.announce)
    thread.start()
    thread.join(5)


def test_a_count_is_answered_only_after_a_sync_that_began_after_its_commit(
    tmp_path: Path,
) -> None:
    """Among other writers, a count waits for the group's next sync: one that began after the
    commit (the record was visible to a reader when it began), and not before it ended."""
    path = tmp_path / "filedb.sqlite3"
    sync = Gated(path)
    group = GroupSync(sync, hold=0)
    _not_alone(group)
    db = SQLiteFileDB(path, group_sync=group)
    try:
        with ThreadPoolExecutor(1) as pool:
            answer = pool.submit(db.upsert, KEY, 7, 1)
            assert sync.started.acquire(timeout=10)
            assert sync.saw_record == [True]  # committed before the sync began
            time.sleep(0.05)
            assert not answer.done()  # and not answered while it runs
            sync.gate.release()
            record = answer.result(timeout=10)
        assert (record.counter, record.magic) == (1, 7)
    finally:
        db.close()


def test_a_count_alone_fsyncs_the_wal_and_takes_no_group_sync(tmp_path: Path) -> None:
    """A caller alone (no sync running, nobody announced) is answered after the WAL's own
    fdatasync, cheaper than a sync of the whole filesystem."""
    path = tmp_path / "filedb.sqlite3"
    sync = Gated(path)
    db = SQLiteFileDB(path, group_sync=GroupSync(sync, hold=0))
    try:
        assert db.upsert(KEY, 7, 1).counter == 1
        assert db.inc(KEY, 3).counter == 2
        assert sync.saw_record == []
    finally:
        db.close()


def test_a_failed_sync_fails_the_count_and_its_op_counts_once_when_sent_again(
    tmp_path: Path,
) -> None:
    """Nobody is answered when the sync fails; the step stands committed, so the caller's
    second try with the same op is a replay, not a second count."""
    path = tmp_path / "filedb.sqlite3"
    sync = Gated(path)
    sync.fail_next = OSError(errno.EIO, "the device failed")
    group = GroupSync(sync, hold=0)
    _not_alone(group)
    db = SQLiteFileDB(path, group_sync=group)
    op = b"op-1"
    try:
        sync.gate.release()
        with pytest.raises(StorageError, match=r"syncing filedb\.sqlite3"):
            db.upsert(KEY, 7, 1, op)
        sync.gate.release()
        record = db.upsert(KEY, 7, 1, op)
        assert (record.counter, record.magic) == (1, 7)
        assert db.applied([op]) == {op}
    finally:
        db.close()


def test_without_the_group_sync_no_sync_is_waited_for(tmp_path: Path) -> None:
    """sync=normal (the operator's choice: a process crash, not a power loss) and
    ``group_sync=False`` (an fsync at each commit) never wait for the group."""
    sync = Gated(tmp_path / "a.sqlite3")
    for db in (
        SQLiteFileDB(tmp_path / "a.sqlite3", synchronous="normal", group_sync=GroupSync(sync)),
        SQLiteFileDB(tmp_path / "b.sqlite3", group_sync=False),
    ):
        try:
            assert db.upsert(KEY, 7, 1).counter == 1
            assert db.inc(KEY, 3).counter == 2
        finally:
            db.close()
    assert sync.saw_record == []


@dataclass
class Moment:
    """What a sync of the filesystem found when it began, and when it ended."""

    copies: set[str]  # keys with both copies under their final names
    records: set[str]  # keys with a committed live record
    began: float
    ended: float = field(default=float("inf"))


@pytest.mark.skipif(groupsync._syncfs is None, reason="needs a trustworthy syncfs (Linux >= 5.8)")
def test_a_record_reaches_the_device_only_after_both_its_copies_did(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Four uploaders, the disks and the FileDB on one filesystem, so one group sync for all:
    what a crash keeps is what a finished sync (or the WAL's fdatasync of a count made alone)
    began with. Every record a sync began with has its two copies in a sync that ended before
    (a crash never keeps a record naming a copy it lost), and every answered upload's record
    was in a sync that ended before the answer."""
    real = groupsync._syncfs
    assert real is not None
    keys: list[str] = []
    moments: list[Moment] = []
    roots = (tmp_path / "a", tmp_path / "b")
    for root in roots:
        root.mkdir()
    db_path = tmp_path / "filedb.sqlite3"

    def _records() -> set[str]:
        conn = sqlite3.connect(db_path)
        try:
            return {bytes(r[0]).hex() for r in conn.execute("SELECT key FROM live")}
        finally:
            conn.close()

    def recorded(fd: int) -> int:
        began = time.monotonic()
        records = _records()
        copies = {k for k in list(keys) if all(os.path.exists(r / blob_path(k)) for r in roots)}
        moment = Moment(copies, records, began)
        moments.append(moment)
        result = real(fd)
        moment.ended = time.monotonic()
        return result

    real_wal = SQLiteFileDB._sync_wal

    def wal_recorded(self: SQLiteFileDB) -> None:  # a caller alone: the WAL's own fdatasync
        moment = Moment(set(), set(_records()), time.monotonic())
        moments.append(moment)
        real_wal(self)
        moment.ended = time.monotonic()

    monkeypatch.setattr(groupsync, "_syncfs", recorded)
    monkeypatch.setattr(SQLiteFileDB, "_sync_wal", wal_recorded)
    monkeypatch.setattr(groupsync, "_groups", groupsync.weakref.WeakValueDictionary())
    filedb = SQLiteFileDB(db_path)
    pairdb = SQLitePairDB(tmp_path / "pairdb.sqlite3")

    def local(spec: DiskSpec) -> Disk:
        return LocalDisk(Path(spec.root), spec=spec)

    store = BlobStore(filedb, pairdb, disk_factory=local, rng=random.Random(1))
    pairdb.add(
        (DiskSpec("local", str(roots[0])), DiskSpec("local", str(roots[1]))), (10**12, 10**12)
    )
    contents = [random.Random(i).randbytes(4096) for i in range(40)]
    keys.extend(key_of(c) for c in contents)
    answered: dict[str, float] = {}

    def upload(content: bytes) -> Callable[[], None]:
        def run() -> None:
            stored = store.upload_whole(key_of(content), 5, content)
            assert stored.uploaded
            answered[stored.record.key] = time.monotonic()

        return run

    try:
        with ThreadPoolExecutor(4) as pool:
            for future in [pool.submit(upload(c)) for c in contents]:
                future.result(timeout=60)
    finally:
        store.close()
    assert len(answered) == len(contents)
    assert len(moments) < 2 * len(contents) + 2  # the syncs were shared
    for i, moment in enumerate(moments):
        for key in moment.records & set(keys):
            assert any(key in m.copies and m.ended <= moment.began for m in moments[:i]), (
                f"sync {i} began with {key}'s record before a sync had its copies"
            )
    for key, at in answered.items():  # its record in a sync (or the WAL's) before the answer
        assert any(key in m.records and m.ended <= at for m in moments)


def test_a_count_committed_while_a_failing_sync_ran_is_not_answered(tmp_path: Path) -> None:
    """A count committed while the group's sync runs waits for the next one; when the running
    sync fails (syncfs reports a writeback error once, to that sync), the pages that failed
    may be this count's WAL pages: the count's caller gets the error too, though the next
    sync succeeds, rather than an answer for a record a crash may lose."""
    path = tmp_path / "filedb.sqlite3"
    sync = Gated(path)
    group = GroupSync(sync, hold=0)
    _not_alone(group)
    db = SQLiteFileDB(path, group_sync=group)
    other = key_of(b"a count committed during the failing sync")
    try:
        with ThreadPoolExecutor(2) as pool:
            first = pool.submit(db.upsert, KEY, 7, 1)
            assert sync.started.acquire(timeout=10)  # S1 runs
            second = pool.submit(db.upsert, other, 7, 1)
            deadline = time.monotonic() + 10
            while not _visible(path, other):  # committed during S1
                assert time.monotonic() < deadline
                time.sleep(0.005)
            sync.fail_next = OSError(errno.EIO, "writeback failed")
            sync.gate.release()
            with pytest.raises(StorageError, match="writeback failed"):
                first.result(timeout=10)
            assert sync.started.acquire(timeout=10)  # S2, which succeeds
            sync.gate.release()
            with pytest.raises(StorageError, match="writeback failed"):
                second.result(timeout=10)
    finally:
        db.close()


def test_after_a_failed_sync_the_committed_steps_are_made_durable_before_any_answer(
    tmp_path: Path,
) -> None:
    """A failed syncfs means pages of the filesystem did not reach the device, and a page
    whose writeback failed is clean in the cache: no later sync writes it again. A hole in
    the WAL on the device loses every commit after it at a crash, yet the steps stand
    committed (a count sent again with its op is answered from its journal entry). So before
    it answers anyone again the FileDB copies the WAL into the database file and empties it
    (SQLite's checkpoint, with its own fsyncs): the record is then in the database file."""
    path = tmp_path / "filedb.sqlite3"
    sync = Gated(path)
    sync.fail_next = OSError(errno.EIO, "the device failed")
    group = GroupSync(sync, hold=0)
    _not_alone(group)
    db = SQLiteFileDB(path, group_sync=group)
    op = b"op-1"
    try:
        sync.gate.release()
        with pytest.raises(StorageError, match=r"syncing filedb\.sqlite3"):
            db.upsert(KEY, 7, 1, op)
        alone = tmp_path / "alone.sqlite3"  # the database file without its WAL
        shutil.copyfile(path, alone)
        assert _visible(alone, KEY)
        assert os.path.getsize(f"{path}-wal") == 0
        sync.gate.release()
        assert db.upsert(KEY, 7, 1, op).counter == 1  # the replay, answered
    finally:
        db.close()


@pytest.mark.skipif(groupsync._syncfs is None, reason="needs a trustworthy syncfs (Linux >= 5.8)")
def test_a_filedb_file_that_is_a_symlink_syncs_where_sqlite_writes(tmp_path: Path) -> None:
    """SQLite follows a symlinked database file and keeps its WAL next to the target (an
    operator's way of putting the FileDB on another disk): the WAL fdatasynced and the
    filesystem synced are the target's, not the link's."""
    (tmp_path / "link").mkdir()
    (tmp_path / "target").mkdir()
    path = tmp_path / "link" / "filedb.sqlite3"
    path.symlink_to(tmp_path / "target" / "filedb.sqlite3")
    db = SQLiteFileDB(path)
    try:
        assert db.group_sync is groupsync.syncfs_of(tmp_path / "target")
        assert db.upsert(KEY, 7, 1).counter == 1  # alone: the WAL's own fdatasync
        assert os.path.exists(tmp_path / "target" / "filedb.sqlite3-wal")
    finally:
        db.close()


@pytest.mark.skipif(groupsync._syncfs is None, reason="needs a trustworthy syncfs (Linux >= 5.8)")
def test_an_upload_that_fails_after_its_copies_leaves_no_announcement(tmp_path: Path) -> None:
    """An upload whose copies rode the FileDB's group sync counts as announced for the next
    sync until its record is written; when it fails before (here a malformed op), the
    announcement goes with it, also when the upload before it went to disks that do not
    share the sync: later syncs do not hold for it, and a count alone is seen alone again."""
    roots = {name: tmp_path / name for name in ("a", "b", "c", "d")}
    for root in roots.values():
        root.mkdir()
    filedb = SQLiteFileDB(tmp_path / "filedb.sqlite3")
    pairdb = SQLitePairDB(tmp_path / "pairdb.sqlite3")

    def local(spec: DiskSpec) -> Disk:  # pair 1 fsyncs its files, pair 2 shares the syncs
        return LocalDisk(Path(spec.root), spec=spec, group_sync=spec.root > str(roots["b"]))

    store = BlobStore(filedb, pairdb, disk_factory=local, rng=random.Random(1))
    group = filedb.group_sync
    assert group is not None
    try:
        first = pairdb.add(
            (DiskSpec("local", str(roots["a"])), DiskSpec("local", str(roots["b"]))),
            (10**12, 10**12),
        )
        assert store.upload_whole(None, 5, b"to the disks that fsync each file").uploaded
        pairdb.set_flags(first.id, PairFlag.LOCKED)
        pairdb.add(
            (DiskSpec("local", str(roots["c"])), DiskSpec("local", str(roots["d"]))),
            (10**12, 10**12),
        )
        with pytest.raises(InvalidInput):
            store.upload_whole(None, 5, b"to the disks sharing the sync", op=b"")
        with ThreadPoolExecutor(1) as pool:
            assert pool.submit(group.quiet).result(timeout=10)  # nobody announced
    finally:
        store.close()


def test_after_a_failed_fdatasync_of_the_wal_the_steps_are_made_durable_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A count made alone whose WAL fdatasync fails stands committed as after a failed sync:
    the error is reported once, and a replay with its op would be answered from the cache;
    the FileDB checkpoints the WAL into the database file before answering anyone again."""
    path = tmp_path / "filedb.sqlite3"
    db = SQLiteFileDB(path, group_sync=GroupSync(Gated(path), hold=0))
    real = SQLiteFileDB._sync_wal
    failures = [OSError(errno.EIO, "the WAL's writeback failed")]

    def fails_once(self: SQLiteFileDB) -> None:
        if failures:
            raise failures.pop()
        real(self)

    monkeypatch.setattr(SQLiteFileDB, "_sync_wal", fails_once)
    op = b"op-1"
    try:
        with pytest.raises(StorageError, match="writeback failed"):
            db.upsert(KEY, 7, 1, op)  # alone: the WAL's own fdatasync
        alone = tmp_path / "alone.sqlite3"  # the database file without its WAL
        shutil.copyfile(path, alone)
        assert _visible(alone, KEY)
        assert db.upsert(KEY, 7, 1, op).counter == 1  # the replay, answered
    finally:
        db.close()


class Errseq:
    """Linux's report of one file's writeback errors (``errseq_t``): a failed writeback is
    reported by ``fsync``/``fdatasync`` once to each open file description that was open
    before it (or opened while nobody had seen it yet); one opened after another descriptor
    saw the error never hears of it. Installed over ``os.open``, ``os.close`` and
    ``os.fdatasync`` for the descriptors of ``path``; every other file goes to the kernel."""

    def __init__(self, path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.path = str(path)
        self.seq = 0  # writeback errors of the file so far
        self.seen = False  # whether a descriptor has reported the last one
        self.cursors: dict[int, int] = {}  # descriptor -> the errors it has reported
        real_open, real_close, real_fdatasync = os.open, os.close, os.fdatasync

        def opened(
            file: str | os.PathLike[str],
            flags: int,
            mode: int = 0o777,
            *,
            dir_fd: int | None = None,
        ) -> int:
            fd = real_open(file, flags, mode, dir_fd=dir_fd)
            if os.fspath(file) == self.path:
                self.cursors[fd] = self.seq if self.seen else 0
            return fd

        def closed(fd: int) -> None:
            self.cursors.pop(fd, None)
            real_close(fd)

        def fdatasync(fd: int) -> None:
            if fd in self.cursors and self.cursors[fd] != self.seq:
                self.cursors[fd] = self.seq
                self.seen = True
                raise OSError(errno.EIO, "the WAL's writeback failed")
            real_fdatasync(fd)

        monkeypatch.setattr(os, "open", opened)
        monkeypatch.setattr(os, "close", closed)
        monkeypatch.setattr(os, "fdatasync", fdatasync)

    def fail(self, *, seen: bool) -> None:
        """A writeback of the file failed; ``seen``: another descriptor (SQLite's own, at a
        checkpoint) has reported it already."""
        self.seq += 1
        self.seen = seen


def test_a_count_alone_sees_a_writeback_error_of_the_wal_that_sqlite_saw_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The WAL's own fdatasync (a count made alone) goes through a descriptor open since the
    FileDB opened, so a writeback error of the WAL is reported to it even when SQLite's own
    descriptor saw it first; a descriptor opened for each fdatasync never heard of it, and the
    count was answered though its record may not be on the device."""
    path = tmp_path / "filedb.sqlite3"
    kernel = Errseq(tmp_path / "filedb.sqlite3-wal", monkeypatch)
    db = SQLiteFileDB(path, group_sync=GroupSync(Gated(path), hold=0))
    try:
        assert db.upsert(KEY, 7, 1).counter == 1  # alone: the WAL's own fdatasync
        kernel.fail(seen=True)
        with pytest.raises(StorageError, match="writeback failed"):
            db.inc(KEY, 3)
        assert db.inc(KEY, 5).counter == 3  # the failed count stands committed; settled
        kernel.fail(seen=False)  # an error nobody saw yet: reported as well
        with pytest.raises(StorageError, match="writeback failed"):
            db.inc(KEY, 9)
    finally:
        db.close()
    assert kernel.cursors == {}  # its descriptor closed with it
