"""What ``postgres.answer_timeout`` costs a statement (issue 30: the deadline on a frozen
server's answers, pochta.postgres.deadline).

A PostgreSQL cluster of our own (tests.pgserver, not durable: the statements write nothing)
and one pool per setting, ``answer_timeout`` 60 s (armed: ``os.dup`` of the socket, a set
insert under a lock, and at the end the set removal and ``os.close``) and 0 (nothing armed),
used in alternating turns: each turn ``--statements`` calls of ``Postgres.query("SELECT 1")``
from one thread. Reported per setting: the median turn's wall-clock µs a statement and
process CPU µs a statement (both threads of this process: the caller and the watchdog), and
the ratio armed/unarmed; also the arm + disarm pair alone on a socket pair (µs, no server).

    python benchmarks/postgres_deadline.py            # 7 turns of 5,000 statements each
    python benchmarks/postgres_deadline.py --quick    # a few seconds, checks the script works
"""

from __future__ import annotations

import argparse
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.pgserver

from tests.pgserver import PostgresServer

from _common import emit, machine
from pochta.postgres.database import PoolSettings, Postgres
from pochta.postgres.deadline import Watchdog


def turn(db: Postgres, n: int) -> tuple[float, float]:
    """Seconds of wall clock and of process CPU for ``n`` statements."""
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(n):
        db.query("SELECT 1")
    return time.perf_counter() - wall, time.process_time() - cpu


def arm_disarm(n: int) -> float:
    """µs of one arm + disarm on a socket pair."""
    dog = Watchdog()
    a, b = socket.socketpair()
    try:
        t0 = time.perf_counter()
        for _ in range(n):
            watch = dog.arm(a, 60.0)
            assert watch is not None
            dog.disarm(watch)
        return (time.perf_counter() - t0) / n * 1e6
    finally:
        dog.close()
        a.close()
        b.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--turns", type=int, default=7)
    ap.add_argument("--statements", type=int, default=5000)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    if args.quick:
        args.turns, args.statements = 2, 300
    results: dict[str, dict[str, list[float]]] = {
        "armed": {"wall": [], "cpu": []},
        "unarmed": {"wall": [], "cpu": []},
    }
    with tempfile.TemporaryDirectory() as tmp, PostgresServer.start(Path(tmp)) as server:
        dsn = server.dsn("postgres")
        pools = {
            "armed": Postgres.connect(dsn, PoolSettings(min_size=1, max_size=1)),
            "unarmed": Postgres.connect(
                dsn, PoolSettings(min_size=1, max_size=1, answer_timeout=0)
            ),
        }
        try:
            for db in pools.values():
                turn(db, 200)  # warm: the connection, prepared nothing, caches
            for i in range(args.turns):
                order = ("armed", "unarmed") if i % 2 == 0 else ("unarmed", "armed")
                for name in order:
                    wall, cpu = turn(pools[name], args.statements)
                    results[name]["wall"].append(wall / args.statements * 1e6)
                    results[name]["cpu"].append(cpu / args.statements * 1e6)
        finally:
            for db in pools.values():
                db.close()
    med = {k: {m: statistics.median(v) for m, v in r.items()} for k, r in results.items()}
    out: dict[str, Any] = {
        "benchmark": "postgres_deadline",
        "machine": machine(Path(tempfile.gettempdir())),
        "turns": args.turns,
        "statements_per_turn": args.statements,
        "armed_us": {m: round(v, 2) for m, v in med["armed"].items()},
        "unarmed_us": {m: round(v, 2) for m, v in med["unarmed"].items()},
        "ratio_wall": round(med["armed"]["wall"] / med["unarmed"]["wall"], 3),
        "ratio_cpu": round(med["armed"]["cpu"] / med["unarmed"]["cpu"], 3),
        "arm_disarm_us": round(arm_disarm(20_000 if not args.quick else 2000), 2),
    }
    emit(out)


if __name__ == "__main__":
    main()
