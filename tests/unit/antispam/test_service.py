"""The write buffer, the flusher, back-pressure and the read merge (Counters over fakes)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from pochta.antispam.shingles.counters import Batch, Ref
from pochta.antispam.shingles.counters.buckets import Buckets, Span, parse_window
from pochta.antispam.shingles.counters.memory import MemoryStore
from pochta.antispam.shingles.counters.service import Counters
from pochta.antispam.shingles.counters.sqlite import SQLiteStore
from pochta.errors import InvalidInput, StorageError

NOW = 1_730_000_000.0
W24 = [parse_window("24h")]


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


class Faulty(MemoryStore):
    """A MemoryStore that refuses writes while ``down`` is set, blocks them while ``hold`` is
    clear, and counts reads."""

    def __init__(self) -> None:
        super().__init__()
        self.down = False
        self.hold = threading.Event()
        self.hold.set()
        self.reads = 0
        self.applies = 0

    def apply(self, batches: Sequence[Batch]) -> list[Exception | None]:
        self.hold.wait()
        self.applies += 1
        if self.down:
            return [StorageError("store down") for _ in batches]
        return super().apply(batches)

    def read(self, refs: Sequence[Ref], span: Span) -> list[Buckets]:
        self.reads += 1
        return super().read(refs, span)


@pytest.fixture
def store() -> Faulty:
    return Faulty()


@pytest.fixture
def counters(store: Faulty) -> Iterator[Counters]:
    c = Counters(store, clock=Clock(), flush_interval=3600)  # flushed only when told
    yield c
    store.down = False
    store.hold.set()
    c.close(timeout=1)


REFS = [Ref(8, 1), Ref(14, 2), Ref(15, 3)]


def spam(counters: Counters, refs: Sequence[Ref] = REFS) -> list[int]:
    return [v["24h"]["spam"] for v in counters.query(refs, W24)]


def test_buffered_increments_are_read_before_they_are_written(
    counters: Counters, store: Faulty
) -> None:
    counters.update(REFS, "spam")
    counters.update(REFS[:1], "spam", 4)
    assert store.applies == 0
    assert spam(counters) == [5, 1, 1]
    counters.flush()
    assert spam(counters) == [5, 1, 1]
    assert counters.stats().buffered == 0


def test_increments_to_one_counter_are_written_as_one(counters: Counters, store: Faulty) -> None:
    for _ in range(1000):
        counters.update(REFS[:1], "spam")
    assert counters.stats().buffered == 1
    counters.flush()
    assert counters.stats().written == 1
    fresh = Counters(store, clock=Clock(), cache_size=0, buffered=False)
    assert spam(fresh, REFS[:1]) == [1000]


def test_a_failed_batch_goes_back_and_is_retried(counters: Counters, store: Faulty) -> None:
    counters.update(REFS, "spam")
    store.down = True
    with pytest.raises(StorageError):
        counters.flush()
    assert spam(counters) == [1, 1, 1]  # still counted, from the buffer
    counters.update(REFS, "spam")
    store.down = False
    counters.flush()
    stats = counters.stats()
    assert stats.failures >= 1 and stats.buffered == 0
    fresh = Counters(store, clock=Clock(), cache_size=0, buffered=False)
    assert spam(fresh) == [2, 2, 2]


def test_back_pressure_blocks_then_refuses_when_the_store_is_down(store: Faulty) -> None:
    counters = Counters(store, clock=Clock(), flush_interval=0.01, max_cells=10, wait_timeout=0.3)
    counters.start()
    try:
        store.down = True
        refs = [Ref(8, i) for i in range(10)]
        counters.update(refs, "ham")  # fills the buffer
        started = time.monotonic()
        with pytest.raises(StorageError, match="buffer is full"):
            counters.update([Ref(8, 99)], "ham")
        assert time.monotonic() - started >= 0.25
        store.down = False  # the flusher retries (with back-off) and makes room
        counters.update([Ref(8, 99)], "ham")
        counters.flush()
        fresh = Counters(store, clock=Clock(), buffered=False)
        assert [v["24h"]["ham"] for v in fresh.query([*refs, Ref(8, 99)], W24)] == [1] * 11
    finally:
        counters.close(timeout=5)


def test_in_flight_batches_count_in_reads(counters: Counters, store: Faulty) -> None:
    counters.update(REFS, "read")
    store.hold.clear()  # the write will hang in the store
    flusher = threading.Thread(target=counters.flush)
    flusher.start()
    deadline = time.monotonic() + 5
    while counters.stats().in_flight == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert counters.stats().in_flight == 3
    assert [v["24h"]["read"] for v in counters.query(REFS, W24)] == [1, 1, 1]
    store.hold.set()
    flusher.join()
    assert [v["24h"]["read"] for v in counters.query(REFS, W24)] == [1, 1, 1]


def test_the_read_cache_stays_right_across_flushes(counters: Counters, store: Faulty) -> None:
    counters.update(REFS, "spam")
    counters.flush()
    assert spam(counters) == [1, 1, 1]
    reads = store.reads
    for i in range(2, 6):
        counters.update(REFS, "spam")
        counters.flush()
        assert spam(counters) == [i, i, i]
    assert store.reads == reads  # answered from the cache, kept equal to the store


def test_close_writes_everything_buffered(tmp_path: Path) -> None:
    clock = Clock()
    c = Counters(SQLiteStore(tmp_path / "c.sqlite3"), clock=clock, flush_interval=3600)
    c.update(REFS, "complaint", 3)
    c.close()
    again = Counters(SQLiteStore(tmp_path / "c.sqlite3"), clock=clock, buffered=False)
    assert [v["24h"]["complaint"] for v in again.query(REFS, W24)] == [3, 3, 3]
    again.close()
    with pytest.raises(StorageError):
        c.update(REFS, "spam")


def test_the_flusher_writes_on_its_own(store: Faulty) -> None:
    counters = Counters(store, flush_interval=0.05)
    counters.start()
    try:
        counters.update(REFS, "ham")
        deadline = time.monotonic() + 5
        while counters.stats().buffered and time.monotonic() < deadline:
            time.sleep(0.02)
        assert counters.stats().buffered == 0
        assert store.applies >= 1
    finally:
        counters.close()


def test_the_flusher_runs_only_once_started_and_is_joined_at_close(store: Faulty) -> None:
    def flushers() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t.name == "pochta-shingle-flusher"]

    before = flushers()
    counters = Counters(store, flush_interval=0.05)
    counters.update(REFS, "ham")
    time.sleep(0.2)
    assert flushers() == before and counters.stats().buffered  # nothing writes on its own
    counters.start()
    counters.start()  # once
    assert len(flushers()) == len(before) + 1
    counters.close()
    assert flushers() == before and counters.stats().buffered == 0  # flushed, joined
    with pytest.raises(StorageError, match="closed"):
        counters.start()
    unbuffered = Counters(store, buffered=False)
    unbuffered.start()  # nothing to start
    assert flushers() == before


def test_unique_counts_distinct_pairs_per_bucket(counters: Counters) -> None:
    clock = counters.clock
    assert isinstance(clock, Clock)
    sender = Ref(31, 0xA)
    pairs = [Ref(30, 0x100 + r, sender) for r in (1, 2, 2, 3, 1)]
    for p in pairs:
        counters.update([p], "ham")
    windows = [parse_window("10m"), parse_window("1d")]
    assert counters.query([sender], windows)[0]["1d"]["ham"] == 3  # from the buffer
    counters.flush()
    assert counters.query([sender], windows)[0]["1d"]["ham"] == 3  # from the store
    clock.now += 3600  # an hour later, recipient 1 again and a new one
    counters.update([pairs[0], Ref(30, 0x104, sender)], "ham")
    counters.flush()
    got = counters.query([sender, pairs[0]], windows)
    assert got[0]["10m"]["ham"] == 2  # distinct in this 10-minute bucket
    assert got[1]["1d"]["ham"] == 3  # the pair's own counter counts every letter


def test_a_buffered_pair_the_store_has_does_not_count_its_unique_again(
    counters: Counters, store: Faulty
) -> None:
    """Store + buffered + in flight, read before the flush, equals the store after it."""
    clock = counters.clock
    assert isinstance(clock, Clock)
    sender = Ref(31, 0xB)
    a, b, c = (Ref(30, 0x200 + r, sender) for r in range(3))
    windows = [parse_window("10m"), parse_window("24h"), parse_window("2d")]
    counters.update([a, b], "spam")
    counters.flush()  # the store has a and b today
    clock.now += 1200  # the same day (NOW is 03:33 UTC), a later 10-minute bucket
    counters.update([a], "spam")
    store.hold.clear()  # a's new bucket hangs in flight
    flusher = threading.Thread(target=counters.flush)
    flusher.start()
    deadline = time.monotonic() + 5
    while counters.stats().in_flight == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    counters.update([a, c], "spam")  # a again (in flight too), and c: new today
    before = counters.query([sender], windows)[0]
    store.hold.set()
    flusher.join()
    counters.flush()
    after = counters.query([sender], windows)[0]
    fresh = Counters(store, clock=clock, buffered=False, cache_size=0)
    stored = fresh.query([sender], windows)[0]
    assert before == after == stored
    # 10-minute buckets: a and c now; a and b, then a and c, over 24h; the day: a, b and c
    assert (stored["10m"]["spam"], stored["24h"]["spam"], stored["2d"]["spam"]) == (2, 4, 3)


class Recording(MemoryStore):
    """A MemoryStore that keeps the ids of the shingles each read asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[tuple[int, int]] = []

    def read(self, refs: Sequence[Ref], span: Span) -> list[Buckets]:
        self.asked.extend(r.id for r in refs)
        return super().read(refs, span)


