"""The loader (pochta.blobs.store.BlobStore) with real SQLite FileDB / PairDB and real local
disks under tmp_path. The only stand-ins are disks that fail on purpose."""

from __future__ import annotations

import errno
import os
import random
import threading
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from pochta.blobs.filedb.sqlite import SQLiteFileDB
from pochta.blobs.keys import blob_path, key_of, master_index
from pochta.blobs.nodes.groupsync import syncfs_of
from pochta.blobs.nodes.local import PROBE, LocalDisk, LocalWriter
from pochta.blobs.pairs.sqlite import SQLitePairDB
from pochta.blobs.store import BlobStore, Stored
from pochta.errors import (
    BadKey,
    BadMagic,
    BlobNotFound,
    ContentMismatch,
    DiskError,
    IntegrityError,
    NoWritablePair,
    StorageError,
)
from pochta.types import BlobReader, BlobWriter, Disk, DiskSpec, FileFlag, Pair, PairFlag, Space

DiskFactory = Callable[[DiskSpec], Disk]


def local(spec: DiskSpec) -> Disk:
    return LocalDisk(Path(spec.root), spec=spec)


@dataclass
class Rig:
    store: BlobStore
    pairs: list[Pair]
    disks_dir: Path

    def roots(self, pair: Pair) -> tuple[Path, Path]:
        return Path(pair.disks[0].root), Path(pair.disks[1].root)

    def pair(self, pair_id: int) -> Pair:
        return next(p for p in self.pairs if p.id == pair_id)


def files(root: Path) -> list[str]:
    """Every regular file under a disk root (temporary ones included)."""
    if not root.exists():
        return []
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def specs(disks_dir: Path, n_pairs: int) -> list[tuple[DiskSpec, DiskSpec]]:
    return [
        (DiskSpec("local", str(disks_dir / f"p{i}a")), DiskSpec("local", str(disks_dir / f"p{i}b")))
        for i in range(1, n_pairs + 1)
    ]


@pytest.fixture
def make_rig(tmp_path: Path) -> Iterator[Callable[..., Rig]]:
    """Build a store with ``n_pairs`` pairs of local disks (registered without probing, so
    that a test may break a disk first); ``factory`` maps a disk spec to its Disk."""
    stores: list[BlobStore] = []

    def make(n_pairs: int = 1, factory: DiskFactory = local, seed: int = 1) -> Rig:
        disks_dir = tmp_path / "disks"
        filedb = SQLiteFileDB(tmp_path / f"filedb-{len(stores)}.sqlite3")
        pairdb = SQLitePairDB(tmp_path / f"pairdb-{len(stores)}.sqlite3")
        store = BlobStore(filedb, pairdb, disk_factory=factory, rng=random.Random(seed))
        stores.append(store)
        pairs = []
        for a, b in specs(disks_dir, n_pairs):
            Path(a.root).mkdir(parents=True)
            Path(b.root).mkdir(parents=True)
            pairs.append(pairdb.add((a, b), (10**12, 10**12)))
        return Rig(store, pairs, disks_dir)

    yield make
    for store in stores:
        store.close()


@pytest.fixture
def rig(make_rig: Callable[..., Rig]) -> Rig:
    return make_rig()


def blob(size: int = 200_000, seed: int = 0, master: int | None = None) -> tuple[bytes, str]:
    """Random content and its key; with ``master``, content whose key names that disk."""
    rng = random.Random(seed)
    while True:
        data = rng.randbytes(size)
        key = key_of(data)
        if master is None or master_index(key) == master:
            return data, key


def chunked(data: bytes, size: int = 65_536) -> Iterator[bytes]:
    for i in range(0, len(data), size):
        yield data[i : i + size]


def read(opened: Iterable[bytes]) -> bytes:
    return b"".join(opened)


def where(rig: Rig) -> dict[str, list[str]]:
    """Which disk roots hold what, for the non-empty ones."""
    found = {}
    for pair in rig.pairs:
        for root in rig.roots(pair):
            if names := files(root):
                found[root.name] = names
    return found


