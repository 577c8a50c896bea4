"""SMTP delivery with ``pochta serve --workers 1`` and ``--workers 2`` (issue 17), same run.

The client of benchmarks/smtp_delivery.py (one smtplib process per connection, connections
kept open, one letter per transaction, the SpamAssassin corpus CRLF-normalized) against a real
``pochta serve`` on the embedded backends (SQLite, sync=full; embedded locks), verdicts on
(the default) and off, 4 and 8 connections. With ``--workers N`` the analysis processes are
split between the servers (``antispam.pool_processes`` = cores / N each), so the machine runs the
same number of analysis processes either way. Letters/s counts 250 answers;
``server_cpu_ms_per_letter`` is every process of the server tree (parent, workers, analysis
processes) over the letters.

What a second server process can gain on embedded SQLite: the databases stay single-writer
files (every commit of either process takes the same file lock, one fsync each, batched
within a process by group commit but not across the two), so the writes do not scale; what
runs in parallel is everything else in the server's own process — SMTP parsing of the
session, the verdict's decision and counting, splitting, hashing and writing the blobs,
building the index rows — which with one process shares one core under the GIL.

    python benchmarks/smtp_workers.py           # 1,500 letters per run
    python benchmarks/smtp_workers.py --quick   # 300 letters, 4 connections
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

from _common import emit, machine, note
from anchors import tree_cpu_seconds
from pochta_factory import corpus
from smtp_delivery import free_port, start_clients, wire


def add_user(data: Path) -> None:
    """A fresh data directory with one mailbox (quietly: stdout is the JSON)."""
    pochta = [sys.executable, "-m", "pochta"]
    subprocess.run([*pochta, "init", "--data", str(data)], check=True, capture_output=True)
    subprocess.run(
        [*pochta, "user", "add", "bench@example.org", "--password-stdin", "--data", str(data)],
        input=b"benchmark password\n",
        check=True,
        capture_output=True,
    )


def serve(
    data: Path, log: Path, verdicts: bool, workers: int
) -> tuple[subprocess.Popen[bytes], int]:
    http, smtp = free_port(), free_port()
    env = {
        **os.environ,
        "POCHTA_ANTISPAM__ENABLED": "true" if verdicts else "false",
        "POCHTA_SMTP__PORT": str(smtp),
        "POCHTA_SMTP__LMTP_PORT": "0",
        "POCHTA_LOG_LEVEL": "warning",
        "POCHTA_SERVICE_TOKEN": "benchmark-service-token-0123456789",
    }
    args = [sys.executable, "-m", "pochta", "serve", "--port", str(http), "--data", str(data)]
    with log.open("ab") as sink:
        proc = subprocess.Popen(
            [*args, "--workers", str(workers)], stdout=sink, stderr=subprocess.STDOUT, env=env
        )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:  # every worker up: each answers on its own socket, so try a few connections
            for _ in range(4 * workers):
                with socket.create_connection(("127.0.0.1", smtp), timeout=0.5) as s:
                    s.settimeout(30)
                    assert s.recv(64).startswith(b"220")
            return proc, smtp
        except (OSError, AssertionError):
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError(log.read_text())


def run(
    letters: list[bytes], connections: int, workdir: Path, verdicts: bool, workers: int
) -> dict[str, Any]:
    name = f"w{workers}-c{connections}-{'verdicts' if verdicts else 'plain'}"
    data = workdir / name
    add_user(data)
    proc, port = serve(data, workdir / f"{name}.log", verdicts, workers)
    try:
        start, out, procs = start_clients(port, letters, connections)
        cpu0 = tree_cpu_seconds(proc.pid)
        t0 = time.perf_counter()
        start.set()
        sent = sum(out.get() for _ in procs)
        elapsed = time.perf_counter() - t0
        cpu = tree_cpu_seconds(proc.pid) - cpu0
        for p in procs:
            p.join()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
        shutil.rmtree(data, ignore_errors=True)
    return {
        "workers": workers,
        "verdicts": verdicts,
        "connections": connections,
        "letters": sent,
        "seconds": round(elapsed, 2),
        "letters_per_s": round(sent / elapsed, 1),
        "mb_per_s": round(sum(len(m) for m in letters) / elapsed / 1e6, 2),
        "server_cpu_ms_per_letter": round(1000 * cpu / sent, 2) if sent else None,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--letters", type=int, default=1500)
    p.add_argument("--dir", default=None)
    args = p.parse_args()
    raws = [m.raw for m in corpus.unsealed()][: 300 if args.quick else args.letters]
    on_wire = [wire(r) for r in raws]
    workdir = Path(tempfile.mkdtemp(prefix="pochta-bench-workers-", dir=args.dir))
    try:
        result: dict[str, Any] = {
            "benchmark": "smtp_workers",
            "machine": machine(workdir),
            "letters": len(raws),
            "bytes": sum(len(r) for r in raws),
            "runs": [],
        }
        for connections in [4] if args.quick else [4, 8]:
            for verdicts in (True, False):
                for workers in (1, 2):
                    note(f"{connections} connections, verdicts {verdicts}, --workers {workers}")
                    result["runs"].append(run(on_wire, connections, workdir, verdicts, workers))
        rate = {
            (r["connections"], r["verdicts"], r["workers"]): r["letters_per_s"]
            for r in result["runs"]
        }
        result["ratio_2_to_1_workers"] = {
            f"{c} connections, verdicts {v}": round(rate[(c, v, 2)] / rate[(c, v, 1)], 2)
            for (c, v, w) in rate
            if w == 1
        }
        emit(result)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
