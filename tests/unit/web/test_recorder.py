"""The history recorder: events added up by hour, written in batches, bounded in memory."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

import pytest

from pochta.errors import StorageError
from pochta.history import MemoryHistory, Recorder
from pochta.history.recorder import OTHERS, parse_shingle_name, shingle_name
from pochta.types import StorageSample, Tally


def wait_until(condition: Callable[[], bool], timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "gave up waiting"
        time.sleep(0.01)


class Clock:
    def __init__(self) -> None:
        self.now = 3600.0 * 1000 + 5

    def __call__(self) -> float:
        return self.now


def test_events_are_added_up_by_hour_and_written_on_flush() -> None:
    store, clock = MemoryHistory(), Clock()
    rec = Recorder(store, clock=clock)
    rec.delivered("phishing", ["PHISH_URGENCY", "PHISH_LINK_IP"], copies=3)
    rec.delivered("phishing", ["PHISH_URGENCY"], copies=1)
    clock.now += 3600
    rec.delivered("ham", [], copies=2)
    rec.login_failed("192.0.2.7", "bob@example.org")
    rec.login_failed("192.0.2.7", None)  # an e-mail that names no user: only the IP
    rec.feedback("complaint", [(14, 0xABC, "spammer@example.net")])
    assert store.tallies("verdict", 0) == []  # nothing written before a flush
    assert rec.flush() == 7
    assert store.tallies("verdict", 0) == [
        Tally(1000, "verdict", "phishing", 4),
        Tally(1001, "verdict", "ham", 2),
    ]
    assert {t.name: t.n for t in store.tallies("sign", 0)} == {
        "PHISH_URGENCY": 4,
        "PHISH_LINK_IP": 3,
    }
    assert [t.name for t in store.tallies("login_account", 0)] == ["bob@example.org"]
    assert [(t.name, t.n) for t in store.tallies("login_ip", 0)] == [("192.0.2.7", 2)]
    (complaint,) = store.tallies("complaint", 0)
    assert parse_shingle_name(complaint.name) == (14, 0xABC, "spammer@example.net")
    assert rec.flush() == 0


def test_shingle_names_are_cut_and_still_parse() -> None:
    name = shingle_name(8, 2**64 - 1, "x" * 1000)
    assert len(name) == 200
    type_, hash_, value = parse_shingle_name(name)
    assert (type_, hash_) == (8, 2**64 - 1) and value == "x" * (200 - len("8:ffffffffffffffff:"))


def test_memory_is_bounded_and_drops_are_counted() -> None:
    store = MemoryHistory()
    rec = Recorder(store, max_buffered=10, clock=Clock())
    for i in range(100):
        rec.login_failed("192.0.2.1", f"user{i}@example.org")
    assert rec.flush() == 10  # one IP cell and nine accounts
    assert rec.dropped == 91


def test_a_series_keeps_at_most_max_names_an_hour_and_adds_the_rest_up() -> None:
    store, clock = MemoryHistory(), Clock()
    rec = Recorder(store, max_names=50, clock=clock)
    for i in range(5000):  # an attacker's addresses (IPv6 gives any number of them)
        rec.login_failed(f"2001:db8::{i:x}", None)
        rec.feedback("complaint", [(8, i, f"made-up subject {i}")])
    rec.login_failed("2001:db8::1", None)  # a name already kept this hour is still its own
    rec.flush()
    for series in ("login_ip", "complaint"):
        cells = {t.name: t.n for t in store.tallies(series, 0)}
        assert len(cells) == 51 and sum(cells.values()) == 5000 + (series == "login_ip")
        assert cells[OTHERS] == 4950
    assert cells["8:0000000000000031:made-up subject 49"] == 1
    assert {t.name: t.n for t in store.tallies("login_ip", 0)}["2001:db8::1"] == 2
    assert rec.dropped == 0
    clock.now += 3600  # a new hour: new names again
    rec.login_failed("198.51.100.1", None)
    rec.flush()
    assert [t.name for t in store.tallies("login_ip", 1001)] == ["198.51.100.1"]


class Failing(MemoryHistory):
    def __init__(self) -> None:
        super().__init__()
        self.fail = True

    def add_tallies(self, tallies: Sequence[Tally]) -> None:
        if self.fail:
            raise StorageError("disk full")
        super().add_tallies(tallies)


def test_a_failed_write_is_kept_for_the_next_flush() -> None:
    store = Failing()
    rec = Recorder(store, clock=Clock())
    rec.delivered("spam", [], copies=1)
    assert rec.flush() == 0
    rec.delivered("spam", [], copies=1)
    store.fail = False
    assert rec.flush() == 1
    assert store.tallies("verdict", 0)[0].n == 2


def test_the_thread_samples_flushes_and_close_writes_the_rest() -> None:
    store, clock = MemoryHistory(), Clock()
    taken = threading.Event()

    def sampler() -> StorageSample:
        taken.set()
        return StorageSample(clock(), 3, 300, 200, 250)

    rec = Recorder(store, sample=sampler, flush_seconds=60, clock=clock)
    rec.start()
    assert taken.wait(10)
    rec.delivered("spam", [], copies=1)
    rec.close()  # stops the thread and flushes
    assert [s.letters for s in store.samples(0)] == [3]
    assert store.tallies("verdict", 0) == [Tally(1000, "verdict", "spam", 1)]


def test_a_restart_does_not_sample_again_before_it_is_due() -> None:
    store, clock = MemoryHistory(), Clock()
    store.add_sample(StorageSample(clock() - 10, 1, 1, 1, 1))
    calls: list[float] = []

    def sampler() -> StorageSample:
        calls.append(clock())
        return StorageSample(clock(), 1, 1, 1, 1)

    rec = Recorder(store, sample=sampler, sample_seconds=600, flush_seconds=0.01, clock=clock)
    rec.delivered("ham", [], copies=1)
    rec.start()
    wait_until(lambda: bool(store.tallies("verdict", 0)))  # the loop has run
    rec.close()
    assert calls == []
    clock.now += 600  # now it is due
    rec = Recorder(store, sample=sampler, sample_seconds=600, flush_seconds=0.01, clock=clock)
    rec.start()
    wait_until(lambda: len(calls) == 1)
    rec.close()


def test_loaders_sharing_a_history_take_turns_at_sampling() -> None:
    """Two recorders (two loaders) on one store: a sample taken by either stands for both,
    so the store gets one sample a period, not one per loader."""
    store, clock = MemoryHistory(), Clock()
    calls: list[str] = []

    def sampler(who: str) -> Callable[[], StorageSample]:
        def take() -> StorageSample:
            calls.append(who)
            return StorageSample(clock(), 1, 1, 1, 1)

        return take

    one, two = (Recorder(store, sample=sampler(w), sample_seconds=600, clock=clock) for w in "ab")
    assert one.sample_if_due(clock()) == clock() + 600
    assert two.sample_if_due(clock()) == clock() + 600  # one's sample stands for two's
    clock.now += 300
    assert two.sample_if_due(clock()) == clock() + 300
    clock.now += 300
    assert two.sample_if_due(clock()) == clock() + 600  # due: two samples this time
    assert one.sample_if_due(clock()) == clock() + 600
    assert calls == ["a", "b"]
    assert len(store.samples(0)) == 2


class Flaky(MemoryHistory):
    """A store that fails its first reads and writes, with the store's error and with a bug's."""

    def __init__(self) -> None:
        super().__init__()
        self.failures = {"samples": 2, "add_tallies": 2, "prune": 1}

    def _fail(self, what: str) -> None:
        if self.failures[what] > 0:
            self.failures[what] -= 1
            if what == "add_tallies":
                raise RuntimeError("a bug")
            raise StorageError("database is locked")

    def samples(self, since: float, limit: int = 10_000) -> list[StorageSample]:
        self._fail("samples")
        return super().samples(since, limit)

    def add_tallies(self, tallies: Sequence[Tally]) -> None:
        self._fail("add_tallies")
        super().add_tallies(tallies)

    def prune(self, before: float) -> int:
        self._fail("prune")
        return super().prune(before)


def test_the_thread_outlives_any_error_and_tries_again(caplog: pytest.LogCaptureFixture) -> None:
    store, clock = Flaky(), Clock()
    rec = Recorder(
        store,
        sample=lambda: StorageSample(clock(), 1, 1, 1, 1),
        flush_seconds=0.001,
        clock=clock,
    )
    rec.delivered("spam", [], copies=1)
    rec.start()
    wait_until(lambda: bool(store.tallies("verdict", 0)) and bool(store.samples(0)))
    rec.delivered("spam", [], copies=1)  # still flushing, after five failures
    rec.wake()
    wait_until(lambda: store.tallies("verdict", 0)[0].n == 2)
    rec.close()
    assert store.failures == {"samples": 0, "add_tallies": 0, "prune": 0}
    assert rec.dropped == 0  # the cells of the failed writes were kept for the next
    messages = [r.getMessage() for r in caplog.records if r.name == "pochta.history"]
    assert sum("database is locked" in m for m in messages) == 3
    assert sum("unexpected error" in m for m in messages) == 2
