"""Locks beyond the contract: an unreachable backend, forks, names, and the embedded backend
shared by processes (``tests/contract/test_guard_lock.py`` has the common semantics)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from pochta.errors import GuardUnavailable, InvalidInput, LeaseLost
from pochta.guard import _proc
from pochta.guard.lock import Lease, Locks, State
from pochta.guard.lock.sqlite import FifoListener, SqliteLockBackend
from pochta.types import Grant


class Cut:
    """A backend whose renewals fail while ``down``."""

    def __init__(self, inner: SqliteLockBackend) -> None:
        self.inner = inner
        self.down = False

    def try_acquire(self, name: str, owner: str, ttl: float, queue: bool = False) -> Grant:
        return self.inner.try_acquire(name, owner, ttl, queue)

    def extend(self, leases: Sequence[tuple[str, str, float]]) -> list[bool]:
        if self.down:
            raise GuardUnavailable("the network is down")
        return self.inner.extend(leases)

    def release(self, name: str, owner: str) -> bool:
        return self.inner.release(name, owner)

    def listen(self, name: str) -> FifoListener:
        return self.inner.listen(name)

    def close(self) -> None:
        self.inner.close()


@pytest.fixture
def backend(tmp_path: Path) -> Iterator[SqliteLockBackend]:
    backend = SqliteLockBackend(tmp_path / "guard.sqlite3")
    yield backend
    backend.close()


def test_an_unreachable_backend_costs_the_lease_only_when_it_runs_out(
    backend: SqliteLockBackend,
) -> None:
    cut = Cut(backend)
    with Locks(cut, ttl=0.4) as locks:
        lost: list[Lease] = []
        brief = locks.acquire("brief", on_lost=lost.append)
        cut.down = True
        time.sleep(0.25)  # a renewal failed, the lease has not run out
        assert brief.is_held() and not lost
        cut.down = False
        time.sleep(0.5)
        assert brief.is_held() and not lost  # renewed once the backend answered again
        cut.down = True
        time.sleep(0.6)
        assert lost == [brief] and not brief.is_held()
        assert "did not answer" in brief.lost_reason
        cut.down = False
        with pytest.raises(LeaseLost):
            brief.release()


def test_a_forked_child_cannot_release_its_parents_lease(backend: SqliteLockBackend) -> None:
    with Locks(backend) as locks:
        lease = locks.acquire("parent-only")
        pid = os.fork()
        if pid == 0:  # the child
            code = 0 if not lease.is_held() else 1
            lease.release()  # does nothing
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert lease.is_held()
        assert locks.try_acquire("parent-only") is None
        lease.release()


@pytest.mark.parametrize("name", ["", "a{b}", "with space", "tab\there", "x" * 201])
def test_bad_names_are_refused(backend: SqliteLockBackend, name: str) -> None:
    with Locks(backend) as locks, pytest.raises(InvalidInput):
        locks.acquire(name)


def test_close_releases_what_is_held(backend: SqliteLockBackend) -> None:
    locks = Locks(backend)
    lease = locks.acquire("left-open")
    locks.close()
    assert lease.state is State.RELEASED
    with Locks(backend) as other:
        assert other.try_acquire("left-open") is not None


def test_a_lease_from_before_a_reboot_is_expired(backend: SqliteLockBackend) -> None:
    assert backend.try_acquire("job", "old-owner", 3600).token is not None
    backend.db.write(lambda c: c.execute("UPDATE lease SET boot = 'another boot'"))
    assert backend.try_acquire("job", "new-owner", 10).token is not None


def test_releases_nobody_hears_leave_no_wake_ups_behind(backend: SqliteLockBackend) -> None:
    for i in range(100):
        backend.try_acquire("quiet", f"owner-{i}", 10)
        backend.release("quiet", f"owner-{i}")
    listener = backend.listen("quiet")
    try:
        started = time.monotonic()
        listener.wait(0.2)
        assert time.monotonic() - started >= 0.19
    finally:
        listener.close()


PROCESS = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from pochta.guard.lock.sqlite import SqliteLockBackend
    from pochta.guard.lock import Locks

    db, counter, rounds = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
    tokens = []
    with Locks(SqliteLockBackend(db), ttl=5) as locks:
        for _ in range(rounds):
            with locks.acquire("counter", timeout=30) as lease:
                value = int(counter.read_text())
                time.sleep(0.001)
                counter.write_text(str(value + 1))
                tokens.append(lease.token)
    print(" ".join(map(str, tokens)))
    """
)


def test_processes_share_the_embedded_lock(tmp_path: Path) -> None:
    counter = tmp_path / "counter"
    counter.write_text("0")
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", PROCESS, str(tmp_path / "guard.sqlite3"), str(counter), "25"],
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    outputs = [proc.communicate(timeout=60)[0] for proc in procs]
    assert all(proc.returncode == 0 for proc in procs)
    assert counter.read_text() == "100"
    tokens = [int(t) for out in outputs for t in out.split()]
    assert len(set(tokens)) == 100
    for out in outputs:  # each process saw its tokens increase
        mine = [int(t) for t in out.split()]
        assert mine == sorted(mine)


