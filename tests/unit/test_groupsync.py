"""GroupSync: callers share syncs, and none is released by a sync that began before it called."""

from __future__ import annotations

import errno
import itertools
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pochta.blobs.nodes import groupsync
from pochta.blobs.nodes.groupsync import GroupSync
from pochta.blobs.nodes.local import LocalDisk


class GatedSync:
    """A sync that blocks until the test opens its gate; it counts starts and ends."""

    def __init__(self) -> None:
        self.started = threading.Semaphore(0)
        self.gate = threading.Semaphore(0)
        self.runs = 0
        self.fail_next: OSError | None = None

    def __call__(self) -> None:
        self.runs += 1
        self.started.release()
        assert self.gate.acquire(timeout=10)
        if self.fail_next is not None:
            error, self.fail_next = self.fail_next, None
            raise error


def _start(target: GroupSync, results: list[object]) -> threading.Thread:
    def run() -> None:
        try:
            target.wait()
            results.append("ok")
        except OSError as exc:
            results.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def _wait_until(predicate: object, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def test_callers_arriving_during_a_sync_share_the_next_one() -> None:
    sync = GatedSync()
    group = GroupSync(sync)
    first: list[object] = []
    leader = _start(group, first)
    assert sync.started.acquire(timeout=5)  # the first sync runs, for the first caller only
    later: list[object] = []
    threads = [_start(group, later) for _ in range(6)]
    _wait_until(lambda: sum(t.is_alive() for t in threads) == 6)
    time.sleep(0.05)  # let all six reach the wait
    sync.gate.release()  # the first sync ends: it does not count for the six
    leader.join(5)
    assert first == ["ok"]
    assert sync.started.acquire(timeout=5)  # one more sync, for all six together
    assert later == []  # nobody was released by the sync that started before they came
    sync.gate.release()
    for t in threads:
        t.join(5)
    assert later == ["ok"] * 6
    assert sync.runs == group.syncs == 2


def test_a_failed_sync_fails_its_batch_only() -> None:
    sync = GatedSync()
    group = GroupSync(sync)
    first: list[object] = []
    leader = _start(group, first)
    assert sync.started.acquire(timeout=5)
    batch: list[object] = []
    threads = [_start(group, batch) for _ in range(3)]
    time.sleep(0.05)
    sync.gate.release()
    leader.join(5)
    assert sync.started.acquire(timeout=5)
    sync.fail_next = OSError(errno.EIO, "I/O error")
    sync.gate.release()
    for t in threads:
        t.join(5)
    assert first == ["ok"]
    assert len(batch) == 3
    assert all(isinstance(r, OSError) and r.errno == errno.EIO for r in batch)
    after: list[object] = []
    t = _start(group, after)
    assert sync.started.acquire(timeout=5)
    sync.gate.release()
    t.join(5)
    assert after == ["ok"]  # the group works on after a failure


def test_an_interrupted_sync_covers_nobody() -> None:
    calls: list[int] = []

    def sync() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise KeyboardInterrupt

    group = GroupSync(sync)
    with pytest.raises(KeyboardInterrupt):
        group.wait()
    group.wait()  # the next caller gets a sync of its own
    assert len(calls) == 2


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=3), min_size=1, max_size=12))
def test_every_caller_is_covered_by_a_sync_that_started_after_it_called(
    delays: list[int],
) -> None:
    """Many callers at random moments: each returns after the end of a sync that began after
    its call (a logical clock orders calls, sync starts and ends)."""
    clock = itertools.count()
    syncs: list[tuple[int, int]] = []

    def sync() -> None:
        start = next(clock)
        time.sleep(0.002)
        syncs.append((start, next(clock)))

    group = GroupSync(sync)
    spans: list[tuple[int, int]] = []

    def caller(delay: int) -> None:
        time.sleep(delay / 1000)
        called = next(clock)
        group.wait()
        spans.append((called, next(clock)))

    threads = [threading.Thread(target=caller, args=(d,)) for d in delays]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(spans) == len(delays)
    assert len(syncs) <= len(delays)
    for called, returned in spans:
        assert any(called < s and e < returned for s, e in syncs), (called, returned, syncs)


