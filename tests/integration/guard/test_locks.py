"""Locks against a real redis-server (and the embedded backend where the scenario applies):
a holder paused past its lease, Redis restarted or gone during a hold, how fast waiters wake."""

from __future__ import annotations

import functools
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
from tests.servers import RedisServer

from pochta.config import RedisSettings
from pochta.errors import LeaseLost
from pochta.guard.lock import Lease, Locks
from pochta.guard.lock.redis import RedisFence, RedisLockBackend
from pochta.guard.lock.sqlite import SqliteFence, SqliteLockBackend
from pochta.redisconn import connect
from pochta.types import Fence, LockBackend

pytestmark = pytest.mark.integration

HOLDER = Path(__file__).with_name("holder.py")


class Holder:
    """holder.py in a child process."""

    def __init__(self, kind: str, where: str, resource: str) -> None:
        root = Path(__file__).parents[3]
        self.proc = subprocess.Popen(
            [sys.executable, str(HOLDER), kind, where, resource],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": f"{root / 'src'}{os.pathsep}{root}"},
        )

    def line(self) -> str:
        assert self.proc.stdout is not None
        return self.proc.stdout.readline().strip()

    def send(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
        self.proc.communicate()


@pytest.fixture(params=["redis", "sqlite"])
def store(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[str, str, LockBackend, Fence]]:
    """(kind, where, a backend, a fence) of one store that holder.py can open too."""
    if request.param == "redis":
        client: redis.Redis = request.getfixturevalue("redis_client")
        server: RedisServer = request.getfixturevalue("redis_server")
        backend: LockBackend = RedisLockBackend(server.client())
        yield "redis", str(server.port), backend, RedisFence(client)
    else:
        db = tmp_path / "guard.sqlite3"
        backend = SqliteLockBackend(db)
        yield "sqlite", str(db), backend, SqliteFence(db)
    backend.close()


def test_a_paused_holder_loses_its_lease_and_is_fenced_off(
    store: tuple[str, str, LockBackend, Fence],
) -> None:
    kind, where, backend, fence = store
    holder = Holder(kind, where, "ledger")
    try:
        word, token = holder.line().split()
        old = int(token)
        assert word == "token"
        holder.proc.send_signal(signal.SIGSTOP)  # paused with a 0.5 s lease
        with Locks(backend) as locks:
            started = time.monotonic()
            lease = locks.acquire("job", timeout=5)  # free once the paused lease ran out
            assert 0.3 < time.monotonic() - started < 2.0
            assert lease.token > old
            fence.write("ledger", lease.token, b"new holder")
            holder.proc.send_signal(signal.SIGCONT)
            assert holder.line() == "lost"  # its renewer finds out at once
            holder.send("go")
            assert holder.line() == "not-held"
            assert holder.line() == "refused"  # the late write with the stale token
            assert holder.line() == "release-lost"
            assert fence.read("ledger") == (lease.token, b"new holder")
            lease.release()
    finally:
        holder.close()


@pytest.fixture
def lone_redis(redis_factory: Callable[..., RedisServer]) -> RedisServer:
    return redis_factory()


def test_redis_restarted_during_a_hold(lone_redis: RedisServer) -> None:
    lost = threading.Event()
    with Locks(RedisLockBackend(lone_redis.client()), ttl=1.0) as locks:
        lease = locks.acquire("job", on_lost=lambda _: lost.set())
        lone_redis.restart()  # no persistence: the lease and the counter are gone
        assert lost.wait(3.0)
        assert not lease.is_held()
        with pytest.raises(LeaseLost):
            lease.release()
        with locks.acquire("job", timeout=1) as again:  # tokens still increase
            assert again.token > lease.token


def test_redis_gone_longer_than_the_lease(lone_redis: RedisServer) -> None:
    lost: list[Lease] = []
    # built as pochta builds it: one retry, no backoff (redis-py's default client retries a
    # refused connection for seconds, with backoff, before it gives up)
    client = connect(RedisSettings(nodes=[f"127.0.0.1:{lone_redis.port}"], timeout=1.0))
    with Locks(RedisLockBackend(client), ttl=0.5) as locks:
        lease = locks.acquire("job", on_lost=lost.append)
        lone_redis.stop()
        time.sleep(0.8)
        assert lost == [lease] and "did not answer" in lease.lost_reason
        lone_redis._spawn()
        with locks.acquire("job", timeout=1) as again:
            assert again.token > lease.token


def _wake_latencies(acquire: Callable[[], object], release: Callable[[], None]) -> float:
    """Seconds from a release to the waiter holding the lock."""
    got: list[float] = []
    listening = threading.Event()

    def wait() -> None:
        listening.set()
        acquire()
        got.append(time.monotonic())

    thread = threading.Thread(target=wait)
    thread.start()
    listening.wait()
    time.sleep(0.15)
    released = time.monotonic()
    release()
    thread.join(10)
    return got[0] - released


def test_waiters_wake_on_release(redis_client: redis.Redis, redis_server: RedisServer) -> None:
    """Ours wakes within milliseconds; redis-py's Lock polls every 0.1 s."""
    ours, theirs = [], []
    with Locks(RedisLockBackend(redis_server.client()), ttl=10.0) as locks:
        for _ in range(5):
            lease = locks.acquire("queue")
            waiter: list[Lease] = []
            take = functools.partial(lambda w: w.append(locks.acquire("queue", timeout=8)), waiter)
            ours.append(_wake_latencies(take, lease.release))
            waiter[0].release()
    for _ in range(5):
        held = redis_client.lock("rp-queue", timeout=10, thread_local=False)
        held.acquire()
        other = redis_client.lock("rp-queue", timeout=10, thread_local=False)
        theirs.append(
            _wake_latencies(functools.partial(other.acquire, blocking_timeout=8), held.release)
        )
        other.release()
    assert statistics.median(ours) < 0.05  # typically under 1 ms
    assert statistics.median(ours) < statistics.median(theirs) / 2


def test_waiters_are_served_in_order_and_a_releaser_cannot_barge(
    redis_client: redis.Redis, redis_server: RedisServer
) -> None:
    with Locks(RedisLockBackend(redis_server.client()), ttl=10.0) as locks:
        first = locks.acquire("fifo")
        order: list[int] = []

        def wait_then_hold(i: int) -> None:
            with locks.acquire("fifo", timeout=10):
                order.append(i)
                time.sleep(0.05)

        threads = []
        for i in range(3):
            threads.append(threading.Thread(target=wait_then_hold, args=(i,)))
            threads[-1].start()
            time.sleep(0.2)  # blocked before the next one comes
        first.release()
        assert locks.try_acquire("fifo") is None  # handed to the waiters, not back to us
        for t in threads:
            t.join(10)
        assert order == [0, 1, 2]
        started = time.monotonic()
        for _ in range(20):  # alone again: no hand-off slows a lone client
            with locks.acquire("fifo", timeout=1):
                pass
        assert time.monotonic() - started < 0.5
