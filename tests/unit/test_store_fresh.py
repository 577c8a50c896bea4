"""An upload's record committed while its copies' sync runs (``FreshFileDB``): the answer
waits for both, the record is FRESH until settled, and after a crash the start's check
(``BlobStore.recover_fresh``) keeps, repairs or drops what a crash between the record's
commit and the copies' sync left. Real SQLite FileDB / PairDB, real local disks, and a real
process killed with SIGKILL."""

from __future__ import annotations

import errno
import hashlib
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from pochta.blobs.filedb.sqlite import SQLiteFileDB
from pochta.blobs.keys import blob_path, key_of
from pochta.blobs.nodes.groupsync import GroupSync, syncfs_of
from pochta.blobs.nodes.local import LocalDisk, LocalWriter
from pochta.blobs.pairs.sqlite import SQLitePairDB
from pochta.blobs.store import BlobStore, Upload
from pochta.errors import DiskError
from pochta.types import DiskSpec, FileFlag, Pair, PairFlag, Space

pytestmark = pytest.mark.skipif(syncfs_of(Path("/")) is None, reason="no trusted syncfs here")


def open_store(where: Path) -> BlobStore:
    return BlobStore(SQLiteFileDB(where / "filedb.sqlite3"), SQLitePairDB(where / "pairdb.sqlite3"))


@pytest.fixture
def where(tmp_path: Path) -> Path:
    """A data directory with one pair of two local disks, registered."""
    store = open_store(tmp_path)
    try:
        a, b = tmp_path / "a", tmp_path / "b"
        a.mkdir()
        b.mkdir()
        store.add_pair(DiskSpec("local", str(a)), DiskSpec("local", str(b)))
    finally:
        store.close()
    return tmp_path


@pytest.fixture
def store(where: Path) -> Iterator[BlobStore]:
    store = open_store(where)
    yield store
    store.close()


def roots(where: Path) -> tuple[Path, Path]:
    return where / "a", where / "b"


def holds(root: Path, key: str) -> bool:
    path = root / blob_path(key)
    return path.is_file() and hashlib.sha256(path.read_bytes()).hexdigest() == key


def test_an_upload_is_answered_without_fresh_and_its_record_settles(store: BlobStore) -> None:
    """The record is FRESH in the FileDB until the next counting step carries its settle
    (no commit of its own); callers never see the flag."""
    data = b"a small attachment\n" * 50
    stored = store.upload(None, 5, [data])
    key = stored.record.key
    assert stored.uploaded
    assert stored.record.flags == FileFlag.NONE
    assert store.stat(key).flags == FileFlag.NONE
    fresh = store.filedb.get(key)
    assert fresh is not None and fresh.flags & FileFlag.FRESH  # settled lazily
    group = LocalDisk(roots_of(store)[0]).group()
    assert group is not None
    before = group.syncs
    again = store.upload(key, 6, [data])  # only counted: the settle goes first, no sync
    assert (again.uploaded, again.record.counter, again.record.flags) == (False, 2, FileFlag.NONE)
    assert group.syncs == before
    settled = store.filedb.get(key)
    assert settled is not None and settled.flags == FileFlag.NONE


def roots_of(store: BlobStore) -> tuple[Path, Path]:
    pair = store.pairs()[0]
    return Path(pair.disks[0].root), Path(pair.disks[1].root)


def test_a_count_of_a_record_another_store_left_fresh_waits_for_a_sync(
    where: Path, store: BlobStore
) -> None:
    """A FRESH record of another uploader (another process here: its own store): its
    copies were placed before the record was committed, so one sync of each filesystem
    that starts after the count makes them durable before the count is answered."""
    data = b"placed, recorded, not yet synced\n" * 10
    key = key_of(data)
    for root in roots(where):
        (root / blob_path(key)).parent.mkdir(parents=True, exist_ok=True)
        (root / blob_path(key)).write_bytes(data)
    pair = store.pairs()[0]
    store.filedb.upsert_fresh(key, 3, pair.id, b"other")  # type: ignore[attr-defined]
    group = LocalDisk(roots(where)[0]).group()
    assert group is not None
    before = group.syncs
    record = store.inc(key, 4)
    assert (record.counter, record.flags) == (2, FileFlag.NONE)
    assert group.syncs > before
    # the store's own upload, durable, its settle on the way: carried by the count, no sync
    own = store.upload(None, 1, [b"mine"]).record.key
    before = group.syncs
    assert store.inc(own, 1).counter == 2
    assert group.syncs == before


