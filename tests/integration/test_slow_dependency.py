"""A slow dependency slows only what needs it (issue 27, item 7), through ``pochta serve``:

- a DNS server that never answers holds no worker process: the server asks SPF/DKIM/DMARC
  beside the worker, and once the server is found out (three timeouts, an unanswered probe)
  a letter's checks are ``temperror`` at once;
- with PostgreSQL paused (SIGSTOP), ``/healthz`` answers from its background check, SMTP
  greets new clients, and the scan API decides, while recipient lookups and the HTTP
  requests that read the database wait for it.

The numbers with more letters and a 10 s pause: benchmarks/slow_dependency.py."""

from __future__ import annotations

import concurrent.futures
import smtplib
import socket
import threading
import time
from pathlib import Path

import httpx
import pytest

from pochta.app import build, service_token
from pochta.config import load_settings
from tests.dnsserver import silent_udp_port
from tests.integration.conftest import TOKEN, Server, start_server
from tests.integration.test_smtp import PASSWORD, add_users, raws
from tests.pgserver import NewDatabase, PostgresServer
from tests.unit.antispam_phishing.helpers import make_key, sign

pytestmark = pytest.mark.integration


def signed_letter(i: int) -> bytes:
    raw = (
        f"From: Bank <notice@mail.example.org>\r\nTo: alice@example.org\r\n"
        f"Subject: statement {i}\r\nDate: Tue, 14 Jan 2025 10:00:00 +0000\r\n"
        f"Message-ID: <s{i}@example.org>\r\n\r\nYour statement {i} is ready.\r\n"
    ).encode()
    return sign(raw, KEY, "example.org", "mail")


KEY = make_key(1024)


def deliver(port: int, raw: bytes, sender: str = "bounce@example.org") -> None:
    with smtplib.SMTP("127.0.0.1", port, timeout=60) as smtp:
        smtp.sendmail(sender, ["alice@example.org"], raw)


def test_a_dns_server_that_never_answers_holds_no_worker(tmp_path: Path) -> None:
    """One worker, six letters at once from a domain whose DNS never answers: before, each
    held the worker for its whole DNS lifetime (2 s: 12 s in all); now they take about one
    question's timeout together, and once the server is found out, none at all."""
    sock, port = silent_udp_port()
    data = tmp_path / "data"
    add_users(data, "alice@example.org")
    lifetime = 2.0
    settings = {
        "POCHTA_ANTISPAM__WORKERS": "1",
        "POCHTA_ANTISPAM__DNS": "system",
        "POCHTA_ANTISPAM__DNS_SERVER": f"127.0.0.1:{port}",
        "POCHTA_ANTISPAM__DNS_TIMEOUT": "0.5",
        "POCHTA_ANTISPAM__DNS_LIFETIME": str(lifetime),
    }
    srv: Server = start_server(data, tmp_path / "serve.log", settings=settings)
    try:
        n = 6
        with concurrent.futures.ThreadPoolExecutor(n) as pool:
            t0 = time.monotonic()
            list(pool.map(lambda i: deliver(srv.smtp_port, signed_letter(i)), range(n)))
            together = time.monotonic() - t0
        assert together < n * lifetime / 3, f"{n} letters took {together:.1f} s"
        deadline = time.monotonic() + 10
        while "the DNS server does not answer" not in srv.log.read_text():
            assert time.monotonic() < deadline, "the silent server was never found out"
            time.sleep(0.1)
        each = []
        with smtplib.SMTP("127.0.0.1", srv.smtp_port, timeout=60) as smtp:
            for i in range(n, n + 4):
                t0 = time.monotonic()
                smtp.sendmail("bounce@example.org", ["alice@example.org"], signed_letter(i))
                each.append(time.monotonic() - t0)
        assert max(each) < 0.5 * lifetime, f"letters one by one took {each}"
        stored = raws(srv, "alice@example.org")
        assert len(stored) == n + 4
        for raw in stored:
            head = raw.split(b"\r\n\r\n", 1)[0].replace(b"\r\n ", b" ").replace(b"\r\n\t", b" ")
            assert b"spf=temperror" in head and b"dkim=temperror" in head, head
            assert b"dmarc=temperror" in head, head
    finally:
        srv.stop()
        sock.close()


