"""Single-run jobs across real processes: two processes run the same ``Singleton``; only one
works at a time; SIGKILL the leader and the other takes over once its lease has run out,
with a higher fencing token; SIGTERM hands over at once. On the embedded (SQLite) locks and
on Redis."""

from __future__ import annotations

import itertools
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.servers import RedisServer, wait_until

pytestmark = pytest.mark.integration

RUNNER = Path(__file__).with_name("job_runner.py")
TTL = 1.0


def rounds(ledger: Path) -> list[tuple[int, int, float, float]]:
    if not ledger.exists():
        return []
    out = []
    for line in ledger.read_text().splitlines():
        pid, token, start, end = line.split()
        out.append((int(pid), int(token), float(start), float(end)))
    return out


def spawn(kind: str, where: str, ledger: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, str(RUNNER), kind, where, str(ledger)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    with proc.stdout:
        assert proc.stdout.readline().strip() == "started"
    return proc


@pytest.fixture(params=["sqlite", "redis"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    if request.param == "sqlite":
        yield "sqlite", str(tmp_path / "locks.sqlite3")
        return
    server = request.getfixturevalue("redis_server")
    assert isinstance(server, RedisServer)
    server.client().flushall()
    yield "redis", str(server.port)


def assert_one_at_a_time(ledger: list[tuple[int, int, float, float]]) -> None:
    """No two rounds of different processes overlap in time, and tokens never go back."""
    ordered = sorted(ledger, key=lambda r: r[2])
    for before, after in itertools.pairwise(ordered):
        if before[0] != after[0]:
            assert before[3] <= after[2], (before, after)
        assert after[1] >= before[1]


def test_one_process_leads_and_a_killed_leader_hands_over_after_its_lease(
    backend: tuple[str, str], tmp_path: Path
) -> None:
    kind, where = backend
    ledger = tmp_path / "ledger"
    first = spawn(kind, where, ledger)
    second = None
    try:
        wait_until(lambda: len(rounds(ledger)) >= 3, 20, "the first process's rounds")
        second = spawn(kind, where, ledger)
        seen = len(rounds(ledger))
        wait_until(lambda: len(rounds(ledger)) >= seen + 10, 20, "more rounds")
        assert {r[0] for r in rounds(ledger)} == {first.pid}  # the second only waits
        first.send_signal(signal.SIGKILL)
        first.wait()
        killed_at = time.monotonic()
        wait_until(
            lambda: any(r[0] == second.pid for r in rounds(ledger)), 20, "the takeover"
        )
        taken = min(r[2] for r in rounds(ledger) if r[0] == second.pid)
        assert taken - killed_at < TTL + 2.5  # one lease length (and a loaded machine's slack)
        old = {r[1] for r in rounds(ledger) if r[0] == first.pid}
        new = {r[1] for r in rounds(ledger) if r[0] == second.pid}
        assert len(old) == len(new) == 1 and min(new) > max(old)
        assert_one_at_a_time(rounds(ledger))
        # a graceful stop releases the lock: a third process leads at once
        third = spawn(kind, where, ledger)
        try:
            second.send_signal(signal.SIGTERM)
            second.wait(timeout=20)
            stopped_at = time.monotonic()
            wait_until(
                lambda: any(r[0] == third.pid for r in rounds(ledger)), 20, "the handover"
            )
            taken = min(r[2] for r in rounds(ledger) if r[0] == third.pid)
            assert taken - stopped_at < TTL  # woken by the release, not by the expiry
            assert_one_at_a_time(rounds(ledger))
        finally:
            third.kill()
            third.wait()
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