def test_a_pair_the_store_has_this_bucket_is_not_read_again() -> None:
    """One sender to many recipients: each letter's read of the unique asked the store for
    every buffered pair; a pair whose bucket of these 10 minutes the store has (flushed by
    this process, or found by a read) is not asked again, and the values stay the store's."""
    store = Recording()
    clock = Clock()
    counters = Counters(store, clock=clock, flush_interval=3600, cache_size=0)  # no stale unique
    other = Counters(store, clock=clock, flush_interval=3600)  # another process
    try:
        sender = Ref(31, 0xC)
        pairs = [Ref(30, 0x300 + r, sender) for r in range(50)]
        windows = [parse_window("10m"), parse_window("24h")]
        counters.update(pairs, "ham")
        counters.flush()  # the store has every pair in this bucket now
        counters.update(pairs, "ham")  # the same recipients again: buffered
        store.asked.clear()
        got = counters.query([sender], windows)[0]
        assert not {p.id for p in pairs} & set(store.asked)
        assert (got["10m"]["ham"], got["24h"]["ham"]) == (50, 50)
        new = Ref(30, 0x400, sender)  # another process's flush: found by a read, once
        other.update([new], "ham")
        other.flush()
        counters.update([new], "ham")
        for _ in range(2):
            store.asked.clear()
            got = counters.query([sender], windows)[0]
            assert got["10m"]["ham"] == 51
        assert new.id not in store.asked  # the first read found it; the second did not ask
        clock.now += 600  # the next bucket: nothing is known of it
        counters.update(pairs[:3], "ham")
        store.asked.clear()
        got = counters.query([sender], windows)[0]
        assert {p.id for p in pairs[:3]} <= set(store.asked)
        assert (got["10m"]["ham"], got["24h"]["ham"]) == (3, 54)  # distinct per bucket
        counters.flush()
        fresh = Counters(store, clock=clock, buffered=False, cache_size=0)
        assert fresh.query([sender], windows)[0] == counters.query([sender], windows)[0] == got
    finally:
        counters.close(timeout=1)
        other.close(timeout=1)


