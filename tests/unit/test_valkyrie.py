"""Valkyrie: the pure decision (``decide``), the I/O budget, and whole passes over real local
disks with an in-memory FileDB / PairDB and a clock the test moves."""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from pochta.blobs.filedb.memory import MemoryFileDB
from pochta.blobs.keys import blob_path, key_of, master_index
from pochta.blobs.pairs.memory import MemoryPairDB
from pochta.blobs.store import BlobStore
from pochta.blobs.valkyrie import (
    Action,
    Kind,
    Name,
    Seen,
    Throttle,
    Valkyrie,
    ValkyrieConfig,
    ValkyrieRunner,
    ValkyrieState,
    decide,
    parse_name,
    quarantine_name,
)
from pochta.errors import BlobNotFound, StorageError
from pochta.types import DiskSpec, FileFlag, FileRecord, Pair, PairFlag, Space

CFG = ValkyrieConfig(
    budget_mb_per_s=None,
    quarantine_seconds=1000.0,
    slave_delay_seconds=100.0,
    tmp_max_age_seconds=50.0,
    orphan_min_age_seconds=10.0,
)
NOW = 1_800_000_000.0
K = key_of(b"valkyrie")


# -- names --------------------------------------------------------------------------------------
def test_parse_name() -> None:
    assert parse_name(blob_path(K)) == Name(Kind.BLOB, K)
    assert parse_name(blob_path(K) + ".deleted.1700000000") == Name(Kind.QUARANTINE, K, 1700000000)
    assert parse_name("tmp/abc.part") == Name(Kind.TMP)
    assert parse_name("tmp/abc") == Name(Kind.OTHER)
    assert parse_name("valkyrie.json") == Name(Kind.OTHER)
    assert parse_name(f"00/00/{K}") == Name(Kind.OTHER)  # in the wrong directory
    assert parse_name(blob_path(K) + ".deleted.x") == Name(Kind.OTHER)
    assert quarantine_name(K, 12.7) == blob_path(K) + ".deleted.12"


# -- decide ---------------------------------------------------------------------------------------
def live(pair: int) -> FileRecord:
    return FileRecord(K, 1, 5, FileFlag.NONE, pair)


def space1(pair: int, moved_at: float) -> FileRecord:
    return FileRecord(K, 0, 0, FileFlag.NONE, pair, Space.DELETED, moved_at)


def seen(**kw: object) -> Seen:
    base: dict[str, object] = {
        "name": Name(Kind.BLOB, K),
        "mtime": NOW - 1000,
        "pair_id": 1,
        "disk_index": master_index(K),
    }
    base.update(kw)
    return Seen(**base)  # type: ignore[arg-type]


def act(s: Seen, now: float = NOW) -> Action:
    return decide(s, CFG, now).action


def test_live_here_is_verified_and_a_stale_space1_record_dropped() -> None:
    assert decide(seen(live=live(1)), CFG, NOW).action is Action.VERIFY
    assert not decide(seen(live=live(1)), CFG, NOW).forget_space1
    d = decide(seen(live=live(1), deleted=space1(1, NOW - 5000)), CFG, NOW)
    assert (d.action, d.forget_space1) == (Action.VERIFY, True)


def test_live_elsewhere_is_a_stray_once_old_enough() -> None:
    assert act(seen(live=live(2))) is Action.STRAY
    assert act(seen(live=live(2), mtime=NOW - 5)) is Action.SKIP


def test_master_quarantines_a_deleted_file_at_once_the_slave_after_its_delay() -> None:
    master, slave = master_index(K), 1 - master_index(K)
    moved = NOW - 50
    assert act(seen(deleted=space1(1, moved), disk_index=master)) is Action.QUARANTINE_DELETED
    assert not decide(seen(deleted=space1(1, moved), disk_index=master), CFG, NOW).forget_space1
    assert act(seen(deleted=space1(1, moved), disk_index=slave)) is Action.SKIP
    later = decide(seen(deleted=space1(1, moved), disk_index=slave), CFG, moved + 100)
    assert (later.action, later.forget_space1) == (Action.QUARANTINE_DELETED, True)


def test_a_file_written_after_the_move_is_left_alone() -> None:
    assert act(seen(deleted=space1(1, NOW - 50), mtime=NOW - 40)) is Action.SKIP


def test_orphans_and_space1_of_another_pair() -> None:
    assert act(seen()) is Action.QUARANTINE_ORPHAN
    assert act(seen(mtime=NOW - 3)) is Action.SKIP  # may be an upload not yet recorded
    assert act(seen(deleted=space1(2, NOW - 50))) is Action.QUARANTINE_ORPHAN