# -- put, upload, dedup -------------------------------------------------------------------------
def test_put_twice_keeps_one_record_and_one_file_per_disk(
    make_rig: Callable[..., Rig], tmp_path: Path
) -> None:
    rig = make_rig(n_pairs=2)
    data, key = blob()
    path = tmp_path / "attachment.bin"
    path.write_bytes(data)
    read_bytes: list[int] = []

    first = rig.store.put(path, 345, progress=read_bytes.append)
    assert first.uploaded
    assert (first.record.counter, first.record.magic, first.size) == (1, 345, len(data))
    assert first.crc32 == zlib.crc32(data)
    assert sum(read_bytes) == 2 * len(data)  # hashed, then uploaded

    read_bytes.clear()
    second = rig.store.put(path, 123, progress=read_bytes.append)
    assert not second.uploaded
    assert (second.record.counter, second.record.magic) == (2, 468)
    assert second.record.pair_id == first.record.pair_id
    assert sum(read_bytes) == len(data)

    pair = rig.pair(first.record.pair_id)
    assert where(rig) == {root.name: [blob_path(key)] for root in rig.roots(pair)}
    for root in rig.roots(pair):
        assert (root / blob_path(key)).read_bytes() == data
    assert rig.store.stat(key) == second.record


def test_of_two_racing_uploads_of_one_content_only_the_first_recorded_is_the_first_copy(
    rig: Rig,
) -> None:
    """Two deliveries of one new attachment at once (the queue runner delivers letters
    concurrently): both write the bytes, one records them first. Only that one stored the first
    copy; the other counted (the deliveries' metrics "uploaded" and "deduplicated" follow this)."""
    data, key = blob()
    other: list[Stored] = []

    def chunks() -> Iterator[bytes]:
        yield data[:1000]
        other.append(rig.store.upload(key, 1, chunked(data)))  # finishes first
        yield data[1000:]

    late = rig.store.upload(key, 2, chunks())
    assert [(s.uploaded, s.first_copy) for s in other] == [(True, True)]
    assert late.uploaded and not late.first_copy  # its bytes written, only counted
    assert (late.record.counter, late.record.magic) == (2, 3)
    assert read(rig.store.open(key)) == data


def test_upload_without_a_key_names_the_content(rig: Rig) -> None:
    data, key = blob()
    stored = rig.store.upload(None, 7, chunked(data))
    assert stored.record.key == key
    assert stored.uploaded
    assert read(rig.store.open(key)) == data


def test_upload_of_a_live_key_only_counts(rig: Rig) -> None:
    data, key = blob()
    rig.store.upload(key, 1, chunked(data))
    before = where(rig)
    stored = rig.store.upload(key, 2, chunked(data))
    assert not stored.uploaded
    assert (stored.record.counter, stored.record.magic) == (2, 3)
    assert where(rig) == before


def test_inc_and_dec_through_the_store(rig: Rig) -> None:
    data, key = blob()
    with pytest.raises(BlobNotFound):
        rig.store.inc(key, 345)
    rig.store.upload(key, 345, chunked(data))
    assert rig.store.inc(key, 123).magic == 468
    assert rig.store.dec(key, 345).counter == 1


def test_the_journal_and_records_through_the_store(rig: Rig) -> None:
    data, key = blob()
    assert rig.store.record(key) is None
    rig.store.upload(key, 3, chunked(data), op=b"op-1")
    rig.store.inc(key, 4, b"op-2")
    rig.store.inc(key, 4, b"op-2")  # a replay: journaled, so not counted again
    record = rig.store.record(key)
    assert record is not None and (record.counter, record.magic) == (2, 7)
    assert rig.store.applied([b"op-1", b"op-2", b"op-3"]) == {b"op-1", b"op-2"}
    assert rig.store.journal() == [b"op-1", b"op-2"]
    assert rig.store.journal(after=b"op-1", limit=5) == [b"op-2"]
    rig.store.forget_ops([b"op-1", b"unknown"])
    assert rig.store.journal() == [b"op-2"]


def test_pairs_and_their_flags_through_the_store(rig: Rig) -> None:
    (pair,) = rig.store.pairs()
    assert pair == rig.pairs[0]
    changed = rig.store.set_flags(pair.id, PairFlag.READONLY)
    assert changed.flags == PairFlag.READONLY and rig.store.pairs() == [changed]


def test_a_key_that_does_not_match_the_content_leaves_nothing(rig: Rig) -> None:
    data, key = blob()
    _, wrong = blob(seed=1)
    with pytest.raises(ContentMismatch) as info:
        rig.store.upload(wrong, 5, chunked(data))
    assert key in info.value.message
    assert wrong in info.value.message
    assert where(rig) == {}
    assert rig.store.filedb.get(wrong) is None
    assert rig.store.filedb.get(key) is None


