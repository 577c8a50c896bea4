"""``smtp.answer = "queued"`` against a real `pochta serve`: 250 at the queue, delivered after,
exactly once across a SIGKILL, retried while the store refuses, bounded."""

from __future__ import annotations

import json
import re
import signal
import smtplib
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from pochta.app import build
from pochta.config import load_settings
from pochta.mailbox.queue import Entry, new_id
from pochta.mailbox.queuedb import QueueStore
from tests.integration.conftest import Server, eventually, start_server
from tests.integration.test_smtp import add_users, raws
from tests.mailtools import letter, payload

pytestmark = pytest.mark.integration

QUEUED = {"POCHTA_SMTP__ANSWER": "queued", "POCHTA_SMTP__QUEUE_RETRY_SECONDS": "0.5"}


def subjects(server: Server, email: str) -> list[str]:
    out = []
    for raw in raws(server, email):
        for line in raw.split(b"\r\n"):
            if line.startswith(b"Subject: "):
                out.append(line[9:].decode())
                break
    return out


def gauge(server: Server, name: str) -> float:
    """An unlabelled gauge's value in ``/metrics`` (summed over the live processes)."""
    for line in httpx.get(f"{server.url}/metrics").text.splitlines():
        if line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} is not in /metrics")


def wait_for(server: Server, email: str, count: int, timeout: float = 60.0) -> list[str]:
    deadline = time.monotonic() + timeout
    while True:
        try:
            got = subjects(server, email)
        except httpx.HTTPError:  # a server process restarting
            if time.monotonic() > deadline:
                raise
            got = []
        if len(got) >= count or time.monotonic() > deadline:
            return got
        time.sleep(0.2)