def test_threads_of_a_dead_owner_are_told_apart_from_the_living(
    backend: SqliteLockBackend,
) -> None:
    with Locks(backend, ttl=0.3) as locks:
        kept = locks.acquire("kept")
        orphaned: list[Lease] = []
        thread = threading.Thread(target=lambda: orphaned.append(locks.acquire("orphan")))
        thread.start()
        thread.join()
        time.sleep(0.5)
        assert kept.is_held()
        assert orphaned[0].state is State.ABANDONED and not orphaned[0].is_held()
        assert [lease.name for lease in locks.held()] == ["kept"]


HOLDER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from pochta.guard.lock.sqlite import SqliteLockBackend
    from pochta.guard.lock import Locks

    with Locks(SqliteLockBackend(Path(sys.argv[1])), ttl=30) as locks:
        lease = locks.acquire("job:deletions", timeout=5)
        print(lease.token, flush=True)
        time.sleep(120)
    """
)


def _holder(tmp_path: Path) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path / "guard.sqlite3")],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    return proc, int(proc.stdout.readline())


def test_a_killed_holders_lease_is_taken_at_once(
    tmp_path: Path, backend: SqliteLockBackend
) -> None:
    """A holder SIGKILLed on this host frees its lock at the next try, not a lease (30 s)
    later; a stopped one (alive) keeps it."""
    proc, token = _holder(tmp_path)
    try:
        with Locks(backend, ttl=5) as locks:
            assert locks.try_acquire("job:deletions") is None  # it runs
            proc.send_signal(signal.SIGSTOP)
            assert locks.try_acquire("job:deletions") is None  # paused, not gone
            proc.kill()
            proc.wait(timeout=10)
            lease = locks.acquire("job:deletions", timeout=2)
            assert lease.token > token
    finally:
        proc.kill()
        proc.communicate()


def test_a_zombie_holder_is_gone_and_another_namespace_is_not_judged(
    tmp_path: Path, backend: SqliteLockBackend
) -> None:
    proc, _ = _holder(tmp_path)
    try:
        os.kill(proc.pid, signal.SIGKILL)  # not reaped yet: a zombie
        deadline = time.monotonic() + 5
        while _proc_state(proc.pid) != "Z" and time.monotonic() < deadline:
            time.sleep(0.01)
        with sqlite3.connect(tmp_path / "guard.sqlite3") as db:  # as if it ran elsewhere
            db.execute("UPDATE lease_holder SET namespace = namespace + 1")
        with Locks(backend, ttl=5) as locks:
            assert locks.try_acquire("job:deletions") is None
            with sqlite3.connect(tmp_path / "guard.sqlite3") as db:
                db.execute("UPDATE lease_holder SET namespace = namespace - 1")
            assert locks.try_acquire("job:deletions") is not None
    finally:
        proc.kill()
        proc.communicate()


def _proc_state(pid: int) -> str:
    data = Path(f"/proc/{pid}/stat").read_bytes()
    return data[data.rfind(b")") + 2 :].split()[0].decode()


def test_gone_tells_a_reused_pid_from_its_process() -> None:
    me, started = os.getpid(), _proc.started()
    assert not _proc.gone(me, started)
    assert _proc.gone(me, started + 1)  # the pid names another process now
    assert not _proc.gone(me, -1)  # unknown: never taken for gone
    assert _proc.gone(2**22 + 1, 1)  # above pid_max: no such process


def test_a_waiter_takes_a_killed_holders_lock_within_a_second_or_so(
    tmp_path: Path, backend: SqliteLockBackend
) -> None:
    """A caller already waiting (a long timeout) is not woken by a death (only a release
    rings): it asks again every second while the holder is one this host can see."""
    proc, token = _holder(tmp_path)
    got: list[Lease] = []
    try:
        with Locks(backend, ttl=5) as locks:
            waiter = threading.Thread(
                target=lambda: got.append(locks.acquire("job:deletions", timeout=25))
            )
            waiter.start()
            time.sleep(0.3)  # waiting now
            proc.kill()
            killed = time.monotonic()
            waiter.join(20)
            assert got and got[0].token > token
            assert time.monotonic() - killed < 5  # not the holder's lease of 30 s
    finally:
        proc.kill()
        proc.communicate()


def test_a_holder_proc_hides_is_asked_of_the_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    """/proc mounted hidepid=invisible hides other users' living processes: a stat that is
    not there is no death until the kernel says there is no such process."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        started = _proc._start_time(child.pid)
        assert not _proc.gone(child.pid, started)

        def hidden(path: object, *args: object, **kwargs: object) -> object:
            if str(path) == f"/proc/{child.pid}/stat":
                raise FileNotFoundError(path)
            return open(path, *args, **kwargs)  # type: ignore[call-overload]

        monkeypatch.setattr(_proc, "open", hidden, raising=False)
        assert not _proc.gone(child.pid, started)  # alive: the kernel knows it
        child.kill()
        child.wait()
        assert _proc.gone(child.pid, started)  # reaped: no such process
    finally:
        child.kill()
        child.wait()
