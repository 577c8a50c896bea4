"""The rate-limit contract: the in-memory, embedded (SQLite), Redis and Redis Cluster backends
pass the same suite on their own clocks, sync and asyncio.

A new backend joins by adding a branch to ``open_rate_kit``.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import redis
import redis.asyncio

from pochta.guard.ratelimit import (
    AsyncRateLimiter,
    RateLimiter,
    ThreadedRateLimitBackend,
)
from pochta.guard.ratelimit.memory import MemoryRateLimitBackend
from pochta.guard.ratelimit.redis import AsyncRedisRateLimitBackend, RedisRateLimitBackend
from pochta.guard.ratelimit.sqlite import SqliteRateLimitBackend
from pochta.types import AsyncRateLimitBackend, Limit, RateLimitBackend, Schedule, Slot
from tests.servers import HOST, RedisCluster, RedisServer

RATE_KINDS = [
    "memory",
    "sqlite",
    pytest.param("redis", marks=pytest.mark.integration),
    pytest.param("cluster", marks=pytest.mark.integration),
]
SECRET = b"contract-test-secret-0123456789"
IP = "203.0.113.5"
EMAIL = "alice@example.com"


@dataclass
class RateKit:
    backend: Callable[[], RateLimitBackend]
    async_backend: Callable[[], AsyncRateLimitBackend]  # called inside a running loop
    opened: list[RateLimitBackend] = field(default_factory=list)

    def limiter(self, tag: str = "test") -> RateLimiter:
        backend = self.backend()
        self.opened.append(backend)
        return RateLimiter(backend, SECRET, tag=tag)


def open_rate_kit(kind: str, request: pytest.FixtureRequest, where: Path) -> RateKit:
    if kind == "memory":
        shared = MemoryRateLimitBackend()
        return RateKit(lambda: shared, lambda: ThreadedRateLimitBackend(shared))
    if kind == "sqlite":
        path = where / "guard.sqlite3"
        return RateKit(
            lambda: SqliteRateLimitBackend(path),
            lambda: ThreadedRateLimitBackend(SqliteRateLimitBackend(path)),
        )
    if kind == "redis":
        server: RedisServer = request.getfixturevalue("redis_server")
        request.getfixturevalue("redis_client")  # flushed
        return RateKit(
            lambda: RedisRateLimitBackend(server.client()),
            lambda: AsyncRedisRateLimitBackend(redis.asyncio.Redis(host=HOST, port=server.port)),
        )
    if kind == "cluster":
        cluster: RedisCluster = request.getfixturevalue("redis_cluster")
        request.getfixturevalue("redis_cluster_client")  # flushed
        port = cluster.live()[0].port
        return RateKit(
            lambda: RedisRateLimitBackend(cluster.client()),
            lambda: AsyncRedisRateLimitBackend(redis.asyncio.RedisCluster(host=HOST, port=port)),
        )
    raise ValueError(kind)


@pytest.fixture(params=RATE_KINDS)
def kit(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RateKit]:
    kit = open_rate_kit(request.param, request, tmp_path)
    yield kit
    for backend in kit.opened:
        backend.close()


def test_max_attempts_then_a_refusal_with_retry_after(kit: RateKit) -> None:
    limiter = kit.limiter()
    per_ip = Limit("ip", 3, 60.0)
    lefts = [limiter.hit((per_ip, IP)) for _ in range(3)]
    assert all(d.allowed and d.retry_after == 0 for d in lefts)
    assert [round(d.remaining) for d in lefts] == [2, 1, 0]
    refused = limiter.hit((per_ip, IP))
    assert not refused.allowed and refused.denied == ("ip",)
    assert refused.remaining == pytest.approx(0, abs=0.01)
    assert 19.5 < refused.retry_after <= 20.0  # one attempt comes back every 60 / 3 s
    assert kit.limiter().hit((per_ip, "198.51.100.7")).allowed  # another subject
    assert kit.limiter(tag="other").hit((per_ip, IP)).allowed  # another limiter


def test_attempts_come_back_continuously(kit: RateKit) -> None:
    limiter = kit.limiter()
    fast = Limit("fast", 2, 0.4)  # one attempt back every 0.2 s
    assert limiter.hit((fast, IP)).allowed and limiter.hit((fast, IP)).allowed
    refused = limiter.hit((fast, IP))
    assert not refused.allowed and 0.1 < refused.retry_after <= 0.2
    time.sleep(refused.retry_after + 0.02)
    assert limiter.hit((fast, IP)).allowed
    assert not limiter.hit((fast, IP)).allowed
    time.sleep(0.45)  # full again, and never more than full
    assert limiter.peek((fast, IP), cost=0).remaining == pytest.approx(2.0)


def test_several_limits_are_charged_together_or_not_at_all(kit: RateKit) -> None:
    limiter = kit.limiter()
    per_ip, per_account = Limit("ip", 2, 60.0), Limit("account", 5, 60.0)
    for _ in range(2):
        assert limiter.hit((per_ip, IP), (per_account, EMAIL)).allowed
    refused = limiter.hit((per_ip, IP), (per_account, EMAIL))
    assert not refused.allowed and refused.denied == ("ip",)
    assert limiter.peek((per_account, EMAIL)).remaining == pytest.approx(2.0, abs=0.01)
    both = limiter.hit((per_ip, IP), (per_account, EMAIL), cost=6)
    assert not both.allowed and set(both.denied) == {"ip", "account"}
    assert both.retry_after == math.inf  # 6 attempts never fit in a limit of 5
    assert limiter.hit((per_account, EMAIL)).allowed


def test_peek_charges_nothing_and_reset_forgets(kit: RateKit) -> None:
    limiter = kit.limiter()
    per_ip = Limit("ip", 2, 60.0)
    for _ in range(3):  # what is left after the attempt looked at
        assert limiter.peek((per_ip, IP)).remaining == pytest.approx(1.0)
    limiter.hit((per_ip, IP), cost=2)
    assert not limiter.peek((per_ip, IP)).allowed
    limiter.reset((per_ip, IP))
    assert limiter.hit((per_ip, IP)).remaining == pytest.approx(1.0, abs=0.01)


def test_async_limiter(kit: RateKit) -> None:
    async def main() -> None:
        backend = kit.async_backend()
        limiter = AsyncRateLimiter(backend, SECRET, tag="test")
        per_ip = Limit("ip", 2, 60.0)
        decisions = await asyncio.gather(*(limiter.hit((per_ip, IP)) for _ in range(5)))
        assert sum(d.allowed for d in decisions) == 2
        assert not (await limiter.peek((per_ip, IP))).allowed
        await limiter.reset((per_ip, IP))
        assert (await limiter.hit((per_ip, IP))).allowed
        await backend.close()
        client = getattr(getattr(backend, "io", None), "client", None)
        if client is not None:
            await client.aclose()

    asyncio.run(main())


# -- schedules (pochta.guard.schedule): every backend reserves in one atomic step -------------
FAST = Schedule("slots", free=2, checks=20, period=30.0, max_wait=2.0, waiters=2)
# spacing 30 / (20 - 2 * 2 - 5) = 2.7 s; past the free checks the intervals grow from
# 2.7 / 16 but are at least max_wait / waiters = 1 s: 1, 1, 1, 1.4, 2.7 s


def test_a_schedule_gives_free_slots_then_spaced_ones_and_refuses_far_ones(kit: RateKit) -> None:
    limiter = kit.limiter()
    first = [limiter.reserve(FAST, EMAIL) for _ in range(2)]
    assert all(s.granted and s.wait == 0.0 for s in first)
    assert first[1].checks == pytest.approx(2.0, abs=0.01)
    spaced = limiter.reserve(FAST, EMAIL)  # the third: at once, the next slot 1 s later
    assert spaced.granted and spaced.wait == 0.0
    waiting = [limiter.reserve(FAST, EMAIL) for _ in range(2)]  # 1 s and 2 s away
    assert all(s.granted for s in waiting)
    assert [s.wait for s in waiting] == pytest.approx([1.0, 2.0], abs=0.4)
    refused = limiter.reserve(FAST, EMAIL)  # 3 s away: within max_wait in 1 s
    assert not refused.granted and refused.retry_after == pytest.approx(1.0, abs=0.4)
    again = limiter.reserve(FAST, EMAIL)
    assert not again.granted and again.retry_after <= refused.retry_after  # nothing moved
    assert again.checks == pytest.approx(5.0, abs=0.1)  # refusals are not counted
    assert kit.limiter().reserve(FAST, "bob@example.com").wait == 0.0  # another subject
    assert kit.limiter(tag="other").reserve(FAST, EMAIL).wait == 0.0  # another limiter
    for _ in range(3):  # looking counts nothing
        looked = limiter.reserve(FAST, EMAIL, commit=False)
        assert looked.checks == pytest.approx(5.0, abs=0.1) and not looked.granted
    limiter.reset_slots(FAST, EMAIL)
    fresh = limiter.reserve(FAST, EMAIL)
    assert fresh.granted and fresh.wait == 0.0 and fresh.checks == pytest.approx(1.0)


def test_slots_are_reserved_atomically_by_many_threads(kit: RateKit) -> None:
    """50 threads ask at once: every slot granted is its own, spaced by the schedule."""
    limiter = kit.limiter()
    slow = Schedule("slow", free=3, checks=100, period=3600.0, max_wait=5.0, waiters=4)
    start = threading.Barrier(50)
    got: list[Slot] = []
    lock = threading.Lock()

    def ask() -> None:
        start.wait()
        slot = limiter.reserve(slow, EMAIL)
        with lock:
            got.append(slot)

    threads = [threading.Thread(target=ask) for _ in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    granted = sorted(s.wait for s in got if s.granted)
    # 3 free and the next at once; the interval after it is 40.4 s / 16 = 2.5 s, then 5 s
    assert granted == pytest.approx([0.0, 0.0, 0.0, 0.0, 2.53], abs=0.3)
    assert all(s.retry_after > 0.0 for s in got if not s.granted)


def test_async_reserve(kit: RateKit) -> None:
    async def main() -> None:
        backend = kit.async_backend()
        limiter = AsyncRateLimiter(backend, SECRET, tag="test")
        slots = await asyncio.gather(*(limiter.reserve(FAST, EMAIL) for _ in range(8)))
        assert sum(s.granted and s.wait == 0.0 for s in slots) >= 3
        assert not all(s.granted for s in slots)
        await backend.close()
        client = getattr(getattr(backend, "io", None), "client", None)
        if client is not None:
            await client.aclose()

    asyncio.run(main())
