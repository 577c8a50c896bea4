"""3,000 concurrent SMTP connections from one stranger against `pochta serve --workers 2`
(issue 27, item 2): how many are greeted and how many refused, and a trusted client's delivery
latency before and meanwhile.

The stranger is 127.0.0.2 (only 127.0.0.1 and ::1 are trusted by default); it opens all its
connections at once (asyncio), reads each one's first line, and holds the greeted ones open
for ``--hold`` seconds. The trusted client (127.0.0.1, smtplib) delivers one letter per
connection, one after another, from before the flood until it ends. ``--src`` runs the server
from another source tree (main's, for the figure before).

    python benchmarks/connection_flood.py
    python benchmarks/connection_flood.py --src /work/main/src     # the same against main
    python benchmarks/connection_flood.py --quick
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import signal
import smtplib
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import emit, machine, note
from pochta.app import build, service_token
from pochta.config import load_settings

STRANGER = "127.0.0.2"
USER = "alice@example.org"
LETTER = b"From: s@example.net\r\nTo: alice@example.org\r\nSubject: meanwhile\r\n\r\nhello\r\n"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def start(
    data: Path, log: Path, workers: int, src: str | None
) -> tuple[subprocess.Popen[bytes], dict[str, int]]:
    ports = {name: free_port() for name in ("http", "smtp", "lmtp", "imap")}
    env = {
        **os.environ,
        "POCHTA_SMTP__PORT": str(ports["smtp"]),
        "POCHTA_SMTP__LMTP_PORT": str(ports["lmtp"]),
        "POCHTA_SMTP__HOSTNAME": "mx.pochta.test",
        "POCHTA_IMAP__PORT": str(ports["imap"]),
        "POCHTA_VALKYRIE__ENABLED": "false",
    }
    if src is not None:
        env["PYTHONPATH"] = src
    with log.open("ab") as sink:
        proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "pochta", "serve", "--workers", str(workers)),
                *("--port", str(ports["http"]), "--data", str(data)),
            ],
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=env,
        )
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{ports['http']}/healthz", timeout=1).status_code == 200:
                return proc, ports
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"pochta serve did not start:\n{log.read_text()[-3000:]}")


class Trusted(threading.Thread):
    """Delivers one letter per connection from 127.0.0.1 until stopped; (start, seconds, ok)."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.stop = threading.Event()
        self.results: list[tuple[float, float, bool]] = []

    def run(self) -> None:
        while not self.stop.is_set():
            began = time.monotonic()
            ok = True
            try:
                with smtplib.SMTP("127.0.0.1", self.port, timeout=60) as smtp:
                    smtp.sendmail("s@example.net", [USER], LETTER)
            except (OSError, smtplib.SMTPException):
                ok = False
            self.results.append((began, time.monotonic() - began, ok))


def summary(latencies: list[float]) -> dict[str, Any]:
    if not latencies:
        return {"letters": 0}
    ordered = sorted(latencies)
    return {
        "letters": len(ordered),
        "p50_ms": round(statistics.median(ordered) * 1000, 1),
        "p95_ms": round(ordered[int(0.95 * (len(ordered) - 1))] * 1000, 1),
        "max_ms": round(ordered[-1] * 1000, 1),
    }


async def flood(port: int, n: int, hold: float) -> dict[str, Any]:
    outcomes: dict[str, int] = {}
    samples: dict[str, str] = {}
    writers: list[asyncio.StreamWriter] = []
    answered_after: list[float] = []

    async def one() -> None:
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection("127.0.0.1", port, local_addr=(STRANGER, 0)), 60
            )
        except (OSError, TimeoutError) as exc:
            kind = f"connect_{type(exc).__name__}"
            outcomes[kind] = outcomes.get(kind, 0) + 1
            return
        writers.append(writer)
        try:
            line = await asyncio.wait_for(reader.readline(), 60)
            answered_after.append(time.monotonic() - started)
        except (OSError, TimeoutError) as exc:
            line = f"error {type(exc).__name__}".encode()
        kind = {b"220": "greeted", b"421": "refused_421"}.get(line[:3], "other")
        outcomes[kind] = outcomes.get(kind, 0) + 1
        samples.setdefault(kind, line.decode("utf-8", "replace").strip())

    started = time.monotonic()
    await asyncio.gather(*(one() for _ in range(n)))
    answered = time.monotonic() - started
    await asyncio.sleep(hold)
    for writer in writers:
        writer.close()
    answered_after.sort()
    return {
        "connections": n,
        "outcomes": outcomes,
        "samples": samples,
        "answered_within_s": {
            f"p{q}": round(answered_after[int(q / 100 * (len(answered_after) - 1))], 2)
            for q in (50, 90, 99, 100)
        }
        if answered_after
        else {},
        "seconds_to_answer_all": round(answered, 2),
        "held_seconds": hold,
    }


def refusals(http_port: int) -> float:
    text = httpx.get(f"http://127.0.0.1:{http_port}/metrics", timeout=10).text
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("pochta_connections_refused_total{")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--connections", type=int, default=3000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--hold", type=float, default=10.0)
    parser.add_argument("--src", help="run the server from this source tree (e.g. main's)")
    parser.add_argument("--keep-log", type=Path, help="copy the server's log here")
    parser.add_argument("--quick", action="store_true", help="300 connections, held 2 s")
    args = parser.parse_args()
    if args.quick:
        args.connections, args.hold = 300, 2.0
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4 * args.connections)), hard))
    with tempfile.TemporaryDirectory(prefix="pochta-flood-") as tmp:
        where = Path(tmp)
        data = where / "data"
        s = load_settings(None, data_dir=data)
        data.mkdir(parents=True)
        pochta = build(s)
        pochta.mailbox.add_user(USER, "a long enough password")
        pochta.close()
        service_token(s)
        result: dict[str, Any] = {
            "benchmark": "connection_flood",
            "server_src": args.src or "this tree",
            "workers": args.workers,
            "machine": machine(where),
        }
        proc, ports = start(data, where / "serve.log", args.workers, args.src)
        try:
            trusted = Trusted(ports["smtp"])
            trusted.start()
            time.sleep(5)  # the latency before the flood
            flood_start = time.monotonic()
            note(f"flood: {args.connections} connections from {STRANGER}")
            result["flood"] = asyncio.run(flood(ports["smtp"], args.connections, args.hold))
            flood_end = time.monotonic()
            trusted.stop.set()
            trusted.join(120)
            before = [s for b, s, ok in trusted.results if ok and b < flood_start]
            during = [s for b, s, ok in trusted.results if ok and flood_start <= b < flood_end]
            result["trusted_delivery_before"] = summary(before)
            result["trusted_delivery_during"] = summary(during)
            result["trusted_failures"] = sum(not ok for _, _, ok in trusted.results)
            try:
                result["refusals_in_metrics"] = refusals(ports["http"])
            except httpx.HTTPError:
                result["refusals_in_metrics"] = None
            log = (where / "serve.log").read_text()
            result["log_lines_about_refusals"] = sum(
                "refused: over the" in line for line in log.splitlines()
            )
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
            if args.keep_log is not None:
                args.keep_log.write_bytes((where / "serve.log").read_bytes())
        emit(result)


if __name__ == "__main__":
    main()
