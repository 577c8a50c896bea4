"""Logs of a real ``pochta serve``: one format (text or JSON lines) for pochta's, uvicorn's and
aiosmtpd's lines; a queue id that ties the SMTP, scoring (in a worker process) and storage
lines of one letter together; aiosmtpd's per-command chatter only at DEBUG; and no secret in
any line of a full run (passwords over HTTP and SMTP AUTH, session and service tokens, a
leak audit), even at DEBUG."""

from __future__ import annotations

import base64
import json
import re
import signal
import smtplib
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.integration.conftest import TOKEN, Server, eventually, start_server
from tests.integration.test_smtp import PASSWORD, add_users
from tests.mailtools import letter, payload

pytestmark = pytest.mark.integration

TEXT_LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z \[(\w+)\s*\] ")


@pytest.fixture(scope="module")
def quiet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """Text lines at the default level (info). Valkyrie is off: its pass lines (info) come
    when its timer says, and would land among the letters' lines that the tests count."""
    root = tmp_path_factory.mktemp("quiet")
    add_users(root / "data", "alice@example.org")
    srv = start_server(
        root / "data",
        root / "serve.log",
        settings={"POCHTA_LOG__FORMAT": "text", "POCHTA_VALKYRIE__ENABLED": "false"},
    )
    yield srv
    srv.stop()


def send(port: int, n: int, *, sender: str = "someone@example.net") -> None:
    """``n`` sessions of one letter each."""
    for i in range(n):
        with smtplib.SMTP("127.0.0.1", port) as client:
            client.sendmail(sender, ["alice@example.org"], letter(subject=f"letter {i}"))


def test_info_has_one_line_per_letter_and_no_smtp_chatter(quiet: Server) -> None:
    before = len(quiet.log.read_text().splitlines())
    send(quiet.smtp_port, 10, sender="chatty-sender@example.net")

    def delivered_lines() -> list[str]:
        lines = quiet.log.read_text().splitlines()[before:]
        return [line for line in lines if "delivered" in line and "pochta.smtp" in line]

    # queued: each letter's line comes when it is delivered, a moment after its 250
    delivered = eventually(delivered_lines, lambda got: len(got) >= 10, what="10 lines")
    assert len(delivered) == 10
    lines = quiet.log.read_text().splitlines()[before:]
    assert len(lines) == 10, lines  # (aiosmtpd: ~150 INFO lines for these 10 sessions)
    assert not any("chatty-sender@example.net" in line for line in lines)
    assert all("queue_id=" in line and "session=" in line for line in delivered)
    for line in quiet.log.read_text().splitlines():
        m = TEXT_LINE.match(line)
        assert m is not None, line  # one format: uvicorn's lines too
        assert m.group(1) in ("info", "warning")


def test_http_lines_carry_a_request_id(quiet: Server) -> None:
    before = len(quiet.log.read_text().splitlines())
    httpx.get(f"{quiet.url}/healthz").raise_for_status()
    (access,) = [
        line
        for line in quiet.log.read_text().splitlines()[before:]
        if "uvicorn.access" in line and "/healthz" in line
    ]
    assert re.search(r"request_id=[0-9a-f]{12}", access)


SECRET_PASSWORD = PASSWORD  # the users' password (tests.integration.test_smtp)
WRONG_GUESS = "w4ong-guess-of-a-password"


def secrets_of_run(session_token: str) -> dict[str, str]:
    plain = base64.b64encode(f"\0alice@example.org\0{SECRET_PASSWORD}".encode()).decode()
    return {
        "password": SECRET_PASSWORD,
        "wrong guess": WRONG_GUESS,
        "password in base64": base64.b64encode(SECRET_PASSWORD.encode()).decode(),
        "AUTH PLAIN response": plain,
        "session token": session_token,
        "service token": TOKEN,
    }


def test_debug_json_ties_a_letter_together_and_leaks_no_secret(tmp_path: Path) -> None:
    data = tmp_path / "data"
    add_users(data, "alice@example.org")
    srv = start_server(
        data,
        tmp_path / "serve.log",
        settings={
            "POCHTA_LOG__FORMAT": "json",
            "POCHTA_LOG__LEVEL": "debug",
            "POCHTA_ANTISPAM__POOL_PROCESSES": "1",
        },
    )
    outputs: list[str] = []
    try:
        # HTTP: a wrong password, the right one, the session token used
        r = httpx.post(
            f"{srv.url}/v1/session", json={"email": "alice@example.org", "password": WRONG_GUESS}
        )
        assert r.status_code == 401
        r = httpx.post(
            f"{srv.url}/v1/session",
            json={"email": "alice@example.org", "password": SECRET_PASSWORD},
        )
        token = r.json()["token"]
        auth = {"Authorization": f"Bearer {token}"}
        assert httpx.get(f"{srv.url}/v1/folders", headers=auth).status_code == 200
        # SMTP: a client that tries AUTH with the password (pochta offers none), then a letter
        with smtplib.SMTP("127.0.0.1", srv.smtp_port) as client:
            client.ehlo()
            plain = base64.b64encode(f"\0alice@example.org\0{SECRET_PASSWORD}".encode())
            client.docmd("AUTH", "PLAIN " + plain.decode())
            client.docmd("AUTH", "LOGIN")
            client.docmd(base64.b64encode(SECRET_PASSWORD.encode()).decode())
            client.rset()
            raw = letter(subject="tied", attachments=[("a.bin", payload(3, 30_000))])
            client.sendmail("s@example.net", ["alice@example.org"], raw)
        # a service using the blob API with the service token
        r = httpx.get(f"{srv.url}/v1/blobs/{'0' * 64}/stat", headers=srv.auth)
        assert r.status_code == 404
        # a leak audit that finds the password
        dump = tmp_path / "dump.txt"
        dump.write_text(f"alice@example.org:{SECRET_PASSWORD}\nnobody@example.org:{WRONG_GUESS}\n")
        audit = subprocess.run(
            [sys.executable, "-m", "pochta", "leaks", "audit", str(dump), "--data", str(data),
             "--workers", "1"],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert audit.returncode == 0, audit.stderr
        outputs += [audit.stdout, audit.stderr]
    finally:
        srv.stop()
    text = srv.log.read_text()
    records = []
    for line in text.splitlines():
        records.append(json.loads(line))  # every line is one JSON object
    # one letter's lines: the session (aiosmtpd, at debug), the worker, the storage, the reply
    (done,) = [r for r in records if r["event"].startswith("delivered")]
    ours = [r for r in records if r.get("queue_id") == done["queue_id"]]
    loggers = {r["logger"] for r in ours}
    assert {"pochta.intake", "pochta.delivery", "pochta.smtp"} <= loggers, loggers
    assert any(r["logger"] == "mail.log" and r.get("session") == done["session"] for r in records)
    assert any(r["level"] == "debug" for r in records)
    # no secret anywhere: the server's log, the audit's output
    everything = text + "".join(outputs)
    for what, secret in secrets_of_run(token).items():
        assert secret not in everything, f"the {what} appears in the logs"


def test_sighup_without_tls_is_logged_not_fatal(quiet: Server) -> None:
    quiet.proc.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 10
    while "SIGHUP: no certificate to reload" not in quiet.log.read_text():
        assert time.monotonic() < deadline, "no line about the SIGHUP"
        time.sleep(0.05)
    assert quiet.proc.poll() is None
    httpx.get(f"{quiet.url}/healthz").raise_for_status()
