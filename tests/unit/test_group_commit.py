"""``pochta.blobs.filedb.group.GroupCommit``: every caller gets its own outcome exactly once,
groups never exceed ``max_batch``, never more than ``leaders`` groups run at once, and
concurrent callers do share groups."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator

import pytest

from pochta.blobs.filedb.group import GroupCommit
from pochta.errors import StorageError


@pytest.fixture(autouse=True)
def busy_switching() -> Iterator[None]:
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    yield
    sys.setswitchinterval(before)


class Server:
    """A fake server: squares numbers, refuses negative ones, records its groups."""

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.groups: list[list[int]] = []
        self.running = 0
        self.most_running = 0
        self.lock = threading.Lock()

    def run(self, steps: list[int]) -> list[int | BaseException]:
        with self.lock:
            self.running += 1
            self.most_running = max(self.most_running, self.running)
            self.groups.append(list(steps))
        time.sleep(self.delay)
        with self.lock:
            self.running -= 1
        return [ValueError(f"no {s}") if s < 0 else s * s for s in steps]


def hammer(group: GroupCommit[int, int], threads: int, per_thread: int) -> dict[int, object]:
    results: dict[int, object] = {}
    lock = threading.Lock()
    start = threading.Barrier(threads)

    def work(t: int) -> None:
        start.wait()
        for i in range(per_thread):
            step = t * per_thread + i
            step = -step if step % 7 == 3 else step
            try:
                got: object = group.submit(step)
            except ValueError as exc:
                got = str(exc)
            with lock:
                results[step] = got

    workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
    return results


@pytest.mark.parametrize("leaders", [1, 2, 3])
def test_every_caller_gets_its_own_outcome(leaders: int) -> None:
    server = Server(delay=0.0005)
    group: GroupCommit[int, int] = GroupCommit(server.run, max_batch=5, leaders=leaders)
    results = hammer(group, threads=16, per_thread=40)
    assert len(results) == 16 * 40
    for step, got in results.items():
        assert got == (f"no {step}" if step < 0 else step * step)
    sent = [s for g in server.groups for s in g]
    assert sorted(sent) == sorted(results)  # each step sent exactly once
    assert max(len(g) for g in server.groups) <= 5
    assert server.most_running <= leaders
    assert any(len(g) > 1 for g in server.groups)  # callers did share groups


def test_a_failing_round_trip_fails_only_its_group() -> None:
    calls = 0

    def run(steps: list[int]) -> list[int | BaseException]:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise StorageError("the server went away")
        return list(steps)

    group: GroupCommit[int, int] = GroupCommit(run, max_batch=8, leaders=1)
    with pytest.raises(StorageError, match="went away"):
        group.submit(1)
    assert group.submit(2) == 2  # the slot was given back


def test_a_closed_group_refuses_new_steps() -> None:
    group: GroupCommit[int, int] = GroupCommit(lambda s: list(s), max_batch=4, leaders=1)
    assert group.submit(3) == 3
    group.close()
    with pytest.raises(StorageError, match="closed"):
        group.submit(4)


def rounds(group: GroupCommit[int, int], threads: int, per_thread: int) -> None:
    """``threads`` callers, each submitting its steps one after the other."""
    start = threading.Barrier(threads)

    def work(t: int) -> None:
        start.wait()
        for i in range(per_thread):
            assert group.submit(t * per_thread + i) == (t * per_thread + i) ** 2

    workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)


def test_callers_answered_together_come_back_as_one_group() -> None:
    """Without gathering, the first caller back from a group leads a group of one and the
    others form the next: sizes alternate 1, 7, 1, 7. With it, the groups stay whole."""
    server = Server(delay=0.002)
    group: GroupCommit[int, int] = GroupCommit(server.run, max_batch=64, leaders=1)
    rounds(group, threads=8, per_thread=30)
    sizes = [len(g) for g in server.groups[2:-2]]  # past the start, before callers leave
    assert sum(sizes) / len(sizes) >= 6, sizes
    assert sum(1 for s in sizes if s == 1) <= len(sizes) // 10, sizes


def test_a_lone_caller_is_never_kept_waiting() -> None:
    """A leader gathers at most once after the others left: its own last group held one step."""
    server = Server(delay=0.05)
    group: GroupCommit[int, int] = GroupCommit(
        server.run, max_batch=64, leaders=1, gather=1000.0, max_gather=1.0
    )
    rounds(group, threads=4, per_thread=4)  # groups of several: the next leader gathers
    started = time.monotonic()
    for i in range(200, 210):
        assert group.submit(i) == i * i
    assert time.monotonic() - started < 4.0  # 10 trips of 0.05 s and one gathering of 1 s


def test_a_second_group_goes_out_only_for_spread_steps() -> None:
    """With slots free, a caller that finds a group on the wire waits for the next group
    unless ``spread`` steps are waiting: 8 callers share groups instead of sending 8 groups
    of one; 64 callers keep several groups on the wire."""
    server = Server(delay=0.002)
    group: GroupCommit[int, int] = GroupCommit(server.run, max_batch=256, leaders=8, spread=8)
    rounds(group, threads=8, per_thread=30)
    sizes = [len(g) for g in server.groups]
    assert sum(sizes) / len(sizes) >= 4, sizes

    server = Server(delay=0.002)
    group = GroupCommit(server.run, max_batch=256, leaders=8, spread=8)
    rounds(group, threads=64, per_thread=10)
    assert server.most_running > 1
    assert server.most_running <= 8
