"""PostgreSQL failover under Patroni (issue 30): how long writes stop when the primary's
machine is lost, and whether any acknowledged write is lost. README's "Several machines"
database layout as tests/patroni.py builds it (two PostgreSQL servers under Patroni,
``synchronous_mode``, three etcd members; namespace hosts on this machine; needs root,
patroni and etcd-server).

A writer on the admin host inserts numbered rows one at a time through pochta's own pool
(``pochta.postgres.Postgres``, the loaders' multi-host DSN with
``target_session_attrs=read-write``), ``synchronous_commit = on``. Each round loses the
primary's machine (its Patroni, PostgreSQL and etcd member SIGKILLed), waits for the standby's
promotion, brings the lost machine back as the new standby and checks that every row the
writer saw committed is on the new primary. Per round: Patroni's promotion time (from the
kill to ``/cluster`` naming a new leader) and the writer's gap (the longest time between two
acknowledged writes around the fault), which is what a loader sees.

Anchor: Patroni's own bound, ``ttl`` + ``loop_wait`` (the leader key expires, then the
standby's next loop promotes it); the writer's gap minus the promotion time is pochta's
reconnection.

    python benchmarks/failover.py             # 5 rounds
    python benchmarks/failover.py --quick     # 1 round
"""

from __future__ import annotations

import argparse
import itertools
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests import netns, patroni
from tests.pgserver import PASSWORD, SUPERUSER
from tests.tlsfiles import TestCA, TLSFiles

from _common import emit, machine, note
from pochta.errors import StorageError
from pochta.postgres.database import PoolSettings, Postgres

SUBNET = "10.77.0"
HOSTS = {"db": 1, "node1": 2, "db2": 4, "admin": 9}


class Writer:
    """Rows 1, 2, 3... inserted one at a time on the admin host; ``acked``: (number, when)
    of each whose commit was answered."""

    def __init__(self, dsn: str, host: netns.Host) -> None:
        self.dsn = dsn
        self.host = host
        self.acked: list[tuple[int, float]] = []
        self.errors = 0
        self.stop = threading.Event()

    def run(self) -> None:
        db = Postgres.connect(self.dsn, PoolSettings(min_size=1, max_size=2, pool_timeout=5))
        db.execute("CREATE TABLE IF NOT EXISTS bench_failover (n bigint PRIMARY KEY)")
        n = 0
        try:
            while not self.stop.is_set():
                n += 1
                try:
                    db.execute("INSERT INTO bench_failover VALUES (%s)", (n,))
                    self.acked.append((n, time.monotonic()))
                except StorageError:
                    self.errors += 1  # unanswered: maybe written, maybe not; never counted
                    time.sleep(0.05)
        finally:
            db.close()

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=lambda: self.host.call(self.run), name="writer")
        thread.start()
        return thread


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    rounds = 1 if args.quick else args.rounds
    why = netns.unavailable() or patroni.missing()
    if why is not None:
        emit({"benchmark": "failover", "skipped": why})
        return
    base = Path(tempfile.mkdtemp(prefix="pochta-bench-failover-"))
    result: dict[str, Any] = {"benchmark": "failover", "machine": machine(base)}
    with netns.network(SUBNET) as net:
        hosts = {name: net.add_host(name, octet) for name, octet in HOSTS.items()}
        ca = TestCA.create(base / "ca")
        for name, host in hosts.items():
            ca.issue(base / name / "tls", [host.address])

        def tls(name: str) -> TLSFiles:
            d = base / name / "tls"
            return TLSFiles(d / "ca.pem", d / "cert.pem", d / "key.pem")

        cluster = patroni.PatroniCluster(
            base, hosts, ("db", "db2"), ("db", "db2", "node1"), tls, hosts["admin"].call,
            tls("admin").ca, SUBNET,
        )  # fmt: skip
        note("starting etcd and Patroni")
        started = time.monotonic()
        cluster.start()
        result["setup_seconds"] = round(time.monotonic() - started, 1)
        dsn = (
            f"postgresql://{SUPERUSER}:{PASSWORD}@{SUBNET}.1:5432,{SUBNET}.4:5432/postgres"
            f"?sslmode=verify-full&sslrootcert={tls('admin').ca}"
            "&target_session_attrs=read-write&connect_timeout=5"
        )
        writer = Writer(dsn, hosts["admin"])
        thread = writer.start()
        out = []
        try:
            for i in range(rounds):
                time.sleep(3)  # writes flowing before the fault
                old = cluster.leader()
                assert old is not None
                note(f"round {i + 1}: losing {old}")
                killed = time.monotonic()
                cluster.kill(old)
                new = cluster.wait_leader(not_=old, timeout=120)
                promoted = time.monotonic()
                deadline = promoted + 120
                while not any(t > promoted for _, t in writer.acked[-5:]):
                    if time.monotonic() > deadline:
                        raise RuntimeError("no write acknowledged after the promotion")
                    time.sleep(0.05)
                cluster.restart(old)
                cluster.wait_sync(timeout=120)
                times = [killed, *(t for _, t in writer.acked if t > killed)]
                gap = max(b - a for a, b in itertools.pairwise(times))
                out.append(
                    {
                        "lost": old,
                        "promoted": new,
                        "promotion_seconds": round(promoted - killed, 2),
                        "writer_gap_seconds": round(gap, 2),
                    }
                )
        finally:
            writer.stop.set()
            thread.join()

        def rows() -> set[int]:
            import psycopg

            with psycopg.connect(dsn) as conn:
                got = conn.execute("SELECT n FROM bench_failover").fetchall()
                return {int(r[0]) for r in got}

        stored = hosts["admin"].call(rows)
        acked = {n for n, _ in writer.acked}
        cluster.stop()
    result |= {
        "ttl": patroni.TTL,
        "loop_wait": patroni.LOOP_WAIT,
        "anchor_seconds": patroni.TTL + patroni.LOOP_WAIT,
        "rounds": out,
        "writes_acknowledged": len(acked),
        "writes_unanswered": writer.errors,
        "acknowledged_lost": len(acked - stored),
    }
    emit(result)


if __name__ == "__main__":
    main()
