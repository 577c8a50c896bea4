"""SMTP delivery through 1 and 2 loaders on PostgreSQL + WebDAV nodes, next to the embedded
store, same run (issue 17).

Three set-ups, each with verdicts on and off, the client of benchmarks/smtp_delivery.py (one
smtplib process per connection, connections kept open, one letter per transaction, the
SpamAssassin corpus CRLF-normalized), the connections spread evenly over the loaders:

- ``embedded``: one ``pochta serve`` on its defaults (SQLite sync=full, local disks).
- ``pg-webdav-1``: one ``pochta serve`` with the mailbox index, FileDB, PairDB and Valkyrie's
  state in PostgreSQL (durable: fsync on, ``synchronous_commit = on``), one pair of disks on
  two nginx WebDAV nodes, locks and shingle counters in Redis. Each node's disk carries the
  free-space report that ``pochta valkyrie run --disk`` writes on a storage host (written once
  here; Valkyrie's scrubbing is the storage hosts' work and is left out of this figure).
- ``pg-webdav-2``: two such loaders (each its own data directory, the same PostgreSQL,
  Redis and nodes), as two machines would run them.

Everything runs on this one machine (loopback), so the loaders, PostgreSQL, Redis, both nginx
and the clients share its cores; ``cpu_ms_per_letter`` splits the CPU over the loaders' process
trees and the shared servers' (PostgreSQL, Redis, nginx). Letters/s counts 250 answers.

    python benchmarks/smtp_loaders.py              # 1,500 letters, 4 connections
    python benchmarks/smtp_loaders.py --quick      # 300 letters
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.pgserver, tests.nginx

from tests.nginx import NginxNode
from tests.pgserver import PostgresServer
from tests.servers import RedisServer

from _common import emit, machine, note
from anchors import tree_cpu_seconds
from pochta.blobs.nodes.report import write_report
from pochta_factory import corpus
from smtp_delivery import free_port, start_clients, wire

POCHTA = [sys.executable, "-m", "pochta"]
TOKEN = "benchmark-service-token-0123456789"


def shared_config(path: Path, dsn: str, redis_port: int) -> Path:
    path.write_text(
        f"""\
[postgres]
dsn = "{dsn}"
migrate_on_start = true
[mailbox]
backend = "postgres"
[blobs]
backend = "postgres"
default_pair = false
[valkyrie]
backend = "postgres"
enabled = false
[guard]
backend = "redis"
key_secret = "benchmark-guard-secret-0123456789abcdef"
[shingles]
backend = "redis"
[redis]
nodes = ["127.0.0.1:{redis_port}"]
"""
    )
    return path


def cli(*args: str, config: Path | None = None, stdin: bytes | None = None) -> None:
    extra = ["--config", str(config)] if config else []
    subprocess.run([*POCHTA, *args, *extra], input=stdin, check=True, capture_output=True)


def serve(
    data: Path, log: Path, verdicts: bool, config: Path | None, workers: int
) -> tuple[subprocess.Popen[bytes], int]:
    http, smtp = free_port(), free_port()
    env = {
        **os.environ,
        "POCHTA_ANTISPAM__ENABLED": "true" if verdicts else "false",
        "POCHTA_ANTISPAM__POOL_PROCESSES": str(workers),
        "POCHTA_SMTP__PORT": str(smtp),
        "POCHTA_SMTP__LMTP_PORT": "0",
        "POCHTA_IMAP__ENABLED": "false",
        "POCHTA_LOG_LEVEL": "warning",
        "POCHTA_SERVICE_TOKEN": TOKEN,
    }
    args = [*POCHTA, "serve", "--port", str(http), "--data", str(data)]
    if config is not None:
        args += ["--config", str(config)]
    with log.open("ab") as sink:
        proc = subprocess.Popen(args, stdout=sink, stderr=subprocess.STDOUT, env=env)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", smtp), timeout=0.5) as s:
                s.settimeout(30)
                if s.recv(64).startswith(b"220"):
                    return proc, smtp
        except OSError:
            pass
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    proc.kill()
    raise RuntimeError(log.read_text()[-3000:])


class Shared:
    """PostgreSQL, Redis and two nginx nodes, started once; a fresh database, Redis db and
    pair of disks for each run."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.pg = PostgresServer.start(workdir, durable=True)
        self.redis = RedisServer.start(workdir / "redis")
        self.nodes = [NginxNode.start(workdir / f"node-{n}") for n in "ab"]
        self.runs = 0

    def fresh(self, name: str) -> Path:
        """A config for one run: its own database, an empty Redis, a new pair registered."""
        self.runs += 1
        db = self.pg.create_database(f"run{self.runs}")
        subprocess.run(
            ["redis-cli", "-p", str(self.redis.port), "flushall"], check=True, capture_output=True
        )
        config = shared_config(self.workdir / f"{name}.toml", self.pg.dsn(db), self.redis.port)
        first = self.workdir / f"{name}-setup"
        cli("init", "--data", str(first), config=config)
        disks = [str(node.disk(f"{name}")) for node in self.nodes]
        for node in self.nodes:  # what `pochta valkyrie run --disk` on a storage host writes
            write_report(node.served / name)
        cli("pairs", "add", *disks, "--data", str(first), config=config)
        add_user(first, config)
        return config

    def pids(self) -> list[int]:
        procs = [self.pg.proc, self.redis.proc, *(n.proc for n in self.nodes)]
        return [p.pid for p in procs if p is not None]

    def close(self) -> None:
        for node in self.nodes:
            node.stop()
        self.redis.stop()
        self.pg.remove()


