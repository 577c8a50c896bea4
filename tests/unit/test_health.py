"""What /healthz reports (pochta.health): kept by a background check, read without waiting;
degraded when no pair takes writes or the pair database has not answered for a while."""

from __future__ import annotations

import threading
import time

from pochta.errors import StorageError
from pochta.health import HealthCheck
from pochta.mailbox.queue import Watch
from pochta.types import DiskSpec, Pair, PairFlag

DISKS = (DiskSpec("local", "/a"), DiskSpec("local", "/b"))


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_reports_what_the_last_check_found_and_how_long_ago() -> None:
    clock = Clock()
    pairs = [Pair(1, DISKS, PairFlag.NONE, (10, 10)), Pair(2, DISKS, PairFlag.READONLY, (1, 1))]
    check = HealthCheck(lambda: pairs, stale_after=20, clock=clock)
    first = check.report()
    assert (first.status, first.checked_seconds_ago) == ("degraded", None)
    assert first.problem == "the pair database has not answered yet"
    check.check()
    clock.now += 3
    h = check.report()
    assert (h.status, h.pairs, h.writable_pairs, h.checked_seconds_ago) == ("ok", 2, 1, 3.0)
    pairs[0] = Pair(1, DISKS, PairFlag.SERVICE, (10, 10))
    check.check()
    assert (check.report().status, check.report().problem) == ("degraded", "no pair takes writes")


def test_a_database_that_stops_answering_turns_it_degraded_after_stale_after() -> None:
    clock = Clock()
    down = False

    def pairs() -> list[Pair]:
        if down:
            raise StorageError("couldn't get a connection after 30.00 sec")
        return [Pair(1, DISKS, PairFlag.NONE, (10, 10))]

    check = HealthCheck(pairs, stale_after=20, clock=clock)
    check.check()
    down = True
    clock.now += 10
    check.check()  # a blip: still within stale_after
    assert check.report().status == "ok"
    clock.now += 15
    h = check.report()
    assert (h.status, h.pairs, h.checked_seconds_ago) == ("degraded", 1, 25.0)
    assert h.problem == (
        "the pair database has not answered for 25 s: couldn't get a connection after 30.00 sec"
    )
    down = False
    check.check()
    assert check.report().status == "ok"


def test_report_never_waits_for_a_check_stuck_in_the_database() -> None:
    """The background check is stuck in the database (a real thread, blocked): reports come
    at once, from what the last answered check found, and turn degraded once the stuck one is
    older than stale_after (the time is the injected clock's: a loaded machine cannot make
    the test's two reports straddle stale_after by accident)."""
    clock = Clock()
    release = threading.Event()
    stuck = threading.Event()
    calls = 0

    def pairs() -> list[Pair]:
        nonlocal calls
        calls += 1
        if calls > 1:
            stuck.set()
            release.wait(10)  # the database stopped answering
        return [Pair(1, DISKS, PairFlag.NONE, (10, 10))]

    check = HealthCheck(pairs, interval=0.01, stale_after=20, clock=clock)
    check.start()  # the first check, in this thread; then the stuck one in its own
    try:
        assert stuck.wait(10)
        t0 = time.monotonic()
        assert check.report().status == "ok"
        clock.now += 21
        assert check.report().status == "degraded"
        assert time.monotonic() - t0 < 1.0  # neither report waited for the stuck check
    finally:
        release.set()
        check.stop()


def test_a_queue_runner_without_progress_while_letters_are_due_turns_it_degraded() -> None:
    pairs = [Pair(1, DISKS, PairFlag.NONE, (10, 10))]
    watches = [Watch(0.0, None), Watch(30.0, 45.0), Watch(200.0, 250.0)]
    check = HealthCheck(lambda: pairs, clock=Clock())
    check.watch_queue(lambda: watches.pop(0), 120.0)
    check.check()
    h = check.report()
    assert (h.status, h.queue_stalled_seconds, h.queue_oldest_seconds) == ("ok", 0.0, None)
    check.check()
    h = check.report()
    assert (h.status, h.queue_stalled_seconds, h.queue_oldest_seconds) == ("ok", 30.0, 45.0)
    check.check()
    h = check.report()
    assert h.status == "degraded" and h.queue_oldest_seconds == 250.0
    assert h.problem == (
        "the incoming queue's runner has made no progress for 200 s while letters are due"
    )
    check.check()  # the watch fails (IndexError here): what it said last is kept, logged
    assert check.report().status == "degraded"
    no_queue = HealthCheck(lambda: pairs, clock=Clock())
    no_queue.check()
    assert no_queue.report().queue_stalled_seconds is None
