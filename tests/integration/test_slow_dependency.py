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
from tests.integration.test_smtp import PASSWORD, add_users, received
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


def _at_once(port: int, first: int, n: int) -> float:
    """Seconds for ``n`` signed letters sent at once, one connection each."""
    with concurrent.futures.ThreadPoolExecutor(n) as pool:
        t0 = time.monotonic()
        list(pool.map(lambda i: deliver(port, signed_letter(i)), range(first, first + n)))
        return time.monotonic() - t0


def _one_by_one(port: int, first: int, n: int) -> list[float]:
    each = []
    with smtplib.SMTP("127.0.0.1", port, timeout=60) as smtp:
        for i in range(first, first + n):
            t0 = time.monotonic()
            smtp.sendmail("bounce@example.org", ["alice@example.org"], signed_letter(i))
            each.append(time.monotonic() - t0)
    return each


def test_a_dns_server_that_never_answers_holds_no_worker(tmp_path: Path) -> None:
    """One worker, six letters at once from a domain whose DNS never answers: before, each
    held the worker for its whole DNS lifetime (2 s: 12 s in all); now they take about one
    question's timeout together, and once the server is found out, none at all. Measured
    against the same letters to a server with ``dns = "off"`` beside it, so that a loaded
    machine slows both alike."""
    sock, port = silent_udp_port()
    add_users(tmp_path / "data", "alice@example.org")
    add_users(tmp_path / "off", "alice@example.org")
    lifetime = 2.0
    settings = {
        "POCHTA_ANTISPAM__POOL_PROCESSES": "1",
        "POCHTA_ANTISPAM__DNS": "system",
        "POCHTA_ANTISPAM__DNS_SERVER": f"127.0.0.1:{port}",
        "POCHTA_ANTISPAM__DNS_TIMEOUT": "0.5",
        "POCHTA_ANTISPAM__DNS_LIFETIME": str(lifetime),
    }
    with concurrent.futures.ThreadPoolExecutor(2) as starting:  # both start at once
        silent = starting.submit(
            start_server, tmp_path / "data", tmp_path / "serve.log", settings=settings
        )
        without_dns = {"POCHTA_ANTISPAM__POOL_PROCESSES": "1", "POCHTA_ANTISPAM__DNS": "off"}
        off = starting.submit(
            start_server, tmp_path / "off", tmp_path / "off.log", settings=without_dns
        ).result()
        srv: Server = silent.result()
    try:
        n = 6
        together = _at_once(srv.smtp_port, 0, n)
        without = _at_once(off.smtp_port, 0, n)
        assert together - without < n * lifetime / 3, f"{together:.1f} s; off: {without:.1f} s"
        deadline = time.monotonic() + 10
        while "the DNS server does not answer" not in srv.log.read_text():
            assert time.monotonic() < deadline, "the silent server was never found out"
            time.sleep(0.1)
        each = _one_by_one(srv.smtp_port, n, 4)
        each_off = _one_by_one(off.smtp_port, n, 4)
        assert max(each) - max(each_off) < 0.5 * lifetime, f"{each}; off: {each_off}"
        # the figures in /metrics: the breaker open, the questions that timed out first
        exposed = httpx.get(f"{srv.url}/metrics", timeout=30).text.splitlines()
        assert "pochta_dns_server_down 1.0" in exposed
        assert "pochta_dns_server_outages_total 1.0" in exposed
        questions = {
            x.split('"')[1]: float(x.split()[-1])
            for x in exposed
            if x.startswith("pochta_dns_questions_total{")
        }
        assert questions["timed_out"] >= 3 and questions["server_down"] >= 1, questions
        stored = received(srv, "alice@example.org", n + 4)
        assert len(stored) == n + 4
        for raw in stored:
            head = raw.split(b"\r\n\r\n", 1)[0].replace(b"\r\n ", b" ").replace(b"\r\n\t", b" ")
            assert b"spf=temperror" in head and b"dkim=temperror" in head, head
            assert b"dmarc=temperror" in head, head
    finally:
        srv.stop()
        off.stop()
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
        "POCHTA_ANTISPAM__POOL_PROCESSES": "1",
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
