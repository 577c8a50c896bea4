"""FileDB inc and dec operations per second, embedded (issue 2, figure 2).

For each backend (SQLite with sync=full, SQLite with sync=normal, and the in-memory FileDB for
reference) and each number of client threads (1 and 8):

1. a fresh FileDB gets ``--records`` live records through ``upsert`` (counter 1, random magic;
   a SQLite file through a second handle with synchronous=off, to load it quickly),
2. inc: every thread, for ``--seconds``, calls ``inc(key, magic)`` on random preloaded keys
   with a fresh random magic each time, remembering each (key, magic) it added,
3. dec: every thread replays its own (key, magic) list as ``dec`` calls, so each dec undoes
   one inc (the path of a real letter deletion; no record reaches counter 0).

Every call is one atomic, acknowledged step (with sync=full: durable against power loss when
it returns). Concurrent calls share one transaction and one commit (group commit). Reported:
ops/s for the whole phase, and per-call latency p50 / p99 in µs.

Anchors, in the same run, on a file of the same layout and size, without pochta: one thread
of raw ``sqlite3`` sending ``UPDATE live SET counter = counter + 1, magic = ... WHERE key = ?``
for random keys, (a) 256 per ``BEGIN IMMEDIATE`` ... ``COMMIT`` (the shape of a full group),
(b) one per transaction (the shape of one caller alone), each at sync=full and sync=normal.

    python benchmarks/filedb_ops.py            # full run
    python benchmarks/filedb_ops.py --quick    # a few seconds, checks the script works
"""

from __future__ import annotations

import argparse
import random
import shutil
import sqlite3
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import emit, machine, note, percentile
from pochta.blobs.filedb.memory import MemoryFileDB
from pochta.blobs.filedb.sqlite import SQLiteFileDB
from pochta.types import FileDB

GOAL_OPS = 40_000

Factory = Callable[[Path], FileDB]
DB_FILE = "filedb.sqlite3"

BACKENDS: dict[str, Factory] = {
    "sqlite sync=full": lambda d: SQLiteFileDB(d / DB_FILE, synchronous="full"),
    "sqlite sync=normal": lambda d: SQLiteFileDB(d / DB_FILE, synchronous="normal"),
    "memory": lambda d: MemoryFileDB(),
}


def _keys(n: int, rng: random.Random) -> list[str]:
    return [rng.randbytes(32).hex() for _ in range(n)]


def _preload(db: FileDB, keys: list[str], workdir: Path) -> None:
    """Live records through the FileDB API itself. A SQLite file is loaded through its own
    handle with synchronous=off (the setting is per connection; the file is the same)."""
    rng = random.Random(2)
    loader = (
        SQLiteFileDB(workdir / DB_FILE, synchronous="off") if isinstance(db, SQLiteFileDB) else db
    )
    for key in keys:
        loader.upsert(key, rng.randrange(1, 2**32), 1)
    if loader is not db:
        loader.close()


def _phase(threads: int, body: Callable[[int, list[float]], int]) -> tuple[int, float, list[float]]:
    """Run ``body(thread_index, latencies)`` in ``threads`` threads started together;
    return total ops, wall seconds, and every call's latency."""
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
    return {
        "ops": ops,
        "seconds": round(elapsed, 3),
        "ops_per_s": round(ops / elapsed),
        "p50_us": round(percentile(lat, 0.50) * 1e6, 1),
        "p99_us": round(percentile(lat, 0.99) * 1e6, 1),
    }


def measure(
    factory: Factory, threads: int, records: int, seconds: float, where: str | None
) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="pochta-bench-filedb-", dir=where))
    try:
        rng = random.Random(1)
        keys = _keys(records, rng)
        db = factory(workdir)
        try:
            _preload(db, keys, workdir)
            done: list[list[tuple[str, int]]] = [[] for _ in range(threads)]

            def inc(i: int, lat: list[float]) -> int:
                r = random.Random(100 + i)
                mine = done[i]
                clock = time.perf_counter
                deadline = clock() + seconds
                while True:
                    key, magic = r.choice(keys), r.randrange(1, 2**32)
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
            for key in keys[:100]:  # every dec undid one inc: back to counter 1
                record = db.get(key)
                assert record is not None
                assert record.counter == 1, record
        finally:
            db.close()
        return {"threads": threads, "inc": inc_result, "dec": dec_result}
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


ANCHOR_SQL = (
    "UPDATE live SET counter = counter + 1,"
    " magic = ((magic + ?2) & 0xFFFFFFFF) - (((magic + ?2) & 0x80000000) << 1) WHERE key = ?1"
)