def test_an_upload_cleans_up_after_itself_without_a_with_block(rig: Rig) -> None:
    """``Upload``: any exception before ``finish`` returns removes every temporary byte."""
    data, _ = blob()
    _, wrong = blob(seed=1)
    up = rig.store.begin_upload(wrong, 5, size_hint=len(data))
    assert up.pair is not None
    assert up.pair.id == rig.pairs[0].id
    for chunk in chunked(data):
        up.write(chunk)
    in_flight = where(rig)
    assert len(in_flight) == 2  # both disks receive the bytes at once, under tmp/
    assert all(len(names) == 1 and names[0].startswith("tmp/") for names in in_flight.values())
    with pytest.raises(ContentMismatch):
        up.finish()
    assert where(rig) == {}
    up.abort()  # harmless afterwards


def test_a_live_key_gets_no_pair(rig: Rig) -> None:
    data, key = blob()
    rig.store.upload(key, 1, chunked(data))
    with rig.store.begin_upload(key, 2) as up:
        assert up.pair is None
        for chunk in chunked(data):
            up.write(chunk)
        assert up.finish().record.counter == 2


def test_a_mismatching_upload_of_a_live_key_changes_nothing(rig: Rig) -> None:
    data, key = blob()
    rig.store.upload(key, 5, chunked(data))
    before = where(rig)
    with pytest.raises(ContentMismatch):
        rig.store.upload(key, 6, chunked(blob(seed=1)[0]))
    assert rig.store.stat(key).counter == 1
    assert where(rig) == before


def test_bad_key_and_bad_magic_are_refused_before_any_byte(rig: Rig, tmp_path: Path) -> None:
    data, key = blob()
    path = tmp_path / "a.bin"
    path.write_bytes(data)
    with pytest.raises(BadMagic):
        rig.store.put(path, 0)
    with pytest.raises(BadMagic):
        rig.store.upload(key, 2**32, chunked(data))
    with pytest.raises(BadKey):
        rig.store.upload(key.upper(), 1, chunked(data))
    with pytest.raises(BadKey):
        rig.store.stat("../../etc/passwd")
    assert where(rig) == {}


def test_unknown_key(rig: Rig) -> None:
    _, key = blob()
    with pytest.raises(BlobNotFound):
        rig.store.stat(key)
    with pytest.raises(BlobNotFound):
        rig.store.open(key)
    with pytest.raises(BlobNotFound):
        rig.store.dec(key, 1)


def test_loaders_uploading_the_same_file_at_once(rig: Rig) -> None:
    """Two recipients, two loaders, one file (seed 004): temporary names never collide, the
    renames leave one good copy per disk, and the upsert counts every loader."""
    data, key = blob(size=500_000)
    start = threading.Barrier(6)

    def loader(magic: int) -> Stored:
        start.wait()
        return rig.store.upload(key, magic, chunked(data))

    with ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(loader, range(1, 7)))
    assert sorted(r.record.counter for r in results) == list(range(1, 7))
    record = rig.store.stat(key)
    assert (record.counter, record.magic) == (6, 21)
    pair = rig.pairs[0]
    assert where(rig) == {root.name: [blob_path(key)] for root in rig.roots(pair)}
    for root in rig.roots(pair):
        assert (root / blob_path(key)).read_bytes() == data


@pytest.mark.skipif(syncfs_of(Path("/")) is None, reason="no trusted syncfs here")
def test_both_copies_on_one_filesystem_take_one_sync_in_the_uploading_thread(rig: Rig) -> None:
    """The two local copies of a pair are placed, then wait once for their filesystem's
    sync, in the uploading thread: waiting for each copy on its own, in two threads, could
    take two syncs in a row (the second copy missing the sync the first one joined)."""
    group = LocalDisk(Path(rig.pairs[0].disks[0].root)).group()
    assert group is not None
    uploads = [blob(size=5000, seed=i) for i in range(8)]
    others = {t.ident for t in threading.enumerate()}
    before = group.syncs  # the group is the filesystem's: earlier tests' syncs count in it
    for data, key in uploads:
        assert rig.store.upload(key, 1, [data]).uploaded
    # alone: one sync for the copies; the record's commit alone fsyncs the FileDB's WAL
    assert group.syncs - before == len(uploads)
    assert {t.ident for t in threading.enumerate()} <= others  # no thread started for it
    for root in rig.roots(rig.pairs[0]):
        for data, key in uploads:
            assert (root / blob_path(key)).read_bytes() == data
        assert list((root / "tmp").iterdir()) == []