def test_letters_answered_at_the_queue_are_delivered_once_across_a_sigkill(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    add_users(data, "alice@example.org")
    # one delivery at a time, four connections: letters wait in the queue when it is killed
    slow = {**QUEUED, "POCHTA_SMTP__QUEUE_DELIVERIES": "1"}
    srv = start_server(data, tmp_path / "serve.log", settings=slow)

    def send(c: int) -> list[str]:
        out = []
        with smtplib.SMTP("127.0.0.1", srv.smtp_port, timeout=30) as smtp:
            for i in range(c, 60, 4):
                raw = letter(subject=f"letter {i}", attachments=[("a.bin", payload(i, 3_000))])
                assert smtp.sendmail("s@example.net", ["alice@example.org"], raw) == {}
                out.append(f"letter {i}")
        return out

    with ThreadPoolExecutor(4) as pool:
        sent = [s for part in pool.map(send, range(4)) for s in part]
    srv.stop(signal.SIGKILL)  # at once, right after the last 250
    srv = start_server(data, tmp_path / "serve2.log", settings=QUEUED)
    try:
        got = wait_for(srv, "alice@example.org", len(sent))
        assert sorted(got) == sorted(sent)  # every one, none twice
        time.sleep(1.0)
        assert len(subjects(srv, "alice@example.org")) == len(sent)
    finally:
        srv.stop()
    after = re.findall(r"delivered [0-9a-f]{16}: ", (tmp_path / "serve2.log").read_text())
    assert after  # the restart delivered what the killed server had queued
    check = subprocess.run(
        [sys.executable, "-m", "pochta", "fsck", "--json", "--data", str(data)],
        capture_output=True,
        text=True,
    )
    assert check.returncode == 0, check.stdout + check.stderr


def _set_flags(data: Path, flags: str) -> None:
    """The one pair's flags, with the CLI (the server, running, reads them at each upload)."""
    subprocess.run(
        [sys.executable, "-m", "pochta", "pairs", "set-flags", "1", flags, "--data", str(data)],
        check=True,
        capture_output=True,
    )


def test_a_letter_the_store_refuses_stays_queued_and_is_retried(tmp_path: Path) -> None:
    data = tmp_path / "data"
    add_users(data, "alice@example.org")
    srv = start_server(data, tmp_path / "serve.log", settings=QUEUED)
    try:
        _set_flags(data, "readonly")  # no pair takes a new file: the delivery fails
        raw = letter(subject="kept", attachments=[("a.bin", payload(7, 20_000))])
        with smtplib.SMTP("127.0.0.1", srv.smtp_port, timeout=30) as smtp:
            smtp.sendmail("s@example.net", ["alice@example.org"], raw)
        time.sleep(3.0)  # several tries fail meanwhile
        assert subjects(srv, "alice@example.org") == []
        assert b"deferred" in srv.log.read_bytes()
        _set_flags(data, "none")
        assert wait_for(srv, "alice@example.org", 1) == ["kept"]
    finally:
        srv.stop()


def test_a_full_queue_refuses_mail_until_it_has_room(tmp_path: Path) -> None:
    data = tmp_path / "data"
    add_users(data, "alice@example.org")
    settings = {**QUEUED, "POCHTA_SMTP__QUEUE_MAX_LETTERS": "2"}
    srv = start_server(data, tmp_path / "serve.log", settings=settings)
    try:
        _set_flags(data, "readonly")
        with smtplib.SMTP("127.0.0.1", srv.smtp_port, timeout=30) as smtp:
            for i in range(2):
                raw = letter(subject=f"q{i}", attachments=[("a.bin", payload(i, 20_000))])
                smtp.sendmail("s@example.net", ["alice@example.org"], raw)
            code, _ = smtp.mail("s@example.net")
            assert code == 452  # the queue is at its limit: the client keeps the letter
            smtp.rset()
        assert gauge(srv, "pochta_queue_letters") == 2  # what an operator watches
        assert gauge(srv, "pochta_queue_bytes") > 2 * 20_000
        _set_flags(data, "none")
        assert sorted(wait_for(srv, "alice@example.org", 2)) == ["q0", "q1"]
        deadline = time.monotonic() + 30
        while gauge(srv, "pochta_queue_letters") and time.monotonic() < deadline:
            time.sleep(0.1)
        assert gauge(srv, "pochta_queue_letters") == 0
        assert gauge(srv, "pochta_queue_bytes") == 0
        with smtplib.SMTP("127.0.0.1", srv.smtp_port, timeout=30) as smtp:
            smtp.sendmail("s@example.net", ["alice@example.org"], letter(subject="q2"))
        assert sorted(wait_for(srv, "alice@example.org", 3)) == ["q0", "q1", "q2"]
    finally:
        srv.stop()


@pytest.mark.slow
def test_two_server_processes_each_queue_and_a_killed_ones_letters_are_delivered(
    tmp_path: Path,
) -> None:
    """``serve --workers 2``: each process has its slot of the queue; one killed right after
    its 250s leaves its letters there, and its replacement (or the other process) delivers
    them, once each."""
    data = tmp_path / "data"
    add_users(data, "alice@example.org")
    settings = {**QUEUED, "POCHTA_ANTISPAM__POOL_PROCESSES": "0", "POCHTA_GUARD__LOCK_TTL": "2"}
    srv = start_server(data, tmp_path / "serve.log", settings=settings, args=("--workers", "2"))
    try:
        sent = []
        for i in range(30):  # a connection each: the kernel spreads them over the processes
            with smtplib.SMTP("127.0.0.1", srv.smtp_port, timeout=30) as smtp:
                smtp.sendmail("s@example.net", ["alice@example.org"], letter(subject=f"w{i}"))
            sent.append(f"w{i}")
        workers = Path(f"/proc/{srv.proc.pid}/task/{srv.proc.pid}/children").read_text().split()
        for pid in workers:  # both: whatever either still held is left in its slot
            subprocess.run(["kill", "-KILL", pid], check=False)
        got = wait_for(srv, "alice@example.org", len(sent), timeout=120)
        assert sorted(got) == sorted(sent)
        time.sleep(1.0)
        assert len(subjects(srv, "alice@example.org")) == len(sent)
        # a slot each (a replacement started before the killed process was gone took a
        # third; the dead slot's letters were adopted)
        assert len(list((data / "queue").glob("*.lock"))) >= 2
    finally:
        srv.stop(signal.SIGTERM, timeout=60)


def test_a_letter_the_delivery_would_refuse_for_its_size_gets_552_not_250(tmp_path: Path) -> None:
    """Its trace header brings it over ``max_message_size``: refused at once, as with
    ``answer = "delivered"``, rather than answered 250 and then held in the queue."""
    data = tmp_path / "data"
    add_users(data, "alice@example.org")
    settings = {**QUEUED, "POCHTA_SMTP__MAX_MESSAGE_SIZE": "4000"}
    srv = start_server(data, tmp_path / "serve.log", settings=settings)
    try:
        raw = letter(subject="near the limit", text="x" * 60 + "\n")
        raw += b"y" * (3990 - len(raw)) + b"\r\n"  # under the limit itself
        with smtplib.SMTP("127.0.0.1", srv.smtp_port, timeout=30) as smtp:
            with pytest.raises(smtplib.SMTPDataError) as refused:
                smtp.sendmail("s@example.net", ["alice@example.org"], raw)
            assert refused.value.smtp_code == 552
            smtp.sendmail("s@example.net", ["alice@example.org"], letter(subject="small"))
        assert wait_for(srv, "alice@example.org", 1) == ["small"]
    finally:
        srv.stop()


def queue_cli(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pochta", "queue", *args, "--data", str(data)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def held_ids(data: Path) -> list[str]:
    done = queue_cli(data, "list", "--held", "--json")
    assert done.returncode == 0, done.stderr
    return [x["id"] for x in json.loads(done.stdout)]


def test_a_held_letter_is_listed_retried_or_dropped_while_the_server_runs(
    tmp_path: Path,
) -> None:
    """Letters answered 250 by a server whose ``max_message_size`` was larger: the delivery
    refuses them as they are, so they are held (not tried again, not counted), and an operator
    sees them with ``pochta queue list --held``, drops one and, once the limit is raised,
    retries the other: the running server delivers it within seconds."""
    data = tmp_path / "data"
    add_users(data, "alice@example.org")
    store = QueueStore(data / "queue", inline=100_000)  # as a server with a larger limit left it
    ids = []
    for subject in ("keep", "drop"):
        raw = letter(subject=subject, attachments=[("a.bin", payload(3, 6_000))])
        trace = b"Received: from c.example by mx.pochta.test\r\n"
        rcpts = ("alice@example.org",)
        entry = Entry(new_id(), "s@example.net", rcpts, None, None, trace, len(raw), time.time())
        store.put(entry, raw)
        ids.append(entry.id)
    store.close()
    keep, dropped = ids
    small = {**QUEUED, "POCHTA_SMTP__MAX_MESSAGE_SIZE": "4000"}
    srv = start_server(data, tmp_path / "serve.log", settings=small)
    try:
        assert sorted(eventually(lambda: held_ids(data), lambda got: len(got) == 2)) == sorted(ids)
        # /healthz says what its last check found (every 5 s; the first, at the start, saw the
        # letters waiting): held since, the next check says none waits
        health = eventually(
            lambda: httpx.get(f"{srv.url}/healthz").json(),
            lambda h: h["queue_oldest_seconds"] is None,
            what="/healthz without a letter waiting",
        )
        assert health["status"] == "ok"
        assert health["queue_stalled_seconds"] == 0
        done = queue_cli(data, "drop", dropped, "--yes")
        assert done.returncode == 0, done.stderr
        assert held_ids(data) == [keep]
        bad = queue_cli(data, "retry", "not-an-id")
        assert bad.returncode == 2 and "not a queue id" in bad.stderr
        assert "Traceback" not in bad.stderr
    finally:
        srv.stop()
    srv = start_server(data, tmp_path / "serve2.log", settings=QUEUED)
    try:
        assert held_ids(data) == [keep]  # held across the restart, not tried again
        done = queue_cli(data, "retry", keep)
        assert done.returncode == 0, done.stderr
        assert wait_for(srv, "alice@example.org", 1, timeout=30) == ["keep"]
        assert eventually(lambda: queue_cli(data, "list", "--json").stdout.strip(),
                          lambda out: out == "[]")  # fmt: skip
    finally:
        srv.stop()
    assert f"queued {keep} held" in (tmp_path / "serve.log").read_text()


def test_a_recipient_deleted_after_rcpt_gets_250_then_the_letter_is_dropped(
    tmp_path: Path,
) -> None:
    """Queued, the end of DATA answers 250 before the recipients are looked up again: a letter
    none of whose recipients has a mailbox any more is then dropped with a log line (the
    "delivered" answer, 554 at the end of DATA: test_smtp)."""
    data = tmp_path / "data"
    add_users(data, "alice@example.org", "bob@example.org")
    srv = start_server(data, tmp_path / "serve.log", settings=QUEUED)
    try:
        with smtplib.SMTP("127.0.0.1", srv.smtp_port, timeout=30) as smtp:
            smtp.ehlo()
            smtp.mail("sender@example.net")
            assert smtp.rcpt("bob@example.org")[0] == 250
            pochta = build(load_settings(None, data_dir=data))
            try:
                pochta.mailbox.delete_user("bob@example.org")
            finally:
                pochta.close()
            code, reply = smtp.data(letter(subject="to nobody"))
            assert code == 250 and b"queued as" in reply
            queue_id = reply.split()[-1].decode()
        eventually(lambda: srv.log.read_text(), lambda t: f"queued {queue_id} dropped" in t)
        # its row goes with the next letter's commit or when the runner flushes (at most
        # queuerunner.FLUSH_SECONDS later): listed a moment after the log line
        eventually(lambda: queue_cli(data, "list", "--json").stdout.strip(),
                   lambda out: out == "[]", timeout=30, what="the dropped row removed")  # fmt: skip
    finally:
        srv.stop()
