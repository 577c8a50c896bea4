"""Shingle counter updates per second, sustained, with the write buffer and without it, while
queries of 40 counters per letter run at a fixed rate (issue 5, figure 6); and bytes per
counter. For Redis Cluster (3 masters with 1 replica each, on loopback, started here) and for
the embedded SQLite store.

Two processes share the machine with the servers:

- the writer: letters of 40 shingles each, one ``Counters.update`` per letter, as fast as it
  can for ``--seconds``, then a flush; updates/s = counters updated / (time until the last one
  was written). With the buffer (the seed's design) and without it (``buffered=False``: each
  letter's update goes to the store at once, one Lua call per node).
- the reader: ``Counters.query`` of 40 shingles per letter over windows ``--windows``, paced at
  ``--query-rate`` letters/s; reported: the rate reached and the latency per letter.

Workloads (40 shingles per letter):

- ``mail``: 28 shingles of the letter's campaign (subject, sender, links ...: campaigns drawn
  Zipf(1.1) from a million, so big mailings are hot keys), 10 of the letter alone (random),
  2 sender -> recipient pairs with the campaign's sender as their unique;
- ``distinct``: 40 shingles never seen before (nothing for the buffer to add up: worst case).

Bytes per counter: a fresh store gets N shingles counted once (kind spam, now), then a second
kind on the same shingles; the growth of used_memory (Redis masters; replicas hold as much
again) or of the SQLite file, divided by N.

    python benchmarks/shingles_throughput.py            # full run (~3 minutes)
    python benchmarks/shingles_throughput.py --quick    # a few seconds, checks the script works
"""

from __future__ import annotations

import argparse
import itertools
import multiprocessing as mp
import os
import random
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import emit, machine, note, percentile

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.servers

from pochta.antispam.shingles.counters import CounterStore, Ref
from pochta.antispam.shingles.counters.buckets import parse_window
from pochta.antispam.shingles.counters.redis import RedisStore
from pochta.antispam.shingles.counters.service import Counters
from pochta.antispam.shingles.counters.sqlite import SQLiteStore
from pochta.config import RedisSettings
from pochta.redisconn import connect

GOAL_UPDATES = 220_000
GOAL_QUERY_LETTERS = 2_000
PER_LETTER = 40
CAMPAIGN_TYPES = [8, 10, 11, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 42, 62] + [21, 22, 23] * 4
ALONE_TYPES = [10, 11, 22, 21, 42, 62, 20, 8, 14, 18]