def _open_descriptors() -> set[str]:
    return {
        os.readlink(f"/proc/self/fd/{fd}")
        for fd in os.listdir("/proc/self/fd")
        if os.path.exists(f"/proc/self/fd/{fd}")
    }


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc")
def test_a_local_copy_is_written_through_its_descriptor_and_closed(tmp_path: Path) -> None:
    """A local writer (a raw descriptor, no file object): the new file gets the mode
    ``open(path, "xb")`` gives (0o666 less the umask), every byte of every chunk, and its
    descriptor is closed by placing, by aborting, and when the writer is dropped unfinished;
    a temporary name already taken is refused."""
    disk = LocalDisk(tmp_path / "d")
    (tmp_path / "d").mkdir()
    umask = os.umask(0o022)
    os.umask(umask)
    chunks = [os.urandom(3), b"", os.urandom(1 << 20), os.urandom(70_000)]
    writer = disk.create("tmp/a.part")  # tmp/ made on the way
    path = tmp_path / "d" / "tmp" / "a.part"
    assert str(path) in _open_descriptors()
    for chunk in chunks:
        writer.write(chunk)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask
    with pytest.raises(DiskError, match="creating a file"):
        disk.create("tmp/a.part")
    writer.commit_as("ab/cd/a")  # group sync or fsync, then the name
    assert (tmp_path / "d" / "ab" / "cd" / "a").read_bytes() == b"".join(chunks)
    assert not path.exists()
    final = str(tmp_path / "d" / "ab" / "cd" / "a")
    assert not any(name.startswith((str(path), final)) for name in _open_descriptors())
    aborted = disk.create("tmp/b.part")
    aborted.write(b"x")
    aborted.abort()
    assert not (tmp_path / "d" / "tmp" / "b.part").exists()
    dropped = disk.create("tmp/c.part")
    assert any(name.endswith("c.part") for name in _open_descriptors())
    del dropped
    assert not any(name.endswith("c.part") for name in _open_descriptors())


# -- reads --------------------------------------------------------------------------------------
@pytest.mark.parametrize("master", [0, 1])
def test_reads_come_from_the_master_disk_then_the_other(rig: Rig, master: int) -> None:
    data, key = blob(master=master)
    rig.store.upload(key, 1, chunked(data))
    pair = rig.pairs[0]
    opened = rig.store.open(key)
    assert opened.disk == pair.disks[master]
    assert opened.size == len(data)
    assert read(opened) == data

    (rig.roots(pair)[master] / blob_path(key)).unlink()
    opened = rig.store.open(key)
    assert opened.disk == pair.disks[1 - master]
    assert read(opened) == data

    (rig.roots(pair)[1 - master] / blob_path(key)).unlink()
    with pytest.raises(StorageError) as info:
        rig.store.open(key)
    assert not isinstance(info.value, IntegrityError)


def test_expected_size_and_crc32(rig: Rig) -> None:
    data, key = blob(master=0)
    stored = rig.store.upload(key, 1, chunked(data))
    opened = rig.store.open(key, expect_size=len(data), expect_crc32=stored.crc32)
    assert opened.disk == rig.pairs[0].disks[0]
    assert read(opened) == data
    assert read(rig.store.open(key, expect_size=len(data))) == data
    with pytest.raises(IntegrityError):
        rig.store.open(key, expect_size=len(data) + 1)
    with pytest.raises(IntegrityError):
        rig.store.open(key, expect_crc32=stored.crc32 ^ 1)
    with pytest.raises(IntegrityError):
        rig.store.open(key, expect_size=len(data) - 1, expect_crc32=stored.crc32)