def place(where: Path, data: bytes, *, lost: tuple[bool, bool]) -> str:
    """Both copies of ``data`` under their name, except those ``lost``: a crash before the
    sync left them empty (ext4's delayed allocation) or not there at all."""
    key = key_of(data)
    for root, gone in zip(roots(where), lost, strict=True):
        path = root / blob_path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"" if gone else data)
    if all(lost):
        (roots(where)[0] / blob_path(key)).unlink()
    return key


def test_recover_fresh_settles_repairs_and_drops(where: Path, store: BlobStore) -> None:
    pair: Pair = store.pairs()[0]
    db = store.filedb
    whole = place(where, b"both copies made it\n", lost=(False, False))
    half = place(where, b"one copy made it\n", lost=(True, False))
    none = place(where, b"no copy made it\n", lost=(True, True))
    for key in (whole, half, none):
        db.upsert_fresh(key, 7, pair.id, b"t", op=key[:8].encode())  # type: ignore[attr-defined]
    db.inc(none, 1, op=b"a count on it")  # noted beside the FRESH record
    report = store.recover_fresh()
    assert (report.checked, report.settled, report.repaired, report.dropped) == (3, 1, 1, 1)
    for key in (whole, half):
        record = db.get(key)
        assert record is not None and (record.counter, record.flags) == (1, FileFlag.NONE)
        assert all(holds(root, key) for root in roots(where))
    assert db.get(none) is None
    assert db.applied([k[:8].encode() for k in (whole, half, none)] + [b"a count on it"]) == {
        whole[:8].encode(),
        half[:8].encode(),
    }
    assert store.recover_fresh().checked == 0


def test_recover_fresh_leaves_a_record_whose_disk_is_not_there(
    where: Path, store: BlobStore
) -> None:
    """An unmounted disk (its directory without the ``tmp/`` every upload makes) is not a
    lost copy: the record stays FRESH for the next start."""
    store.upload(None, 1, [b"makes tmp/ on both disks"])
    key = place(where, b"on a disk that went away\n", lost=(False, False))
    store.filedb.upsert_fresh(key, 1, store.pairs()[0].id, b"t")  # type: ignore[attr-defined]
    os.rename(roots(where)[1] / "tmp", roots(where)[1] / "tmp-away")
    report = store.recover_fresh()
    assert report.skipped >= 1 and report.dropped == 0
    record = store.filedb.get(key)
    assert record is not None and record.flags & FileFlag.FRESH


CHILD = textwrap.dedent(
    """
    import hashlib, sys, threading, time
    from pathlib import Path
    from pochta.blobs.filedb.sqlite import SQLiteFileDB
    from pochta.blobs.nodes.local import LocalWriter
    from pochta.blobs.pairs.sqlite import SQLitePairDB
    from pochta.blobs.store import BlobStore, Upload

    where = Path(sys.argv[1])
    filedb = SQLiteFileDB(where / "filedb.sqlite3")
    store = BlobStore(filedb, SQLitePairDB(where / "pairdb.sqlite3"))
    for i in range(int(sys.argv[2])):
        data = b"acknowledged %d\\n" % i * (1 + i * 50)
        stored = store.upload(None, i + 1, [data], op=b"ack %d" % i)
        print("ack", i + 1, stored.record.key, flush=True)

    # the last upload: its copies are placed and its record committed, but the sync of the
    # copies never ends (the machine stops there)
    syncing = threading.Event()

    def stuck(self):
        syncing.set()
        threading.Event().wait()

    LocalWriter.wait_durable = stuck
    data = b"the last upload, never answered\\n" * 64
    key = hashlib.sha256(data).hexdigest()
    threading.Thread(
        target=store.upload, args=(None, 99, [data]), kwargs={"op": b"last"}, daemon=True
    ).start()
    syncing.wait()
    while store.filedb.get(key) is None:
        time.sleep(0.005)
    print("committed", key, flush=True)
    time.sleep(600)
    """
)


