"""Locks and limits on a Redis Cluster of 3 masters and 3 replicas: one slot per lock, work
spread over the shards, a master killed under a held lease, and the login limits' master
lost (they fail closed, then hold on the promoted replica)."""

from __future__ import annotations

import contextlib
import threading
import time

import pytest
import redis
from tests.servers import RedisCluster

from pochta.config import RedisSettings
from pochta.errors import GuardUnavailable, LeaseLost, RateLimited
from pochta.guard.known import KnownClients
from pochta.guard.known.redis import RedisKnownClients
from pochta.guard.lock import Locks
from pochta.guard.lock.redis import RedisLockBackend
from pochta.guard.logins import LoginGuard
from pochta.guard.ratelimit import RateLimiter
from pochta.guard.ratelimit.redis import RedisRateLimitBackend
from pochta.redisconn import connect
from pochta.types import Limit, Schedule

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


@pytest.mark.slow
def test_login_limits_fail_closed_while_their_master_is_lost_and_hold_after_the_failover(
    redis_cluster: RedisCluster, redis_cluster_client: redis.RedisCluster
) -> None:
    """Issue 30 item 3: the login limits' shard loses its master. While no master serves it,
    every login is refused as unavailable (GuardUnavailable: HTTP 503, IMAP NO), the known
    owner's included: no password is checked, so no guess gets
    through unlimited. Once the replica has taken over, the counts it had are there: the
    address that spent its failures is still refused, and new guesses are counted again."""
    nodes = [f"127.0.0.1:{n.port}" for n in redis_cluster.live()]
    client = connect(RedisSettings(mode="cluster", nodes=nodes, timeout=1.0))  # pochta's leash
    guard = LoginGuard(
        RateLimiter(RedisRateLimitBackend(client), SECRET, tag="login"),
        KnownClients(RedisKnownClients(client), SECRET, remember_for=86400.0, tag="login"),
        per_ip=Limit("login-ip", 5, 3600.0),
        per_client=Limit("login-client", 3, 3600.0),
        per_account=Schedule("login-account", free=10, checks=100, period=3600.0, max_wait=0.0),
    )
    alice, attacker, owner_ip = "alice@example.org", "203.0.113.7", "192.0.2.10"
    binding = "0123456789abcdef0123456789abcdef"
    guard.succeeded(guard.admit(owner_ip, alice, binding=binding))  # her usual address
    guesses = 0
    while True:  # the attacker guesses until refused: 3 failures on this account
        try:
            admission = guard.admit(attacker, alice, binding=binding)
        except RateLimited:
            break
        guard.failed(admission)
        guesses += 1
    assert guesses == 3
    victim = redis_cluster.master_of("{login}")
    home = redis_cluster_client.get_node_from_key("{login}")
    redis_cluster_client.wait(1, 1000, target_nodes=home)  # the replica has the counts
    victim.kill()
    outcomes: list[str] = []
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # the attacker, then the owner, in turn
            for ip in (attacker, owner_ip):
                try:
                    guard.admit(ip, alice, binding=binding)
                    outcomes.append(f"{ip} admitted")
                except RateLimited:
                    outcomes.append(f"{ip} limited")
                except GuardUnavailable:
                    outcomes.append(f"{ip} unavailable")
            if outcomes[-1] == f"{owner_ip} admitted":
                break
            time.sleep(0.1)
        # the master was missed (refused as unavailable), then the replica took over
        assert f"{attacker} unavailable" in outcomes and outcomes[-1] == f"{owner_ip} admitted"
        assert f"{attacker} admitted" not in outcomes  # never let through while it was lost
        seen = time.monotonic() + 10  # the node asked may learn of the failover by gossip later
        while redis_cluster.master_of("{login}").port == victim.port and time.monotonic() < seen:
            time.sleep(0.1)
        assert redis_cluster.master_of("{login}").port != victim.port
        with pytest.raises(RateLimited):  # the failures counted before the loss are there
            guard.admit(attacker, alice, binding=binding)
        # another address: its failures are counted on the new master as before
        stranger = "198.51.100.9"
        for _ in range(3):
            guard.failed(guard.admit(stranger, alice, binding=binding))
        with pytest.raises(RateLimited):
            guard.admit(stranger, alice, binding=binding)
    finally:
        client.close()
        redis_cluster.restart(victim)