def _mix(x: int) -> int:
    """splitmix64: a well-spread 64-bit hash of an integer."""
    x = (x + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return x ^ (x >> 31)


def letters(workload: str, count: int, seed: int) -> list[list[Ref]]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        if workload == "distinct":
            out.append([Ref(t, rng.getrandbits(64)) for t in (CAMPAIGN_TYPES + ALONE_TYPES)[:40]])
            continue
        campaign = min(int(rng.paretovariate(0.1)), 10**6)  # Zipf-like: P(>= k) ~ k^-0.1
        campaign = _mix(campaign)
        refs = [Ref(t, _mix(campaign ^ (t * 7919 + i))) for i, t in enumerate(CAMPAIGN_TYPES)]
        refs += [Ref(t, rng.getrandbits(64)) for t in ALONE_TYPES]
        sender = Ref(31, _mix(campaign ^ 31))
        refs += [Ref(30, rng.getrandbits(64), sender) for _ in range(2)]
        out.append(refs)
    return out


# -- stores -------------------------------------------------------------------------------------
def open_store(spec: dict[str, Any]) -> CounterStore:
    if spec["kind"] == "redis-cluster":
        settings = RedisSettings(mode="cluster", nodes=spec["nodes"], timeout=5.0)
        return RedisStore(connect(settings), prefix="bench")
    if spec["kind"] == "sqlite":
        return SQLiteStore(Path(spec["path"]), synchronous="normal")
    raise ValueError(spec["kind"])


def writer(
    spec: dict[str, Any],
    workload: str,
    buffered: bool,
    seconds: float,
    pool: int,
    go: Any,
    out: Any,
) -> None:
    batch = letters(workload, pool, seed=1)
    counters = Counters(
        open_store(spec),
        buffered=buffered,
        flush_interval=1.0,
        max_cells=2_000_000,
        wait_timeout=60.0,
    )
    counters.start()  # the flusher, as in pochta serve (nothing to start when unbuffered)
    out.put("ready")
    go.wait()
    cpu = time.process_time()
    start = time.perf_counter()
    deadline = start + seconds
    done = 0
    i = 0
    while True:
        counters.update(batch[i], "ham")
        done += 1
        i += 1
        if i == pool:
            i = 0
        if not done % 64 and time.perf_counter() >= deadline:
            break
    accepted_at = time.perf_counter()
    counters.flush()
    written_at = time.perf_counter()
    cpu = time.process_time() - cpu
    stats = counters.stats()
    counters.close()
    out.put(
        {
            "letters": done,
            "updates": done * PER_LETTER,
            "accept_seconds": round(accepted_at - start, 3),
            "seconds_until_written": round(written_at - start, 3),
            "updates_per_s": round(done * PER_LETTER / (written_at - start)),
            "accepted_per_s": round(done * PER_LETTER / (accepted_at - start)),
            "cells_written": stats.written,
            "store_calls_batches": stats.batches,
            "coalescing": round(done * PER_LETTER / max(1, stats.written), 2),
            "cpu_seconds": round(cpu, 2),
        }
    )


def reader(
    spec: dict[str, Any],
    workload: str,
    rate: float,
    windows: list[str],
    go: Any,
    stop: Any,
    out: Any,
) -> None:
    batch = letters(workload, 20_000, seed=2)
    ws = [parse_window(w) for w in windows]
    counters = Counters(open_store(spec), flush_interval=1.0)
    counters.start()
    out.put("ready")
    go.wait()
    cpu = time.process_time()
    lat: list[float] = []
    start = time.perf_counter()
    i = 0
    while not stop.is_set():
        due = start + i / rate
        now = time.perf_counter()
        if due > now:
            time.sleep(min(due - now, 0.05))
            continue
        t0 = time.perf_counter()
        counters.query(batch[i % len(batch)], ws)
        lat.append(time.perf_counter() - t0)
        i += 1
    elapsed = time.perf_counter() - start
    cpu = time.process_time() - cpu
    counters.close()
    lat.sort()
    out.put(
        {
            "letters": i,
            "letters_per_s": round(i / elapsed),
            "counters_per_s": round(i * PER_LETTER / elapsed),
            "p50_ms": round(percentile(lat, 0.5) * 1e3, 2),
            "p99_ms": round(percentile(lat, 0.99) * 1e3, 2),
            "cpu_seconds": round(cpu, 2),
        }
    )


def _ticks(pids: list[int]) -> float:
    """CPU seconds (user + system) the processes have used so far (Linux /proc)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except (OSError, IndexError, ValueError):
            pass
    return total / os.sysconf("SC_CLK_TCK")


def run_phase(spec: dict[str, Any], workload: str, buffered: bool) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    out_w, out_r, go, stop = ctx.Queue(), ctx.Queue(), ctx.Event(), ctx.Event()
    pool = 20_000 if ARGS.quick else 60_000
    w = ctx.Process(target=writer, args=(spec, workload, buffered, ARGS.seconds, pool, go, out_w))
    r = ctx.Process(
        target=reader, args=(spec, workload, ARGS.query_rate, ARGS.windows, go, stop, out_r)
    )
    w.start()
    assert out_w.get(timeout=300) == "ready"  # letters made, store open
    reading = ARGS.query_rate > 0
    if reading:
        r.start()
        assert out_r.get(timeout=300) == "ready"
    pids = spec.get("pids", [])
    servers = _ticks(pids)
    load = os.getloadavg()[0]
    go.set()
    result_w = out_w.get(timeout=ARGS.seconds + 600)
    servers = _ticks(pids) - servers
    stop.set()
    result_r = out_r.get(timeout=60) if reading else {"letters": 0, "cpu_seconds": 0.0}
    w.join()
    if reading:
        r.join()
    cpu = result_w["cpu_seconds"] + result_r["cpu_seconds"] + servers
    return {
        "workload": workload,
        "buffered": buffered,
        "writer": result_w,
        "reader": result_r,
        "servers_cpu_seconds": round(servers, 2),
        "cpu_us_per_update_all_processes": round(cpu / result_w["updates"] * 1e6, 2),
        "loadavg_1m_before": round(load, 2),
        "loadavg_1m_after": round(os.getloadavg()[0], 2),
    }


def run_reader_only(spec: dict[str, Any], workload: str) -> dict[str, Any]:
    """Queries alone, as fast as one reader process goes (what the machine allows reads)."""
    ctx = mp.get_context("spawn")
    out_r, go, stop = ctx.Queue(), ctx.Event(), ctx.Event()
    r = ctx.Process(target=reader, args=(spec, workload, 1e9, ARGS.windows, go, stop, out_r))
    r.start()
    assert out_r.get(timeout=300) == "ready"
    go.set()
    time.sleep(min(ARGS.seconds, 10.0))
    stop.set()
    result = out_r.get(timeout=60)
    r.join()
    return {"workload": workload, "reader_alone": result}


# -- bytes per counter ----------------------------------------------------------------------
def redis_memory(spec: dict[str, Any], n: int) -> dict[str, Any]:
    store = open_store(spec)
    assert isinstance(store, RedisStore)
    client = store.client
    for node in client.get_primaries():  # type: ignore[union-attr]
        client.get_redis_connection(node).flushall()  # type: ignore[union-attr]
    counters = Counters(store, flush_interval=0.2)
    counters.start()
    rng = random.Random(3)
    refs = [Ref(14, rng.getrandbits(64)) for _ in range(n)]
    before = store.memory()
    for i in range(0, n, 40):
        counters.update(refs[i : i + 40], "spam")
    counters.flush()
    time.sleep(3)  # let the key table finish rehashing (it holds two tables meanwhile)
    first = store.memory()
    for i in range(0, n, 40):
        counters.update(refs[i : i + 40], "ham")
    counters.flush()
    time.sleep(3)
    second = store.memory()
    keys = itertools.islice(client.scan_iter(match="bench*", count=1000), 1000)  # type: ignore[union-attr]
    sample = [int(client.memory_usage(k) or 0) for k in keys]  # type: ignore[union-attr]
    counters.close()
    return {
        "counters": n,
        "keys_per_shingle": round((first["keys"] - before["keys"]) / n, 2),
        "bytes_per_first_counter": round((first["used_memory"] - before["used_memory"]) / n, 1),
        "bytes_per_added_kind": round((second["used_memory"] - first["used_memory"]) / n, 1),
        "memory_usage_per_key_sample_avg": round(sum(sample) / max(1, len(sample)), 1),
        "note": "masters only; each replica holds as much again",
    }


def sqlite_memory(where: Path, n: int) -> dict[str, Any]:
    path = where / "size.sqlite3"
    store = SQLiteStore(path, synchronous="normal")
    counters = Counters(store, flush_interval=0.2)
    counters.start()
    rng = random.Random(3)
    refs = [Ref(14, rng.getrandbits(64)) for _ in range(n)]

    def size() -> int:
        conn = sqlite3.connect(path)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        conn.close()
        return path.stat().st_size

    before = size()
    for i in range(0, n, 40):
        counters.update(refs[i : i + 40], "spam")
    counters.flush()
    first = size()
    for i in range(0, n, 40):
        counters.update(refs[i : i + 40], "ham")
    counters.flush()
    second = size()
    counters.close()
    return {
        "counters": n,
        "bytes_per_first_counter": round((first - before) / n, 1),
        "bytes_per_added_kind": round((second - first) / n, 1),
        "note": "file bytes (day row + 10-minute row per counter, B-tree pages)",
    }


def main() -> None:
    where = Path(tempfile.mkdtemp(prefix="pochta-bench-shingles-"))
    result: dict[str, Any] = {
        "figure": "shingles_throughput",
        "goal": f">= {GOAL_UPDATES} counter updates/s into Redis Cluster with the buffer, while"
        f" queries of 40 counters per letter run at >= {GOAL_QUERY_LETTERS} letters/s",
        "command": " ".join(["python", *sys.argv]),
        "machine": machine(where),
        "params": {
            "seconds": ARGS.seconds,
            "query_rate": ARGS.query_rate,
            "windows": ARGS.windows,
            "counters_per_letter": PER_LETTER,
            "workloads": ARGS.workloads,
        },
        "redis_cluster": {},
        "embedded_sqlite": {},
    }
    try:
        if not ARGS.skip_redis:
            from tests.servers import RedisCluster

            note("starting a Redis Cluster: 3 masters, 1 replica each ...")
            with RedisCluster.start(where / "cluster", node_timeout_ms=5000) as cluster:
                spec = {
                    "kind": "redis-cluster",
                    "nodes": [f"127.0.0.1:{n.port}" for n in cluster.nodes],
                    "pids": [n.proc.pid for n in cluster.nodes if n.proc is not None],
                }
                phases = []
                for workload in ARGS.workloads:
                    for buffered in [m == "buffered" for m in ARGS.modes]:
                        note(f"redis cluster, {workload}, buffered={buffered} ...")
                        phase = run_phase(spec, workload, buffered)
                        note(
                            f"  {phase['writer']['updates_per_s']:>9,} updates/s, queries"
                            f" {phase['reader'].get('letters_per_s', 0):,} letters/s"
                        )
                        phases.append(phase)
                        if buffered:
                            note(f"redis cluster, {workload}, queries alone ...")
                            alone = run_reader_only(spec, workload)
                            note(f"  {alone['reader_alone']['letters_per_s']:,} letters/s")
                            phases.append(alone)
                        cluster.flush()
                result["redis_cluster"]["phases"] = phases
                note("redis cluster, bytes per counter ...")
                result["redis_cluster"]["memory"] = redis_memory(spec, ARGS.memory_counters)
        if not ARGS.skip_embedded:
            phases = []
            for workload in ARGS.workloads:
                for buffered in [m == "buffered" for m in ARGS.modes]:
                    path = where / f"counters-{workload}-{buffered}.sqlite3"
                    spec = {"kind": "sqlite", "path": str(path)}
                    SQLiteStore(path).close()  # the schema, before two processes open it
                    note(f"sqlite, {workload}, buffered={buffered} ...")
                    phase = run_phase(spec, workload, buffered)
                    note(
                        f"  {phase['writer']['updates_per_s']:>9,} updates/s, queries"
                        f" {phase['reader'].get('letters_per_s', 0):,} letters/s"
                    )
                    phases.append(phase)
                    if buffered:
                        note(f"sqlite, {workload}, queries alone ...")
                        alone = run_reader_only(spec, workload)
                        note(f"  {alone['reader_alone']['letters_per_s']:,} letters/s")
                        phases.append(alone)
            result["embedded_sqlite"]["phases"] = phases
            note("sqlite, bytes per counter ...")
            result["embedded_sqlite"]["memory"] = sqlite_memory(where, ARGS.memory_counters)
    finally:
        shutil.rmtree(where, ignore_errors=True)
    emit(result)


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="a few seconds: check the script works")
    p.add_argument("--seconds", type=float, default=20.0, help="length of each write phase")
    p.add_argument(
        "--query-rate", type=float, default=GOAL_QUERY_LETTERS, help="letters/s (0: no reader)"
    )
    p.add_argument("--windows", nargs="+", default=["1h", "24h"], help="windows per query")
    p.add_argument("--workloads", nargs="+", default=["mail", "distinct"])
    p.add_argument(
        "--modes", nargs="+", default=["buffered", "direct"], help="with the buffer / without"
    )
    p.add_argument("--memory-counters", type=int, default=200_000)
    p.add_argument("--skip-redis", action="store_true")
    p.add_argument("--skip-embedded", action="store_true")
    args = p.parse_args()
    if args.quick:
        args.seconds = min(args.seconds, 2.0)
        args.memory_counters = min(args.memory_counters, 20_000)
    return args


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    ARGS = _args()
    main()