@pytest.mark.parametrize("lost", ["none", "one copy", "both copies"])
def test_sigkill_between_the_record_and_the_copies_sync(where: Path, lost: str) -> None:
    """A process uploads, each answer after both copies and the record are durable; then
    it is killed (SIGKILL) while its last upload's record is committed and its copies'
    sync has not ended. SIGKILL keeps the page cache, so the copies' loss of a machine
    crash is made by hand (an empty file, or none). The start's check then keeps the last
    upload (copies good), repairs it (one good), or drops it with its journaled count
    (none good); every acknowledged upload is there, counted once, both copies good."""
    script = where / "child.py"
    script.write_text(CHILD)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    child = subprocess.Popen(
        [sys.executable, str(script), str(where), "6"], stdout=subprocess.PIPE, env=env
    )
    acked: dict[str, int] = {}
    last = ""
    try:
        assert child.stdout is not None
        for line in child.stdout:
            words = line.decode().split()
            if words[0] == "ack":
                acked[words[2]] = int(words[1])
            elif words[0] == "committed":
                last = words[1]
                break
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
        if child.stdout is not None:
            child.stdout.close()
    assert len(acked) == 6 and last

    a, b = roots(where)
    if lost != "none":  # what a crash of the machine before the sync may leave
        (a / blob_path(last)).write_bytes(b"")
    if lost == "both copies":
        (b / blob_path(last)).unlink()

    store = open_store(where)  # the restart
    try:
        db = store.filedb
        record = db.get(last)
        assert record is not None and record.flags & FileFlag.FRESH
        report = store.recover_fresh()
        assert report.skipped == 0
        record = db.get(last)
        if lost == "both copies":
            assert report.dropped == 1
            assert record is None
            assert db.applied([b"last"]) == set()  # the count never happened
        else:
            assert report.repaired == (1 if lost == "one copy" else 0)
            assert record is not None and (record.counter, record.magic) == (1, 99)
            assert record.flags == FileFlag.NONE
            assert holds(a, last) and holds(b, last)
            assert db.applied([b"last"]) == {b"last"}
        for key, magic in acked.items():  # nothing acknowledged is lost
            record = db.get(key)
            assert record is not None and record.space is Space.LIVE
            assert (record.counter, record.magic, record.flags) == (1, magic, FileFlag.NONE)
            assert holds(a, key) and holds(b, key)
            assert db.applied([b"ack %d" % (magic - 1)]) == {b"ack %d" % (magic - 1)}
        assert db.fresh_keys() == []  # type: ignore[attr-defined]
    finally:
        store.close()


class UnsyncedWriter(LocalWriter):
    """A local copy whose filesystem's sync fails (a writeback error)."""

    def wait_durable(self) -> None:
        raise DiskError("disk /x: committing into place failed: Input/output error")


class UnsyncedDisk(LocalDisk):
    def create(self, name: str) -> LocalWriter:
        return UnsyncedWriter(self, self.root / name)


def test_a_failed_sync_fails_the_upload_and_drops_the_record_committed_beside_it(
    where: Path,
) -> None:
    """The record was committed FRESH while the copies' sync ran; the sync failed: the
    upload is not answered, and the record goes again with the count journaled on it."""
    store = BlobStore(
        SQLiteFileDB(where / "filedb.sqlite3"),
        SQLitePairDB(where / "pairdb.sqlite3"),
        disk_factory=lambda spec: UnsyncedDisk(Path(spec.root), spec=spec),
    )
    try:
        data = b"never durable\n" * 20
        with pytest.raises(DiskError):
            store.upload(None, 5, [data], op=b"the count")
        assert store.filedb.get(key_of(data)) is None
        assert store.applied([b"the count"]) == set()
    finally:
        store.close()


# -- two uploads of one key: FRESH belongs to the upload that inserted the record ------------
# (an independent review's repro scripts t1, t1b, t2, t3: each ended in a record with no
# readable copy or an acknowledged upload with no record)
BIG = b"same attachment, two uploaders\n" * 100_000  # > CHUNK: a streaming upload


def two_pairs(where: Path) -> tuple[Pair, Pair]:
    store = open_store(where)
    try:
        for name in "abcd":
            (where / name).mkdir()
        p1, p2 = (
            store.add_pair(DiskSpec("local", str(where / x)), DiskSpec("local", str(where / y)))
            for x, y in ("ab", "cd")
        )
    finally:
        store.close()
    return p1, p2


