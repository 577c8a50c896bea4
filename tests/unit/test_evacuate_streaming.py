"""Evacuation streams (pochta.blobs.evacuate): memory bounded by one chunk, never by the
file; a source copy that turns out bad midway leaves nothing behind and the sibling is used;
the record's counter and magic are not touched (a copy is not a reference)."""

from __future__ import annotations

import gc
import hashlib
import tracemalloc
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pochta.blobs.evacuate import evacuate
from pochta.blobs.filedb.memory import MemoryFileDB
from pochta.blobs.keys import blob_path, master_index
from pochta.blobs.nodes import local
from pochta.blobs.nodes.local import LocalDisk, LocalReader, LocalWriter
from pochta.blobs.pairs.memory import MemoryPairDB
from pochta.blobs.store import BlobStore
from pochta.errors import DiskError
from pochta.types import DiskSpec, Pair, PairFlag

CHUNK = 64 << 10  # the local disk's read chunk during these tests


@dataclass
class Meter:
    """What the disks saw since the last source was opened."""

    read: int = 0  # bytes the current source reader has handed out
    written: dict[int, int] = field(default_factory=dict)  # bytes per copy being written
    held_peak: int = 0  # most bytes read from the source and not yet written to every copy
    aborted: list[int] = field(default_factory=list)  # bytes of each copy thrown away
    fail_reads: set[DiskSpec] = field(default_factory=set)  # disks whose reads fail midway
    armed: bool = False

    def opened(self) -> None:
        self.read, self.written = 0, {}

    def note(self) -> None:
        held = self.read - min(self.written.values(), default=0)
        self.held_peak = max(self.held_peak, held)


class WatchedWriter:
    def __init__(self, inner: LocalWriter, meter: Meter) -> None:
        self._inner = inner
        self._meter = meter
        self._bytes = 0
        self._done = False
        meter.written[id(self)] = 0

    def probe(self) -> None:
        self._inner.probe()

    def write(self, chunk: bytes) -> None:
        self._inner.write(chunk)
        self._bytes += len(chunk)
        self._meter.written[id(self)] = self._bytes
        self._meter.note()

    def commit(self) -> None:
        self._inner.commit()
        self._done = True

    def commit_as(self, name: str) -> None:
        self._inner.commit_as(name)
        self._done = True

    def abort(self) -> None:
        if not self._done:
            self._meter.aborted.append(self._bytes)
            self._done = True
        self._inner.abort()


class WatchedReader:
    def __init__(self, inner: LocalReader, meter: Meter, fail: bool) -> None:
        self._inner = inner
        self._meter = meter
        self._fail = fail
        self.size = inner.size

    def __iter__(self) -> Iterator[bytes]:
        for n, chunk in enumerate(self._inner):
            if self._fail and n == 3:
                raise DiskError("disk: reading failed: Input/output error")
            self._meter.read += len(chunk)
            self._meter.note()
            yield chunk

    def close(self) -> None:
        self._inner.close()


class WatchedDisk(LocalDisk):
    """A local disk whose evacuation traffic a Meter follows (once armed)."""

    def __init__(self, spec: DiskSpec, meter: Meter) -> None:
        super().__init__(Path(spec.root), spec=spec)
        self.meter = meter

    def create(self, name: str) -> LocalWriter:
        inner = super().create(name)
        if self.meter.armed and not name.startswith("tmp/probe-"):
            return WatchedWriter(inner, self.meter)  # type: ignore[return-value]
        return inner

    def open(self, name: str, start: int = 0, end: int | None = None) -> LocalReader:
        inner = super().open(name, start, end)
        if not self.meter.armed:
            return inner
        self.meter.opened()
        fail = self.spec in self.meter.fail_reads
        return WatchedReader(inner, self.meter, fail)  # type: ignore[return-value]


@dataclass
class Rig:
    store: BlobStore
    pairs: list[Pair]
    meter: Meter

    def root(self, pair: Pair, index: int) -> Path:
        return Path(pair.disks[index].root)

    def roots(self) -> list[Path]:
        return [self.root(p, i) for p in self.pairs for i in (0, 1)]


@pytest.fixture
def rig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Rig]:
    monkeypatch.setattr(local, "CHUNK", CHUNK)
    meter = Meter()
    store = BlobStore(
        MemoryFileDB(), MemoryPairDB(), disk_factory=lambda spec: WatchedDisk(spec, meter)
    )
    pairs = [
        store.add_pair(
            DiskSpec("local", str(tmp_path / f"p{p}a")), DiskSpec("local", str(tmp_path / f"p{p}b"))
        )
        for p in range(2)
    ]
    yield Rig(store, pairs, meter)
    store.close()


