"""Lock acquire+release per second on one Redis, side by side (issue 7, issue 19): pochta's
Locks, redis-py's Lock and python-redis-lock, each ``with lock: pass`` on the same redis-server
(started here on a loopback port, no persistence), in the same run. Every contestant uses a
client built the way pochta builds one from ``[redis]`` (``pochta.redisconn.connect``: 2 s
socket timeout, one retry); pochta talks to Redis only through redis-py's public API.

1. sequential: one client, one name, uncontended. Contestants run in turns (``--rounds``
   short rounds of ``--trial`` seconds each, pochta next to redis-py's Lock, the order
   reversed every other round) so a noisy machine slows all of them alike; the ratio is the
   median of the per-round ratios. "pochta, redis-py command path" is the same Locks
   with every script call sent through ``execute_command`` (``Scripts(direct=False)``), to
   show where the difference comes from; "pochta, no socket timeout" on a client without
   one (not for production: a Redis that hangs would hang the lock), to show what the poll
   CPython makes before every send and receive on a socket with a timeout costs. Also the
   client's CPU time per cycle (user + system), which a busy machine disturbs less than wall
   time.
2. parser: the sequential pochta / redis-py figures again in a child process that cannot
   import hiredis (redis-py then parses replies in Python).
3. threads: ``--threads`` threads, each on its own name (throughput, GIL-bound).
4. contention: ``--clients`` processes loop acquire / 0.5 ms of work / release on ONE name
   for ``--seconds``: acquires per client, Jain's fairness index ((sum x)^2 / (n sum x^2),
   1.0 = perfectly even), total acquires/s.
5. wake latency: release to the blocked waiter holding the lock (median of ``--wakes``).
   The holder releases at a random phase of redis-py's 0.1 s polling sleep.
6. renewal: extending 1,000 leases in one pipelined round trip vs one call each.

    python benchmarks/guard_lock.py            # full run
    python benchmarks/guard_lock.py --quick    # a few seconds, checks the script works
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

if __name__ == "__main__" and "--no-hiredis" in sys.argv:
    sys.modules["hiredis"] = None  # type: ignore[assignment]  # redis-py falls back to Python

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.servers

import redis
import redis_lock
from redis.utils import HIREDIS_AVAILABLE
from tests.servers import HOST, RedisServer

from _common import emit, machine, note
from pochta.config import RedisSettings
from pochta.errors import GuardUnavailable
from pochta.guard.lock import Locks
from pochta.guard.lock.redis import RedisLockBackend
from pochta.guard.lock.sqlite import SqliteLockBackend
from pochta.redisconn import Scripts, connect

GOAL = 1.5  # x redis-py, sequential

Cycle = Callable[[], None]


def client(port: int) -> redis.Redis:
    """A client as pochta builds one from ``[redis] nodes = ["127.0.0.1:PORT"]``."""
    made = connect(RedisSettings(nodes=[f"{HOST}:{port}"]))
    assert isinstance(made, redis.Redis)
    return made


def contestants(port: int, where: Path) -> dict[str, Callable[[str], AbstractContextManager[Any]]]:
    """name -> (lock name -> a context manager that holds that lock)."""
    theirs = client(port)
    ours = Locks(RedisLockBackend(client(port)))
    untimed = Locks(RedisLockBackend(redis.Redis(host=HOST, port=port)))
    command_path = RedisLockBackend(client(port))
    command_path.io = Scripts(command_path.io.client, GuardUnavailable, direct=False)
    ours_slow = Locks(command_path)
    embedded = Locks(SqliteLockBackend(where / "guard.sqlite3"))
    return {
        "pochta": lambda name: ours.acquire(name, timeout=10),
        "redis-py Lock": lambda name: theirs.lock(name, timeout=10, blocking_timeout=10),
        "pochta, redis-py command path": lambda name: ours_slow.acquire(name, timeout=10),
        "pochta, no socket timeout": lambda name: untimed.acquire(name, timeout=10),
        "python-redis-lock": lambda name: redis_lock.Lock(theirs, name, expire=10),
        "pochta embedded (SQLite)": lambda name: embedded.acquire(name, timeout=10),
    }


def sequential(
    port: int, where: Path, rounds: int, trial: float, only: tuple[str, ...] = ()
) -> dict[str, Any]:
    locks = contestants(port, where)
    if only:
        locks = {name: hold for name, hold in locks.items() if name in only}
    rates: dict[str, list[float]] = {name: [] for name in locks}
    cpu: dict[str, list[float]] = {name: [] for name in locks}  # client CPU s per cycle
    for name, hold in locks.items():  # warm up: connections, scripts
        for _ in range(50):
            with hold("seq:" + name.replace(" ", "-")):
                pass
    for turn in range(rounds):  # neighbours in time share the machine's mood: pair them
        order = list(locks.items())
        for name, hold in order if turn % 2 else reversed(order):
            key = "seq:" + name.replace(" ", "-")
            n, start, cpu_start = 0, time.perf_counter(), time.process_time()
            while (elapsed := time.perf_counter() - start) < trial:
                with hold(key):
                    pass
                n += 1
            rates[name].append(n / elapsed)
            cpu[name].append((time.process_time() - cpu_start) / n)
    ratios = [a / b for a, b in zip(rates["pochta"], rates["redis-py Lock"], strict=True)]
    out: dict[str, Any] = {
        name: {
            "ops_per_s": round(statistics.median(r)),
            "client_cpu_us_per_cycle": round(statistics.median(cpu[name]) * 1e6),
            "rounds": [round(x) for x in r],
        }
        for name, r in rates.items()
    }
    out["pochta_vs_redis_py"] = round(statistics.median(ratios), 2)
    out["pochta_vs_redis_py_rounds"] = [round(x, 2) for x in ratios]
    if "python-redis-lock" in rates:
        out["pochta_vs_python_redis_lock"] = round(
            statistics.median(
                a / b for a, b in zip(rates["pochta"], rates["python-redis-lock"], strict=True)
            ),
            2,
        )
    return out


def without_hiredis(port: int, rounds: int, trial: float) -> dict[str, Any]:
    """The sequential pochta / redis-py comparison in a child process without hiredis."""
    child = [sys.executable, __file__, "--no-hiredis", "--port", str(port)]
    child += ["--rounds", str(rounds), "--trial", str(trial)]
    out = subprocess.run(child, capture_output=True, text=True, check=True).stdout
    result: dict[str, Any] = json.loads(out)
    return result


def threaded(port: int, where: Path, threads: int, seconds: float) -> dict[str, Any]:
    out: dict[str, Any] = {}
    locks = contestants(port, where)
    for name in ("pochta", "redis-py Lock", "python-redis-lock"):
        hold = locks[name]
        counts = [0] * threads
        barrier = threading.Barrier(threads + 1)

        def run(
            i: int,
            hold: Callable[[str], AbstractContextManager[Any]] = hold,
            counts: list[int] = counts,
            barrier: threading.Barrier = barrier,
        ) -> None:
            key = f"thr:{i}"
            barrier.wait()
            deadline = time.perf_counter() + seconds
            n = 0
            while time.perf_counter() < deadline:
                with hold(key):
                    pass
                n += 1
            counts[i] = n

        workers = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
        for w in workers:
            w.start()
        barrier.wait()
        start = time.perf_counter()
        for w in workers:
            w.join()
        out[name] = {"ops_per_s": round(sum(counts) / (time.perf_counter() - start))}
    out["pochta_vs_redis_py"] = round(
        out["pochta"]["ops_per_s"] / out["redis-py Lock"]["ops_per_s"], 2
    )
    return out


def _contend(kind: str, port: int, seconds: float, start_at: float, queue: Any) -> None:
    made = client(port)
    hold: Callable[[], AbstractContextManager[Any]]
    if kind == "pochta":
        locks = Locks(RedisLockBackend(made))
        hold = lambda: locks.acquire("contended", timeout=30)  # noqa: E731
    elif kind == "redis-py Lock":
        hold = lambda: made.lock("contended:rp", timeout=10, blocking_timeout=30)  # noqa: E731
    else:
        hold = lambda: redis_lock.Lock(made, "contended:prl", expire=10)  # noqa: E731
    time.sleep(max(0.0, start_at - time.time()))
    deadline = time.monotonic() + seconds
    n = 0
    while time.monotonic() < deadline:
        with hold():
            busy = time.perf_counter() + 0.0005
            while time.perf_counter() < busy:
                pass
        n += 1
    queue.put(n)


def contention(port: int, clients: int, seconds: float) -> dict[str, Any]:
    ctx = multiprocessing.get_context("spawn")
    out: dict[str, Any] = {}
    for kind in ("pochta", "redis-py Lock", "python-redis-lock"):
        queue = ctx.Queue()
        start_at = time.time() + 1.5  # every process imported and connected
        procs = [
            ctx.Process(target=_contend, args=(kind, port, seconds, start_at, queue))
            for _ in range(clients)
        ]
        for p in procs:
            p.start()
        counts = sorted(queue.get(timeout=seconds + 60) for _ in procs)
        for p in procs:
            p.join()
        total = sum(counts)
        out[kind] = {
            "acquires_per_client": counts,
            "acquires_per_s": round(total / seconds),
            "jain_fairness": round(total**2 / (len(counts) * sum(c * c for c in counts)), 3)
            if total
            else None,
            "min_over_max": round(counts[0] / counts[-1], 3) if counts[-1] else None,
        }
    return out


def wake_latency(port: int, trials: int) -> dict[str, Any]:
    theirs = client(port)
    locks = Locks(RedisLockBackend(client(port)))
    rng = random.Random(7)

    def measure(take: Callable[[], Any], give_back: Callable[[Any], None], hold: Any) -> float:
        got: list[float] = []
        waiting = threading.Event()

        def wait() -> None:
            waiting.set()
            result = take()
            got.append(time.monotonic())
            give_back(result)

        thread = threading.Thread(target=wait)
        thread.start()
        waiting.wait()
        time.sleep(0.2 + rng.uniform(0, 0.1))  # any phase of a poller's 0.1 s sleep
        released = time.monotonic()
        hold()
        thread.join()
        return got[0] - released

    out: dict[str, Any] = {}
    samples = []
    for _ in range(trials):
        lease = locks.acquire("wake")
        samples.append(
            measure(lambda: locks.acquire("wake", timeout=10), lambda x: x.release(), lease.release)
        )
    out["pochta"] = round(statistics.median(samples) * 1000, 2)
    samples = []
    for _ in range(trials):
        held = theirs.lock("wake:rp", timeout=10, thread_local=False)
        held.acquire()
        other = theirs.lock("wake:rp", timeout=10, thread_local=False)
        samples.append(
            measure(lambda o=other: o.acquire(blocking_timeout=10), lambda _, o=other: o.release(),
                    held.release)
        )  # fmt: skip
    out["redis-py Lock"] = round(statistics.median(samples) * 1000, 2)
    samples = []
    for _ in range(trials):
        held_prl = redis_lock.Lock(theirs, "wake:prl", expire=10)
        held_prl.acquire()
        other_prl = redis_lock.Lock(theirs, "wake:prl", expire=10)
        samples.append(
            measure(lambda o=other_prl: o.acquire(timeout=10), lambda _, o=other_prl: o.release(),
                    held_prl.release)
        )  # fmt: skip
    out["python-redis-lock"] = round(statistics.median(samples) * 1000, 2)
    return {"median_ms": out}


def renewal(port: int, leases: int) -> dict[str, Any]:
    backend = RedisLockBackend(client(port))
    held = [(f"renew:{i}", f"owner-{i}", 30.0) for i in range(leases)]
    for name, owner, ttl in held:
        backend.try_acquire(name, owner, ttl)
    start = time.perf_counter()
    assert all(backend.extend(held))
    batched = time.perf_counter() - start
    start = time.perf_counter()
    for lease in held:
        assert backend.extend([lease]) == [True]
    single = time.perf_counter() - start
    return {
        "leases": leases,
        "pipelined_ms": round(batched * 1000, 1),
        "one_by_one_ms": round(single * 1000, 1),
    }


def child(args: argparse.Namespace) -> None:
    """``--no-hiredis --port P``: the sequential pair only, against the parent's server."""
    where = Path(tempfile.mkdtemp(prefix="pochta-bench-lock-"))
    only = ("pochta", "redis-py Lock")
    result = sequential(args.port, where, args.rounds, args.trial, only)
    json.dump({"hiredis": HIREDIS_AVAILABLE, **result}, sys.stdout)