def committed_fresh_by_another(where: Path, data: bytes, pair: Pair, token: bytes) -> None:
    """Another uploader (a process of its own) placed its copies on ``pair`` (every byte
    written, not synced) and committed the record FRESH; its sync still runs."""
    key = key_of(data)
    for root in (Path(pair.disks[0].root), Path(pair.disks[1].root)):
        path = root / blob_path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    other = open_store(where)
    try:
        db = other.filedb
        record = db.upsert_fresh(key, 5, pair.id, token, op=b"A-op")  # type: ignore[attr-defined]
        assert record is not None
    finally:
        other.close()


def begun_on(store: BlobStore, avoid: Pair, data: bytes, op: bytes) -> Upload:
    """An upload of ``data`` begun (and its bytes written) on the other pair."""
    store.set_flags(avoid.id, PairFlag.READONLY)
    try:
        upload = store.begin_upload(key_of(data), 7, len(data), op=op)
    finally:
        store.set_flags(avoid.id, PairFlag.NONE)
    assert upload.pair.id != avoid.id
    for i in range(0, len(data), 1 << 20):
        upload.write(data[i : i + (1 << 20)])
    return upload


def test_a_second_uploader_neither_settles_the_first_ones_record_nor_answers_before_its_sync(
    tmp_path: Path,
) -> None:
    """A (pair 1) committed the record FRESH, its sync running; B (pair 2) finishes: B
    counts on A's record only after a sync of pair 1's filesystem that started after A's
    commit, and B never clears A's FRESH (review t1: B settled it; a loss of pair 1's
    unsynced copies then left a record with no copy)."""
    p1, _ = two_pairs(tmp_path)
    key = key_of(BIG)
    b = open_store(tmp_path)
    try:
        upload = begun_on(b, p1, BIG, b"B-op")
        committed_fresh_by_another(tmp_path, BIG, p1, b"A's token")
        group = LocalDisk(tmp_path / "a").group()
        assert group is not None
        before = group.syncs
        stored = upload.finish()
        assert stored.record.pair_id == p1.id and stored.record.counter == 2
        assert stored.record.flags == FileFlag.NONE
        # B's own copies' sync, then one for A's copies before the count (and one after it)
        assert group.syncs >= before + 2
    finally:
        b.close()  # any settle B held is written now
    store = open_store(tmp_path)
    try:
        record = store.filedb.get(key)
        assert record is not None and record.flags & FileFlag.FRESH  # A's, for A to settle
        assert store.filedb.fresh_keys() == [(key, b"A's token")]  # type: ignore[attr-defined]
        assert store.applied([b"A-op", b"B-op"]) == {b"A-op", b"B-op"}
        report = store.recover_fresh()  # A's copies are good: kept and settled
        assert (report.settled, report.dropped) == (1, 0)
        assert b"".join(store.open(key)) == BIG
    finally:
        store.close()


class UnsyncableDisk(LocalDisk):
    """A local disk whose filesystem's sync fails (a writeback error)."""

    def group(self) -> GroupSync | None:
        def fail() -> None:
            raise OSError(errno.EIO, "Input/output error")

        return GroupSync(fail)


def test_a_second_uploader_whose_wait_for_the_records_copies_fails_counts_nothing(
    tmp_path: Path,
) -> None:
    """B waits for the copies of A's FRESH record (pair 1) before counting on it; when that
    sync fails, B's upload fails and B's count is nowhere, A's record untouched (review
    t1b: B answered before pair 1's copies were durable, and the start's drop of A's
    record then removed B's acknowledged count)."""
    p1, _ = two_pairs(tmp_path)
    key = key_of(BIG)
    unsyncable = {str(tmp_path / "a"), str(tmp_path / "b")}
    b = BlobStore(
        SQLiteFileDB(tmp_path / "filedb.sqlite3"),
        SQLitePairDB(tmp_path / "pairdb.sqlite3"),
        disk_factory=lambda spec: (
            UnsyncableDisk(Path(spec.root), spec=spec)
            if spec.root in unsyncable
            else LocalDisk(Path(spec.root), spec=spec)
        ),
    )
    try:
        upload = begun_on(b, p1, BIG, b"B-op")
        committed_fresh_by_another(tmp_path, BIG, p1, b"A's token")
        with pytest.raises(DiskError):
            upload.finish()
        record = b.filedb.get(key)
        assert record is not None and (record.counter, record.pair_id) == (1, p1.id)
        assert record.flags & FileFlag.FRESH
        assert b.applied([b"A-op", b"B-op"]) == {b"A-op"}
    finally:
        b.close()


