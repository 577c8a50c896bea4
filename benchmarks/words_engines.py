"""Learned words on each engine (issue 28, item 3): what one letter costs the store that every
loader shares, with SQLite (one machine's file) as the anchor, in one run.

Stores: ``SQLiteWordStore`` (a file in a temporary directory, ``synchronous=normal`` as pochta
opens it), ``PostgresWordStore`` (a PostgreSQL cluster of our own: Debian's binaries, a free
loopback port, durable: fsync on, synchronous_commit on, pochta's default; schema by ``pochta
db upgrade``) and ``RedisWordStore`` (a redis-server of our own on loopback, without
persistence, as the test servers run). Each store first gets ``--words`` words of the
installation (owner 0) in letters of 300 (not measured), then, from one thread:

- add: one letter's 300 words (half of them known, half new), one ``add`` (one atomic step,
  what a flush writes for one letter; the flusher writes every 2 s, off the mail's path);
- counts: one letter's 300 words (half known), one ``counts`` (what scoring a letter reads,
  on the mail's path);
- a big flush: 20,000 new words in one ``add`` (on Redis, how long one script holds the
  node that has the owner's slot);

and adds from ``--threads`` threads, each with its own store (connection pool, client) on the
same table, as loaders do: letters per second in all. Also the bytes a word takes (the file,
the table with its indexes, Redis's used_memory), after the load.

    python benchmarks/words_engines.py            # full run
    python benchmarks/words_engines.py --quick    # a few seconds, checks the script works
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.pgserver, tests.servers

from tests.pgserver import PostgresServer
from tests.servers import RedisServer

from _common import emit, machine, note, percentile
from pochta.antispam.words import WordStore
from pochta.antispam.words.postgres import PostgresWordStore
from pochta.antispam.words.redis import RedisWordStore
from pochta.antispam.words.sqlite import SQLiteWordStore
from pochta.postgres.database import PoolSettings, Postgres
from pochta.postgres.migrate import upgrade

LETTER = 300  # words of one letter
FLUSH = 20_000  # new words of one big flush (a busy installation's 2 s): how long one step takes
DAY = 20_000


def _letter(rng: random.Random, known: int, fresh: list[int]) -> list[int]:
    """300 words: half from the ``known`` loaded ones (hash = index * odd constant), half
    never seen (taken from ``fresh``)."""
    half = LETTER // 2
    old = [_hash(rng.randrange(known)) for _ in range(half)]
    new = [fresh.pop() if fresh else rng.getrandbits(64) for _ in range(LETTER - half)]
    return list(dict.fromkeys(old + new))


def _hash(i: int) -> int:
    return (i * 0x9E3779B97F4A7C15 + 1) % (1 << 64)


def _load(store: WordStore, n: int) -> None:
    for i in range(0, n, LETTER):
        store.add(0, {_hash(j): (1, 0) for j in range(i, min(n, i + LETTER))}, (1, 0), DAY)


def _timed(calls: int, body: Callable[[], None]) -> dict[str, Any]:
    lat: list[float] = []
    start = time.perf_counter()
    for _ in range(calls):
        t = time.perf_counter()
        body()
        lat.append(time.perf_counter() - t)
    elapsed = time.perf_counter() - start
    lat.sort()
    return {
        "calls": calls,
        "per_s": round(calls / elapsed),
        "p50_ms": round(percentile(lat, 0.5) * 1000, 3),
        "p99_ms": round(percentile(lat, 0.99) * 1000, 3),
    }


def _parallel(opens: Callable[[], WordStore], threads: int, seconds: float, known: int) -> int:
    """Letters added per second by ``threads`` threads, each with its own store."""
    stores = [opens() for _ in range(threads)]
    counts = [0] * threads
    barrier = threading.Barrier(threads + 1)
    stop = threading.Event()

    def run(i: int) -> None:
        rng = random.Random(100 + i)
        barrier.wait()
        while not stop.is_set():
            stores[i].add(0, dict.fromkeys(_letter(rng, known, []), (1, 0)), (1, 0), DAY + 1)
            counts[i] += 1

    workers = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    barrier.wait()
    start = time.perf_counter()
    time.sleep(seconds)
    stop.set()
    for w in workers:
        w.join()
    elapsed = time.perf_counter() - start
    for s in stores:
        s.close()
    return round(sum(counts) / elapsed)


def measure(
    name: str, opens: Callable[[], WordStore], size: Callable[[], int | None]
) -> dict[str, Any]:
    store = opens()
    note(f"{name}: loading {ARGS.words:,} words ...")
    _load(store, ARGS.words)
    used = size()
    rng = random.Random(1)
    fresh = [rng.getrandbits(64) for _ in range(ARGS.letters * LETTER)]
    note(f"{name}: add / counts ...")
    add = _timed(
        ARGS.letters,
        lambda: store.add(0, dict.fromkeys(_letter(rng, ARGS.words, fresh), (1, 0)), (1, 0), DAY),
    )
    read = _timed(ARGS.letters, lambda: store.counts(0, _letter(rng, ARGS.words, [])))
    big = [rng.getrandbits(64) for _ in range(5 * FLUSH)]
    flush = _timed(
        5, lambda: store.add(0, {big.pop(): (1, 0) for _ in range(FLUSH)}, (100, 0), DAY)
    )
    store.close()
    row: dict[str, Any] = {
        "store": name,
        "add_300_words": add,
        "counts_300_words": read,
        f"add_{FLUSH}_new_words": flush,
        "bytes_per_word": round(used / ARGS.words) if used is not None else None,
    }
    for threads in ARGS.threads:
        note(f"{name}: adds from {threads} thread(s) ...")
        row[f"letters_added_per_s_{threads}_threads"] = _parallel(
            opens, threads, ARGS.seconds, ARGS.words
        )
    return row


def main() -> None:
    where = Path(ARGS.dir or tempfile.mkdtemp(prefix="words-engines-"))
    result: dict[str, Any] = {
        "figure": "words_engines",
        "command": " ".join(["python", *sys.argv]),
        "machine": machine(where),
        "params": {
            "words_loaded": ARGS.words,
            "letters_timed": ARGS.letters,
            "words_per_letter": LETTER,
            "threads": ARGS.threads,
            "seconds_per_parallel_phase": ARGS.seconds,
        },
        "results": [],
    }
    path = where / "words.sqlite3"
    result["results"].append(
        measure(
            "sqlite",
            lambda: SQLiteWordStore(path),
            lambda: path.stat().st_size + _size(path.with_name(path.name + "-wal")),
        )
    )
    note("starting PostgreSQL (durable: fsync on) ...")
    with PostgresServer.start(where / "pg", durable=True) as server:
        dsn = server.dsn(server.create_database("bench"))
        db = Postgres.connect(dsn, PoolSettings(max_size=2))
        upgrade(db)
        row = db.query("SHOW server_version")
        result["machine"]["postgres"] = row[0][0] if row else "?"

        def pg_size() -> int:
            db.execute("VACUUM ANALYZE pochta.learned_words")
            got = db.query("SELECT pg_total_relation_size('pochta.learned_words')")
            return int(got[0][0])

        result["results"].append(
            measure(
                "postgres",
                lambda: PostgresWordStore(Postgres.connect(dsn, PoolSettings(max_size=2))),
                pg_size,
            )
        )
        db.close()
    note("starting redis-server ...")
    with RedisServer.start(where / "redis") as redis_server:
        admin = redis_server.client()
        result["machine"]["redis"] = admin.info("server")["redis_version"]
        base = int(admin.info("memory")["used_memory"])
        clients: list[Any] = []

        def redis_store() -> WordStore:
            clients.append(redis_server.client())
            return RedisWordStore(clients[-1])

        result["results"].append(
            measure("redis", redis_store, lambda: int(admin.info("memory")["used_memory"]) - base)
        )
        for c in clients:
            c.close()
        admin.close()
    emit(result)


def _size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="a few seconds: check the script works")
    p.add_argument("--words", type=int, default=300_000, help="words loaded before timing")
    p.add_argument("--letters", type=int, default=500, help="letters timed (add, counts)")
    p.add_argument("--threads", type=int, nargs="+", default=[1, 4], help="threads adding")
    p.add_argument("--seconds", type=float, default=5.0, help="length of a parallel phase")
    p.add_argument("--dir", default=None, help="where the files go (default: a temporary dir)")
    args = p.parse_args()
    if args.quick:
        args.words, args.letters, args.seconds = 3_000, 30, 0.3
    return args


if __name__ == "__main__":
    ARGS = _args()
    main()
