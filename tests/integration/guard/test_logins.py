"""Issue 27's finding through a real ``pochta serve``: 60 wrong passwords for alice from 20
loopback addresses (over HTTP and IMAP), then alice's right password. On main every door
answered 429 / NO [UNAVAILABLE], to her usual address too: anyone who knew her e-mail could
keep her out. Now her usual address, a new address in her network (within 5 s) and her
device token anywhere get in; a network she never used competes with the attack for the
account's slots (it is told when to come back, never refused for good)."""

from __future__ import annotations

import imaplib
import socket
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from tests.integration.conftest import Server, start_server
from tests.integration.test_smtp import PASSWORD, add_users

from pochta.app import build
from pochta.config import load_settings

pytestmark = pytest.mark.integration

ALICE = "alice@example.org"
USUAL = "127.0.0.1"  # where alice logs in from every day
NEARBY = "127.0.0.77"  # a new address in her network (127.0.0.0/24)
ATTACKERS = [f"127.0.9.{i}" for i in range(1, 21)]  # 20 addresses of another network
NEVER_SEEN = "127.0.50.1"  # a network she never used
FAR_AWAY = "127.0.60.1"  # another one, where she brings her device token


class FromAddress(imaplib.IMAP4):
    """imaplib's client with its socket bound to ``source`` (a stranger on 127.0.0.0/8);
    ``open`` is imaplib's documented place to make the connection differently."""

    def __init__(self, source: str, host: str, port: int) -> None:
        self.source = source
        super().__init__(host, port, timeout=30)

    def open(self, host: str = "", port: int = 143, timeout: float | None = None) -> None:
        self.host, self.port = host, port
        self.sock = socket.create_connection((host, port), timeout, source_address=(self.source, 0))
        self.file = self.sock.makefile("rb")


def http_login(
    server: Server, source: str, password: str, device: str | None = None
) -> httpx.Response:
    transport = httpx.HTTPTransport(local_address=source)
    with httpx.Client(transport=transport, timeout=30) as c:
        body = {"email": ALICE, "password": password}
        if device is not None:
            body["device"] = device
        return c.post(f"{server.url}/v1/session", json=body)


def imap_login(server: Server, source: str, password: str) -> str:
    """OK, or the server's NO text."""
    c = FromAddress(source, "127.0.0.1", server.imap_port)
    try:
        c.login(ALICE, password)
        return "OK"
    except imaplib.IMAP4.error as exc:
        return str(exc)
    finally:
        c.shutdown()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    data = tmp_path / "data"
    add_users(data)
    pochta = build(load_settings(data_dir=data, antispam={"pool_processes": 0}))
    try:
        pochta.mailbox.add_user(ALICE, PASSWORD)
    finally:
        pochta.close()
    srv = start_server(
        data, tmp_path / "serve.log", settings={"POCHTA_ANTISPAM__POOL_PROCESSES": "1"}
    )
    yield srv
    if srv.proc.poll() is None:
        srv.stop()


def test_an_attack_on_alices_account_does_not_keep_her_out(server: Server) -> None:
    first = http_login(server, USUAL, PASSWORD)  # her usual address, and a device token
    assert first.status_code == 200, first.text
    device = first.json().get("device")  # (main gave none)
    assert imap_login(server, USUAL, PASSWORD) == "OK"

    def guess(i: int) -> str:
        source = ATTACKERS[i % len(ATTACKERS)]
        if i % 2:
            return str(http_login(server, source, f"guess-{i}").status_code)
        return imap_login(server, source, f"guess-{i}")

    with ThreadPoolExecutor(20) as pool:  # 60 wrong passwords from 20 addresses
        answers = list(pool.map(guess, range(60)))
    assert "OK" not in answers and "200" not in answers
    assert any(a == "429" or "UNAVAILABLE" in a for a in answers)  # the attack was slowed

    assert http_login(server, USUAL, PASSWORD).status_code == 200  # on main: 429
    assert imap_login(server, USUAL, PASSWORD) == "OK"  # on main: NO [UNAVAILABLE]
    start = time.monotonic()  # a new address in her network: each within 5 s
    assert http_login(server, NEARBY, PASSWORD).status_code == 200
    assert time.monotonic() - start < 5.0
    start = time.monotonic()
    assert imap_login(server, "127.0.0.78", PASSWORD) == "OK"
    assert time.monotonic() - start < 5.0
    assert http_login(server, FAR_AWAY, PASSWORD, device).status_code == 200

    # a network alice never used is told when to come back (or let in at once when the
    # attack left a slot free): it competes with the attackers' addresses for the slots
    stranger = http_login(server, NEVER_SEEN, PASSWORD)
    if stranger.status_code == 429:
        assert 1 <= int(stranger.headers["retry-after"]) <= 48  # the slots' spacing
    else:
        assert stranger.status_code == 200