def test_a_second_uploader_whose_own_sync_fails_leaves_the_first_ones_record(
    tmp_path: Path,
) -> None:
    """B's own copies (pair 2) fail to sync: B fails, without dropping A's FRESH record
    (review t3: B's drop matched A's record, which A then answered) and without a count."""
    p1, p2 = two_pairs(tmp_path)
    key = key_of(BIG)
    unsyncable = {str(tmp_path / "c"), str(tmp_path / "d")}
    b = BlobStore(
        SQLiteFileDB(tmp_path / "filedb.sqlite3"),
        SQLitePairDB(tmp_path / "pairdb.sqlite3"),
        disk_factory=lambda spec: (
            UnsyncedDisk(Path(spec.root), spec=spec)
            if spec.root in unsyncable
            else LocalDisk(Path(spec.root), spec=spec)
        ),
    )
    try:
        upload = begun_on(b, p1, BIG, b"B-op")
        assert upload.pair.id == p2.id
        committed_fresh_by_another(tmp_path, BIG, p1, b"A's token")
        with pytest.raises(DiskError):
            upload.finish()
        record = b.filedb.get(key)
        assert record is not None and (record.counter, record.pair_id) == (1, p1.id)
        assert record.flags & FileFlag.FRESH
        assert b.filedb.fresh_keys() == [(key, b"A's token")]  # type: ignore[attr-defined]
        assert b.applied([b"A-op", b"B-op"]) == {b"A-op"}
    finally:
        b.close()


def test_a_held_settle_never_clears_a_later_upload_of_the_key(where: Path) -> None:
    """X uploads a key (its settle held for its next counting step) and goes idle; Y's dec
    moves the record to space1; Z uploads the key again (FRESH, its sync running); X's
    next step writes its held settle: Z's FRESH stays (review t2: it was cleared, and a
    crash then left a settled record naming copies that never reached the device)."""
    x, y = open_store(where), open_store(where)
    try:
        data = b"an attachment mailed twice\n" * 1000
        key = x.upload(None, 5, [data]).record.key
        assert y.dec(key, 5).space is Space.DELETED
        pair = y.pairs()[0]
        for root in roots(where):  # Z's copies, placed
            (root / blob_path(key)).unlink(missing_ok=True)
            (root / blob_path(key)).write_bytes(data)
        z = y.filedb.upsert_fresh(key, 6, pair.id, b"Z's token")  # type: ignore[attr-defined]
        assert z is not None
        x.upload(None, 1, [b"anything else"])  # X's next counting step
        record = y.filedb.get(key)
        assert record is not None and record.flags & FileFlag.FRESH
        assert (key, b"Z's token") in y.filedb.fresh_keys()  # type: ignore[attr-defined]
        x.close()  # and at close
        record = y.filedb.get(key)
        assert record is not None and record.flags & FileFlag.FRESH
    finally:
        x.close()
        y.close()


def test_a_retry_of_an_upload_answers_its_first_attempts_count_without_settling_it(
    tmp_path: Path,
) -> None:
    """A client's retry (the same op) of an upload whose first attempt committed the record
    FRESH and stopped: the retry is answered with that count (not a second one) after a
    sync of the record's disks, and leaves FRESH to the start's check (the review: the
    retry settled the first attempt's record)."""
    p1, _ = two_pairs(tmp_path)
    key = key_of(BIG)
    b = open_store(tmp_path)
    try:
        upload = begun_on(b, p1, BIG, b"A-op")
        committed_fresh_by_another(tmp_path, BIG, p1, b"A's token")  # the first attempt
        stored = upload.finish()
        assert (stored.record.counter, stored.record.pair_id) == (1, p1.id)
    finally:
        b.close()
    store = open_store(tmp_path)
    try:
        assert store.filedb.fresh_keys() == [(key, b"A's token")]  # type: ignore[attr-defined]
    finally:
        store.close()
