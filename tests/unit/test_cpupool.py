"""The worker pool with real processes: results, errors, the hard deadline, crashes, the
initializer, back-pressure, close. Bounds are generous: they must hold on a loaded 2-core
machine; what is asserted is the order of events, not their speed."""

from __future__ import annotations

import asyncio
import gc
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from pochta.cpupool import CpuPool, PoolStats, RemoteTraceback, cores
from pochta.errors import CpuPoolProcessDied, CpuPoolTimeout, CpuPoolUnavailable, TooLarge

# -- what the workers run (module level: they travel by name) ----------------------------

_initialized = 0


def init(log: str) -> None:
    global _initialized
    _initialized += 1
    with open(log, "a") as f:
        f.write(f"{os.getpid()}\n")


def whoami() -> tuple[int, int]:
    return os.getpid(), _initialized


def echo(x: object) -> object:
    return x


def double(data: bytes) -> bytes:
    return data + data


def nap(seconds: float) -> int:
    time.sleep(seconds)
    return os.getpid()


def fail(message: str) -> None:
    raise ValueError(message)


def too_large() -> None:
    raise TooLarge("a letter over the size limit")


class Unpicklable(Exception):
    def __init__(self, message: str, extra: int) -> None:  # args lose ``extra``
        super().__init__(message)


def raise_unpicklable() -> None:
    raise Unpicklable("cannot cross", 1)


def return_unpicklable() -> object:
    return lambda: None


