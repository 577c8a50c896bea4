"""Rate limits against a real redis-server: many concurrent clients, skewed client clocks, and
no raw subject in any key."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
import redis
from tests.servers import RedisServer

from pochta.guard.ratelimit import RateLimiter
from pochta.guard.ratelimit.redis import RedisRateLimitBackend
from pochta.types import Limit, RateDecision

pytestmark = pytest.mark.integration

SECRET = b"integration-secret-0123456789"
PER_IP = Limit("ip", 30, 3600.0)
PER_ACCOUNT = Limit("account", 50, 3600.0)


def test_100_concurrent_clients_never_exceed_a_limit(
    redis_client: redis.Redis, redis_server: RedisServer
) -> None:
    clients = [redis_server.client() for _ in range(100)]
    start = threading.Barrier(100)
    decisions: list[list[RateDecision]] = [[] for _ in clients]

    def attack(i: int) -> None:
        limiter = RateLimiter(RedisRateLimitBackend(clients[i]), SECRET, tag="login")
        start.wait()
        for _ in range(4):
            ip = "203.0.113.5" if i % 2 else "198.51.100.9"  # two IPs, one account
            decisions[i].append(limiter.hit((PER_IP, ip), (PER_ACCOUNT, "alice@pochta.test")))

    threads = [threading.Thread(target=attack, args=(i,)) for i in range(100)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    allowed = [d for ds in decisions for d in ds if d.allowed]
    refused = [d for ds in decisions for d in ds if not d.allowed]
    assert len(allowed) == PER_ACCOUNT.max  # 400 attempts, the account allows 50
    assert all(d.retry_after > 0 for d in refused)
    limiter = RateLimiter(RedisRateLimitBackend(redis_client), SECRET, tag="login")
    used = [  # the IPs were charged only for the attempts that passed on both limits
        PER_IP.max - limiter.peek((PER_IP, ip), cost=0).remaining
        for ip in ("203.0.113.5", "198.51.100.9")
    ]
    assert sum(used) == pytest.approx(50, abs=0.1) and max(used) <= 30
    assert limiter.peek((PER_ACCOUNT, "alice@pochta.test"), cost=0).remaining < 0.05
    for client in clients:
        client.close()


SKEWED = textwrap.dedent(
    """
    import sys, time
    skew = float(sys.argv[2])
    real = time.time
    time.time = lambda: real() + skew          # this client's clock is off
    time.time_ns = lambda: int((real() + skew) * 1e9)
    import redis
    from pochta.guard.ratelimit.redis import RedisRateLimitBackend
    from pochta.guard.ratelimit import RateLimiter
    from pochta.types import Limit
    limiter = RateLimiter(
        RedisRateLimitBackend(redis.Redis(host="127.0.0.1", port=int(sys.argv[1]))),
        b"integration-secret-0123456789",
    )
    results = [limiter.hit((Limit("ip", 10, 60.0), "203.0.113.5")) for _ in range(10)]
    print(sum(d.allowed for d in results), max(d.retry_after for d in results))
    """
)


def test_a_skewed_client_clock_changes_nothing(
    redis_client: redis.Redis, redis_server: RedisServer
) -> None:
    root = Path(__file__).parents[3]
    env = {**os.environ, "PYTHONPATH": f"{root / 'src'}{os.pathsep}{root}"}
    outputs = []
    for skew in ("-3600", "3600", "86400"):  # an hour slow, an hour fast, a day fast
        out = subprocess.run(
            [sys.executable, "-c", SKEWED, str(redis_server.port), skew],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        ).stdout.split()
        outputs.append((int(out[0]), float(out[1]), time.monotonic()))
    assert sum(allowed for allowed, _, _ in outputs) == 10  # 30 attempts, a limit of 10
    assert outputs[0][:2] == (10, 0.0)
    first = outputs[0][2]
    for _, retry, done in outputs[1:]:  # one attempt per 6 s comes back, by Redis' clock
        assert retry == pytest.approx(6.0 - (done - first), abs=0.5)


def test_keys_hold_no_ip_or_address(redis_client: redis.Redis) -> None:
    limiter = RateLimiter(RedisRateLimitBackend(redis_client), SECRET, tag="login")
    limiter.hit((PER_IP, "203.0.113.5"), (PER_ACCOUNT, "alice@pochta.test"))
    keys = [key.decode() for key in redis_client.keys("*")]
    assert len(keys) == 2
    assert all(key.startswith("pochta:rate:{login}:") for key in keys)
    assert not any("203.0.113" in key or "alice" in key or "pochta.test" in key for key in keys)