def test_quarantine_purged_after_its_period_restored_when_needed() -> None:
    q = Name(Kind.QUARANTINE, K, int(NOW - 999))
    assert act(seen(name=q)) is Action.SKIP
    assert act(seen(name=q), NOW + 1) is Action.PURGE
    assert act(seen(name=q, live=live(1), blob_present=False)) is Action.RESTORE
    assert act(seen(name=q, live=live(1), blob_present=False), NOW + 10) is Action.RESTORE
    assert act(seen(name=q, live=live(1), blob_present=True), NOW + 1) is Action.PURGE
    assert act(seen(name=q, live=live(2), blob_present=False), NOW + 1) is Action.PURGE


def test_tmp_files_removed_when_stale() -> None:
    assert act(seen(name=Name(Kind.TMP), mtime=NOW - 51)) is Action.DELETE_TMP
    assert act(seen(name=Name(Kind.TMP), mtime=NOW - 49)) is Action.SKIP


def test_a_pair_in_service_is_only_checked() -> None:
    assert act(seen(live=live(1), service=True)) is Action.CHECK
    assert act(seen(service=True)) is Action.SKIP
    assert act(seen(name=Name(Kind.TMP), mtime=0, service=True)) is Action.SKIP


# -- the budget ---------------------------------------------------------------------------------
class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept += seconds
        self.now += seconds


def test_throttle_keeps_the_average_rate() -> None:
    t = FakeTime()
    throttle = Throttle(10.0, monotonic=t.monotonic, sleep=t.sleep)
    for _ in range(100):
        throttle.spend(1_000_000)  # 100 MB at 10 MB/s: 9 s beyond the first second's burst
    assert 8.9 <= t.now <= 10.1
    free = Throttle(None, monotonic=t.monotonic, sleep=t.sleep)
    before = t.slept
    free.spend(10**12)
    assert t.slept == before


# -- whole passes -------------------------------------------------------------------------------
class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


