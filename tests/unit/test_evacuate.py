"""Evacuation, retirement and restore (pochta.blobs.evacuate) over real local disks."""

from __future__ import annotations

import os
import shutil
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from pochta.blobs.evacuate import evacuate, restore, retire
from pochta.blobs.filedb.memory import MemoryFileDB
from pochta.blobs.keys import blob_path, key_of, master_index
from pochta.blobs.pairs.memory import MemoryPairDB
from pochta.blobs.store import BlobStore
from pochta.errors import BlobNotFound, InvalidInput, PairNotFound
from pochta.types import DiskSpec, FileFlag, Pair, PairFlag, Space


@dataclass
class Rig:
    store: BlobStore
    pairs: list[Pair]

    def root(self, pair: Pair, index: int) -> Path:
        return Path(pair.disks[index].root)


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    store = BlobStore(MemoryFileDB(), MemoryPairDB())
    pairs = [
        store.add_pair(
            DiskSpec("local", str(tmp_path / f"p{p}a")), DiskSpec("local", str(tmp_path / f"p{p}b"))
        )
        for p in range(3)
    ]
    yield Rig(store, pairs)
    store.close()


def fill(rig: Rig, pair: Pair, n: int) -> dict[str, bytes]:
    """n files on ``pair`` (the others locked meanwhile)."""
    for p in rig.pairs:
        if p.id != pair.id:
            rig.store.pairdb.set_flags(p.id, PairFlag.LOCKED)
    contents = {}
    for i in range(n):
        data = os.urandom(500 + i)
        record = rig.store.upload(None, 1 + i, [data]).record
        assert record.pair_id == pair.id
        contents[record.key] = data
    for p in rig.pairs:
        if p.id != pair.id:
            rig.store.pairdb.set_flags(p.id, PairFlag.NONE)
    rig.store.refresh_free(force=True)
    return contents


def test_evacuate_a_pair_whose_disk_is_gone_then_retire_it(rig: Rig) -> None:
    failed = rig.pairs[0]
    contents = fill(rig, failed, 25)
    shutil.rmtree(rig.root(failed, 1))  # one disk dies
    seen: list[tuple[int, int]] = []
    report = evacuate(rig.store, failed.id, progress=lambda d, t: seen.append((d, t)))
    assert (report.total, report.moved, report.errors, report.left) == (25, 25, 0, 0)
    assert report.bytes == sum(len(d) for d in contents.values())
    assert seen[-1] == (25, 25)
    assert rig.store.pairdb.get(failed.id).flags & PairFlag.SERVICE
    for key, data in contents.items():
        record = rig.store.stat(key)
        assert record.pair_id != failed.id
        assert rig.store.check_copies(key) == []  # two good copies on the new pair
        assert rig.store.read(key, len(data), zlib.crc32(data)) == data
    retired = retire(rig.store, failed.id)
    assert retired.id == failed.id
    with pytest.raises(PairNotFound):
        rig.store.pairdb.get(failed.id)


def test_evacuate_reads_around_a_corrupt_copy(rig: Rig) -> None:
    pair = rig.pairs[1]
    contents = fill(rig, pair, 3)
    key = next(iter(contents))
    master = rig.root(pair, master_index(key)) / blob_path(key)
    master.write_bytes(b"bit rot")
    report = evacuate(rig.store, pair.id)
    assert report.moved == 3
    assert rig.store.check_copies(key) == []


def test_evacuate_counts_a_file_with_no_good_copy_and_keeps_its_record(rig: Rig) -> None:
    pair = rig.pairs[0]
    contents = fill(rig, pair, 2)
    key = next(iter(contents))
    for i in (0, 1):
        (rig.root(pair, i) / blob_path(key)).write_bytes(b"rot")
    report = evacuate(rig.store, pair.id)
    assert (report.moved, report.errors, report.left) == (1, 1, 1)
    assert rig.store.stat(key).pair_id == pair.id
    with pytest.raises(InvalidInput, match="still holds 1 live file"):
        retire(rig.store, pair.id)


def test_evacuate_is_resumable(rig: Rig) -> None:
    pair = rig.pairs[2]
    fill(rig, pair, 10)
    first = evacuate(rig.store, pair.id, batch=3)
    assert first.left == 0
    again = evacuate(rig.store, pair.id)
    assert (again.total, again.moved) == (0, 0)


def test_a_key_deleted_during_evacuation_is_skipped(rig: Rig) -> None:
    pair = rig.pairs[0]
    contents = fill(rig, pair, 4)
    victim = sorted(contents)[2]
    magic = 1 + list(contents).index(victim)

    def progress(done: int, total: int) -> None:
        if done == 1:
            rig.store.dec(victim, magic)

    report = evacuate(rig.store, pair.id, progress=progress)
    assert (report.moved, report.skipped) == (3, 1)  # copied, but the compare-and-set failed
    record = rig.store.stat(victim)
    assert record.space is Space.DELETED and record.pair_id == pair.id


def test_retire_refuses_a_pair_with_live_files(rig: Rig) -> None:
    pair = rig.pairs[0]
    fill(rig, pair, 1)
    with pytest.raises(InvalidInput, match="evacuate"):
        retire(rig.store, pair.id)


def test_restore_brings_a_quarantined_file_back(rig: Rig) -> None:
    data = b"the user comes for it"
    record = rig.store.upload(None, 5, [data]).record
    pair = rig.store.pairdb.get(record.pair_id)
    rig.store.dec(record.key, 5)
    for i in (0, 1):
        p = rig.root(pair, i) / blob_path(record.key)
        p.rename(p.with_name(f"{record.key}.deleted.100"))
    (rig.root(pair, 0) / blob_path(record.key)).with_name(f"{record.key}.deleted.200").write_bytes(
        data
    )
    done = restore(rig.store, record.key)
    assert sorted(done.renamed) == sorted(str(d) for d in pair.disks)
    assert done.missing == []
    assert done.record.space is Space.LIVE
    assert done.record.flags & FileFlag.DO_NOT_DELETE
    assert rig.store.check_copies(record.key) == []
    left = sorted(p.name for p in (rig.root(pair, 0) / blob_path(record.key)).parent.iterdir())
    assert left == [record.key, f"{record.key}.deleted.100"]  # the newest one came back


def test_restore_of_a_file_in_place_changes_nothing(rig: Rig) -> None:
    record = rig.store.upload(None, 5, [b"here"]).record
    done = restore(rig.store, record.key)
    assert done.renamed == []
    assert done.record == record


def test_restore_with_no_copy_anywhere(rig: Rig) -> None:
    with pytest.raises(BlobNotFound):
        restore(rig.store, key_of(b"never stored"))