def main(args: argparse.Namespace) -> None:
    where = Path(tempfile.mkdtemp(prefix="pochta-bench-lock-"))
    with RedisServer.start(where / "redis") as server:
        version = server.client().info("server")["redis_version"]
        result: dict[str, Any] = {
            "figure": "guard_lock",
            "goal": f"pochta >= {GOAL}x redis-py Lock, sequential acquire+release",
            "command": " ".join(["python", *sys.argv]),
            "machine": machine(where),
            "redis": version,
            "libraries": {
                "redis-py": redis.__version__,
                "python-redis-lock": getattr(redis_lock, "__version__", "?"),
                "hiredis": HIREDIS_AVAILABLE,
            },
            "params": vars(args),
        }
        note("sequential ...")
        result["sequential"] = sequential(server.port, where, args.rounds, args.trial)
        note(f"  pochta / redis-py = {result['sequential']['pochta_vs_redis_py']}")
        note("sequential, without hiredis (child process) ...")
        result["without_hiredis"] = without_hiredis(server.port, args.rounds, args.trial)
        note(f"  pochta / redis-py = {result['without_hiredis']['pochta_vs_redis_py']}")
        note(f"{args.threads} threads ...")
        result["threads"] = threaded(server.port, where, args.threads, args.seconds)
        note(f"contention, {args.clients} processes on one lock ...")
        result["contention"] = contention(server.port, args.clients, args.seconds)
        note("wake latency ...")
        result["wake_latency"] = wake_latency(server.port, args.wakes)
        note("renewal ...")
        result["renewal"] = renewal(server.port, 1000)
        result["goal_met"] = result["sequential"]["pochta_vs_redis_py"] >= GOAL
    emit(result)


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="a few seconds: check the script works")
    p.add_argument("--rounds", type=int, default=41, help="sequential rounds")
    p.add_argument("--trial", type=float, default=0.1, help="seconds per contestant per round")
    p.add_argument("--threads", type=int, default=8, help="threads, each on its own lock")
    p.add_argument("--clients", type=int, default=4, help="processes contending on one lock")
    p.add_argument("--seconds", type=float, default=3.0, help="threaded / contention phases")
    p.add_argument("--wakes", type=int, default=9, help="wake-latency samples")
    p.add_argument("--no-hiredis", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.quick:
        args.rounds, args.trial, args.seconds, args.wakes = 2, 0.15, 0.5, 3
    return args


if __name__ == "__main__":
    arguments = _args()
    child(arguments) if arguments.no_hiredis else main(arguments)