def forever(pid_file: str) -> None:
    """Loops for ever and ignores SIGTERM, as C code that never returns to Python would."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    Path(pid_file).write_text(str(os.getpid()))
    while True:
        pass


def exit_now() -> None:
    os._exit(3)


_kept: list[object] = []


def build_cycles() -> None:
    """An initializer that builds what lives as long as its worker (cycles, as a model's are)."""
    for _ in range(1_000):
        cycle: list[object] = []
        cycle.append(cycle)
        _kept.append(cycle)


def collector_state() -> tuple[bool, bool, bool]:
    """Whether the initializer's objects are out of the collector's walks (frozen), whether
    at least as many objects as it built are frozen, and whether a cycle made by a task is
    still collected."""
    walked = {id(o) for o in gc.get_objects()}
    cycle: list[object] = []
    cycle.append(cycle)
    ref = weakref.ref(Holder(cycle))
    del cycle
    gc.collect()
    return id(_kept[0]) not in walked, gc.get_freeze_count() >= 1_000, ref() is None


class Holder:
    def __init__(self, cycle: list[object]) -> None:
        self.cycle = cycle
        cycle.append(self)


def broken_init() -> None:
    raise RuntimeError("rules file is unreadable")


# -- helpers -------------------------------------------------------------------------------


def gone(pid: int, within: float = 10.0) -> bool:
    """True once ``pid`` no longer runs (absent, or a zombie waiting to be reaped)."""
    end = time.monotonic() + within
    while time.monotonic() < end:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


def pool_threads(name: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(name)]


@pytest.fixture(scope="module")
def pool() -> Iterator[CpuPool]:
    with CpuPool(2, name="test-shared") as p:
        yield p


# -- results and errors --------------------------------------------------------------------


def test_results_come_back(pool: CpuPool) -> None:
    assert pool.run(echo, {"a": [1, 2]}) == {"a": [1, 2]}
    letter = os.urandom(5 * 1024)
    assert pool.run(double, letter) == letter + letter
    assert asyncio.run(pool.arun(double, letter)) == letter + letter


def test_concurrent_callers_all_get_their_own_result(pool: CpuPool) -> None:
    async def main() -> list[object]:
        return await asyncio.gather(*(pool.arun(echo, i) for i in range(50)))

    assert asyncio.run(main()) == list(range(50))
    with ThreadPoolExecutor(4) as threads:
        assert list(threads.map(lambda i: pool.run(echo, i), range(50))) == list(range(50))


def test_an_exception_reaches_the_caller_as_itself(pool: CpuPool) -> None:
    with pytest.raises(ValueError, match="bad letter") as info:
        pool.run(fail, "bad letter")
    assert isinstance(info.value.__cause__, RemoteTraceback)
    assert "in fail" in str(info.value.__cause__)  # the worker's own traceback
    with pytest.raises(TooLarge) as too:
        asyncio.run(pool.arun(too_large))
    assert too.value.code == "too_large"


def test_what_does_not_pickle_is_an_error_and_the_worker_goes_on(pool: CpuPool) -> None:
    with pytest.raises(RuntimeError, match="Unpicklable"):
        pool.run(raise_unpicklable)
    with pytest.raises(Exception, match="pickle"):
        pool.run(return_unpicklable)
    with pytest.raises(Exception, match=r"pickle|local"):
        pool.run(lambda: None)
    assert pool.run(echo, "still here") == "still here"
    assert pool.stats.killed == pool.stats.died == 0


def test_a_deadline_must_be_positive(pool: CpuPool) -> None:
    with pytest.raises(ValueError, match="deadline"):
        pool.run(echo, 1, deadline=0)


# -- the hard deadline -----------------------------------------------------------------------


def test_a_task_past_its_deadline_is_killed_and_the_others_go_on(tmp_path: Path) -> None:
    pid_file = tmp_path / "forever.pid"
    log = str(tmp_path / "init.log")  # the initializer imports this module in each worker
    with CpuPool(2, initializer=init, initargs=(log,), name="test-deadline") as pool:
        before = pool.pids
        early = pool._submit(nap, (0.3,), None)  # already running when the loop starts
        t0 = time.monotonic()
        stuck = pool._submit(forever, (str(pid_file),), 1.5)
        alongside = []
        while not stuck.done():  # the other worker keeps serving, one task after another
            started = time.monotonic()
            alongside.append(pool.run(echo, len(alongside)))
            assert time.monotonic() - started < 5.0
            time.sleep(0.02)
        told = time.monotonic() - t0
        with pytest.raises(CpuPoolTimeout, match="forever"):
            stuck.result()
        assert 1.4 < told < 1.5 + 5.0
        assert early.result(timeout=5) in before
        assert len(alongside) >= 1 and alongside == list(range(len(alongside)))
        killed = int(pid_file.read_text())
        assert killed in before and gone(killed)
        after = [pool.run(echo, "next", deadline=5.0) for _ in range(4)]
        assert after == ["next"] * 4
        end = time.monotonic() + 10  # the replacement starts while the other worker serves
        while pool.stats.restarts < 1 and time.monotonic() < end:
            time.sleep(0.02)
        pids = pool.pids
        assert len(pids) == 2 and killed not in pids
        s = pool.stats
        assert (s.killed, s.died, s.restarts, s.running) == (1, 0, 1, 0)


def test_a_worker_that_exits_under_its_task_is_replaced() -> None:
    with CpuPool(1, name="test-died") as pool:
        (before,) = pool.pids
        with pytest.raises(CpuPoolProcessDied, match=r"exit_now.*code 3"):
            pool.run(exit_now, deadline=30.0)
        assert asyncio.run(pool.arun(echo, "again")) == "again"
        (after,) = pool.pids
        assert after != before and gone(before)
        assert (pool.stats.died, pool.stats.restarts) == (1, 1)


# -- the initializer -------------------------------------------------------------------------


def test_the_initializer_runs_once_per_process(tmp_path: Path) -> None:
    log = tmp_path / "init.log"
    with CpuPool(2, initializer=init, initargs=(str(log),), name="test-init") as pool:
        assert sorted(map(int, log.read_text().split())) == sorted(pool.pids)
        seen = {pool.run(whoami) for _ in range(40)}
        assert {count for _, count in seen} == {1}  # never twice in one process
        with pytest.raises(CpuPoolProcessDied):
            pool.run(exit_now)
        end = time.monotonic() + 10  # the replacement starts while the other worker serves
        while len(log.read_text().split()) < 3 and time.monotonic() < end:
            time.sleep(0.02)
        assert {pool.run(whoami)[1] for _ in range(20)} == {1}
        started = list(map(int, log.read_text().split()))
        assert len(started) == 3 and started[-1] in pool.pids  # the replacement ran it once


def test_what_a_worker_starts_with_is_frozen_and_its_tasks_cycles_are_collected() -> None:
    """The initializer's objects live as long as the worker: they are left out of the
    collector's walks (a full collection walked every one of them), while what tasks make
    is still collected."""
    with CpuPool(1, initializer=build_cycles) as p:
        assert p.run(collector_state) == (True, True, True)


def test_reinitialize_restarts_every_worker_with_the_new_arguments(tmp_path: Path) -> None:
    old, new = tmp_path / "old.log", tmp_path / "new.log"
    with CpuPool(2, initializer=init, initargs=(str(old),), name="test-reinit") as pool:
        before = set(pool.pids)
        pool.reinitialize((str(new),))
        # each worker is replaced before its next task (idle) or after its task (busy): within
        # a few tasks every answer comes from a process initialized with the new arguments
        end = time.monotonic() + 30
        while set(pool.pids) & before and time.monotonic() < end:
            with ThreadPoolExecutor(2) as callers:
                list(callers.map(lambda _: pool.run(whoami), range(4)))
        assert not set(pool.pids) & before
        started_new = set(map(int, new.read_text().split()))
        assert set(pool.pids) <= started_new
        assert {pid for pid, _ in (pool.run(whoami) for _ in range(10))} <= started_new
        assert len(old.read_text().split()) == 2  # the old arguments started only the first two


def test_a_failing_initializer_fails_start_and_leaves_nothing() -> None:
    pool = CpuPool(2, initializer=broken_init, name="test-broken")
    with pytest.raises(CpuPoolUnavailable, match="rules file is unreadable"):
        pool.start()
    assert not [p for p in multiprocessing.active_children() if p.name.startswith("test-broken")]
    with pytest.raises(CpuPoolUnavailable):
        pool.run(echo, 1)


# -- back-pressure -----------------------------------------------------------------------------


def test_max_pending_is_enforced_at_once() -> None:
    with CpuPool(1, max_pending=2, name="test-pending") as pool:
        busy = pool._submit(nap, (2.0,), None)
        deadline = time.monotonic() + 10
        while pool.stats.running == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        waiting = [pool._submit(echo, (i,), None) for i in range(2)]
        with pytest.raises(CpuPoolUnavailable, match="2 tasks already wait"):
            pool.run(echo, "one too many")
        assert not busy.done()  # refused at once, not queued behind the task that runs 2 s
        assert pool.stats.rejected == 1 and pool.stats.pending == 2
        assert [f.result(timeout=10) for f in waiting] == [0, 1]
        assert busy.result(timeout=10) > 0


def test_an_urgent_task_is_taken_before_the_others_that_wait() -> None:
    with CpuPool(1, max_pending=10, name="test-urgent") as pool:
        busy = pool._submit(nap, (0.5,), None)
        deadline = time.monotonic() + 10
        while pool.stats.running == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        done: list[object] = []
        waiting = [pool._submit(echo, (f"plain {i}",), None) for i in range(3)]
        waiting.append(pool._submit(echo, ("urgent",), None, True))
        for future in waiting:
            future.add_done_callback(lambda f: done.append(f.result()))
        for future in waiting:
            future.result(timeout=10)
        busy.result(timeout=10)
        assert done == ["urgent", "plain 0", "plain 1", "plain 2"]


def test_a_cancelled_waiting_task_gives_its_place_back() -> None:
    async def main(pool: CpuPool) -> None:
        busy = asyncio.ensure_future(pool.arun(nap, 0.5))
        await asyncio.sleep(0.2)
        waiting = asyncio.ensure_future(pool.arun(echo, "late"))
        await asyncio.sleep(0.05)
        assert pool.stats.pending == 1
        waiting.cancel()
        await asyncio.sleep(0.05)
        assert pool.stats.pending == 0
        assert await pool.arun(echo, "in its place") == "in its place"
        await busy

    with CpuPool(1, max_pending=1, name="test-cancel") as pool:
        asyncio.run(main(pool))


# -- the event loop ------------------------------------------------------------------------------


def test_arun_does_not_block_the_event_loop(pool: CpuPool) -> None:
    async def main() -> int:
        ticks = 0
        stop = asyncio.Event()

        async def ticker() -> None:
            nonlocal ticks
            while not stop.is_set():
                ticks += 1
                await asyncio.sleep(0.01)

        task = asyncio.ensure_future(ticker())
        await pool.arun(nap, 0.5)
        stop.set()
        await task
        return ticks

    assert asyncio.run(main()) >= 10  # ~50 on an idle machine; a blocked loop gives 1


# -- life cycle ----------------------------------------------------------------------------------


def test_nothing_runs_before_start_and_constructing_starts_nothing() -> None:
    before = set(multiprocessing.active_children())
    pool = CpuPool(2, name="test-lazy")
    assert set(multiprocessing.active_children()) == before and not pool_threads("test-lazy")
    with pytest.raises(CpuPoolUnavailable, match="not running"):
        pool.run(echo, 1)
    pool.close()
    pool.close()


def test_close_is_idempotent_fails_waiting_callers_and_leaves_nothing(tmp_path: Path) -> None:
    pool = CpuPool(1, name="test-close")
    pool.start()
    pids = pool.pids
    running = pool._submit(forever, (str(tmp_path / "pid"),), None)  # no deadline at all
    waiting = pool._submit(echo, ("never",), None)
    while not (tmp_path / "pid").exists():
        time.sleep(0.01)
    started = time.monotonic()
    pool.close()
    pool.close()
    assert time.monotonic() - started < 5.0
    for future in (running, waiting):
        with pytest.raises(CpuPoolUnavailable):
            future.result(timeout=5)
    assert all(gone(pid) for pid in pids)
    assert not [p for p in multiprocessing.active_children() if p.name.startswith("test-close")]
    assert not pool_threads("test-close")
    with pytest.raises(CpuPoolUnavailable):
        pool.run(echo, 1)
    with pytest.raises(CpuPoolUnavailable):
        pool.start()


def test_stats_start_at_zero() -> None:
    with CpuPool(1, name="test-stats") as pool:
        assert pool.stats == PoolStats(1, 0, 0, 0, 0, 0, 0, 0)
        pool.run(echo, 1)
        assert pool.stats.completed == 1


def test_cores_counts_the_usable_cores() -> None:
    assert 1 <= cores() <= (os.cpu_count() or 1)


# -- start-up: modules imported once by the fork server -------------------------------------

_PRELOAD = """
import sys
from pochta.cpupool import CpuPool
assert "tabnanny" not in sys.modules
with CpuPool(1, preload={preload!r}, name="test-preload") as pool:
    print(pool.run(eval, "'tabnanny' in __import__('sys').modules"))
"""


@pytest.mark.parametrize(("preload", "imported"), [(["tabnanny"], "True"), ([], "False")])
def test_a_preloaded_module_is_in_every_worker_before_its_first_task(
    preload: list[str], imported: str
) -> None:
    # a fresh interpreter each: the fork server is one per process and keeps its first preload
    script = _PRELOAD.format(preload=preload)
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [imported]