def _users_on(data: Path, dsn: str, *emails: str) -> None:
    s = load_settings(
        None,
        data_dir=data,
        mailbox={"backend": "postgres"},
        blobs={"backend": "postgres"},
        postgres={"dsn": dsn},
    )
    data.mkdir(parents=True, exist_ok=True)
    pochta = build(s)
    try:
        for email in emails:
            pochta.mailbox.add_user(email, PASSWORD)
    finally:
        pochta.close()
    service_token(s)


def _greeting(port: int) -> float:
    t0 = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        banner = s.recv(512)
    assert banner.startswith(b"220 "), banner
    return time.monotonic() - t0


def _get(port: int, path: str, out: list[bytes]) -> None:
    """A GET on a plain socket (an httpx client per thread costs tens of ms of CPU each, and
    45 of them would slow this test's own measurements)."""
    with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
        out.append(s.recv(64))


def _rcpt(port: int, out: list[int]) -> None:
    with smtplib.SMTP("127.0.0.1", port, timeout=60) as smtp:
        smtp.ehlo()
        smtp.mail("someone@example.net")
        out.append(smtp.rcpt("alice@example.org")[0])


def test_a_paused_database_stalls_only_what_needs_it(
    tmp_path: Path, postgres_server: PostgresServer, new_postgres_db: NewDatabase
) -> None:
    dsn = new_postgres_db()
    data = tmp_path / "data"
    _users_on(data, dsn, "alice@example.org")
    settings = {
        "POCHTA_MAILBOX__BACKEND": "postgres",
        "POCHTA_BLOBS__BACKEND": "postgres",
        "POCHTA_POSTGRES__DSN": dsn,
        "POCHTA_ANTISPAM__WORKERS": "1",
        "POCHTA_HTTP__HEALTH_INTERVAL_SECONDS": "0.3",
        "POCHTA_HTTP__HEALTH_STALE_SECONDS": "1.5",
    }
    srv = start_server(data, tmp_path / "serve.log", settings=settings)
    letter = b"From: a@example.net\r\nTo: alice@example.org\r\nSubject: hi\r\n\r\nhello\r\n"
    try:
        assert httpx.get(f"{srv.url}/healthz", timeout=5).json()["status"] == "ok"
        rcpts: list[int] = []
        scraped: list[bytes] = []
        stalled = [
            threading.Thread(target=_rcpt, args=(srv.smtp_port, rcpts)) for _ in range(10)
        ] + [  # more than Starlette's 40 threads, each waiting for the pair database
            threading.Thread(target=_get, args=(srv.port, "/metrics", scraped)) for _ in range(45)
        ]
        health: list[tuple[float, int]] = []
        greetings: list[float] = []
        with postgres_server.paused(), httpx.Client(base_url=srv.url, timeout=30) as client:
            for t in stalled:
                t.start()
            time.sleep(0.5)  # every lookup and /metrics is waiting on the database now
            for _ in range(10):
                t0 = time.monotonic()
                r = client.get("/healthz")
                health.append((time.monotonic() - t0, r.status_code))
                greetings.append(_greeting(srv.smtp_port))
                time.sleep(0.15)
            t0 = time.monotonic()
            scan = client.post(
                "/v1/scan", content=letter, headers={"Authorization": f"Bearer {TOKEN}"}
            )
            scanned = time.monotonic() - t0
            last = client.get("/healthz").json()
        for t in stalled:
            t.join(60)
        assert len(scraped) == 45 and all(b" 200 " in r for r in scraped)
        assert max(t for t, _ in health) < 1.0, f"/healthz took {health}"
        assert max(greetings) < 1.0, f"greetings took {greetings}"
        assert scan.status_code == 200 and scanned < 3.0, f"the scan took {scanned:.2f} s"
        # the pause outlasted health_stale_seconds: degraded, saying why, never waiting
        assert last["status"] == "degraded", last
        assert "has not answered for" in last["problem"]
        assert rcpts == [250] * 10  # the lookups waited for the database and went on
        deadline = time.monotonic() + 10
        while httpx.get(f"{srv.url}/healthz", timeout=5).status_code != 200:
            assert time.monotonic() < deadline, "/healthz never came back"
            time.sleep(0.2)
    finally:
        srv.stop()
