"""Rate-limit checks per second on one Redis, side by side (issue 7, issue 19): pochta's
rolling limit (one Lua script, server clock) against the ``limits`` library's moving window on
the same redis-server (started here on a loopback port), in the same run. Both use clients
built the way pochta builds one from ``[redis]`` (``pochta.redisconn.connect``: 2 s socket
timeout, one retry); ``limits`` gets that client's connection pool.

1. one limit: ``--subjects`` IP addresses drawn at random, 100 attempts per hour each (almost
   every check allowed, as in normal traffic). Contestants run in turns (``--rounds`` short
   rounds of ``--trial`` seconds, the order reversed every other round); the ratio is the
   median of the per-round ratios. Also the client's CPU time per check.
2. two limits per check (per IP and per account): pochta charges both in one atomic script
   call; ``limits`` needs two calls, and the first is charged even when the second refuses.
3. threads: ``--threads`` threads, one limit.
4. memory in Redis for one subject after 1,000 attempts in a 1,000-per-hour limit.

    python benchmarks/guard_ratelimit.py            # full run
    python benchmarks/guard_ratelimit.py --quick    # a few seconds, checks the script works
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.servers

import limits
import redis
from limits import RateLimitItemPerHour, storage, strategies
from redis.utils import HIREDIS_AVAILABLE
from tests.servers import HOST, RedisServer

from _common import emit, machine, note
from pochta.config import RedisSettings
from pochta.guard.ratelimit import RateLimiter
from pochta.guard.ratelimit.memory import MemoryRateLimitBackend
from pochta.guard.ratelimit.redis import RedisRateLimitBackend
from pochta.guard.ratelimit.sqlite import SqliteRateLimitBackend
from pochta.redisconn import connect
from pochta.types import Limit

GOAL = 1.0  # x limits' moving window
SECRET = b"benchmark-secret-0123456789abcdef"

Check = Callable[[str, str], bool]


def client(port: int) -> redis.Redis:
    """A client as pochta builds one from ``[redis] nodes = ["127.0.0.1:PORT"]``."""
    made = connect(RedisSettings(nodes=[f"{HOST}:{port}"]))
    assert isinstance(made, redis.Redis)
    return made


def moving_window(port: int) -> strategies.MovingWindowRateLimiter:
    pool = client(port).connection_pool
    return strategies.MovingWindowRateLimiter(
        storage.RedisStorage(f"redis://{HOST}:{port}", connection_pool=pool)
    )


def contestants(port: int, where: Path) -> dict[str, Check]:
    """name -> check(ip, email) for ONE limit on the ip (email unused)."""
    per_ip = Limit("ip", 100, 3600.0)
    ours = RateLimiter(RedisRateLimitBackend(client(port)), SECRET)
    embedded = RateLimiter(SqliteRateLimitBackend(where / "guard.sqlite3"), SECRET)
    memory = RateLimiter(MemoryRateLimitBackend(), SECRET)
    moving = moving_window(port)
    item = RateLimitItemPerHour(100)
    return {
        "pochta": lambda ip, _: ours.hit((per_ip, ip)).allowed,
        "limits moving window": lambda ip, _: moving.hit(item, "ip", ip),
        "pochta embedded (SQLite)": lambda ip, _: embedded.hit((per_ip, ip)).allowed,
        "pochta in memory": lambda ip, _: memory.hit((per_ip, ip)).allowed,
    }


def two_limits(port: int) -> dict[str, Check]:
    per_ip, per_account = Limit("ip", 100, 3600.0), Limit("account", 100, 3600.0)
    ours = RateLimiter(RedisRateLimitBackend(client(port)), SECRET)
    moving = moving_window(port)
    ip_item, account_item = RateLimitItemPerHour(100), RateLimitItemPerHour(100)

    def theirs(ip: str, email: str) -> bool:
        return moving.hit(ip_item, "ip", ip) and moving.hit(account_item, "account", email)

    return {
        "pochta": lambda ip, email: ours.hit((per_ip, ip), (per_account, email)).allowed,
        "limits moving window": theirs,
    }


def subjects(n: int) -> list[tuple[str, str]]:
    rng = random.Random(3)
    return [
        (f"198.51.{rng.randrange(256)}.{rng.randrange(256)}", f"user{rng.randrange(10**6)}@x.ru")
        for _ in range(n)
    ]


def in_turns(checks: dict[str, Check], people: list[tuple[str, str]], rounds: int, trial: float):
    rng = random.Random(4)
    rates: dict[str, list[float]] = {name: [] for name in checks}
    for check in checks.values():  # warm up
        for ip, email in people[:50]:
            check(ip, email)
    cpu: dict[str, list[float]] = {name: [] for name in checks}  # client CPU s per check
    for turn in range(rounds):  # neighbours in time share the machine's mood: pair them
        order = list(checks.items())
        for name, check in order if turn % 2 else reversed(order):
            n, start, cpu_start = 0, time.perf_counter(), time.process_time()
            while (elapsed := time.perf_counter() - start) < trial:
                ip, email = people[rng.randrange(len(people))]
                check(ip, email)
                n += 1
            rates[name].append(n / elapsed)
            cpu[name].append((time.process_time() - cpu_start) / n)
    out: dict[str, Any] = {
        name: {
            "checks_per_s": round(statistics.median(r)),
            "client_cpu_us_per_check": round(statistics.median(cpu[name]) * 1e6),
            "rounds": [round(x) for x in r],
        }
        for name, r in rates.items()
    }
    ratios = [a / b for a, b in zip(rates["pochta"], rates["limits moving window"], strict=True)]
    out["pochta_vs_limits"] = round(statistics.median(ratios), 2)
    return out


def threaded(checks: dict[str, Check], people: list[tuple[str, str]], threads: int, seconds: float):
    out: dict[str, Any] = {}
    for name in ("pochta", "limits moving window"):
        check = checks[name]
        counts = [0] * threads
        barrier = threading.Barrier(threads + 1)

        def run(
            i: int,
            check: Check = check,
            counts: list[int] = counts,
            barrier: threading.Barrier = barrier,
        ) -> None:
            rng = random.Random(i)
            barrier.wait()
            deadline = time.perf_counter() + seconds
            n = 0
            while time.perf_counter() < deadline:
                check(*people[rng.randrange(len(people))])
                n += 1
            counts[i] = n

        workers = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
        for w in workers:
            w.start()
        barrier.wait()
        start = time.perf_counter()
        for w in workers:
            w.join()
        out[name] = {"checks_per_s": round(sum(counts) / (time.perf_counter() - start))}
    out["pochta_vs_limits"] = round(
        out["pochta"]["checks_per_s"] / out["limits moving window"]["checks_per_s"], 2
    )
    return out


def memory(port: int) -> dict[str, Any]:
    made = client(port)
    made.flushall()
    ours = RateLimiter(RedisRateLimitBackend(made), SECRET)
    moving = moving_window(port)
    limit, item = Limit("ip", 1000, 3600.0), RateLimitItemPerHour(1000)
    for _ in range(1000):
        ours.hit((limit, "203.0.113.5"))
        moving.hit(item, "ip", "203.0.113.5")
    sizes = {key.decode(): made.memory_usage(key) for key in made.keys("*")}
    return {
        "pochta_bytes": sum(v for k, v in sizes.items() if k.startswith("pochta:")),
        "limits_bytes": sum(v for k, v in sizes.items() if not k.startswith("pochta:")),
    }


def main(args: argparse.Namespace) -> None:
    where = Path(tempfile.mkdtemp(prefix="pochta-bench-rate-"))
    with RedisServer.start(where / "redis") as server:
        people = subjects(args.subjects)
        result: dict[str, Any] = {
            "figure": "guard_ratelimit",
            "goal": f"pochta >= {GOAL}x limits' moving window, checks per second",
            "command": " ".join(["python", *sys.argv]),
            "machine": machine(where),
            "redis": server.client().info("server")["redis_version"],
            "libraries": {
                "redis-py": redis.__version__,
                "limits": limits.__version__,
                "hiredis": HIREDIS_AVAILABLE,
            },
            "params": vars(args),
        }
        note("one limit ...")
        result["one_limit"] = in_turns(
            contestants(server.port, where), people, args.rounds, args.trial
        )
        note(f"  pochta / limits = {result['one_limit']['pochta_vs_limits']}")
        note("two limits ...")
        result["two_limits"] = in_turns(two_limits(server.port), people, args.rounds, args.trial)
        note(f"{args.threads} threads ...")
        result["threads"] = threaded(
            contestants(server.port, where), people, args.threads, args.seconds
        )
        note("memory ...")
        result["memory_one_subject_1000_hits"] = memory(server.port)
        result["goal_met"] = result["one_limit"]["pochta_vs_limits"] >= GOAL
    emit(result)


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="a few seconds: check the script works")
    p.add_argument("--rounds", type=int, default=41, help="rounds of turns")
    p.add_argument("--trial", type=float, default=0.1, help="seconds per contestant per round")
    p.add_argument("--subjects", type=int, default=10_000, help="distinct IPs / accounts")
    p.add_argument("--threads", type=int, default=8)
    p.add_argument("--seconds", type=float, default=3.0, help="threaded phase")
    args = p.parse_args()
    if args.quick:
        args.rounds, args.trial, args.seconds = 2, 0.15, 0.5
    return args


if __name__ == "__main__":
    main(_args())
