"""``pochta serve --processes 2`` (was ``--workers``, issue 31): the parent hands each server
process its part of the cores for its CPU pool in ``POCHTA_ANTISPAM__POOL_PROCESSES`` (was
``POCHTA_ANTISPAM__WORKERS``), which the server processes read as a setting."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pochta.cpupool import cores
from tests.integration.conftest import free_port
from tests.integration.test_serve_workers import children, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

POOL = "POCHTA_ANTISPAM__POOL_PROCESSES"


def environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode().split("=", 1) for item in raw if b"=" in item)


def running_serve(pid: int) -> bool:
    """Whether the process has become its own program (``serve --listen-fds``)."""
    try:
        return b"--listen-fds" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def test_the_server_processes_get_their_share_of_the_pool(tmp_path: Path) -> None:
    """Checked as soon as the server processes exist (no need to wait for their pools)."""
    env = {k: v for k, v in os.environ.items() if k not in ("POCHTA_ANTISPAM__WORKERS", POOL)}
    log = tmp_path / "serve.log"
    with log.open("wb") as sink:
        parent = subprocess.Popen(
            [
                *(sys.executable, "-m", "pochta", "serve", "--processes", "2"),
                *("--port", str(free_port()), "--data", str(tmp_path / "data")),
            ],
            stdout=sink,
            stderr=subprocess.STDOUT,
            env={**env, "POCHTA_SMTP__ENABLED": "false", "POCHTA_IMAP__ENABLED": "false"},
        )
    try:
        wait_for(lambda: len(children(parent.pid)) == 2, "two server processes")
        started = children(parent.pid)
        # a child read between its fork and its exec shows the parent's first environment
        wait_for(lambda: all(running_serve(pid) for pid in started), "their exec")
        for pid in started:
            assert environ(pid)[POOL] == str(max(1, cores() // 2))
            assert "POCHTA_ANTISPAM__WORKERS" not in environ(pid)
        text = log.read_text()
        assert "pochta: 2 processes on HTTP" in text
        assert "deprecated" not in text
    finally:
        parent.terminate()  # the supervisor stops its server processes (mid-start here)
        parent.wait(timeout=60)
    wait_for(lambda: not any(Path(f"/proc/{pid}").exists() for pid in started), "no orphans")
