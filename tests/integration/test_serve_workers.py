"""``pochta serve --workers 2``: two server processes behind the same ports, started and
supervised by a parent that bound the sockets. Letters are delivered whichever worker takes
the connection; the single-run jobs have one leader among the workers; a worker killed is
replaced and its jobs taken over (at once: its lease's holder is seen gone); SIGTERM stops
everything (exit 0);
a port in use is one line and exit 6."""

from __future__ import annotations

import re
import signal
import smtplib
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.integration.conftest import Server, eventually, free_port, start_server

pytestmark = [pytest.mark.integration, pytest.mark.slow]

LEADS = re.compile(
    r"job mailbox-deletions: this process leads \(token (\d+)\) \[pochta\.guard\.singleton\]"
    r" pid=(\d+)"
)


def children(pid: int) -> set[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return {int(p) for p in path.read_text().split()} if path.exists() else set()


def leaders(log: Path) -> list[tuple[int, int]]:
    return [(int(m[2]), int(m[1])) for m in LEADS.finditer(log.read_text())]  # (pid, token)


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.1)


def deliver(server: Server, n: int, tag: str) -> None:
    for i in range(n):  # a new connection each: the kernel spreads them over the workers
        with smtplib.SMTP("127.0.0.1", server.smtp_port, timeout=60) as smtp:
            smtp.sendmail("a@example.net", ["bob@example.org"], f"Subject: {tag} {i}\r\n\r\nhi\r\n")


def letters(server: Server) -> int:
    r = httpx.post(
        f"{server.url}/v1/session",
        json={"email": "bob@example.org", "password": "a long enough password"},
    )
    token = r.json()["token"]
    folders = httpx.get(f"{server.url}/v1/folders", headers={"Authorization": f"Bearer {token}"})
    return sum(int(f["total"]) for f in folders.json())  # Inbox and Spam


def test_two_workers_deliver_and_one_leads_the_jobs(tmp_path: Path) -> None:
    data = tmp_path / "data"
    subprocess.run([sys.executable, "-m", "pochta", "init", "--data", str(data)], check=True)
    subprocess.run(
        [
            *(sys.executable, "-m", "pochta", "user", "add", "bob@example.org"),
            *("--password-stdin", "--data", str(data)),
        ],
        input=b"a long enough password\n",
        check=True,
        capture_output=True,
    )
    log = tmp_path / "serve.log"
    server = start_server(
        data,
        log,
        settings={"POCHTA_GUARD__LOCK_TTL": "2", "POCHTA_ANTISPAM__POOL_PROCESSES": "0"},
        args=("--workers", "2"),
        timeout=120,
    )
    try:
        wait_for(lambda: len(children(server.proc.pid)) == 2, "two workers")
        workers = children(server.proc.pid)
        wait_for(lambda: bool(leaders(log)), "a leader of the deletion job")
        deliver(server, 6, "first")
        assert eventually(lambda: letters(server), lambda n: n >= 6, what="6 letters") == 6
        [(leader, token)] = leaders(log)  # one leader, whichever worker it is
        assert leader in workers
        time.sleep(1.0)
        assert len(leaders(log)) == 1  # the other worker only waits
        # kill the leader: the parent starts a new worker; a worker takes the job over
        killed_at = time.monotonic()
        subprocess.run(["kill", "-KILL", str(leader)], check=True)
        wait_for(lambda: len(leaders(log)) == 2, "a new leader")
        assert time.monotonic() - killed_at < 30
        new_leader, new_token = leaders(log)[1]
        assert new_leader != leader and new_token > token
        # the killed one is a child until the parent reaps it (a zombie): the leader now takes
        # over at once (its holder is seen gone), maybe before the parent has noticed
        wait_for(
            lambda: len(children(server.proc.pid)) == 2 and leader not in children(server.proc.pid),
            "the replacement worker",
        )
        deliver(server, 4, "second")
        assert eventually(lambda: letters(server), lambda n: n >= 10, what="10 letters") == 10
        # the ports are taken while it runs: another serve says so in one line, exit 6
        busy = subprocess.run(
            [
                *(sys.executable, "-m", "pochta", "serve", "--workers", "2"),
                *("--port", str(server.port), "--data", str(data)),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert busy.returncode == 6, busy.stderr
        assert "cannot listen for HTTP" in busy.stderr and "Traceback" not in busy.stderr
        assert server.stop(signal.SIGTERM, timeout=60) == 0
        for pid in workers | {new_leader}:
            assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(
                f"/proc/{pid}/status"
            ).read_text()
    finally:
        if server.proc.poll() is None:
            server.stop(signal.SIGKILL)


def test_inherited_descriptors_are_checked(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", free_port()))  # bound, not listening
        out = subprocess.run(
            [
                *(sys.executable, "-m", "pochta", "serve"),
                *("--listen-fds", f"http={s.fileno()}", "--data", str(tmp_path / "d")),
            ],
            capture_output=True,
            text=True,
            pass_fds=[s.fileno()],
            timeout=120,
        )
    assert out.returncode == 2 and "not a listening socket" in out.stderr, out.stderr


def test_workers_stop_when_the_parent_is_killed(tmp_path: Path) -> None:
    server = start_server(
        tmp_path / "data",
        tmp_path / "serve.log",
        settings={"POCHTA_ANTISPAM__POOL_PROCESSES": "0"},
        args=("--workers", "2"),
        timeout=120,
    )
    try:
        wait_for(lambda: len(children(server.proc.pid)) == 2, "two workers")
        workers = children(server.proc.pid)
    finally:
        server.stop(signal.SIGKILL)
    wait_for(lambda: not any(Path(f"/proc/{pid}").exists() for pid in workers), "no orphans")
