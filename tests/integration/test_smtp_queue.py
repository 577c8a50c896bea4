"""``smtp.answer = "queued"`` against a real `pochta serve`: 250 at the queue, delivered after,
exactly once across a SIGKILL, retried while the store refuses, bounded."""

from __future__ import annotations

import signal
import smtplib
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration.conftest import Server, start_server
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


def wait_for(server: Server, email: str, count: int, timeout: float = 60.0) -> list[str]:
    deadline = time.monotonic() + timeout
    while True:
        got = subjects(server, email)
        if len(got) >= count or time.monotonic() > deadline:
            return got
        time.sleep(0.2)


def test_letters_answered_at_the_queue_are_delivered_once_across_a_sigkill(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    add_users(data, "alice@example.org")
    srv = start_server(data, tmp_path / "serve.log", settings=QUEUED)
    sent = []
    with smtplib.SMTP("127.0.0.1", srv.smtp_port, timeout=30) as smtp:
        for i in range(40):
            raw = letter(subject=f"letter {i}", attachments=[("a.bin", payload(i, 3_000))])
            refused = smtp.sendmail("s@example.net", ["alice@example.org"], raw)
            assert refused == {}
            sent.append(f"letter {i}")
    srv.stop(signal.SIGKILL)  # at once: most of them are still in the queue
    srv = start_server(data, tmp_path / "serve2.log", settings=QUEUED)
    try:
        got = wait_for(srv, "alice@example.org", len(sent))
        assert sorted(got) == sorted(sent)  # every one, none twice
        time.sleep(1.0)
        assert len(subjects(srv, "alice@example.org")) == len(sent)
    finally:
        srv.stop()
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
        _set_flags(data, "none")
        assert sorted(wait_for(srv, "alice@example.org", 2)) == ["q0", "q1"]
        with smtplib.SMTP("127.0.0.1", srv.smtp_port, timeout=30) as smtp:
            smtp.sendmail("s@example.net", ["alice@example.org"], letter(subject="q2"))
        assert sorted(wait_for(srv, "alice@example.org", 3)) == ["q0", "q1", "q2"]
    finally:
        srv.stop()