def measure_anchor(
    sync: str, per_commit: int, records: int, seconds: float, where: str | None
) -> dict[str, Any]:
    """Raw sqlite3, one thread, WAL: ``per_commit`` UPDATEs of random keys per transaction."""
    workdir = Path(tempfile.mkdtemp(prefix="pochta-bench-filedb-", dir=where))
    try:
        keys = _keys(records, random.Random(1))
        db = SQLiteFileDB(workdir / DB_FILE, synchronous="off")  # the schema, loaded quickly
        _preload(db, keys, workdir)
        db.close()
        raw = [bytes.fromhex(k) for k in keys]
        rng = random.Random(7)
        conn = sqlite3.connect(workdir / DB_FILE, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(f"PRAGMA synchronous={sync}")
            ops = 0
            start = time.perf_counter()
            deadline = start + seconds
            while time.perf_counter() < deadline:
                conn.execute("BEGIN IMMEDIATE")
                for _ in range(per_commit):
                    conn.execute(ANCHOR_SQL, (rng.choice(raw), rng.randrange(1, 2**32)))
                conn.execute("COMMIT")
                ops += per_commit
            elapsed = time.perf_counter() - start
        finally:
            conn.close()
        return {"ops": ops, "seconds": round(elapsed, 3), "ops_per_s": round(ops / elapsed)}
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


ANCHORS = {"256 UPDATEs per transaction": 256, "one UPDATE per transaction": 1}


def main() -> None:
    result: dict[str, Any] = {
        "figure": "filedb_ops",
        "goal": f">= {GOAL_OPS} ops/s embedded",
        "command": " ".join(["python", *sys.argv]),
        "machine": machine(Path(ARGS.dir or tempfile.gettempdir())),
        "params": {
            "records": ARGS.records,
            "seconds_per_phase": ARGS.seconds,
            "threads": ARGS.threads,
        },
        "results": [],
        "anchors": [],
    }
    for sync in ("full", "normal"):
        for label, per_commit in ANCHORS.items():
            note(f"anchor: raw sqlite3, sync={sync}, {label} ...")
            got = measure_anchor(sync, per_commit, ARGS.records, ARGS.seconds, ARGS.dir)
            note(f"  {got['ops_per_s']:>9,} ops/s")
            row = {"anchor": f"sync={sync}, {label}", "sync": sync, "per_commit": per_commit}
            result["anchors"].append({**row, **got})
    for name, factory in BACKENDS.items():
        for threads in ARGS.threads:
            note(f"{name}, {threads} thread(s) ...")
            row = {
                "backend": name,
                **measure(factory, threads, ARGS.records, ARGS.seconds, ARGS.dir),
            }
            anchor = next(
                (
                    a
                    for a in result["anchors"]
                    if name == f"sqlite sync={a['sync']}" and a["per_commit"] == 256
                ),
                None,
            )
            single = next(
                (
                    a
                    for a in result["anchors"]
                    if name == f"sqlite sync={a['sync']}" and a["per_commit"] == 1
                ),
                None,
            )
            shown = ""
            if anchor is not None and single is not None:
                # x_anchor: against the group-shaped anchor of the same sync; x_commit_bound:
                # against threads x one transaction each (each caller waits for its commit)
                for phase in ("inc", "dec"):
                    ops = row[phase]["ops_per_s"]
                    row[phase]["x_anchor"] = round(ops / anchor["ops_per_s"], 2)
                    row[phase]["x_commit_bound"] = round(ops / (threads * single["ops_per_s"]), 2)
                shown = f"   ({row['inc']['x_anchor']}x / {row['dec']['x_anchor']}x the anchor)"
            note(
                f"  inc {row['inc']['ops_per_s']:>9,} ops/s   dec {row['dec']['ops_per_s']:>9,}"
                f" ops/s{shown}"
            )
            result["results"].append(row)
    emit(result)


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="a few seconds: check the script works")
    p.add_argument("--records", type=int, default=100_000, help="live records preloaded")
    p.add_argument("--seconds", type=float, default=5.0, help="length of each inc phase")
    p.add_argument("--threads", type=int, nargs="+", default=[1, 8, 64], help="client threads")
    p.add_argument("--dir", default=None, help="where the databases go (default: TMPDIR)")
    args = p.parse_args()
    if args.quick:
        args.records, args.seconds = min(args.records, 2_000), min(args.seconds, 0.3)
    return args


if __name__ == "__main__":
    ARGS = _args()
    main()
