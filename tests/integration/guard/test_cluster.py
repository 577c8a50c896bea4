"""Locks and limits on a Redis Cluster of 3 masters and 3 replicas: one slot per lock, work
spread over the shards, and a master killed under a held lease."""

from __future__ import annotations

import contextlib
import threading
import time

import pytest
import redis
from tests.servers import RedisCluster

from pochta.errors import LeaseLost
from pochta.guard.backends.redislock import RedisLockBackend
from pochta.guard.backends.redisrate import RedisRateLimitBackend
from pochta.guard.lock import Locks
from pochta.guard.ratelimit import RateLimiter
from pochta.types import Limit

pytestmark = pytest.mark.integration

SECRET = b"cluster-secret-0123456789abcdef"


def test_each_lock_lives_in_one_slot_and_locks_spread_over_shards(
    redis_cluster: RedisCluster, redis_cluster_client: redis.RedisCluster
) -> None:
    backend = RedisLockBackend(redis_cluster_client)
    masters = set()
    for i in range(12):
        name = f"disk-{i}"
        slots = {redis_cluster_client.keyslot(key) for key in backend._keys(name)}
        assert len(slots) == 1
        masters.add(redis_cluster.master_of(backend._lease(name)).port)
    assert len(masters) == 3
    with Locks(backend) as locks:
        leases = [locks.acquire(f"disk-{i}") for i in range(12)]
        assert all(locks.try_acquire(f"disk-{i}") is None for i in range(12))
        for lease in leases:
            lease.release()


@pytest.mark.slow
def test_locks_and_limits_survive_a_master_kill(
    redis_cluster: RedisCluster, redis_cluster_client: redis.RedisCluster
) -> None:
    client = redis_cluster.client()
    backend = RedisLockBackend(client)
    limiter = RateLimiter(RedisRateLimitBackend(client), SECRET, tag="pair-7")
    per_op = Limit("evacuations", 5, 3600.0)
    lost = threading.Event()
    locks = Locks(backend, ttl=6.0)  # longer than a failover
    lease = locks.acquire("pair-7", on_lost=lambda _: lost.set())
    allowed = sum(limiter.hit((per_op, "pair-7")).allowed for _ in range(3))
    home = redis_cluster_client.get_node_from_key(backend._lease("pair-7"))
    client.wait(1, 1000, target_nodes=home)  # the replica has what was written so far
    victim = redis_cluster.kill_master(backend._lease("pair-7"))  # the lock's and the limit's
    try:
        deadline = time.monotonic() + 6
        while time.monotonic() < deadline:  # the client finds the new master
            with contextlib.suppress(redis.RedisError):
                owner = client.get(backend._lease("pair-7"))
                break
            time.sleep(0.2)
        assert owner == lease.owner.encode()  # the replica had the lease
        time.sleep(2.5)  # renewals go to the new master
        assert lease.is_held() and not lost.is_set()
        assert client.pttl(backend._lease("pair-7")) > 3000
        allowed += sum(limiter.hit((per_op, "pair-7")).allowed for _ in range(5))
        assert allowed == per_op.max  # the count survived the failover
        lease.release()
        with locks.acquire("pair-7", timeout=3) as again:
            assert again.token > lease.token
    finally:
        with contextlib.suppress(LeaseLost):
            locks.close()
        client.close()
        redis_cluster.restart(victim)