def add_user(data: Path, config: Path | None) -> None:
    cli("init", "--data", str(data), config=config)
    cli(
        "user", "add", "bench@example.org", "--password-stdin", "--data", str(data),
        config=config, stdin=b"benchmark password\n",
    )  # fmt: skip


def run(
    setup: str, letters: list[bytes], connections: int, verdicts: bool, shared: Shared
) -> dict[str, Any]:
    name = f"{setup}-{'verdicts' if verdicts else 'plain'}"
    loaders = 2 if setup == "pg-webdav-2" else 1
    config = None if setup == "embedded" else shared.fresh(name)
    datas = [shared.workdir / f"{name}-loader{i}" for i in range(loaders)]
    if config is None:
        add_user(datas[0], None)
    else:
        for data in datas:
            cli("init", "--data", str(data), config=config)
    workers = max(1, (os.cpu_count() or 2) // loaders)
    servers = [
        serve(data, shared.workdir / f"{data.name}.log", verdicts, config, workers)
        for data in datas
    ]
    try:
        groups = [
            start_clients(port, letters[i::loaders], connections // loaders)
            for i, (_, port) in enumerate(servers)
        ]
        trees = [proc.pid for proc, _ in servers]
        cpu0 = sum(tree_cpu_seconds(p) for p in trees)
        shared0 = sum(tree_cpu_seconds(p) for p in shared.pids()) if config else 0.0
        t0 = time.perf_counter()
        for start, _, _ in groups:
            start.set()
        sent = sum(out.get() for _, out, procs in groups for _ in procs)
        elapsed = time.perf_counter() - t0
        cpu = sum(tree_cpu_seconds(p) for p in trees) - cpu0
        shared_cpu = (sum(tree_cpu_seconds(p) for p in shared.pids()) - shared0) if config else 0
        for _, _, procs in groups:
            for p in procs:
                p.join()
    finally:
        for proc, _ in servers:
            proc.send_signal(signal.SIGTERM)
        for proc, _ in servers:
            proc.wait(timeout=120)
    return {
        "setup": setup,
        "loaders": loaders,
        "verdicts": verdicts,
        "connections": connections,
        "letters": sent,
        "seconds": round(elapsed, 2),
        "letters_per_s": round(sent / elapsed, 1),
        "loaders_cpu_ms_per_letter": round(1000 * cpu / sent, 2) if sent else None,
        "shared_servers_cpu_ms_per_letter": round(1000 * shared_cpu / sent, 2) if sent else None,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--letters", type=int, default=1500)
    p.add_argument("--connections", type=int, default=4)
    p.add_argument("--dir", default=None)
    p.add_argument("--keep", action="store_true", help="keep the servers' files and logs")
    p.add_argument("--setups", default="embedded,pg-webdav-1,pg-webdav-2")
    args = p.parse_args()
    raws = [m.raw for m in corpus.unsealed()][: 300 if args.quick else args.letters]
    on_wire = [wire(r) for r in raws]
    workdir = Path(tempfile.mkdtemp(prefix="pochta-bench-loaders-", dir=args.dir))
    workdir.chmod(0o755)
    shared = Shared(workdir)
    try:
        result: dict[str, Any] = {
            "benchmark": "smtp_loaders",
            "machine": machine(workdir),
            "letters": len(raws),
            "bytes": sum(len(r) for r in raws),
            "runs": [],
        }
        for verdicts in (True, False):
            for setup in args.setups.split(","):
                note(f"{setup}, verdicts {verdicts}")
                result["runs"].append(run(setup, on_wire, args.connections, verdicts, shared))
        rate = {(r["setup"], r["verdicts"]): r["letters_per_s"] for r in result["runs"]}
        result["ratios"] = (
            {}
            if len(rate) < 6
            else {
                f"verdicts {v}": {
                    "pg-webdav-1 / embedded": round(
                        rate[("pg-webdav-1", v)] / rate[("embedded", v)], 2
                    ),
                    "pg-webdav-2 / pg-webdav-1": round(
                        rate[("pg-webdav-2", v)] / rate[("pg-webdav-1", v)], 2
                    ),
                }
                for v in (True, False)
            }
        )
        result["machine_after"] = machine(workdir)
        emit(result)
    finally:
        shared.close()
        if args.keep:
            note(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
