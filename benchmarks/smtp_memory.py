"""Peak memory of ``pochta serve`` while 8 clients each send one 50 MB letter at once (issue 21).

A real ``python -m pochta serve`` (embedded defaults, a fresh data directory, one mailbox) runs
on free loopback ports. ``--clients`` client processes connect together and each sends one
letter of ``--size`` bytes with smtplib: a short text part and one base64 attachment of random
bytes (different per client, so nothing is deduplicated), the shape a big letter has in real
mail. The figure is the server process's peak resident set (``VmHWM`` in /proc/<pid>/status,
read once every letter has its answer); the worker processes that parse and split letters are
reported beside it (their own VmHWM, read while they live), not added to it.

    python benchmarks/smtp_memory.py                    # 8 x 50 MB (the goal: <= 600 MB)
    python benchmarks/smtp_memory.py --clients 2 --size 10000000
"""

from __future__ import annotations

import argparse
import base64
import multiprocessing as mp
import os
import random
import shutil
import signal
import smtplib
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from _common import emit, machine, note

GOAL_MB = 600.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def big_letter(seed: int, size: int) -> bytes:
    """A letter of exactly ``size`` bytes (CRLF), most of it one base64 attachment."""
    head = (
        b"From: Sender <sender@example.net>\r\nTo: bench@example.org\r\n"
        b"Subject: big letter %d\r\nMessage-ID: <%d@example.net>\r\nMIME-Version: 1.0\r\n"
        b'Content-Type: multipart/mixed; boundary="b"\r\n\r\n'
        b"--b\r\nContent-Type: text/plain\r\n\r\nThe file is attached.\r\n"
        b"--b\r\nContent-Type: application/octet-stream\r\n"
        b'Content-Disposition: attachment; filename="data.bin"\r\n'
        b"Content-Transfer-Encoding: base64\r\n\r\n" % (seed, seed)
    )
    tail = b"--b--\r\n"
    room = size - len(head) - len(tail)
    lines = room // 78  # 76 base64 characters + CRLF
    data = random.Random(seed).randbytes(lines * 57)
    encoded = base64.encodebytes(data).replace(b"\n", b"\r\n")
    filler = room - len(encoded)
    body = head + encoded + tail
    # pad with a header so that the letter has exactly the size asked for
    pad = b"X-Pad: " + b"p" * max(0, filler - 9) + b"\r\n" if filler >= 9 else b""
    return pad + body


def send(port: int, seed: int, size: int, start: Any, results: Any) -> None:
    raw = big_letter(seed, size)
    start.wait()
    began = time.monotonic()
    try:
        with smtplib.SMTP("127.0.0.1", port, timeout=600) as smtp:
            smtp.sendmail("sender@example.net", ["bench@example.org"], raw)
        results.put((seed, "250", time.monotonic() - began))
    except smtplib.SMTPException as exc:
        results.put((seed, f"{type(exc).__name__}: {exc}", time.monotonic() - began))


def status_kb(pid: int, field: str) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if ppid == pid:
            found.append(int(entry.name))
    return found


def descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        kids = children(todo.pop())
        out += kids
        todo += kids
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--size", type=int, default=50_000_000, help="bytes per letter")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="pochta-mem-"))
    data = tmp / "data"
    subprocess.run(
        [sys.executable, "-m", "pochta", "init", "--data", str(data)],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        [
            *(sys.executable, "-m", "pochta", "user", "add", "bench@example.org"),
            *("--password-stdin", "--data", str(data)),
        ],
        input=b"benchmark password\n",
        check=True,
        capture_output=True,
    )
    http, smtp, lmtp = free_port(), free_port(), free_port()
    env = {
        **os.environ,
        "POCHTA_SMTP__PORT": str(smtp),
        "POCHTA_SMTP__LMTP_PORT": str(lmtp),
        "POCHTA_IMAP__ENABLED": "false",
        "POCHTA_SMTP__HOSTNAME": "mx.bench.test",
        "POCHTA_LOG_LEVEL": "warning",
        "POCHTA_VALKYRIE__ENABLED": "false",
    }
    log = (tmp / "serve.log").open("wb")
    server = subprocess.Popen(
        [sys.executable, "-m", "pochta", "serve", "--port", str(http), "--data", str(data)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
    )
    result: dict[str, Any] = {"benchmark": "smtp_memory", "machine": machine(tmp)}
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with socket.create_connection(("127.0.0.1", smtp), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise SystemExit(f"pochta serve did not start: {tmp / 'serve.log'}") from None
                time.sleep(0.2)
        time.sleep(2)  # the worker processes start and load the model
        idle_kb = status_kb(server.pid, "VmRSS") or 0
        note(f"server idle RSS {idle_kb / 1024:.0f} MB; sending {args.clients} letters")
        worker_peak: dict[int, int] = {}
        stop = threading.Event()

        def watch_workers() -> None:
            while not stop.is_set():
                for pid in descendants(server.pid):
                    hwm = status_kb(pid, "VmHWM")
                    if hwm is not None:
                        worker_peak[pid] = max(worker_peak.get(pid, 0), hwm)
                stop.wait(0.2)

        watcher = threading.Thread(target=watch_workers, daemon=True)
        watcher.start()
        ctx = mp.get_context("fork")
        start, results = ctx.Event(), ctx.Queue()
        procs = [
            ctx.Process(target=send, args=(smtp, seed, args.size, start, results))
            for seed in range(args.clients)
        ]
        for p in procs:
            p.start()
        time.sleep(1)
        began = time.monotonic()
        start.set()
        answers = [results.get(timeout=1800) for _ in procs]
        elapsed = time.monotonic() - began
        for p in procs:
            p.join()
        stop.set()
        watcher.join()
        peak_kb = status_kb(server.pid, "VmHWM") or 0
        result.update(
            {
                "clients": args.clients,
                "letter_bytes": args.size,
                "answers": sorted({a[1] for a in answers}),
                "accepted": sum(a[1] == "250" for a in answers),
                "seconds": round(elapsed, 1),
                "server_idle_rss_mb": round(idle_kb / 1024, 1),
                "server_peak_rss_mb": round(peak_kb / 1024, 1),
                "worker_peak_rss_mb": sorted(round(v / 1024, 1) for v in worker_peak.values()),
                "goal_server_peak_rss_mb": GOAL_MB,
                "met": peak_kb / 1024 <= GOAL_MB,
            }
        )
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)
    emit(result)


if __name__ == "__main__":
    main()