@dataclass
class Rig:
    store: BlobStore
    valkyrie: Valkyrie
    clock: Clock
    pairs: list[Pair]

    def root(self, pair: Pair, index: int) -> Path:
        return Path(pair.disks[index].root)

    def put(self, data: bytes, magic: int = 7) -> FileRecord:
        return self.store.upload(None, magic, [data]).record

    def pass_all(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for report in self.valkyrie.run_all():
            assert report.complete, report.problems
            for name, value in report.counts.as_dict().items():
                total[name] = total.get(name, 0) + value
        return total


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    clock = Clock()
    filedb = MemoryFileDB(clock=clock)
    store = BlobStore(filedb, MemoryPairDB())
    pairs = []
    for p in range(2):
        a = DiskSpec("local", str(tmp_path / f"p{p}a"))
        b = DiskSpec("local", str(tmp_path / f"p{p}b"))
        pairs.append(store.add_pair(a, b))
    state = ValkyrieState(tmp_path / "valkyrie.sqlite3")
    valkyrie = Valkyrie(store, state, CFG, clock=clock)
    yield Rig(store, valkyrie, clock, pairs)
    state.close()


def age(path: Path, seconds: float) -> None:
    t = path.stat().st_mtime - seconds
    os.utime(path, (t, t))


def test_a_clean_store_passes_untouched(rig: Rig) -> None:
    records = [rig.put(os.urandom(1000 + i)) for i in range(10)]
    counts = rig.pass_all()
    assert counts["verified"] == 20
    assert counts["repaired"] == counts["errors"] == counts["quarantined"] == 0
    assert counts["bytes"] == sum(2 * (1000 + i) for i in range(10))
    for r in records:
        assert rig.store.check_copies(r.key) == []


def test_a_bit_flip_is_repaired_from_the_sibling(rig: Rig) -> None:
    data = os.urandom(5000)
    r = rig.put(data)
    pair = rig.store.pairdb.get(r.pair_id)
    path = rig.root(pair, 1) / blob_path(r.key)
    raw = bytearray(path.read_bytes())
    raw[1234] ^= 0x10
    path.write_bytes(bytes(raw))
    assert rig.store.check_copies(r.key) != []
    counts = rig.pass_all()
    assert counts["repaired"] == 1
    assert path.read_bytes() == data
    assert rig.store.check_copies(r.key) == []


def test_a_missing_sibling_copy_is_recreated(rig: Rig) -> None:
    data = os.urandom(3000)
    r = rig.put(data)
    pair = rig.store.pairdb.get(r.pair_id)
    (rig.root(pair, 0) / blob_path(r.key)).unlink()
    assert rig.pass_all()["repaired"] == 1
    assert (rig.root(pair, 0) / blob_path(r.key)).read_bytes() == data


def test_a_deleted_file_is_quarantined_then_purged(rig: Rig) -> None:
    r = rig.put(b"to be deleted", magic=9)
    pair = rig.store.pairdb.get(r.pair_id)
    for i in (0, 1):
        age(rig.root(pair, i) / blob_path(r.key), 60)
    rig.store.dec(r.key, 9)
    master = master_index(r.key)
    counts = rig.pass_all()
    assert counts["quarantined"] == 1  # the master at once
    assert not (rig.root(pair, master) / blob_path(r.key)).exists()
    assert (rig.root(pair, 1 - master) / blob_path(r.key)).exists()
    assert rig.store.filedb.get_deleted(r.key) is not None
    rig.clock.now += CFG.slave_delay_seconds + 1
    counts = rig.pass_all()
    assert counts["quarantined"] == 1  # now the slave, which drops the space1 record
    assert counts["space1_dropped"] == 1
    assert rig.store.filedb.get(r.key) is None
    for i in (0, 1):
        assert not (rig.root(pair, i) / blob_path(r.key)).exists()
        assert len(list((rig.root(pair, i) / blob_path(r.key)).parent.iterdir())) == 1
    rig.clock.now += CFG.quarantine_seconds + 1
    assert rig.pass_all()["purged"] == 2
    for i in (0, 1):
        assert list((rig.root(pair, i) / blob_path(r.key)).parent.iterdir()) == []


def test_a_re_uploaded_file_is_kept_and_its_space1_record_dropped(rig: Rig) -> None:
    r = rig.put(b"comes back", magic=9)
    rig.store.dec(r.key, 9)
    rig.clock.now += 1
    again = rig.store.upload(r.key, 11, [b"comes back"]).record
    counts = rig.pass_all()
    assert counts["space1_dropped"] == 1
    assert counts["quarantined"] == 0
    assert rig.store.filedb.get_deleted(r.key) is None
    assert rig.store.filedb.get(r.key) == again
    assert rig.store.check_copies(r.key) == []


def test_orphans_and_old_tmp_files_are_cleaned(rig: Rig) -> None:
    pair = rig.pairs[0]
    orphan = b"nobody knows me"
    key = key_of(orphan)
    path = rig.root(pair, 0) / blob_path(key)
    path.parent.mkdir(parents=True)
    path.write_bytes(orphan)
    tmp = rig.root(pair, 1) / "tmp" / "abandoned.part"
    tmp.write_bytes(b"half an upload")
    young = rig.root(pair, 1) / "tmp" / "young.part"
    young.write_bytes(b"in flight")
    counts = rig.pass_all()
    assert counts["orphans"] == 0  # too young: may be an upload not yet recorded
    age(path, 20)
    age(tmp, 60)
    counts = rig.pass_all()
    assert (counts["orphans"], counts["tmp_removed"]) == (1, 1)
    assert not path.exists() and not tmp.exists() and young.exists()
    assert [p.name for p in path.parent.iterdir()] == [f"{key}.deleted.{int(rig.clock.now)}"]


def test_a_stray_copy_goes_only_when_the_owner_is_sound(rig: Rig) -> None:
    data = os.urandom(2000)
    r = rig.put(data)
    owner = rig.store.pairdb.get(r.pair_id)
    other = next(p for p in rig.pairs if p.id != owner.id)
    stray = rig.root(other, 0) / blob_path(r.key)
    stray.parent.mkdir(parents=True)
    stray.write_bytes(data)
    age(stray, 20)
    for i in (0, 1):  # the owner has lost both copies: the stray must stay
        (rig.root(owner, i) / blob_path(r.key)).write_bytes(b"rotten")
    reports = rig.valkyrie.run_all()
    assert stray.exists()
    assert sum(rep.counts.errors for rep in reports) >= 1
    for i in (0, 1):
        (rig.root(owner, i) / blob_path(r.key)).write_bytes(data)
    assert rig.pass_all()["strays"] == 1
    assert not stray.exists()


def test_a_quarantined_file_whose_key_is_live_again_comes_back(rig: Rig) -> None:
    data = os.urandom(1000)
    r = rig.put(data)
    pair = rig.store.pairdb.get(r.pair_id)
    for i in (0, 1):  # as if both disks had quarantined it in a race with a re-upload
        p = rig.root(pair, i) / blob_path(r.key)
        p.rename(p.with_name(f"{r.key}.deleted.{int(rig.clock.now)}"))
    counts = rig.pass_all()
    assert counts["repaired"] == 2
    assert rig.store.check_copies(r.key) == []


def test_the_position_is_saved_and_the_pass_resumes(rig: Rig, tmp_path: Path) -> None:
    pair = rig.pairs[0]
    on_pair = 0
    for i in range(3000):  # placement is random: 30 files on this pair, whatever it takes
        if rig.put(os.urandom(100 + i)).pair_id == pair.id:
            on_pair += 1
            if on_pair == 30:
                break
    assert on_pair == 30
    config = ValkyrieConfig(budget_mb_per_s=None, checkpoint_every=5)
    v = Valkyrie(rig.store, rig.valkyrie.state, config, clock=rig.clock)
    seen: list[int] = []

    class StopAfter:
        def __init__(self, n: int) -> None:
            self.n = n

        def is_set(self) -> bool:
            seen.append(1)
            return len(seen) > self.n

    first = v.run_disk(pair, 0, stop=StopAfter(7))  # type: ignore[arg-type]
    assert not first.complete
    assert first.counts.checked == 7
    position = rig.valkyrie.state.position(str(pair.disks[0]))
    assert position != ""
    rest = v.run_disk(pair, 0)
    assert rest.complete
    total = len(list(rig.store.disk(pair.disks[0]).walk()))
    assert first.counts.checked + rest.counts.checked == total
    assert rig.valkyrie.state.position(str(pair.disks[0])) == ""
    summary = rig.valkyrie.state.summary()
    assert summary["checked"] == total
    assert summary["disks"][0]["passes"] == 1


def test_a_disk_whose_root_is_gone_is_reported(rig: Rig) -> None:
    r = rig.put(os.urandom(100))
    pair = rig.store.pairdb.get(r.pair_id)
    shutil.rmtree(rig.root(pair, 0))
    report = rig.valkyrie.run_disk(pair, 0)
    assert not report.complete
    assert report.counts.errors == 1
    assert "not there" in report.problems[0]
    rig.store.pairdb.set_flags(pair.id, PairFlag.SERVICE)
    sibling = rig.valkyrie.run_disk(rig.store.pairdb.get(pair.id), 1)
    assert sibling.counts.errors == 1  # in SERVICE: reported, nothing written
    assert not rig.root(pair, 0).exists()


# -- decs that go wrong never delete a referenced file -------------------------------------------
NOW_CFG = ValkyrieConfig(budget_mb_per_s=None, slave_delay_seconds=0.0, orphan_min_age_seconds=0.0)


def sweep(rig: Rig) -> None:
    v = Valkyrie(rig.store, rig.valkyrie.state, NOW_CFG, clock=rig.clock)
    for _ in range(2):  # master, then slave
        rig.clock.now += 1
        for report in v.run_all():
            assert report.complete, report.problems


def test_a_replayed_dec_never_deletes_a_referenced_file(rig: Rig) -> None:
    data = os.urandom(800)
    r = rig.put(data, magic=11)  # letter A
    rig.store.inc(r.key, 22)  # letter B
    rig.store.dec(r.key, 11)  # A deleted
    after = rig.store.dec(r.key, 11)  # A's dec replayed after a crash
    assert after.space is Space.LIVE and after.flags & FileFlag.DO_NOT_DELETE
    sweep(rig)
    assert rig.store.check_copies(r.key) == []  # B still reads it


def test_a_dec_of_an_unknown_key_changes_nothing(rig: Rig) -> None:
    r = rig.put(os.urandom(500), magic=3)
    with pytest.raises(BlobNotFound):
        rig.store.dec(key_of(b"never stored"), 3)
    sweep(rig)
    assert rig.store.check_copies(r.key) == []


def upload_until_stored(store: BlobStore, key: str, data: bytes) -> None:
    """A client: an upload refused because the key was deleted meanwhile is sent again."""
    for _ in range(5):
        try:
            store.upload(key, 9, [data])
            return
        except StorageError:
            continue


def test_a_dec_racing_an_upload_of_the_same_content(rig: Rig) -> None:
    for i in range(20):
        data = os.urandom(600 + i)
        r = rig.put(data, magic=5)
        threads = [
            threading.Thread(target=rig.store.dec, args=(r.key, 5)),
            threading.Thread(target=upload_until_stored, args=(rig.store, r.key, data)),
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        sweep(rig)
        record = rig.store.stat(r.key)
        assert record.space is Space.LIVE  # the upload's reference holds it
        assert record.counter == 1
        assert rig.store.check_copies(r.key) == []


def test_the_runner_scrubs_every_disk_in_the_background_and_stops(rig: Rig) -> None:
    rig.put(os.urandom(300))
    runner = ValkyrieRunner(rig.valkyrie, rescan_seconds=0.05)
    runner.start()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        disks = rig.valkyrie.state.summary()["disks"]
        if len(disks) == 4 and all(d["passes"] >= 1 for d in disks):
            break
        time.sleep(0.02)
    runner.stop(timeout=5)
    disks = rig.valkyrie.state.summary()["disks"]
    assert [d["passes"] >= 1 for d in disks] == [True] * 4
    assert sum(d["verified"] for d in disks) == 2
