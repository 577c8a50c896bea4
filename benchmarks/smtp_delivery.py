"""SMTP delivery rate for the SpamAssassin corpus, and import rate (issue 3, figure 1).

A real ``python -m pochta serve`` (embedded defaults, sync=full: every 250 is durable) runs on
free loopback ports with a fresh data directory and one mailbox. A separate client process
per connection sends corpus letters with smtplib (each letter CRLF-normalized as it goes on the
wire), one letter per transaction, connections kept open. Letters/s counts 250 answers.

Import: ``pochta import`` of the same letters (a directory of files) in one process.

    python benchmarks/smtp_delivery.py            # the whole corpus, 1/4/8 connections
    python benchmarks/smtp_delivery.py --quick    # 300 letters
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import re
import shutil
import signal
import smtplib
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import emit, machine, note
from pochta import corpus

GOAL = 200.0  # letters/s on this 2-core machine


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wire(raw: bytes) -> bytes:
    out = re.sub(rb"\r\n|\r|\n", b"\r\n", raw)
    return out if out.endswith(b"\r\n") else out + b"\r\n"


def add_user(data: Path) -> None:
    subprocess.run(
        [
            *(sys.executable, "-m", "pochta", "user", "add", "bench@example.org"),
            *("--password-stdin", "--data", str(data)),
        ],
        input=b"benchmark password\n",
        check=True,
        capture_output=True,
    )


def serve(data: Path, log: Path) -> tuple[subprocess.Popen[bytes], int]:
    http, smtp = free_port(), free_port()
    env = {
        **os.environ,
        "POCHTA_SMTP__PORT": str(smtp),
        "POCHTA_SMTP__LMTP_PORT": "0",
        "POCHTA_LOG_LEVEL": "warning",
        "POCHTA_SERVICE_TOKEN": "benchmark-service-token-0123456789",
    }
    with log.open("ab") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "pochta", "serve", "--port", str(http), "--data", str(data)],
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=env,
        )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", smtp), timeout=0.5).close()
            return proc, smtp
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError(log.read_text())


def client(port: int, letters: list[bytes], start: Any, out: Any) -> None:
    start.wait()
    ok = 0
    with smtplib.SMTP("127.0.0.1", port, timeout=120) as smtp:
        for raw in letters:
            smtp.sendmail("feeder@example.net", ["bench@example.org"], raw)
            ok += 1
    out.put(ok)


def smtp_run(letters: list[bytes], connections: int, workdir: Path) -> dict[str, Any]:
    data = workdir / f"smtp-{connections}"
    add_user(data)
    proc, port = serve(data, workdir / f"serve-{connections}.log")
    try:
        ctx = mp.get_context("spawn")
        start, out = ctx.Event(), ctx.Queue()
        procs = [
            ctx.Process(target=client, args=(port, letters[i::connections], start, out))
            for i in range(connections)
        ]
        for p in procs:
            p.start()
        time.sleep(1.0)  # clients connected and waiting
        t0 = time.perf_counter()
        start.set()
        sent = sum(out.get() for _ in procs)
        elapsed = time.perf_counter() - t0
        for p in procs:
            p.join()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    nbytes = sum(len(m) for m in letters)
    return {
        "connections": connections,
        "letters": sent,
        "seconds": round(elapsed, 2),
        "letters_per_s": round(sent / elapsed, 1),
        "mb_per_s": round(nbytes / elapsed / 1e6, 2),
    }


def import_run(raws: list[bytes], workdir: Path) -> dict[str, Any]:
    src = workdir / "import-src"
    src.mkdir()
    for i, raw in enumerate(raws):
        (src / f"{i:05d}.eml").write_bytes(raw)
    data = workdir / "import-data"
    add_user(data)
    t0 = time.perf_counter()
    done = subprocess.run(
        [
            *(sys.executable, "-m", "pochta", "import", "--user", "bench@example.org"),
            *("--json", "--data", str(data), str(src)),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    elapsed = time.perf_counter() - t0
    report = json.loads(done.stdout)
    return {
        "letters": report["letters"],
        "seconds_including_start": round(elapsed, 2),
        "letters_per_s": round(report["letters"] / elapsed, 1),
        "savings_percent": report["savings_percent"],
    }


def main() -> None:
    args = _args()
    raws = [m.raw for m in corpus.letters()]
    if args.quick:
        raws = raws[:300]
    on_wire = [wire(r) for r in raws]
    workdir = Path(tempfile.mkdtemp(prefix="pochta-bench-smtp-", dir=args.dir))
    try:
        result: dict[str, Any] = {
            "benchmark": "smtp_delivery",
            "machine": machine(workdir),
            "corpus_letters": len(raws),
            "corpus_bytes": sum(len(r) for r in raws),
            "goal_letters_per_s": GOAL,
            "smtp": [],
        }
        for connections in [4] if args.quick else [1, 4, 8]:
            note(f"smtp: {connections} connection(s)")
            result["smtp"].append(smtp_run(on_wire, connections, workdir))
        note("import")
        result["import"] = import_run(raws, workdir)
        best = max(r["letters_per_s"] for r in result["smtp"])
        result["best_smtp_letters_per_s"] = best
        result["goal_met"] = best >= GOAL
        emit(result)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="300 letters: check the script works")
    p.add_argument("--dir", default=None, help="where the data directories go (default: /tmp)")
    return p.parse_args()


if __name__ == "__main__":
    main()
