"""The lock contract: the embedded (SQLite) backend, Redis and Redis Cluster pass the same suite,
sync and asyncio, and so do their fences.

A new lock backend joins by adding a branch to ``open_lock_kit``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import redis
import redis.asyncio

from pochta.errors import LeaseLost, LockTimeout, StaleToken
from pochta.guard.alock import AsyncLease, AsyncLocks
from pochta.guard.lock import Lease, Locks
from pochta.guard.lock.memory import MemoryFence
from pochta.guard.lock.redis import AsyncRedisLockBackend, RedisFence, RedisLockBackend
from pochta.guard.lock.sqlite import AsyncSqliteLockBackend, SqliteFence, SqliteLockBackend
from pochta.types import AsyncLockBackend, Fence, LockBackend
from tests.servers import HOST, RedisCluster, RedisServer

LOCK_KINDS = [
    "sqlite",
    pytest.param("redis", marks=pytest.mark.integration),
    pytest.param("cluster", marks=pytest.mark.integration),
]
FENCE_KINDS = ["memory", *LOCK_KINDS]


@dataclass
class LockKit:
    """Clients of one lock store: each ``backend()`` is a separate client, as another process
    would have; ``async_backend()`` is called inside a running loop."""

    backend: Callable[[], LockBackend]
    async_backend: Callable[[], AsyncLockBackend]
    opened: list[Locks] = field(default_factory=list)

    def locks(self, ttl: float = 10.0) -> Locks:
        locks = Locks(self.backend(), ttl=ttl)
        self.opened.append(locks)
        return locks


def open_lock_kit(kind: str, request: pytest.FixtureRequest, where: Path) -> LockKit:
    if kind == "sqlite":
        path = where / "guard.sqlite3"
        return LockKit(lambda: SqliteLockBackend(path), lambda: AsyncSqliteLockBackend(path))
    if kind == "redis":
        server: RedisServer = request.getfixturevalue("redis_server")
        request.getfixturevalue("redis_client")  # flushed
        return LockKit(
            lambda: RedisLockBackend(server.client()),
            lambda: AsyncRedisLockBackend(redis.asyncio.Redis(host=HOST, port=server.port)),
        )
    if kind == "cluster":
        cluster: RedisCluster = request.getfixturevalue("redis_cluster")
        request.getfixturevalue("redis_cluster_client")  # flushed
        port = cluster.live()[0].port
        return LockKit(
            lambda: RedisLockBackend(cluster.client()),
            lambda: AsyncRedisLockBackend(redis.asyncio.RedisCluster(host=HOST, port=port)),
        )
    raise ValueError(kind)


@pytest.fixture(params=LOCK_KINDS)
def kit(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LockKit]:
    kit = open_lock_kit(request.param, request, tmp_path)
    yield kit
    for locks in kit.opened:
        locks.close()
        locks.backend.close()


@pytest.fixture(params=FENCE_KINDS)
def fence(request: pytest.FixtureRequest, tmp_path: Path) -> Fence:
    if request.param == "memory":
        return MemoryFence()
    if request.param == "sqlite":
        return SqliteFence(tmp_path / "guard.sqlite3")
    if request.param == "redis":
        return RedisFence(request.getfixturevalue("redis_client"))
    if request.param == "cluster":
        return RedisFence(request.getfixturevalue("redis_cluster_client"))
    raise ValueError(request.param)


# -- the backend steps --------------------------------------------------------------------------
def test_one_holder_at_a_time_and_tokens_increase(kit: LockKit) -> None:
    backend = kit.locks().backend
    first = backend.try_acquire("job", "owner-1", 5.0)
    assert first.token is not None
    refused = backend.try_acquire("job", "owner-2", 5.0)
    assert refused.token is None
    assert 0 < refused.holder_ttl <= 5.0
    assert backend.release("job", "owner-1")
    second = backend.try_acquire("job", "owner-2", 5.0)
    assert second.token is not None and second.token > first.token


def test_only_the_holder_releases_or_extends(kit: LockKit) -> None:
    backend = kit.locks().backend
    assert backend.try_acquire("job", "holder", 5.0).token is not None
    assert not backend.release("job", "intruder")
    assert backend.extend([("job", "intruder", 5.0), ("job", "holder", 5.0)]) == [False, True]
    assert backend.try_acquire("job", "intruder", 5.0).token is None
    assert backend.release("job", "holder")
    assert not backend.release("job", "holder")  # twice: no longer held


def test_a_retried_acquire_of_the_holder_returns_its_token(kit: LockKit) -> None:
    backend = kit.locks().backend
    token = backend.try_acquire("job", "holder", 5.0).token
    assert token is not None
    assert backend.try_acquire("job", "holder", 5.0).token == token


def test_an_unrenewed_lease_expires(kit: LockKit) -> None:
    backend = kit.locks().backend
    old = backend.try_acquire("job", "holder", 0.2).token
    assert old is not None
    time.sleep(0.3)
    assert backend.extend([("job", "holder", 5.0)]) == [False]
    new = backend.try_acquire("job", "next", 5.0).token
    assert new is not None and new > old
    assert not backend.release("job", "holder")


def test_tokens_strictly_increase_per_name_across_clients(kit: LockKit) -> None:
    clients = [kit.locks(), kit.locks()]
    tokens = []
    for i in range(20):
        with clients[i % 2].acquire("counter", timeout=5) as lease:
            tokens.append(lease.token)
    assert tokens == sorted(tokens) and len(set(tokens)) == len(tokens)


# -- Locks: renewal, loss, waiting ---------------------------------------------------------------
def test_the_renewer_keeps_a_lease_past_its_ttl(kit: LockKit) -> None:
    locks, other = kit.locks(ttl=0.3), kit.locks(ttl=0.3)
    with locks.acquire("long-job") as lease:
        time.sleep(1.0)
        assert lease.is_held()
        assert other.try_acquire("long-job") is None
    assert other.try_acquire("long-job") is not None


def test_a_dead_owner_thread_lets_its_lease_expire(kit: LockKit) -> None:
    locks, other = kit.locks(ttl=0.4), kit.locks()
    taken: list[Lease] = []
    thread = threading.Thread(target=lambda: taken.append(locks.acquire("orphan")))
    thread.start()
    thread.join()
    started = time.monotonic()
    with other.acquire("orphan", timeout=5) as lease:
        waited = time.monotonic() - started
        assert lease.token > taken[0].token
    assert waited < 2.0  # the lease was not renewed past its 0.4 s
    assert not taken[0].is_held()


def test_a_lost_lease_is_reported(kit: LockKit) -> None:
    locks = kit.locks(ttl=0.3)
    lost = threading.Event()
    lease = locks.acquire("fragile", on_lost=lambda _: lost.set())
    kit.locks().backend.release("fragile", lease.owner)  # someone removed it behind our back
    assert lost.wait(2.0)
    assert not lease.is_held()
    with pytest.raises(LeaseLost):
        lease.check()
    with pytest.raises(LeaseLost):
        lease.release()


def test_leaving_the_block_after_a_loss_raises(kit: LockKit) -> None:
    locks = kit.locks(ttl=0.3)
    lease = locks.acquire("fragile")
    kit.locks().backend.release("fragile", lease.owner)
    time.sleep(0.5)
    with pytest.raises(LeaseLost):
        lease.__exit__(None, None, None)


def test_a_waiter_wakes_on_release_not_on_expiry(kit: LockKit) -> None:
    holder, waiter = kit.locks(ttl=10.0), kit.locks()
    lease = holder.acquire("queue")
    got: list[float] = []
    ready = threading.Event()

    def wait() -> None:
        ready.set()
        with waiter.acquire("queue", timeout=8) as _:
            got.append(time.monotonic())

    thread = threading.Thread(target=wait)
    thread.start()
    ready.wait()
    time.sleep(0.3)  # the waiter is listening
    released = time.monotonic()
    lease.release()
    thread.join(timeout=8)
    assert got and got[0] - released < 0.5  # the fallback would have been the 10 s lease


def test_acquire_times_out(kit: LockKit) -> None:
    holder, other = kit.locks(), kit.locks()
    with holder.acquire("busy"):
        started = time.monotonic()
        with pytest.raises(LockTimeout):
            other.acquire("busy", timeout=0.3)
        assert 0.25 < time.monotonic() - started < 1.5
        with pytest.raises(LockTimeout):
            other.acquire("busy", timeout=0)


def test_threads_exclude_each_other(kit: LockKit) -> None:
    locks = [kit.locks(ttl=2.0) for _ in range(2)]
    inside = 0
    overlaps = 0
    counter = 0

    def work(i: int) -> None:
        nonlocal inside, overlaps, counter
        for _ in range(15):
            with locks[i % 2].acquire("shared", timeout=10):
                inside += 1
                overlaps += inside > 1
                value = counter
                time.sleep(0.001)
                counter = value + 1
                inside -= 1

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert overlaps == 0 and counter == 60


# -- fencing -------------------------------------------------------------------------------------
def test_a_stale_holder_is_fenced_off(kit: LockKit) -> None:
    fence = MemoryFence()
    locks = kit.locks()
    old = locks.acquire("ledger")
    kit.locks().backend.release("ledger", old.owner)  # its lease is gone, it does not know yet
    with locks.acquire("ledger", timeout=1) as new:
        fence.write("ledger", new.token, b"new")
    with pytest.raises(StaleToken):
        fence.write("ledger", old.token, b"old")
    assert fence.read("ledger") == (new.token, b"new")


def test_fence_keeps_the_highest_token(fence: Fence) -> None:
    assert fence.read("account:13") == (0, None)
    fence.write("account:13", 5, b"five")
    fence.write("account:13", 5, b"five again")  # the same holder writes twice
    fence.admit("account:13", 7)
    assert fence.read("account:13") == (7, b"five again")
    with pytest.raises(StaleToken):
        fence.write("account:13", 6, b"six")
    with pytest.raises(StaleToken):
        fence.admit("account:13", 1)
    fence.write("account:13", 8, b"eight")
    assert fence.read("account:13") == (8, b"eight")
    assert fence.read("account:14") == (0, None)


# -- asyncio -------------------------------------------------------------------------------------
async def _close(locks: AsyncLocks) -> None:
    await locks.close()
    await locks.backend.close()
    client = getattr(getattr(locks.backend, "io", None), "client", None)
    if client is not None:
        await client.aclose()


def test_async_exclusion_tokens_and_wake(kit: LockKit) -> None:
    async def main() -> None:
        a, b = AsyncLocks(kit.async_backend()), AsyncLocks(kit.async_backend())
        try:
            first = await a.acquire("job")
            assert await b.try_acquire("job") is None
            waiter = asyncio.create_task(b.acquire("job", timeout=5))
            await asyncio.sleep(0.2)
            released = time.monotonic()
            await first.release()
            second = await waiter
            assert time.monotonic() - released < 0.5
            assert second.token > first.token
            with pytest.raises(LockTimeout):
                await a.acquire("job", timeout=0.2)
            await second.release()
        finally:
            await _close(a)
            await _close(b)

    asyncio.run(main())


def test_async_renewal_and_cancellation_on_loss(kit: LockKit) -> None:
    async def main() -> None:
        locks = AsyncLocks(kit.async_backend(), ttl=0.3)
        intruder = kit.locks().backend
        try:
            async with locks.hold("long-job") as lease:
                await asyncio.sleep(0.8)
                assert lease.is_held()
            lost: list[AsyncLease] = []
            reached_end = False

            async def critical_section() -> None:
                nonlocal reached_end
                async with locks.hold("long-job", on_lost=lost.append) as lease:
                    intruder.release("long-job", lease.owner)
                    await asyncio.sleep(5)  # cancelled when the renewer finds out
                    reached_end = True

            started = time.monotonic()
            with pytest.raises(LeaseLost):
                await critical_section()
            assert len(lost) == 1 and not reached_end
            assert time.monotonic() - started < 1.0
        finally:
            await _close(locks)

    asyncio.run(main())