class Forgetful(Recording):
    """A store that can fail, and lose what it had (a Redis failover loses acknowledged
    writes): ``down`` refuses writes; ``lose`` empties it."""

    def __init__(self) -> None:
        super().__init__()
        self.down = False

    def apply(self, batches: Sequence[Batch]) -> list[Exception | None]:
        if self.down:
            return [StorageError("store down") for _ in batches]
        return super().apply(batches)

    def lose(self) -> None:
        fresh = MemoryStore()
        self.__dict__.update({k: v for k, v in fresh.__dict__.items()})


@pytest.mark.parametrize("how", ["a failed flush", "the clock stepped back"])
def test_what_is_known_of_the_store_is_forgotten_when_it_may_be_false(how: str) -> None:
    """The pairs known stored are forgotten when the store fails (it may have lost them) and
    whenever the bucket changes, backwards too (a bucket met again may have expired): the
    unique is then read from the store again, not taken as known."""
    store = Forgetful()
    clock = Clock()
    counters = Counters(store, clock=clock, flush_interval=3600, cache_size=0)
    try:
        sender = Ref(31, 0xC)
        pairs = [Ref(30, 0x300 + r, sender) for r in range(5)]
        windows = [parse_window("10m")]
        counters.update(pairs, "ham")
        counters.flush()  # known stored now
        if how == "a failed flush":
            store.lose()  # the store lost them, and says so by failing the next write
            store.down = True
            counters.update([Ref(30, 0x999, Ref(31, 0xD))], "ham")
            with pytest.raises(StorageError):
                counters.flush()
            store.down = False
        else:
            clock.now -= 600  # to the bucket before, and back
            counters.query([sender], windows)
            clock.now += 600
        counters.update(pairs, "ham")
        store.asked.clear()
        got = counters.query([sender], windows)[0]
        assert {p.id for p in pairs} <= set(store.asked)  # read again, not taken as known
        if how == "a failed flush":
            assert got["10m"]["ham"] == 5  # the buffered pairs are new to the store again
    finally:
        counters.close(timeout=1)


