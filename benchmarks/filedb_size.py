"""FileDB bytes per record at 1,000,000 records (issue 2, figure 3).

A fresh SQLite FileDB (``pochta.blobs.filedb.sqlite``, as ``pochta serve`` opens it) gets
``--records`` live records with random SHA-256 keys, in random order (as content addresses
arrive), each with a random magic, counter 1, no flags, pair 1: what an upload leaves.

``--via api`` (default) inserts through ``SQLiteFileDB.upsert`` itself, one call per record
(opened with synchronous=off for the load: durability does not change a single byte of the
file). ``--via sql`` inserts the same rows with ``executemany`` in random order, the same
table contents by a faster path (the page layout depends only on the order of inserts).

Measured after ``PRAGMA wal_checkpoint(TRUNCATE)`` (the WAL is folded into the file):
the database file size, and per table from SQLite's ``dbstat``: pages, bytes, unused bytes
and payload. Then after ``SQLiteFileDB.compact()`` (VACUUM: pages packed full), and again
after ``--regrow`` more random inserts on top of the compacted file (how fast the gain fades).

Anchor: seed 004's Tarantool 1.5 layout, 57 bytes per record + 12 bytes of index = 69 bytes
with 20-byte SHA-1 keys. Goal: <= 48 bytes per record with 32-byte SHA-256 keys.

    python benchmarks/filedb_size.py            # full run: 1,000,000 records
    python benchmarks/filedb_size.py --quick    # a few seconds, checks the script works
"""

from __future__ import annotations

import argparse
import random
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import emit, machine, note
from pochta.blobs.filedb.sqlite import SQLiteFileDB
from pochta.types import FileFlag, Space

GOAL = 48
ANCHOR = 69


def load_api(path: Path, keys: list[bytes], rng: random.Random) -> None:
    db = SQLiteFileDB(path, synchronous="off")
    try:
        for i, key in enumerate(keys):
            db.upsert(key.hex(), rng.randrange(1, 2**32), 1)
            if i % 100_000 == 99_999:
                note(f"  {i + 1:,} records")
    finally:
        db.close()


def load_sql(path: Path, keys: list[bytes], rng: random.Random) -> None:
    """The rows ``upsert`` writes (magic stored as a signed 32-bit integer), in the same order."""
    SQLiteFileDB(path).close()  # the schema and pragmas exactly as pochta makes them
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA synchronous=off")
        batch = 10_000
        for i in range(0, len(keys), batch):
            rows = []
            for key in keys[i : i + batch]:
                magic = rng.randrange(1, 2**32)
                rows.append((key, magic - 2**32 if magic >= 2**31 else magic))
            conn.execute("BEGIN")
            conn.executemany(
                "INSERT INTO live (key, counter, magic, flags, pair) VALUES (?, 1, ?, 0, 1)",
                rows,
            )
            conn.execute("COMMIT")
    finally:
        conn.close()


def measure(path: Path, records: int) -> dict[str, Any]:
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        tables = {}
        for name, pages, size, unused, payload, cells in conn.execute(
            "SELECT name, count(*), sum(pgsize), sum(unused), sum(payload), sum(ncell)"
            " FROM dbstat GROUP BY name ORDER BY name"
        ):
            tables[name] = {
                "pages": pages,
                "bytes": size,
                "unused_bytes": unused,
                "payload_bytes": payload,
                "cells": cells,
            }
        live = tables["live"]
        leaf = conn.execute(
            "SELECT count(*), sum(pgsize), sum(unused) FROM dbstat"
            " WHERE name = 'live' AND pagetype = 'leaf'"
        ).fetchone()
    finally:
        conn.close()
    wal = path.with_name(path.name + "-wal")
    size = path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)
    return {
        "file_bytes": size,
        "bytes_per_record": round(size / records, 2),
        "live_table_bytes_per_record": round(live["bytes"] / records, 2),
        "payload_bytes_per_record": round(live["payload_bytes"] / records, 2),
        "leaf_fill": round(1 - leaf[2] / leaf[1], 3),
        "page_size": page_size,
        "tables": tables,
    }


def check(path: Path, keys: list[bytes]) -> None:
    """A few records read back through the FileDB API look like uploads."""
    db = SQLiteFileDB(path)
    try:
        for key in random.Random(5).sample(keys, min(100, len(keys))):
            record = db.get(key.hex())
            assert record is not None, key.hex()
            assert record.space is Space.LIVE
            assert (record.counter, record.flags, record.pair_id) == (1, FileFlag.NONE, 1)
    finally:
        db.close()


def main() -> None:
    workdir = Path(tempfile.mkdtemp(prefix="pochta-bench-size-", dir=ARGS.dir))
    path = workdir / "filedb.sqlite3"
    result: dict[str, Any] = {
        "figure": "filedb_size",
        "goal": f"<= {GOAL} bytes per record (anchor: Tarantool {ANCHOR} with SHA-1 keys)",
        "command": " ".join(["python", *sys.argv]),
        "machine": machine(workdir),
        "params": {"records": ARGS.records, "via": ARGS.via, "regrow": ARGS.regrow},
    }
    try:
        rng = random.Random(7)
        keys = list({rng.randbytes(32) for _ in range(ARGS.records)})
        rng.shuffle(keys)
        note(f"inserting {len(keys):,} records via {ARGS.via} ...")
        start = time.perf_counter()
        (load_api if ARGS.via == "api" else load_sql)(path, keys, rng)
        result["load_seconds"] = round(time.perf_counter() - start, 1)
        check(path, keys)
        result["as_inserted"] = measure(path, len(keys))
        note(f"  as inserted: {result['as_inserted']['bytes_per_record']} bytes/record")

        db = SQLiteFileDB(path)
        start = time.perf_counter()
        db.compact()
        result["compact_seconds"] = round(time.perf_counter() - start, 2)
        db.close()
        result["after_compact"] = measure(path, len(keys))
        note(f"  after compact: {result['after_compact']['bytes_per_record']} bytes/record")

        more = [rng.randbytes(32) for _ in range(round(len(keys) * ARGS.regrow))]
        load_sql(path, more, rng)
        total = len(keys) + len(more)
        result["after_compact_then_regrow"] = measure(path, total)
        result["after_compact_then_regrow"]["records"] = total
        note(
            f"  compact, then +{ARGS.regrow:.0%} records:"
            f" {result['after_compact_then_regrow']['bytes_per_record']} bytes/record"
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    emit(result)


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="a few seconds: check the script works")
    p.add_argument("--records", type=int, default=1_000_000)
    p.add_argument("--via", choices=["api", "sql"], default="api", help="how records go in")
    p.add_argument(
        "--regrow", type=float, default=0.1, help="share of records inserted after compact"
    )
    p.add_argument("--dir", default=None, help="where the database goes (default: TMPDIR)")
    args = p.parse_args()
    if args.quick:
        args.records = min(args.records, 20_000)
    return args


if __name__ == "__main__":
    ARGS = _args()
    main()
