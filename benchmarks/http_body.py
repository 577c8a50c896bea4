"""Peak memory of ``pochta serve`` while one client sends a huge body to the login (issue 21).

A real ``python -m pochta serve`` (embedded defaults, a fresh data directory) runs on free
loopback ports. One client, unauthenticated, sends ``POST /v1/session`` with a JSON body of
``--size`` bytes in chunks (no Content-Length: the server cannot refuse it from the headers),
as fast as the server takes it, and stops at the first answer; then a second request declares
a 1.5 GB Content-Length and sends nothing. Reported: each answer's status and time, the bytes
the server took before answering, and the server process's resident set before and at its
peak (``VmHWM``). Before issue 21 the body was read whole and then refused with 422.

    python benchmarks/http_body.py                   # 512 MB chunked
    python benchmarks/http_body.py --size 100000000
"""

from __future__ import annotations

import argparse
import contextlib
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
from smtp_memory import free_port, status_kb

CHUNK = 1 << 20


def answer(sock: socket.socket) -> int | None:
    """The status of the reply waiting on ``sock``, if any has come (non-blocking)."""
    sock.setblocking(False)
    try:
        head = sock.recv(4096)
    except (BlockingIOError, InterruptedError):
        return None
    except OSError:
        return -1  # reset: the server closed the connection
    finally:
        sock.setblocking(True)
    if not head:
        return -1
    return int(head.split(b" ", 2)[1])


def chunked(port: int, size: int) -> dict[str, Any]:
    piece = b'{"email": "a@example.org", "password": "' + b"x" * (CHUNK - 64)
    sent, status = 0, None
    began = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.sendall(
            b"POST /v1/session HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        while sent < size:
            status = answer(sock)
            if status is not None:
                break
            try:
                sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
            except OSError:
                break
            sent += len(piece)
        if status is None:
            with contextlib.suppress(OSError):
                sock.sendall(b"0\r\n\r\n")
            sock.settimeout(120)
            try:
                head = sock.recv(4096)
                status = int(head.split(b" ", 2)[1]) if head else -1
            except OSError:
                status = -1
    return {"status": status, "bytes_sent_before_answer": sent,
            "seconds": round(time.monotonic() - began, 3)}  # fmt: skip


def declared(port: int, length: int) -> dict[str, Any]:
    began = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.sendall(
            b"POST /v1/session HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % length
        )
        head = sock.recv(4096)
    return {"content_length": length, "status": int(head.split(b" ", 2)[1]) if head else None,
            "seconds": round(time.monotonic() - began, 4)}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=512 << 20, help="bytes of the chunked body")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="pochta-body-"))
    data = tmp / "data"
    subprocess.run([sys.executable, "-m", "pochta", "init", "--data", str(data)],
                   check=True, capture_output=True)  # fmt: skip
    http, smtp, lmtp = free_port(), free_port(), free_port()
    env = {
        **os.environ,
        "POCHTA_SMTP__PORT": str(smtp),
        "POCHTA_SMTP__LMTP_PORT": str(lmtp),
        "POCHTA_IMAP__ENABLED": "false",
        "POCHTA_LOG_LEVEL": "warning",
        "POCHTA_VALKYRIE__ENABLED": "false",
    }
    log = (tmp / "serve.log").open("wb")
    server = subprocess.Popen(
        [sys.executable, "-m", "pochta", "serve", "--port", str(http), "--data", str(data)],
        stdout=log, stderr=subprocess.STDOUT, env=env,
    )  # fmt: skip
    result: dict[str, Any] = {"benchmark": "http_body", "machine": machine(tmp)}
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with socket.create_connection(("127.0.0.1", http), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise SystemExit(f"pochta serve did not start: {tmp / 'serve.log'}") from None
                time.sleep(0.2)
        time.sleep(2)
        idle_kb = status_kb(server.pid, "VmRSS") or 0
        note(f"server idle RSS {idle_kb / 1024:.0f} MB; sending {args.size} bytes chunked")
        result["chunked"] = chunked(http, args.size)
        result["declared"] = declared(http, 1_500_000_000)
        peak_kb = status_kb(server.pid, "VmHWM") or 0
        result.update(
            {
                "body_bytes": args.size,
                "server_idle_rss_mb": round(idle_kb / 1024, 1),
                "server_peak_rss_mb": round(peak_kb / 1024, 1),
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