def test_reads_with_known_pairs_equal_the_store_after_the_flush() -> None:
    """Many recipients of a few senders, updates, another process's flushes and the clock
    crossing 10-minute buckets at random: each read (some pairs known to the store, some
    not) equals what the store holds once this process's buffer is written."""
    import random

    rng = random.Random(29)
    store = MemoryStore()
    clock = Clock()
    counters = Counters(store, clock=clock, flush_interval=3600, cache_size=0)
    other = Counters(store, clock=clock, flush_interval=3600)
    senders = [Ref(31, 0xD0 + s) for s in range(3)]
    windows = [parse_window("10m"), parse_window("1h"), parse_window("2d")]
    try:
        for _ in range(150):
            for _ in range(rng.randrange(1, 12)):
                sender = rng.choice(senders)
                pair = Ref(30, sender.hash << 8 | rng.randrange(8), sender)
                (other if rng.random() < 0.3 else counters).update([pair], "ham")
            if rng.random() < 0.5:
                other.flush()
            counters.query(senders, windows)  # learns the pairs it finds stored
            if rng.random() < 0.5:  # else the buffer keeps its cells into the next bucket
                before = counters.query(senders, windows)
                counters.flush()
                fresh = Counters(store, clock=clock, buffered=False, cache_size=0)
                assert before == fresh.query(senders, windows)
            clock.now += rng.choice((0, 60, 300, 600, 3600))
    finally:
        counters.close(timeout=1)
        other.close(timeout=1)


def test_write_through_mode(store: Faulty) -> None:
    counters = Counters(store, clock=Clock(), buffered=False)
    counters.update(REFS, "unspam", 2)
    assert store.applies == 1
    assert [v["24h"]["unspam"] for v in counters.query(REFS, W24)] == [2, 2, 2]
    store.down = True
    with pytest.raises(StorageError):
        counters.update(REFS, "unspam")
    counters.close()


@pytest.mark.parametrize(("kind", "n"), [("nope", 1), ("spam", 0), ("spam", -1), ("ham", 2**63)])
def test_bad_updates_are_invalid_input(counters: Counters, kind: str, n: int) -> None:
    with pytest.raises(InvalidInput):
        counters.update(REFS, kind, n)


def test_counters_are_64_bit(counters: Counters) -> None:
    big = 2**62
    counters.update(REFS[:1], "spam", big)
    counters.update(REFS[:1], "spam", big - 1)
    counters.flush()
    assert spam(counters, REFS[:1]) == [2**63 - 1]


def test_the_mail_flow_never_waits_for_a_full_buffer(
    store: Faulty, caplog: pytest.LogCaptureFixture
) -> None:
    from pochta.antispam.shingles.shingler import Shingler

    store.down = True
    shingler = Shingler(Counters(store, flush_interval=3600, max_cells=5, wait_timeout=30))
    raw = b"From: a@example.com\r\nSubject: hello\r\nTo: b@example.com\r\n\r\nsome words here"
    started = time.monotonic()
    for _ in range(3):
        assert shingler.observe(raw)  # the first fills the buffer; the others are dropped
    assert time.monotonic() - started < 5
    assert "dropped" in caplog.text
    store.down = False
    shingler.close()


class FlushingRead(MemoryStore):
    """A store whose next read first lets ``counters`` flush: the flusher running between
    the moment a query reads the buffers and the moment it reads the store."""

    def __init__(self) -> None:
        super().__init__()
        self.counters: Counters | None = None
        self.flush_before_reads = 0

    def read(self, refs: Sequence[Ref], span: Span) -> list[Buckets]:
        if self.flush_before_reads and self.counters is not None:
            self.flush_before_reads -= 1
            self.counters.flush()
        return super().read(refs, span)


def test_a_flush_between_the_buffers_and_the_store_is_not_counted_twice() -> None:
    store = FlushingRead()
    counters = Counters(store, clock=Clock(), flush_interval=3600, cache_size=0)
    store.counters = counters
    try:
        counters.update(REFS, "spam")
        store.flush_before_reads = 1  # the buffered increment reaches the store meanwhile
        assert spam(counters) == [1, 1, 1]  # not 2: the read is done again
        assert store.flush_before_reads == 0
        counters.update(REFS, "spam")
        store.flush_before_reads = 2  # the first try overlaps the flush; the second, last,
        # try is answered without checking (here the flush before it had nothing to write)
        assert spam(counters) in ([2, 2, 2], [3, 3, 3])
        assert spam(counters) == [2, 2, 2]  # and right once nothing overlaps
    finally:
        counters.close(timeout=1)
