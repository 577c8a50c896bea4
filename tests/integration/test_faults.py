"""Faults with real processes: ``pochta serve`` killed with SIGKILL at random moments while
letters with shared attachments are delivered, deleted and delivered again; then Valkyrie,
bit flips, a lost disk and its evacuation. ``pochta fsck`` is the judge: nothing lost, nothing
damaged, no counter below its references."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import smtplib
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.conftest import TOKEN, free_port, start_server
from tests.integration.test_smtp import PASSWORD, add_users
from tests.mailtools import letter, payload

pytestmark = [pytest.mark.integration, pytest.mark.slow]

KILLS = 50
USERS = ("alice@example.org", "bob@example.org")
POOL = [payload(100 + i, 6_000 + 9_000 * i) for i in range(6)]  # shared attachments


def cli(data: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "pochta", *args, "--data", str(data)],
        capture_output=True,
        check=check,
        timeout=120,
    )


def valkyrie(data: Path, *args: str) -> dict[str, Any]:
    """``pochta valkyrie run --once --json`` (through its module until the CLI registers it)."""
    code = "import sys; from pochta.cli.valkyrie import app; app(prog_name='pochta valkyrie')"
    done = subprocess.run(
        [sys.executable, "-c", code, "run", "--once", "--json", "--data", str(data), *args],
        capture_output=True,
        timeout=120,
    )
    assert done.stdout, done.stderr.decode()
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def fsck(data: Path) -> dict[str, Any]:
    done = cli(data, "fsck", "--json", check=False)
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def assert_sound(report: dict[str, Any]) -> None:
    """Nothing lost, damaged, unreadable, or undercounted with agreeing magic (a file that
    decs could delete while letters still reference it). Counters a crash left short while
    the magic disagrees ("miscounted") are kept by the magic: reported, allowed."""
    for name in ("lost", "damaged", "unreadable", "undercounted"):
        assert report[name] == [], f"{name}: {report[name][:5]}"




class Workload:
    """Deliveries, deletions and re-deliveries against whatever server listens on the ports;
    every failure (the server is dead or starting) is expected and ignored."""

    def __init__(self, http: int, smtp: int, tokens: dict[str, str], seed: int) -> None:
        self.http, self.smtp, self.tokens = http, smtp, tokens
        self.rng = random.Random(seed)
        self.stop = threading.Event()
        self.delivered = self.deleted = self.failed = 0
        self.sent: list[bytes] = []
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _letter(self) -> bytes:
        n = self.rng.randint(1, 3)
        parts = [(f"part{i}.bin", self.rng.choice(POOL)) for i in range(n)]
        subject = f"letter {self.rng.getrandbits(32):x}"
        return letter(subject=subject, attachments=parts)

    def _deliver(self, raw: bytes) -> None:
        to = self.rng.sample(USERS, self.rng.randint(1, 2))
        with smtplib.SMTP("127.0.0.1", self.smtp, timeout=5) as smtp:
            smtp.sendmail("sender@example.net", to, raw)
        self.delivered += 1

    def _delete(self) -> None:
        user = self.rng.choice(USERS)
        auth = {"Authorization": f"Bearer {self.tokens[user]}"}
        base = f"http://127.0.0.1:{self.http}/v1/messages"
        page = httpx.get(f"{base}?limit=50", headers=auth, timeout=5).json()
        if page["messages"]:
            victim = self.rng.choice(page["messages"])["id"]
            httpx.delete(f"{base}/{victim}", headers=auth, timeout=5)
            self.deleted += 1

    def _run(self) -> None:
        while not self.stop.is_set():
            roll = self.rng.random()
            try:
                if roll < 0.5:
                    raw = self._letter()
                    self.sent.append(raw)
                    self._deliver(raw)
                elif roll < 0.65 and self.sent:
                    self._deliver(self.rng.choice(self.sent))  # the same letter again
                else:
                    self._delete()
            except (OSError, smtplib.SMTPException, httpx.HTTPError, ValueError, KeyError):
                self.failed += 1
                time.sleep(0.05)


def serve(data: Path, log: Path, http: int, smtp: int) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "POCHTA_SERVICE_TOKEN": TOKEN,
        "POCHTA_SMTP__PORT": str(smtp),
        "POCHTA_SMTP__LMTP_PORT": str(free_port()),
        "POCHTA_SMTP__HOSTNAME": "mx.pochta.test",
    }
    with log.open("ab") as sink:
        return subprocess.Popen(
            [sys.executable, "-m", "pochta", "serve", "--port", str(http), "--data", str(data)],
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=env,
        )


def wait_healthy(http: int, proc: subprocess.Popen[bytes], timeout: float = 40) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if httpx.get(f"http://127.0.0.1:{http}/healthz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    raise AssertionError("pochta serve did not become healthy")


def wait_for_deletions(data: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if json.loads(cli(data, "stats", "--json").stdout)["pending_deletions"] == 0:
            return
        time.sleep(0.5)
    raise AssertionError("deletions did not finish")


def stored_files(root: Path) -> list[Path]:
    return sorted(p for p in root.glob("??/??/*") if len(p.name) == 64)


def test_sigkill_campaign_then_valkyrie_bit_flips_and_a_lost_disk(tmp_path: Path) -> None:
    data = tmp_path / "data"
    log = tmp_path / "serve.log"
    add_users(data, *USERS)
    cli(data, "pairs", "add", str(tmp_path / "disk-c"), str(tmp_path / "disk-d"))

    first = start_server(data, log)
    tokens = {}
    for user in USERS:
        r = httpx.post(f"{first.url}/v1/session", json={"email": user, "password": PASSWORD})
        tokens[user] = r.json()["token"]
    first.stop(signal.SIGKILL)
    http, smtp = first.port, first.smtp_port

    work = Workload(http, smtp, tokens, seed=4)
    rng = random.Random(2026)
    work.thread.start()
    try:
        for _ in range(KILLS):
            proc = serve(data, log, http, smtp)
            if rng.random() < 0.3:  # during startup and recovery
                time.sleep(rng.uniform(0.2, 2.0))
            else:  # while it works
                wait_healthy(http, proc)
                time.sleep(rng.uniform(0.1, 1.0))
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
    finally:
        work.stop.set()
        work.thread.join(timeout=10)
    assert work.delivered > 20, (work.delivered, work.failed)

    # the last run: recovery and pending deletions finish
    last = start_server(data, log, smtp_port=smtp)
    wait_for_deletions(data)
    assert last.stop() == 0

    report = fsck(data)
    assert_sound(report)
    assert report["letters"] > 0 and report["blobs"] > 0

    # Valkyrie, acting at once (nothing runs meanwhile): two passes, so both disks act
    for _ in range(2):
        swept = valkyrie(data, "--slave-delay", "0", "--orphan-min-age", "0")
        assert swept["errors"] == 0, swept
    assert_sound(fsck(data))

    # bit flips: every one is repaired from the sibling copy
    roots = [data / "disks" / "0", data / "disks" / "1", tmp_path / "disk-c", tmp_path / "disk-d"]
    files = [f for root in roots for f in stored_files(root)]
    flipped = rng.sample(files, min(8, len(files)))
    flipped = list({f.name: f for f in flipped}.values())  # at most one copy of each key
    for f in flipped:
        raw = bytearray(f.read_bytes())
        raw[rng.randrange(len(raw))] ^= 1 << rng.randrange(8)
        f.write_bytes(bytes(raw))
    swept = valkyrie(data)
    assert sum(d["repaired"] for d in swept["disks"]) == len(flipped)
    assert_sound(fsck(data))

    # a disk directory disappears: detected, the pair evacuated, two good copies afterwards
    shutil.rmtree(data / "disks" / "0")
    swept = valkyrie(data)
    assert swept["errors"] >= 1
    assert any("not there" in p for d in swept["disks"] for p in d["problems"])
    cli(data, "pairs", "set-flags", "1", "service")
    moved = json.loads(cli(data, "pairs", "evacuate", "1", "--json").stdout)
    assert (moved["left"], moved["errors"]) == (0, 0)
    cli(data, "pairs", "retire", "1")
    report = fsck(data)
    assert_sound(report)  # fsck reads both copies of every referenced file
    assert report["blobs"] > 0
