"""Real servers on free loopback ports, started and stopped by fixtures."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import httpx
import pytest

TOKEN = "integration-service-token-0123456789"

DELIVERED = {"POCHTA_SMTP__ANSWER": "delivered"}
"""Settings of a test about ``smtp.answer = "delivered"`` itself: the reply at the end of DATA
is the delivery's (451 / 554 there, the letter stored at its 250), whatever the default."""

T = TypeVar("T")


def eventually(
    probe: Callable[[], T], until: Callable[[T], bool], *, timeout: float = 60.0, what: str = ""
) -> T:
    """``probe()`` again every 0.1 s until ``until`` holds for what it returned (that value is
    returned), at most ``timeout`` seconds (then AssertionError with the last value): a letter
    answered 250 at the queue (``smtp.answer = "queued"``) is stored a moment later, so a test
    waits for it rather than reading it at once, and never for a fixed time."""
    deadline = time.monotonic() + timeout
    while True:
        got = probe()
        if until(got):
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"{what or 'the condition'}: not in {timeout:.0f} s: {got!r:.300}")
        time.sleep(0.1)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Server:
    url: str
    port: int
    smtp_port: int
    lmtp_port: int
    data: Path
    proc: subprocess.Popen[bytes]
    log: Path
    imap_port: int = 0
    imaps_port: int = 0  # IMAPS, when the test set one (POCHTA_IMAP__TLS_PORT)

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {TOKEN}"}

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout=timeout)


def start_server(
    data: Path,
    log: Path,
    *,
    smtp_port: int | None = None,
    lmtp_port: int | None = None,
    settings: dict[str, str] | None = None,
    args: tuple[str, ...] = (),
    timeout: float = 120.0,  # a loaded 2-core machine starts it slowly
    imap_port: int | None = None,
    port: int | None = None,
) -> Server:
    """``pochta serve`` with HTTP, SMTP and LMTP on free loopback ports (or the ports given:
    a restart keeps its ports); ``settings``: more POCHTA_* environment variables."""
    chosen = port is None and smtp_port is None and lmtp_port is None and imap_port is None
    logged = log.stat().st_size if log.exists() else 0  # what earlier starts wrote
    port = port or free_port()
    smtp_port = smtp_port or free_port()
    lmtp_port = lmtp_port or free_port()
    imap_port = imap_port or free_port()
    env = {
        **os.environ,
        "POCHTA_SERVICE_TOKEN": TOKEN,
        "POCHTA_LOG_LEVEL": "info",
        "POCHTA_SMTP__PORT": str(smtp_port),
        "POCHTA_SMTP__LMTP_PORT": str(lmtp_port),
        "POCHTA_SMTP__HOSTNAME": "mx.pochta.test",
        "POCHTA_IMAP__PORT": str(imap_port),
        **(settings or {}),
    }
    with log.open("ab") as sink:
        proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "pochta", "serve", "--port", str(port)),
                *("--data", str(data), *args),
            ],
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=env,
        )
    server = Server(
        f"http://127.0.0.1:{port}", port, smtp_port, lmtp_port, data, proc, log, imap_port
    )
    deadline = time.monotonic() + timeout
    # one client for all the polls: ``httpx.get`` builds a client, and its TLS context
    # (the CA bundle parsed), each time: ~20 ms of CPU per poll, taken from the server starting
    with httpx.Client(timeout=1) as probe:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                text = log.read_text()
                stolen = b"address already in use" in log.read_bytes()[logged:]
                if chosen and stolen and timeout > 0:
                    # a free port we picked was taken by another process meanwhile: pick again
                    return start_server(
                        data, log, settings=settings, args=args, timeout=timeout - 1
                    )
                raise RuntimeError(f"pochta serve exited early:\n{text}")
            try:
                if probe.get(f"{server.url}/healthz").status_code == 200:
                    return server
            except httpx.TransportError:
                pass
            time.sleep(0.1)
    server.stop(signal.SIGKILL)
    raise RuntimeError(f"pochta serve did not become healthy:\n{log.read_text()}")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    srv = start_server(tmp_path / "data", tmp_path / "serve.log")
    yield srv
    if srv.proc.poll() is None:
        srv.stop()
