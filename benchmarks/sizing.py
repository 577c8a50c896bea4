"""Bytes per record on PostgreSQL, for sizing an installation (issue 30, item 5; docs/sizing.md).

1. FileDB: ``--records`` live records with random SHA-256 keys in random order (as content
   addresses arrive) in ``pochta.filedb_live`` (the shipped schema: fillfactor 90, the
   primary key and the by-pair index), counter 1, a random magic, pair 1; sizes after VACUUM
   from ``pg_relation_size`` per relation.
2. The mailbox index: ``--letters`` letters delivered through pochta's own delivery path
   (``Mailbox.deliver``) into one account, each with one attachment of its own, on PostgreSQL
   and on SQLite (the embedded index); bytes of the letters and refs tables with their
   indexes per letter, and the skeletons (the letter minus its attachments) apart, since
   they grow with the letters' own text.

    python benchmarks/sizing.py            # 1,000,000 FileDB records, 2,000 letters
    python benchmarks/sizing.py --quick    # a few seconds, checks the script works
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.pgserver, tests.mailtools

from tests.mailtools import letter, payload
from tests.pgserver import PostgresServer, migrated_template

from _common import emit, machine, note
from pochta.app import build
from pochta.config import load_settings

STORES = {
    "mailbox": {"backend": "postgres"},
    "blobs": {"backend": "postgres"},
    "valkyrie": {"backend": "postgres", "enabled": False},
    "antispam": {"pool_processes": 0},
}


def filedb_bytes(server: PostgresServer, records: int) -> dict[str, Any]:
    with server.connect("pochta") as conn:
        conn.execute(
            "INSERT INTO pochta.filedb_live (key, counter, magic, flags, pair)"
            " SELECT sha256(int8send(g)), 1, (random() * 4294967295)::bigint, 0, 1"
            " FROM generate_series(1, %s) g",
            (records,),
        )
        conn.execute("VACUUM ANALYZE pochta.filedb_live")
        sizes = {}
        for rel in ("filedb_live", "filedb_live_pkey", "filedb_live_by_pair"):
            row = conn.execute("SELECT pg_relation_size(%s)", (f"pochta.{rel}",)).fetchone()
            assert row is not None
            sizes[rel] = int(row[0])
    total = sum(sizes.values())
    return {
        "records": records,
        "bytes": sizes,
        "bytes_per_record": round(total / records, 1),
        "heap_per_record": round(sizes["filedb_live"] / records, 1),
        "records_per_gb": round(1e9 / (total / records)),
    }


def deliver(data: Path, letters: int, **settings: Any) -> None:
    pochta = build(load_settings(data_dir=data, **settings))
    try:
        user = pochta.mailbox.add_user("ann@example.org", "a long enough password")
        for n in range(letters):
            raw = letter(subject=f"letter {n}", attachments=[(f"{n}.bin", payload(n, 4_000))])
            pochta.mailbox.deliver(raw, [user])
    finally:
        pochta.close()


def index_postgres(server: PostgresServer, data: Path, letters: int) -> dict[str, Any]:
    deliver(data, letters, postgres={"dsn": server.dsn("pochta")}, **STORES)
    with server.connect("pochta") as conn:
        conn.execute("VACUUM ANALYZE")
        sizes = {}
        for rel in ("letters", "refs", "skeletons"):
            row = conn.execute("SELECT pg_total_relation_size(%s)", (f"pochta.{rel}",)).fetchone()
            assert row is not None
            sizes[rel] = int(row[0])
    index = sizes["letters"] + sizes["refs"]
    return {
        "letters": letters,
        "bytes": sizes,
        "index_bytes_per_letter": round(index / letters, 1),
        "skeleton_bytes_per_letter": round(sizes["skeletons"] / letters, 1),
    }


def index_sqlite(data: Path, letters: int) -> dict[str, Any]:
    deliver(data, letters, antispam={"pool_processes": 0})
    path = data / "mailbox.sqlite3"
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        rows = conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name").fetchall()
    sizes = {str(name): int(size) for name, size in rows}
    skeleton = sum(v for k, v in sizes.items() if "skeleton" in k)
    index = sum(v for k, v in sizes.items() if k.startswith(("letters", "refs", "sqlite_auto")))
    return {
        "letters": letters,
        "file_bytes": path.stat().st_size,
        "tables": sizes,
        "index_bytes_per_letter": round(index / letters, 1),
        "skeleton_bytes_per_letter": round(skeleton / letters, 1),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="a few seconds: check the script works")
    p.add_argument("--records", type=int, default=1_000_000)
    p.add_argument("--letters", type=int, default=2_000)
    args = p.parse_args()
    records, letters = (20_000, 100) if args.quick else (args.records, args.letters)
    tmp = Path(tempfile.mkdtemp(prefix="pochta-sizing-"))
    result: dict[str, Any] = {"benchmark": "sizing", "machine": machine(tmp)}
    with PostgresServer.start(durable=True) as server:
        migrated_template(server, "pochta")
        note(f"FileDB: {records:,} records")
        result["filedb_postgres"] = filedb_bytes(server, records)
        note(f"mailbox index: {letters:,} letters on PostgreSQL")
        result["index_postgres"] = index_postgres(server, tmp / "pg", letters)
    note(f"mailbox index: {letters:,} letters on SQLite")
    result["index_sqlite"] = index_sqlite(tmp / "sqlite", letters)
    emit(result)


if __name__ == "__main__":
    main()