@pytest.mark.skipif(groupsync.syncfs_of(Path("/")) is None, reason="no trusted syncfs here")
def test_disks_on_one_filesystem_share_one_group_and_the_files_land(tmp_path: Path) -> None:
    a, b = LocalDisk(tmp_path / "a"), LocalDisk(tmp_path / "b")
    for root in (a.root, b.root):
        root.mkdir()
    assert a.group() is b.group() is not None
    data = [os.urandom(5000) for _ in range(16)]
    shared = a.group()
    assert shared is not None
    before = shared.syncs  # the group is the filesystem's: earlier tests' syncs count in it

    def put(i: int) -> None:
        for disk in (a, b):
            writer = disk.create(f"tmp/{i}.part")
            writer.write(data[i])
            writer.commit_as(f"ab/{i:02x}/file{i}")

    threads = [threading.Thread(target=put, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    for disk in (a, b):
        for i in range(16):
            assert b"".join(disk.open(f"ab/{i:02x}/file{i}")) == data[i]
        assert list((disk.root / "tmp").iterdir()) == []
    group = a.group()
    assert group is not None
    assert 1 <= group.syncs - before <= 32  # one wait per copy at most, fewer when they overlap


def test_without_syncfs_the_disk_fsyncs_each_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(groupsync, "_syncfs", None)
    disk = LocalDisk(tmp_path)
    assert disk.group() is None
    writer = disk.create("tmp/x.part")
    writer.write(b"bytes")
    writer.commit_as("ab/cd/x")
    assert b"".join(disk.open("ab/cd/x")) == b"bytes"
    assert disk.size("tmp/x.part") is None


def _in_thread(call: Callable[[], object], results: list[object]) -> threading.Thread:
    def run() -> None:
        try:
            results.append(call())
        except Exception as exc:  # the test reads it
            results.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_a_sync_about_to_start_holds_for_an_announced_writer_and_carries_it() -> None:
    """An upload that has begun its copies announces itself: the next sync waits for it (here
    up to a long hold) and serves it with the caller already waiting: one sync, not two."""
    sync = GatedSync()
    group = GroupSync(sync, hold=30.0)
    arrived = threading.Event()
    announced = threading.Event()

    def uploader() -> str:
        group.announce()
        announced.set()
        assert arrived.wait(10)
        group.wait()
        return "uploader"

    results: list[object] = []
    up = _in_thread(uploader, results)
    assert announced.wait(5)
    other = _start(group, results)
    time.sleep(0.1)
    assert sync.runs == 0  # held for the announced uploader
    arrived.set()
    assert sync.started.acquire(timeout=5)
    sync.gate.release()
    up.join(5)
    other.join(5)
    assert sorted(map(str, results)) == ["ok", "uploader"]
    assert sync.runs == group.syncs == 1


def test_the_hold_is_bounded_and_forgo_ends_it() -> None:
    """A writer that announced itself and never comes delays a sync by ``hold`` at most;
    ``forgo`` ends the hold at once, and a thread that came already forgoes nothing."""
    sync = GatedSync()
    for _ in range(4):
        sync.gate.release()
    group = GroupSync(sync, hold=0.2)
    group.announce()  # this thread, which will not come
    started = time.monotonic()
    results: list[object] = []
    _start(group, results).join(5)
    assert results == ["ok"]
    assert 0.15 <= time.monotonic() - started < 5
    group.forgo()
    held = GroupSync(sync, hold=30.0)
    held.announce()
    forgone: list[object] = []
    waiter = _start(held, forgone)
    time.sleep(0.05)
    assert forgone == []
    held.forgo()  # the hold ends now, not in 30 s
    waiter.join(5)
    assert forgone == ["ok"]
    held.announce()
    held.wait()  # came: nothing left to forgo, and later syncs do not hold
    held.forgo()
    started = time.monotonic()
    held.wait()
    assert time.monotonic() - started < 5


def test_a_returning_caller_is_held_for_and_its_write_rides_the_next_sync() -> None:
    """``wait(returning=True)`` (an upload's copies) then ``after(write)`` (its record): the
    sync after the copies' holds until the write is done, then carries it together with the
    callers that queued meanwhile; a write that fails releases the hold."""
    seen: list[bool] = []
    written = threading.Event()
    go = threading.Event()
    gate = GatedSync()

    def sync() -> None:
        seen.append(written.is_set())
        gate()

    group = GroupSync(sync, hold=30.0)

    def uploader() -> str:
        group.wait(returning=True)  # the copies
        assert go.wait(10)
        return group.after(written.set) or "record"  # the record

    results: list[object] = []
    up = _in_thread(uploader, results)
    assert gate.started.acquire(timeout=5)  # the copies' sync runs
    other = _start(group, results)
    time.sleep(0.05)
    gate.gate.release()  # the copies are durable; the other caller's sync is next
    time.sleep(0.1)
    assert gate.runs == 1  # held for the uploader's record
    go.set()
    assert gate.started.acquire(timeout=5)
    gate.gate.release()
    up.join(5)
    other.join(5)
    assert sorted(map(str, results)) == ["ok", "record"]
    assert seen == [False, True]  # the second sync began after the record was written
    assert gate.runs == 2

    def fails() -> None:
        raise OSError(errno.EIO, "the write failed")

    with pytest.raises(OSError, match="the write failed"):
        group.after(fails)
    gate.gate.release()
    started = time.monotonic()
    group.wait()  # nothing announced is left: no hold
    assert time.monotonic() - started < 5


def test_a_failed_sync_fails_the_callers_whose_writes_it_may_have_covered() -> None:
    """syncfs reports a writeback error once, to the sync that ends after it: the writes made
    while that sync ran (a count committed during it, copies placed during it) may be the
    pages that failed, so their callers are failed too, though the sync they wait for (the
    next one) succeeds. Without this they were answered and the write was lost on a crash."""
    sync = GatedSync()
    group = GroupSync(sync, hold=0)
    first: list[object] = []
    leader = _start(group, first)
    assert sync.started.acquire(timeout=5)  # S1 runs
    during: list[object] = []
    waiter = _start(group, during)  # wrote while S1 runs, waits for S2
    wrote = threading.Event()
    counter = _in_thread(lambda: group.after(wrote.set) or "after", during)
    assert wrote.wait(5)
    time.sleep(0.05)
    sync.fail_next = OSError(errno.EIO, "writeback failed")
    sync.gate.release()  # S1 fails: the error may be of the pages written during it
    leader.join(5)
    assert len(first) == 1 and isinstance(first[0], OSError)
    assert sync.started.acquire(timeout=5)  # S2 runs, and succeeds
    sync.gate.release()
    waiter.join(5)
    counter.join(5)
    assert len(during) == 2
    assert all(isinstance(r, OSError) and r.errno == errno.EIO for r in during), during
    later: list[object] = []
    t = _start(group, later)  # arrives after the failure: its own sync decides
    assert sync.started.acquire(timeout=5)
    sync.gate.release()
    t.join(5)
    assert later == ["ok"]