@pytest.mark.parametrize("master", [0, 1])
def test_a_corrupt_master_copy_falls_back_to_the_good_one(rig: Rig, master: int) -> None:
    data, key = blob(master=master)
    stored = rig.store.upload(key, 1, chunked(data))
    pair = rig.pairs[0]
    bad = rig.roots(pair)[master] / blob_path(key)
    corrupt = bytearray(data)
    corrupt[len(data) // 2] ^= 0xFF
    bad.write_bytes(bytes(corrupt))  # same size, one byte flipped

    opened = rig.store.open(key, expect_size=len(data), expect_crc32=stored.crc32)
    assert opened.disk == pair.disks[1 - master]
    assert read(opened) == data

    (rig.roots(pair)[1 - master] / blob_path(key)).write_bytes(bytes(corrupt))
    with pytest.raises(IntegrityError):
        rig.store.open(key, expect_size=len(data), expect_crc32=stored.crc32)


def test_a_truncated_master_copy_falls_back_on_expected_size(rig: Rig) -> None:
    data, key = blob(master=1)
    rig.store.upload(key, 1, chunked(data))
    pair = rig.pairs[0]
    (rig.roots(pair)[1] / blob_path(key)).write_bytes(data[:-10])
    opened = rig.store.open(key, expect_size=len(data))
    assert opened.disk == pair.disks[0]
    assert read(opened) == data


def test_range_reads(rig: Rig) -> None:
    data, key = blob(size=300_000, master=0)
    stored = rig.store.upload(key, 1, chunked(data))
    opened = rig.store.open(key, start=1000, end=2000)
    assert opened.size == len(data)  # the whole size, for Content-Range
    assert read(opened) == data[1000:2000]
    assert read(rig.store.open(key, start=299_990)) == data[299_990:]
    assert read(rig.store.open(key, start=5, end=10**9)) == data[5:]
    checked = rig.store.open(key, start=10, end=20, expect_crc32=stored.crc32)
    assert read(checked) == data[10:20]
    again = rig.store.reopen(opened, 0, 3)
    assert (again.disk, again.size) == (opened.disk, len(data))
    assert read(again) == data[:3]
    # a range served by the other disk when the master copy is gone
    (rig.roots(rig.pairs[0])[0] / blob_path(key)).unlink()
    fallback = rig.store.open(key, start=100, end=200)
    assert fallback.disk == rig.pairs[0].disks[1]
    assert read(fallback) == data[100:200]


def test_dec_to_zero_moves_the_record_and_the_file_stays_readable(rig: Rig) -> None:
    data, key = blob()
    rig.store.upload(key, 5, chunked(data))
    record = rig.store.dec(key, 5)
    assert (record.space, record.counter, record.magic) == (Space.DELETED, 0, 0)
    assert record.moved_at is not None
    assert rig.store.stat(key) == record
    assert read(rig.store.open(key)) == data
    assert len(where(rig)) == 2  # Valkyrie removes it later, through quarantine
    # a late dec for a reference the store did not know about: back to live, flagged
    again = rig.store.dec(key, 9)
    assert (again.space, again.counter, again.flags) == (Space.LIVE, -1, FileFlag.DO_NOT_DELETE)


# -- placement over real and failing disks ------------------------------------------------------
class CountingDisk(LocalDisk):
    """A local disk that counts its probes: of the disk, and the creation of an upload's
    temporary file (which the upload then probes)."""

    def __init__(self, spec: DiskSpec, probes: Counter[DiskSpec]) -> None:
        super().__init__(Path(spec.root), spec=spec)
        self.probes = probes

    def probe(self) -> None:
        self.probes[self.spec] += 1
        super().probe()

    def create(self, name: str) -> LocalWriter:
        self.probes[self.spec] += 1
        return super().create(name)


def test_a_pair_with_an_unwritable_disk_is_skipped(make_rig: Callable[..., Rig]) -> None:
    probes: Counter[DiskSpec] = Counter()

    rig = make_rig(n_pairs=2, factory=lambda spec: CountingDisk(spec, probes))
    broken, good = rig.pairs
    (rig.roots(broken)[1] / "tmp").write_bytes(b"a file where the tmp directory should be")
    for seed in range(12):
        data, key = blob(size=20_000, seed=seed)
        assert rig.store.upload(key, 1, chunked(data)).record.pair_id == good.id
    assert probes[broken.disks[1]] >= 1  # it was tried, and refused
    assert files(rig.roots(broken)[0]) == []
    assert files(rig.roots(broken)[1]) == ["tmp"]
    assert not any("tmp/" in name for root in rig.roots(good) for name in files(root))


def test_add_pair_probes_both_disks(make_rig: Callable[..., Rig], tmp_path: Path) -> None:
    rig = make_rig(n_pairs=0)
    a, b = tmp_path / "new-a", tmp_path / "new-b"
    b.write_bytes(b"a file, not a directory")
    with pytest.raises(DiskError):
        rig.store.add_pair(DiskSpec("local", str(a)), DiskSpec("local", str(b)))
    assert rig.store.pairdb.list() == []
    b.unlink()
    pair = rig.store.add_pair(DiskSpec("local", str(a)), DiskSpec("local", str(b)))
    assert min(pair.free) > 0
    assert rig.store.pairdb.list() == [pair]


class FullWriter:
    def __init__(self, inner: BlobWriter, spec: DiskSpec, budget: int) -> None:
        self._inner = inner
        self._spec = spec
        self._left = budget

    def probe(self) -> None:
        if len(PROBE) > self._left:  # the probe's bytes do not fit either (then go again)
            raise DiskError(f"disk {self._spec} is full (probing)")
        self._inner.probe()

    def write(self, chunk: bytes) -> None:
        if len(chunk) > self._left:
            raise DiskError(f"disk {self._spec} is full (writing)") from OSError(
                errno.ENOSPC, os.strerror(errno.ENOSPC)
            )
        self._left -= len(chunk)
        self._inner.write(chunk)

    def commit(self) -> None:
        self._inner.commit()

    def commit_as(self, name: str) -> None:
        self._inner.commit_as(name)

    def abort(self) -> None:
        self._inner.abort()


class FullDisk:
    """A local disk that runs out of space after ``budget`` bytes per file and reports
    ``free`` bytes free (a full disk that does not know it, or a quota)."""

    def __init__(self, spec: DiskSpec, budget: int, free: int) -> None:
        self.spec = spec
        self._inner = LocalDisk(Path(spec.root), spec=spec)
        self._budget = budget
        self._free = free

    def create(self, name: str) -> BlobWriter:
        return FullWriter(self._inner.create(name), self.spec, self._budget)

    def publish(self, tmp_name: str, name: str) -> None:
        self._inner.publish(tmp_name, name)

    def open(self, name: str, start: int = 0, end: int | None = None) -> BlobReader:
        return self._inner.open(name, start, end)

    def size(self, name: str) -> int | None:
        return self._inner.size(name)

    def delete(self, name: str) -> None:
        self._inner.delete(name)

    def free_bytes(self) -> int:
        return self._free

    def probe(self) -> None:
        writer = self.create("tmp/probe.part")
        try:
            writer.write(b"pochta probe\n")
        finally:
            writer.abort()


def full_first_disk(budget: int, free: int) -> DiskFactory:
    """Disk a of pair 1 is full; every other disk is a plain local one."""

    def factory(spec: DiskSpec) -> Disk:
        if spec.root.endswith("p1a"):
            return FullDisk(spec, budget, free)
        return local(spec)

    return factory


def test_running_out_of_space_mid_write_fails_cleanly(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(n_pairs=1, factory=full_first_disk(budget=100_000, free=10**12))
    data, key = blob(size=1_000_000)
    with pytest.raises(DiskError) as info:
        rig.store.upload(key, 1, chunked(data))
    assert "full" in info.value.message
    assert isinstance(info.value, StorageError)
    assert where(rig) == {}  # no temporary file on either disk
    assert rig.store.filedb.get(key) is None


def test_a_disk_too_full_for_the_probe_sends_the_upload_elsewhere(
    make_rig: Callable[..., Rig],
) -> None:
    rig = make_rig(n_pairs=2, factory=full_first_disk(budget=0, free=10**12))
    full, other = rig.pairs
    for seed in range(8):
        data, key = blob(size=50_000, seed=seed)
        assert rig.store.upload(key, 1, chunked(data)).record.pair_id == other.id
    assert files(rig.roots(full)[0]) == []
    assert files(rig.roots(full)[1]) == []


def test_a_disk_reporting_too_little_room_is_not_chosen(
    make_rig: Callable[..., Rig], tmp_path: Path
) -> None:
    rig = make_rig(n_pairs=2, factory=full_first_disk(budget=10**9, free=100_000))
    full, other = rig.pairs
    for seed in range(8):
        data, _ = blob(size=200_000, seed=seed)
        path = tmp_path / f"{seed}.bin"
        path.write_bytes(data)
        assert rig.store.put(path, 1).record.pair_id == other.id
    assert files(rig.roots(full)[0]) == []


@pytest.mark.parametrize(
    "flags", [(PairFlag.READONLY, PairFlag.SERVICE), (PairFlag.LOCKED, PairFlag.READONLY)]
)
def test_only_non_writable_pairs_means_no_writable_pair(
    make_rig: Callable[..., Rig], tmp_path: Path, flags: tuple[PairFlag, PairFlag]
) -> None:
    rig = make_rig(n_pairs=2)
    for pair, flag in zip(rig.pairs, flags, strict=True):
        rig.store.pairdb.set_flags(pair.id, flag)
    data, key = blob()
    path = tmp_path / "a.bin"
    path.write_bytes(data)
    with pytest.raises(NoWritablePair):
        rig.store.upload(key, 1, chunked(data))
    with pytest.raises(NoWritablePair):
        rig.store.put(path, 1)
    assert where(rig) == {}
    assert rig.store.filedb.get(key) is None


def test_no_pairs_at_all(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(n_pairs=0)
    data, key = blob()
    with pytest.raises(NoWritablePair):
        rig.store.upload(key, 1, chunked(data))


def test_every_pair_failing_its_probe_names_them_all(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(n_pairs=2)
    for pair in rig.pairs:
        (rig.roots(pair)[0] / "tmp").write_bytes(b"not a directory")
    data, key = blob()
    with pytest.raises(NoWritablePair) as info:
        rig.store.upload(key, 1, chunked(data))
    for pair in rig.pairs:
        assert f"pair {pair.id}" in info.value.message
    assert rig.store.filedb.get(key) is None


# -- a small file in hand (upload_whole) --------------------------------------------------------
def test_a_small_file_in_hand_with_a_wrong_key_touches_no_disk(
    make_rig: Callable[..., Rig],
) -> None:
    """Its bytes are hashed before any disk is touched: not even a temporary file is made."""
    probes: Counter[DiskSpec] = Counter()
    rig = make_rig(factory=lambda spec: CountingDisk(spec, probes))
    data, key = blob(size=4096)
    _, wrong = blob(size=4096, seed=1)
    with pytest.raises(ContentMismatch) as info:
        rig.store.upload(wrong, 5, [data])
    assert key in info.value.message
    assert sum(probes.values()) == 0  # no file was created on either disk
    assert where(rig) == {}
    assert rig.store.filedb.get(wrong) is None and rig.store.filedb.get(key) is None


class NoWriteWriter(LocalWriter):
    """A local file whose content never gets written (the disk fails it)."""

    def write(self, chunk: bytes) -> None:
        raise DiskError("disk refuses the bytes (writing)")


class NoWriteDisk(LocalDisk):
    def create(self, name: str) -> LocalWriter:
        return NoWriteWriter(self, self.root / name)


def test_a_small_file_the_first_pair_cannot_write_is_stored_on_another(
    make_rig: Callable[..., Rig],
) -> None:
    """The content of a small file in hand is its own probe on local disks: a pair whose
    disk refuses the bytes is left for another, and keeps nothing of them."""

    def factory(spec: DiskSpec) -> Disk:
        if spec.root.endswith("p1b"):
            return NoWriteDisk(Path(spec.root), spec=spec)
        return local(spec)

    rig = make_rig(n_pairs=2, factory=factory)
    broken, good = rig.pairs
    for seed in range(6):
        data, key = blob(size=3000, seed=seed)
        stored = rig.store.upload(key, 1, [data[:1000], data[1000:]])
        assert stored.uploaded and stored.record.pair_id == good.id
        assert (stored.size, stored.crc32) == (len(data), zlib.crc32(data))
        for root in rig.roots(good):
            assert (root / blob_path(key)).read_bytes() == data
    assert files(rig.roots(broken)[0]) == [] and files(rig.roots(broken)[1]) == []


def test_an_empty_file_in_hand_is_probed_and_stored(rig: Rig) -> None:
    key = key_of(b"")
    stored = rig.store.upload(key, 9, [b""])
    assert stored.uploaded and (stored.size, stored.record.counter) == (0, 1)
    for root in rig.roots(rig.pairs[0]):
        assert (root / blob_path(key)).read_bytes() == b""
        assert list((root / "tmp").iterdir()) == []
    again = rig.store.upload(key, 1, [])
    assert not again.uploaded and (again.record.counter, again.record.magic) == (2, 10)
