"""FileDB inc and dec operations per second on PostgreSQL (issue 17), with anchors measured
on the same server in the same run.

A PostgreSQL cluster of our own (Debian's binaries, initdb in a temporary directory, a free
loopback port; durable: fsync on, synchronous_commit on, as pochta's default) holds the
FileDB schema (``pochta db upgrade``). For each mode and number of client threads:

1. ``--records`` live records are loaded (one INSERT from arrays; not measured),
2. inc: every thread calls ``PostgresFileDB.inc(key, magic)`` on random loaded keys with a
   fresh random magic, for ``--seconds``, remembering each (key, magic) it added,
3. dec: every thread replays its own list as ``dec`` calls (each dec undoes one inc).

Modes: ``single`` (``batch_max = 1``: every step is its own statement and commit on a
pooled connection) and ``batched`` (group commit, the default: the steps of concurrent
callers go out as one ``pochta.filedb_steps`` call, one commit). Every call is one atomic,
acknowledged, durable step.

Anchors, on the same server and table, without pochta: one connection sending ``UPDATE ...
SET counter = counter + 1, magic = (magic + m) % 2^32 WHERE key = $1`` for random keys,
(a) in pipeline mode, 256 per commit (the batched shape), (b) one per round trip and commit
(the single shape). Reported: ops/s and, for pochta, per-call latency p50
/ p99 in µs, the ratio to the pipelined anchor (``x_anchor``) and to the bound of callers
that each wait for their own durable commit (``x_commit_bound``: clients x the
one-per-commit anchor; N callers complete at most N steps per commit).

    python benchmarks/filedb_postgres.py            # full run
    python benchmarks/filedb_postgres.py --quick    # a few seconds, checks the script works
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.pgserver

from tests.pgserver import PostgresServer

from _common import emit, machine, note, percentile
from pochta.blobs.filedb.postgres import PostgresFileDB
from pochta.postgres.database import PoolSettings, Postgres
from pochta.postgres.migrate import upgrade

GOAL_OPS = 40_000
MOD = 2**32


def _keys(n: int, rng: random.Random) -> list[bytes]:
    return [rng.randbytes(32) for _ in range(n)]


def _load(dsn: str, keys: list[bytes]) -> None:
    """Fresh tables holding ``keys`` live (counter 1, random magic)."""
    rng = random.Random(2)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("TRUNCATE pochta.filedb_live, pochta.filedb_deleted, pochta.filedb_ops")
        for i in range(0, len(keys), 50_000):
            part = keys[i : i + 50_000]
            conn.execute(
                "INSERT INTO pochta.filedb_live (key, counter, magic, flags, pair)"
                " SELECT k, 1, m, 0, 1 FROM unnest(%s::bytea[], %s::bigint[]) AS t(k, m)",
                (part, [rng.randrange(1, MOD) for _ in part]),
            )
        conn.execute("VACUUM ANALYZE pochta.filedb_live")
        conn.execute("CHECKPOINT")


def _phase(threads: int, body: Callable[[int, list[float]], int]) -> tuple[int, float, list[float]]:
    latencies: list[list[float]] = [[] for _ in range(threads)]
    counts = [0] * threads
    barrier = threading.Barrier(threads + 1)

    def run(i: int) -> None:
        barrier.wait()
        counts[i] = body(i, latencies[i])

    workers = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    barrier.wait()
    start = time.perf_counter()
    for w in workers:
        w.join()
    elapsed = time.perf_counter() - start
    return sum(counts), elapsed, sorted(x for lat in latencies for x in lat)


def _summary(ops: int, elapsed: float, lat: list[float]) -> dict[str, Any]:
    out: dict[str, Any] = {"ops": ops, "seconds": round(elapsed, 3)}
    out["ops_per_s"] = round(ops / elapsed)
    if lat:
        out["p50_us"] = round(percentile(lat, 0.50) * 1e6, 1)
        out["p99_us"] = round(percentile(lat, 0.99) * 1e6, 1)
    return out


def measure_pochta(
    dsn: str, keys: list[bytes], mode: str, threads: int, seconds: float, sync: str, leaders: int
) -> dict[str, Any]:
    _load(dsn, keys)
    hexkeys = [k.hex() for k in keys]
    pool = PoolSettings(min_size=2, max_size=max(4, threads + 2), synchronous_commit=sync)  # type: ignore[arg-type]
    db = PostgresFileDB(
        Postgres.connect(dsn, pool), batch_max=1 if mode == "single" else 256, leaders=leaders
    )
    done: list[list[tuple[str, int]]] = [[] for _ in range(threads)]
    try:

        def inc(i: int, lat: list[float]) -> int:
            r = random.Random(100 + i)
            mine = done[i]
            clock = time.perf_counter
            deadline = clock() + seconds
            while True:
                key, magic = r.choice(hexkeys), r.randrange(1, MOD)
                t0 = clock()
                db.inc(key, magic)
                t1 = clock()
                lat.append(t1 - t0)
                mine.append((key, magic))
                if t1 >= deadline:
                    return len(mine)

        def dec(i: int, lat: list[float]) -> int:
            clock = time.perf_counter
            for key, magic in done[i]:
                t0 = clock()
                record = db.dec(key, magic)
                lat.append(clock() - t0)
                assert record.counter >= 1, record
            return len(done[i])

        inc_result = _summary(*_phase(threads, inc))
        dec_result = _summary(*_phase(threads, dec))
        for key in hexkeys[:100]:  # every dec undid one inc: back to counter 1
            record = db.get(key)
            assert record is not None
            assert record.counter == 1, record
    finally:
        db.close()
    return {"inc": inc_result, "dec": dec_result}


def measure_anchor(dsn: str, keys: list[bytes], pipelined: bool, seconds: float) -> dict[str, Any]:
    """Raw psycopg on one connection in autocommit: UPDATEs of random keys. ``pipelined``:
    256 at a time in pipeline mode (psycopg sends one Sync at the end, so the 256 form one
    implicit transaction and one commit); else one UPDATE per round trip and commit."""
    _load(dsn, keys)
    rng = random.Random(7)
    sql = (
        "UPDATE pochta.filedb_live SET counter = counter + 1,"
        " magic = (magic + %s) %% 4294967296 WHERE key = %s"
    )
    ops = 0
    with psycopg.connect(dsn, autocommit=True) as conn:
        cur = conn.cursor()
        start = time.perf_counter()
        deadline = start + seconds
        while time.perf_counter() < deadline:
            if pipelined:
                with conn.pipeline():
                    for _ in range(256):
                        cur.execute(sql, (rng.randrange(1, MOD), rng.choice(keys)), prepare=True)
                ops += 256
            else:
                cur.execute(sql, (rng.randrange(1, MOD), rng.choice(keys)), prepare=True)
                ops += 1
        elapsed = time.perf_counter() - start
    return _summary(ops, elapsed, [])


ANCHORS = {
    "pipelined UPDATE, 256 per commit": True,
    "one UPDATE per round trip and commit": False,
}


def main() -> None:
    result: dict[str, Any] = {
        "figure": "filedb_postgres",
        "goal": f">= {GOAL_OPS} ops/s batched",
        "command": " ".join(["python", *sys.argv]),
        "machine": machine(Path(ARGS.dir or tempfile.gettempdir())),
        "params": {
            "records": ARGS.records,
            "seconds_per_phase": ARGS.seconds,
            "threads": ARGS.threads,
            "synchronous_commit": ARGS.sync,
            "batch_leaders": ARGS.leaders,
        },
        "results": [],
        "anchors": [],
    }
    note("starting PostgreSQL (durable: fsync on) ...")
    with PostgresServer.start(Path(ARGS.dir) if ARGS.dir else None, durable=True) as server:
        name = server.create_database("bench")
        dsn = server.dsn(name)
        db = Postgres.connect(dsn, PoolSettings(max_size=1))
        upgrade(db)
        db.close()
        with server.connect() as conn:
            row = conn.execute("SHOW server_version").fetchone()
        result["machine"]["postgres"] = row[0] if row else "?"
        keys = _keys(ARGS.records, random.Random(1))
        for label, pipelined in ANCHORS.items():
            note(f"anchor: {label} ...")
            row = {"anchor": label, **measure_anchor(dsn, keys, pipelined, ARGS.seconds)}
            note(f"  {row['ops_per_s']:>9,} ops/s")
            result["anchors"].append(row)
        for sync in ARGS.sync:
            for mode in ARGS.modes:
                for threads in ARGS.threads:
                    note(f"pochta {mode}, synchronous_commit={sync}, {threads} thread(s) ...")
                    got = measure_pochta(dsn, keys, mode, threads, ARGS.seconds, sync, ARGS.leaders)
                    # the bound of callers that each wait for their own commit: at most
                    # one step per caller per commit (the one-per-commit anchor's rate)
                    bound = threads * result["anchors"][1]["ops_per_s"]
                    for phase in ("inc", "dec"):  # against the pipelined anchor of this run
                        got[phase]["x_anchor"] = round(
                            got[phase]["ops_per_s"] / result["anchors"][0]["ops_per_s"], 2
                        )
                        got[phase]["x_commit_bound"] = round(got[phase]["ops_per_s"] / bound, 2)
                    row = {"mode": mode, "synchronous_commit": sync, "threads": threads, **got}
                    note(
                        f"  inc {got['inc']['ops_per_s']:>9,} ops/s"
                        f"   dec {got['dec']['ops_per_s']:>9,} ops/s"
                        f"   ({got['inc']['x_anchor']}x / {got['dec']['x_anchor']}x the anchor,"
                        f" {got['inc']['x_commit_bound']}x / {got['dec']['x_commit_bound']}x"
                        f" {threads} x one commit)"
                    )
                    result["results"].append(row)
    emit(result)


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="a few seconds: check the script works")
    p.add_argument("--records", type=int, default=100_000, help="live records preloaded")
    p.add_argument("--seconds", type=float, default=5.0, help="length of each inc phase")
    p.add_argument("--threads", type=int, nargs="+", default=[1, 8, 64], help="client threads")
    p.add_argument("--modes", nargs="+", default=["single", "batched"], help="single, batched")
    p.add_argument("--sync", nargs="+", default=["on"], help="synchronous_commit: on, off")
    p.add_argument("--leaders", type=int, default=8, help="postgres.batch_leaders (batched)")
    p.add_argument("--dir", default=None, help="where the cluster goes (default: TMPDIR)")
    args = p.parse_args()
    if args.quick:
        args.records, args.seconds = min(args.records, 2_000), min(args.seconds, 0.3)
    return args


if __name__ == "__main__":
    ARGS = _args()
    main()