def store_on(rig: Rig, pair: Pair, size: int, magic: int, seed: int) -> str:
    """A file of ``size`` pseudo-random bytes on ``pair``, sent in chunks (never whole)."""
    for p in rig.pairs:
        rig.store.pairdb.set_flags(p.id, PairFlag.NONE if p.id == pair.id else PairFlag.LOCKED)

    def chunks() -> Iterator[bytes]:
        for n in range(0, size, CHUNK):
            block = hashlib.sha256(f"{seed}:{n}".encode()).digest()
            yield (block * (CHUNK // len(block) + 1))[: min(CHUNK, size - n)]

    record = rig.store.upload(None, magic, chunks(), size_hint=size).record
    assert record.pair_id == pair.id
    for p in rig.pairs:
        rig.store.pairdb.set_flags(p.id, PairFlag.NONE)
    rig.store.refresh_free(force=True)
    return record.key


def temporary_files(rig: Rig) -> list[Path]:
    return [f for root in rig.roots() for f in (root / "tmp").glob("*") if f.is_file()]


def test_evacuation_holds_one_chunk_at_a_time_never_the_file(rig: Rig) -> None:
    source, target = rig.pairs
    size = 16 << 20  # 256 chunks
    key = store_on(rig, source, size, magic=7, seed=1)
    before = rig.store.stat(key)
    gc.collect()
    rig.meter.armed = True
    tracemalloc.start()
    try:
        report = evacuate(rig.store, source.id)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (report.moved, report.errors, report.bytes) == (1, 0, size)
    # every chunk was written to both new copies before the next one was read
    assert rig.meter.held_peak == CHUNK
    # and Python never held much more than a few chunks (the file is 16 MiB)
    assert peak < 1 << 20, f"evacuating a 16 MiB file peaked at {peak / 2**20:.1f} MiB"
    after = rig.store.stat(key)
    assert after.pair_id == target.id
    assert (after.counter, after.magic, after.flags) == (before.counter, before.magic, before.flags)
    assert rig.store.check_copies(key) == []
    assert temporary_files(rig) == []


@pytest.mark.parametrize("fault", ["corrupt", "read_error"])
def test_a_source_copy_bad_midway_falls_back_to_the_sibling_and_leaves_nothing(
    rig: Rig, fault: str
) -> None:
    source, target = rig.pairs
    size = 1 << 20  # 16 chunks
    key = store_on(rig, source, size, magic=3, seed=2)
    rig.store.inc(key, 11)  # two references: the counter must stay 2
    before = rig.store.stat(key)
    master = rig.root(source, master_index(key)) / blob_path(key)
    good = master.read_bytes()
    if fault == "corrupt":  # one bit flipped half-way: found only by the hash at the end
        raw = bytearray(good)
        raw[size // 2] ^= 0x10
        master.write_bytes(bytes(raw))
    else:  # the disk fails after three chunks
        rig.meter.fail_reads.add(source.disks[master_index(key)])
    rig.meter.armed = True
    report = evacuate(rig.store, source.id)
    assert (report.moved, report.errors, report.left) == (1, 0, 0), report.problems
    # the first attempt had started writing both copies, and threw them away
    thrown = rig.meter.aborted
    assert len(thrown) == 2
    assert all(n == (size if fault == "corrupt" else 3 * CHUNK) for n in thrown), thrown
    assert temporary_files(rig) == []
    after = rig.store.stat(key)
    assert after.pair_id == target.id
    assert (after.counter, after.magic) == (before.counter, before.magic) == (2, 14)
    assert rig.store.check_copies(key) == []
    for i in (0, 1):
        assert (rig.root(target, i) / blob_path(key)).read_bytes() == good


def test_no_good_copy_leaves_no_temporary_file_and_keeps_the_record(rig: Rig) -> None:
    source, _ = rig.pairs
    key = store_on(rig, source, 300_000, magic=5, seed=3)
    for i in (0, 1):
        path = rig.root(source, i) / blob_path(key)
        raw = bytearray(path.read_bytes())
        raw[-1] ^= 1
        path.write_bytes(bytes(raw))
    rig.meter.armed = True
    report = evacuate(rig.store, source.id)
    assert (report.moved, report.errors, report.left) == (0, 1, 1)
    assert "does not hash to its key" in report.problems[0]
    assert len(rig.meter.aborted) == 4  # two attempts, two copies each
    assert temporary_files(rig) == []
    assert rig.store.stat(key).pair_id == source.id
    assert not any((root / blob_path(key)).exists() for root in rig.roots()[2:])


def test_evacuated_bytes_are_the_original_ones_for_many_files(rig: Rig) -> None:
    source, target = rig.pairs
    keys = [
        store_on(rig, source, size, magic=1 + n, seed=10 + n)
        for n, size in enumerate([0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 5 * CHUNK + 17])
    ]
    originals = {k: (rig.root(source, 0) / blob_path(k)).read_bytes() for k in keys}
    report = evacuate(rig.store, source.id)
    assert (report.moved, report.errors) == (len(set(keys)), 0)
    assert report.bytes == sum(len(v) for v in originals.values())
    for key, data in originals.items():
        assert hashlib.sha256(data).hexdigest() == key
        for i in (0, 1):
            assert (rig.root(target, i) / blob_path(key)).read_bytes() == data
    assert temporary_files(rig) == []
