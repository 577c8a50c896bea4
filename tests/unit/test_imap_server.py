"""The IMAP server in-process (a real socket, a real mailbox; no `pochta serve`): its limits on
what a client controls, its login limits, STARTTLS and IMAPS with a certificate made here,
APPEND, UID EXPUNGE and folder names."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import datetime
import functools
import hashlib
import imaplib
import ipaddress
import re
import socket
import ssl
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from tests.mailtools import letter, payload

from pochta.antispam.verdict import Analyzer
from pochta.app import Pochta, build
from pochta.budget import Budget
from pochta.config import SmtpSettings, load_settings
from pochta.cpupool import CpuPool
from pochta.errors import RateLimited
from pochta.mailbox.intake import AnalysisSettings, Intake, init_pool_process
from pochta.netaddr import LOOPBACK, parse_networks, within
from pochta.server import imapstore, smtp
from pochta.server.imap import ImapLimits, ImapServer
from pochta.server.imapstore import ImapStore
from pochta.server.passwords import PasswordSlots

PASSWORD = "correct horse battery"
ALICE = "alice@example.org"


@pytest.fixture(scope="module")
def pochta(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pochta]:
    data = tmp_path_factory.mktemp("imap") / "data"
    p = build(
        load_settings(
            data_dir=data,
            smtp={"max_message_size": 1 << 20},
            guard={
                "login_ip_max": 1000,
                "login_client_max": 1000,
                "login_account_free": 1000,
                "login_account_checks": 3000,
            },
            antispam={"enabled": False, "pool_processes": 0},
        )
    )
    p.mailbox.add_user(ALICE, PASSWORD)
    yield p
    p.close()


@dataclass
class Running:
    port: int
    tls_port: int
    server: ImapServer
    loop: asyncio.AbstractEventLoop

    def run(self, fn: Callable[[], Any]) -> Any:
        done: Future[Any] = Future()
        self.loop.call_soon_threadsafe(lambda: done.set_result(fn()))
        return done.result(5)


def certificate(where: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and localhost, and its key."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = where / "cert.pem", where / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


@pytest.fixture(scope="module")
def cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return certificate(tmp_path_factory.mktemp("tls"))


def client_context(cert: tuple[Path, Path]) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(cert[0]))
    return ctx


def start(
    pochta: Pochta,
    limits: ImapLimits,
    cert: tuple[Path, Path] | None = None,
    store: ImapStore | None = None,
    **options: Any,
) -> Iterator[Running]:
    """A server on a loop of its own; ``options``: more of ImapServer's (budget, cleartext,
    spool_dir, require_tls...)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    tls = None
    if cert is not None:

        def tls() -> ssl.SSLContext:
            ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            ctx.load_cert_chain(str(cert[0]), str(cert[1]))
            return ctx

    async def up() -> tuple[ImapServer, list[asyncio.Server]]:
        server = ImapServer(store or ImapStore(pochta.mailbox), limits, tls=tls, **options)
        listeners = [await server.start("127.0.0.1", 0)]
        if tls is not None:
            listeners.append(await server.start("127.0.0.1", 0, implicit_tls=True))
        return server, listeners

    server, listeners = asyncio.run_coroutine_threadsafe(up(), loop).result(10)
    ports = [s.sockets[0].getsockname()[1] for s in listeners]
    yield Running(ports[0], ports[-1], server, loop)

    async def down() -> None:
        for s in listeners:
            s.close()
        await server.close()

    asyncio.run_coroutine_threadsafe(down(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)
    loop.close()


LIMITS = ImapLimits(
    line_length=2048,
    literal_size=1 << 20,
    login_command=1024,
    literals=3,
    ranges=50,
    connections=20,
    connections_per_ip=4,
    idle_sessions=1,
    error_limit=4,
    login_timeout=20.0,
    idle_timeout=30.0,
    idle_poll=0.1,
)


@pytest.fixture(scope="module")
def imap(pochta: Pochta) -> Iterator[Running]:
    yield from start(pochta, LIMITS)


@pytest.fixture(scope="module")
def imaps(pochta: Pochta, cert: tuple[Path, Path]) -> Iterator[Running]:
    yield from start(pochta, LIMITS, cert)


class Raw:
    """A client that speaks bytes, for what imaplib will not send."""

    def __init__(self, port: int, source: str = "127.0.0.1") -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), 10, (source, 0))
        self.f = self.sock.makefile("rwb")
        self.greeting = self.f.readline()

    def send(self, data: bytes) -> None:
        self.f.write(data)
        self.f.flush()

    def until(self, tag: bytes) -> list[bytes]:
        lines = []
        while True:
            line = self.f.readline()
            lines.append(line)
            if not line or line.startswith(tag + b" ") or line.startswith(b"* BYE"):
                return lines

    def login(self) -> None:
        self.send(
            b"l LOGIN %s {%d+}\r\n%s\r\n" % (ALICE.encode(), len(PASSWORD), PASSWORD.encode())
        )
        assert self.until(b"l")[-1].startswith(b"l OK")

    def close(self) -> None:
        self.f.close()
        self.sock.close()


def test_a_line_over_the_limit_ends_the_session(imap: Running) -> None:
    c = Raw(imap.port)
    c.send(b"a NOOP " + b"x" * 3000 + b"\r\n")
    assert c.f.readline().startswith(b"* BYE [TOOBIG]")
    assert c.f.readline() == b""
    c.close()


def test_too_many_literals_or_ranges_are_refused(imap: Running) -> None:
    c = Raw(imap.port)
    c.login()
    c.send(b"s SELECT INBOX\r\n")
    c.until(b"s")
    ranges = ",".join(str(n) for n in range(1, 120, 2)).encode()
    c.send(b"f FETCH " + ranges + b" (FLAGS)\r\n")
    assert c.until(b"f")[-1].startswith(b"f BAD more than 50 ranges")
    c.send(b"g SEARCH SUBJECT {1}\r\n")
    assert c.f.readline().startswith(b"+")
    c.send(b"a OR SUBJECT {1}\r\n")
    c.f.readline()
    c.send(b"b SUBJECT {1}\r\n")
    c.f.readline()
    c.send(b"c SUBJECT {1}\r\n")
    assert c.f.readline().startswith(b"g NO [TOOBIG] more than 3 literals")
    c.close()


def test_connections_per_ip_are_limited(imap: Running) -> None:
    open_ = [Raw(imap.port) for _ in range(4)]
    assert all(c.greeting.startswith(b"* OK") for c in open_)
    extra = Raw(imap.port)
    assert extra.greeting.startswith(b"* BYE [UNAVAILABLE] too many connections")
    for c in [*open_, extra]:
        c.close()


def test_errors_end_the_session_and_silence_too(imap: Running, pochta: Pochta) -> None:
    c = Raw(imap.port)
    for n in range(3):
        c.send(b"x%d BLAH\r\n" % n)
        assert c.f.readline().startswith(b"x%d BAD" % n)
    c.send(b"x4 FETCH\r\n")
    assert c.f.readline().startswith(b"x4 BAD")
    assert c.f.readline().startswith(b"* BYE too many errors")
    c.close()
    for running in start(pochta, dataclasses.replace(LIMITS, login_timeout=0.5)):
        quiet = Raw(running.port)
        assert quiet.f.readline().startswith(b"* BYE autologout")
        quiet.close()
        # the bound is on a whole command, not on the silence between two bytes of it
        slow = Raw(running.port)
        began = time.monotonic()
        for ch in b"a NO":
            slow.send(bytes([ch]))
            time.sleep(0.1)
        assert slow.f.readline().startswith(b"* BYE autologout")
        assert time.monotonic() - began < 1.5
        slow.close()
        # a command every 0.3 s: each within the bound, the session goes on past it
        busy = Raw(running.port)
        for n in range(5):
            time.sleep(0.3)
            busy.send(b"n%d NOOP\r\n" % n)
            assert busy.f.readline().startswith(b"n%d OK" % n)
        busy.close()


def test_idle_sessions_are_limited(imap: Running) -> None:
    first, second = Raw(imap.port), Raw(imap.port)
    for c in (first, second):
        c.login()
        c.send(b"s SELECT INBOX\r\n")
        c.until(b"s")
    first.send(b"i IDLE\r\n")
    assert first.f.readline().startswith(b"+")
    second.send(b"i IDLE\r\n")
    assert second.f.readline().startswith(b"i NO [LIMIT]")
    first.send(b"DONE\r\n")
    assert first.until(b"i")[-1].startswith(b"i OK")
    second.send(b"j IDLE\r\n")
    assert second.f.readline().startswith(b"+")
    second.send(b"DONE\r\n")
    assert second.until(b"j")[-1].startswith(b"j OK")
    first.close()
    second.close()


def test_imap_logins_count_toward_the_http_apis_limits(pochta: Pochta, tmp_path: Path) -> None:
    p = build(
        load_settings(
            data_dir=tmp_path / "data",
            guard={"login_ip_max": 2, "login_ip_period": 3600},
            antispam={"enabled": False, "pool_processes": 0},
        )
    )
    try:
        p.mailbox.add_user(ALICE, PASSWORD)
        for running in start(p, LIMITS):
            for _ in range(2):
                c = imaplib.IMAP4("127.0.0.1", running.port)
                with pytest.raises(imaplib.IMAP4.error, match="AUTHENTICATIONFAILED"):
                    c.login(ALICE, "wrong")
                c.shutdown()
            c = imaplib.IMAP4("127.0.0.1", running.port)
            with pytest.raises(imaplib.IMAP4.error, match=r"UNAVAILABLE\] too many login"):
                c.login(ALICE, PASSWORD)  # the right password, but the IP used its tries
            c.shutdown()
            with pytest.raises(RateLimited):  # the HTTP API's login sees the same limit
                p.mailbox.login(ALICE, PASSWORD, ip="127.0.0.1")
    finally:
        p.close()


def test_a_login_waits_for_its_slot_without_holding_up_other_logins(tmp_path: Path) -> None:
    """An account under attack: a login from an address it does not know waits for the
    account's next slot (asleep in the event loop), while a login to another account, under
    the same one-at-a-time argon2 limit, goes through at once."""
    p = build(
        load_settings(
            data_dir=tmp_path / "data",
            guard={"login_account_free": 1, "login_max_wait": 5.0},  # then 2.4 s, 4.8 s...
            antispam={"enabled": False, "pool_processes": 0},
        )
    )
    try:
        p.mailbox.add_user(ALICE, PASSWORD)
        p.mailbox.add_user("bob@example.org", PASSWORD)
        for running in start(p, LIMITS, passwords=PasswordSlots(1)):
            for _ in range(2):  # the free check, then one at once: the next slot is 2.4 s away
                c = imaplib.IMAP4("127.0.0.1", running.port)
                with pytest.raises(imaplib.IMAP4.error, match="AUTHENTICATIONFAILED"):
                    c.login(ALICE, "guess")
                c.shutdown()
            waited: list[float] = []

            def alice(port: int, waited: list[float]) -> None:
                start = time.monotonic()
                c = imaplib.IMAP4("127.0.0.1", port)
                c.login(ALICE, PASSWORD)
                waited.append(time.monotonic() - start)
                c.logout()

            thread = threading.Thread(target=alice, args=(running.port, waited))
            thread.start()
            time.sleep(0.5)  # alice is waiting for her slot now
            start_bob = time.monotonic()
            bob = imaplib.IMAP4("127.0.0.1", running.port)
            bob.login("bob@example.org", PASSWORD)
            bob_took = time.monotonic() - start_bob
            bob.logout()
            thread.join(30)
            assert waited and 2.0 < waited[0] < 10.0
            assert bob_took < waited[0] - 0.5  # bob was not queued behind alice's wait
    finally:
        p.close()


def test_append_stores_the_letter_with_its_flags_and_date(imap: Running, pochta: Pochta) -> None:
    raw = letter(subject="Draft of the report", attachments=[("a.bin", payload(3, 30_000))])
    c = imaplib.IMAP4("127.0.0.1", imap.port)
    c.login(ALICE, PASSWORD)
    c.create("Drafts")
    when = imaplib.Time2Internaldate(1_700_000_000)
    typ, data = c.append("Drafts", "(\\Draft \\Seen)", when, raw)
    assert typ == "OK"
    m = re.search(rb"APPENDUID (\d+) (\d+)", data[0])  # type: ignore[arg-type]
    assert m is not None
    c.select("Drafts")
    typ, data = c.uid("FETCH", m.group(2).decode(), "(FLAGS INTERNALDATE BODY.PEEK[])")
    head, body = data[0]  # type: ignore[misc]
    assert body == raw
    assert b"\\Draft" in head and b"\\Seen" in head
    assert b'INTERNALDATE "14-Nov-2023 22:13:20 +0000"' in head
    typ, data = c.append("Nowhere", None, None, raw)
    assert typ == "NO" and b"TRYCREATE" in data[0]  # type: ignore[operator]
    c.logout()


def test_uid_expunge_removes_only_the_letters_named(imap: Running, pochta: Pochta) -> None:
    c = imaplib.IMAP4("127.0.0.1", imap.port)
    c.login(ALICE, PASSWORD)
    c.create("Trash")
    for n in range(3):
        c.append("Trash", "(\\Deleted)", None, letter(subject=f"old {n}"))
    c.select("Trash")
    uids = c.uid("SEARCH", "ALL")[1][0].split()  # type: ignore[union-attr]
    assert c.uid("EXPUNGE", uids[1].decode())[0] == "OK"
    assert c.response("EXPUNGE") == ("EXPUNGE", [b"2"])
    assert c.uid("SEARCH", "ALL")[1][0].split() == [uids[0], uids[2]]  # type: ignore[union-attr]
    c.close()  # CLOSE expunges the rest
    c.select("Trash")
    assert c.uid("SEARCH", "ALL")[1] == [b""]
    c.logout()


def test_folder_names_in_modified_utf7(imap: Running, pochta: Pochta) -> None:
    c = imaplib.IMAP4("127.0.0.1", imap.port)
    c.login(ALICE, PASSWORD)
    assert c.create('"&BB8EPgRHBEIEMA-"')[0] == "OK"  # Почта
    assert any(b'"&BB8EPgRHBEIEMA-"' in line for line in c.list()[1])  # type: ignore[operator, union-attr]
    user = pochta.mailbox.user(ALICE)
    assert user is not None
    assert "Почта" in [f.name for f in pochta.mailbox.folders(user.id)]
    assert c.create("INBOX")[0] == "NO"
    hostile = '"' + "*a" * 30 + '*b"'  # backtracking would take ages on a long name
    c.create("a" * 190)
    started = time.monotonic()
    assert c.list('""', hostile) == ("OK", [None])
    assert time.monotonic() - started < 2
    with pytest.raises(imaplib.IMAP4.error, match="LIST pattern longer than 1000"):
        c.list('""', '"' + "*" * 1001 + '"')
    c.logout()


def test_starttls_comes_before_the_login(imaps: Running, cert: tuple[Path, Path]) -> None:
    c = imaplib.IMAP4("127.0.0.1", imaps.port)
    assert "STARTTLS" in c.capabilities and "LOGINDISABLED" in c.capabilities
    with pytest.raises(imaplib.IMAP4.error, match="PRIVACYREQUIRED"):
        c.login(ALICE, PASSWORD)
    c.starttls(client_context(cert))
    typ, _ = c.login(ALICE, PASSWORD)
    assert typ == "OK"
    assert c.select("INBOX")[0] == "OK"
    c.logout()


def test_what_was_sent_before_the_handshake_is_never_read(
    imaps: Running, cert: tuple[Path, Path]
) -> None:
    raw = socket.create_connection(("127.0.0.1", imaps.port), timeout=10)
    f = raw.makefile("rwb")
    f.readline()
    f.write(b"a STARTTLS\r\nb CAPABILITY\r\n")  # b is injected before the handshake
    f.flush()
    assert f.readline().startswith(b"a OK")
    tls = client_context(cert).wrap_socket(raw, server_hostname="localhost")
    tf = tls.makefile("rwb")
    tf.write(b"c NOOP\r\n")
    tf.flush()
    assert tf.readline().startswith(b"c OK")  # b was thrown away: no answer to it
    tf.close()
    f.close()
    tls.close()


def test_implicit_tls(imaps: Running, cert: tuple[Path, Path]) -> None:
    c = imaplib.IMAP4_SSL("127.0.0.1", imaps.tls_port, ssl_context=client_context(cert))
    assert "STARTTLS" not in c.capabilities and "AUTH=PLAIN" in c.capabilities
    assert c.login(ALICE, PASSWORD)[0] == "OK"
    raw = letter(subject="over TLS")
    c.append("INBOX", None, None, raw)
    c.select("INBOX")
    _, data = c.uid("SEARCH", "SUBJECT", '"over TLS"')
    uid = data[0].split()[-1]  # type: ignore[union-attr]
    assert c.uid("FETCH", uid.decode(), "(BODY.PEEK[])")[1][0][1] == raw  # type: ignore[index]
    c.logout()


def test_a_big_letter_is_streamed_not_held_whole(imap: Running, pochta: Pochta) -> None:
    """FETCH of a letter with a 24 MB attachment: the server's Python allocations stay far
    below the letter's size (the client here reads and hashes as the bytes come)."""
    attachment = payload(11, 24 << 20)
    raw = letter(subject="big one", attachments=[("big.bin", attachment)])
    user = pochta.mailbox.user(ALICE)
    assert user is not None
    pochta.mailbox.delivery.max_message_size = 64 << 20
    pochta.mailbox.deliver(raw, [user], folder="Inbox")
    want = hashlib.sha256(raw).hexdigest()
    del raw, attachment
    c = Raw(imap.port)
    c.login()
    c.send(b"s SELECT INBOX\r\n")
    c.until(b"s")
    c.send(b'u UID SEARCH SUBJECT "big one"\r\n')
    uid = c.until(b"u")[0].split()[-1]
    tracemalloc.start()
    try:
        c.send(b"f UID FETCH " + uid + b" (BODY.PEEK[])\r\n")
        head = c.f.readline()
        size = int(re.search(rb"\{(\d+)\}\r\n$", head).group(1))  # type: ignore[union-attr]
        digest = hashlib.sha256()
        left = size
        while left:
            chunk = c.f.read(min(left, 1 << 16))
            digest.update(chunk)
            left -= len(chunk)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert c.until(b"f")[-1].startswith(b"f OK")
    assert digest.hexdigest() == want
    assert size > 32 << 20  # base64 of 24 MB
    assert peak < 8 << 20, peak
    c.close()


# -- issue 27: bounded before and after the login, a budget, the store off the loop, no clear
# -- text off loopback


def closed(c: Raw) -> bool:
    """The server closed the connection (what it sent before is read and dropped)."""
    try:
        while c.f.readline():
            pass
    except ConnectionError:
        pass
    return True


def test_before_the_login_a_big_literal_is_refused_unread_and_the_connection_closed(
    imap: Running,
) -> None:
    """Before the login a command holds ``login_command`` bytes (1 KB here) in all: a larger
    literal gets BYE before a byte of it is read; a synchronizing one never gets its "+"."""
    c = Raw(imap.port)
    c.send(b"a LOGIN {2000}\r\n")
    assert c.f.readline().startswith(b"* BYE [TOOBIG] before the login")
    assert c.f.readline() == b""  # closed, and no "+ go ahead" came first
    c.close()
    c = Raw(imap.port)
    c.send(b"a LOGIN {600}\r\n")
    assert c.f.readline().startswith(b"+")
    c.send(b"x" * 600 + b" {600}\r\n")  # two literals that fit alone do not fit together
    assert c.f.readline().startswith(b"* BYE [TOOBIG]")
    c.close()
    c = Raw(imap.port)
    c.send(b"a LOGIN alice {500000+}\r\n")  # LITERAL+: it comes anyway; the connection goes

    def push() -> None:
        with contextlib.suppress(OSError):
            c.sock.sendall(b"x" * 500_000)

    sender = threading.Thread(target=push)
    sender.start()
    assert c.f.readline().startswith(b"* BYE [TOOBIG] before the login")
    assert closed(c)
    sender.join(10)
    c.close()


def test_before_the_login_an_authenticate_response_is_bounded_too(pochta: Pochta) -> None:
    limits = dataclasses.replace(LIMITS, line_length=65536)
    for running in start(pochta, limits):
        c = Raw(running.port)
        c.send(b"a AUTHENTICATE PLAIN\r\n")
        assert c.f.readline().startswith(b"+")
        c.send(base64.b64encode(b"\0" + ALICE.encode() + b"\0" + b"p" * 3000) + b"\r\n")
        assert c.f.readline().startswith(b"* BYE [TOOBIG] an AUTHENTICATE response longer")
        assert closed(c)
        c.close()


def test_after_the_login_a_command_is_bounded_in_total_its_literals_included(
    imap: Running,
) -> None:
    c = Raw(imap.port)
    c.login()
    c.send(b"s SEARCH SUBJECT {1500}\r\n")
    assert c.f.readline().startswith(b"+")
    c.send(b"y" * 1500 + b" SUBJECT {1500}\r\n")  # 3,000 bytes of literals: over 2,048
    assert c.f.readline().startswith(b"s NO [TOOBIG] a command takes at most 2048 bytes")
    c.send(b"n NOOP\r\n")  # refused before the "+": the client sent nothing more
    assert c.until(b"n")[-1].startswith(b"n OK")
    c.send(b"t SEARCH SUBJECT {3000+}\r\n")
    assert c.f.readline().startswith(b"* BYE [TOOBIG]")
    c.close()


def spooled(where: Path) -> list[Path]:
    return sorted(where.glob("*.letter")) if where.is_dir() else []


def wait_until(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_append_spools_a_big_letter_to_a_file_that_goes_in_every_outcome(
    pochta: Pochta, tmp_path: Path
) -> None:
    """APPEND's letter past ``spool_threshold`` goes to a file as it comes (the budget holds
    nothing for it), is stored from there byte for byte, and its file is removed whether the
    letter is stored, refused or cut off."""
    spool = tmp_path / "spool"
    budget = Budget(1 << 20)
    limits = dataclasses.replace(LIMITS, spool_threshold=64 << 10)
    raw = letter(subject="spooled", attachments=[("a.bin", payload(5, 400_000))])
    for running in start(pochta, limits, spool_dir=spool, budget=budget):
        c = Raw(running.port)
        c.login()
        c.send(b"a APPEND INBOX (\\Seen) {%d+}\r\n" % len(raw) + raw[:300_000])
        wait_until(lambda: bool(spooled(spool)) and spooled(spool)[0].stat().st_size >= 200_000)
        assert budget.used <= 2048  # the letter is in its file, not in memory
        c.send(raw[300_000:] + b"\r\n")
        done = c.until(b"a")[-1]
        assert done.startswith(b"a OK [APPENDUID"), done
        assert spooled(spool) == [] and budget.used == 0
        uid = done.split()[4].rstrip(b"]")
        c.send(b"s SELECT INBOX\r\n")
        c.until(b"s")
        c.send(b"f UID FETCH " + uid + b" (FLAGS BODY.PEEK[])\r\n")
        head = c.f.readline()
        assert b"\\Seen" in head
        assert c.f.read(len(raw)) == raw
        assert c.until(b"f")[-1].startswith(b"f OK")
        # refused: the folder does not exist
        c.send(b"b APPEND Nowhere {%d+}\r\n" % len(raw) + raw + b"\r\n")
        assert c.until(b"b")[-1].startswith(b"b NO [TRYCREATE]")
        assert spooled(spool) == []
        # cut off: the client goes away in the middle of the letter
        c.send(b"c APPEND INBOX {%d+}\r\n" % len(raw) + raw[:200_000])
        wait_until(lambda: bool(spooled(spool)))
        c.close()
        wait_until(lambda: spooled(spool) == [] and budget.used == 0)


def test_when_the_budget_is_spent_literals_are_refused_and_letters_spooled(
    pochta: Pochta, tmp_path: Path
) -> None:
    """With nothing left in the server's budget, a literal that must be parsed in memory is
    refused before it is read (NO; BYE for LITERAL+), and an APPEND still works: its letter
    goes to a file from the first byte."""
    budget = Budget(0)
    for running in start(pochta, LIMITS, spool_dir=tmp_path / "spool", budget=budget):
        c = Raw(running.port)
        c.send(b'l LOGIN %s "%s"\r\n' % (ALICE.encode(), PASSWORD.encode()))
        assert c.until(b"l")[-1].startswith(b"l OK")
        c.send(b"s SEARCH SUBJECT {3}\r\n")
        assert c.f.readline().startswith(b"s NO [UNAVAILABLE]")
        raw = letter(subject="while the budget is spent")
        c.send(b"a APPEND INBOX {%d+}\r\n" % len(raw) + raw + b"\r\n")
        assert c.until(b"a")[-1].startswith(b"a OK [APPENDUID")
        c.send(b"t SEARCH SUBJECT {3+}\r\nabc\r\n")
        assert c.f.readline().startswith(b"* BYE [UNAVAILABLE]")
        c.close()
    assert budget.used == 0


class StallingIndex:
    """The mailbox index, but folder listings wait while ``gate`` is closed: a database that
    stopped answering."""

    def __init__(self, index: Any, gate: threading.Event) -> None:
        self.index = index
        self.gate = gate

    def folders(self, user_id: int) -> Any:
        self.gate.wait(30)
        return self.index.folders(user_id)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.index, name)


def test_a_stalled_index_stalls_only_the_imap_commands_that_wait_on_it(
    pochta: Pochta, tmp_path: Path
) -> None:
    """A SELECT waits on a stalled index; meanwhile another IMAP session is greeted and
    answered and SMTP (on the same event loop) greets its clients at once."""
    gate = threading.Event()
    store = ImapStore(pochta.mailbox)
    store.index = StallingIndex(pochta.mailbox.index, gate)
    limits = dataclasses.replace(LIMITS, store_threads=2)
    for running in start(pochta, limits, store=store):
        settings = SmtpSettings(port=0, lmtp_port=0, hostname="mx.pochta.test")
        listeners = asyncio.run_coroutine_threadsafe(
            smtp.start(pochta.mailbox, pochta.intake, settings, tmp_path / "spool"),
            running.loop,
        ).result(10)
        smtp_port = listeners[0].sockets[0].getsockname()[1]
        try:
            stuck = Raw(running.port)
            stuck.login()
            stuck.send(b"s SELECT INBOX\r\n")
            time.sleep(0.3)  # the SELECT is waiting on the index now
            began = time.monotonic()
            other = Raw(running.port)
            assert other.greeting.startswith(b"* OK")
            other.send(b"c CAPABILITY\r\nn NOOP\r\n")
            assert other.until(b"c")[-1].startswith(b"c OK")
            assert other.until(b"n")[-1].startswith(b"n OK")
            with socket.create_connection(("127.0.0.1", smtp_port), timeout=5) as s:
                assert s.makefile("rb").readline().startswith(b"220 ")
            assert time.monotonic() - began < 3  # not a 30 s stall
            gate.set()
            assert stuck.until(b"s")[-1].startswith(b"s OK [READ-WRITE]")
            other.close()
            stuck.close()
        finally:
            gate.set()

            for listener in listeners:
                running.loop.call_soon_threadsafe(listener.close)


def test_no_clear_text_password_from_outside_the_allowed_networks(pochta: Pochta) -> None:
    """Without TLS, only clients on the allowed networks may log in (here 127.0.0.1 alone;
    127.0.0.2 plays a stranger): elsewhere LOGINDISABLED and NO [PRIVACYREQUIRED]."""
    for running in start(pochta, LIMITS, cleartext=["127.0.0.1/32"]):
        stranger = Raw(running.port, source="127.0.0.2")
        assert b"LOGINDISABLED" in stranger.greeting and b"AUTH=PLAIN" not in stranger.greeting
        stranger.send(b'a LOGIN %s "%s"\r\n' % (ALICE.encode(), PASSWORD.encode()))
        assert stranger.f.readline().startswith(b"a NO [PRIVACYREQUIRED]")
        stranger.send(b"b AUTHENTICATE PLAIN\r\n")
        assert stranger.f.readline().startswith(b"b NO [PRIVACYREQUIRED]")  # no "+" first
        stranger.close()
        local = imaplib.IMAP4("127.0.0.1", running.port)
        assert "AUTH=PLAIN" in local.capabilities and "LOGINDISABLED" not in local.capabilities
        assert local.login(ALICE, PASSWORD)[0] == "OK"
        local.logout()


def test_with_tls_a_stranger_logs_in_after_starttls(
    pochta: Pochta, cert: tuple[Path, Path]
) -> None:
    """TLS offered but not required of everyone (``tls.require_starttls = false``): loopback
    may log in in clear, a stranger only after STARTTLS."""
    for running in start(pochta, LIMITS, cert, cleartext=["127.0.0.1/32"], require_tls=False):
        stranger = Raw(running.port, source="127.0.0.2")
        assert b"STARTTLS" in stranger.greeting and b"LOGINDISABLED" in stranger.greeting
        stranger.send(b'a LOGIN %s "%s"\r\n' % (ALICE.encode(), PASSWORD.encode()))
        assert stranger.f.readline().startswith(b"a NO [PRIVACYREQUIRED] log in over TLS")
        stranger.send(b"t STARTTLS\r\n")
        assert stranger.f.readline().startswith(b"t OK")
        tls = client_context(cert).wrap_socket(stranger.sock, server_hostname="localhost")
        f = tls.makefile("rwb")
        f.write(b'c CAPABILITY\r\nl LOGIN %s "%s"\r\n' % (ALICE.encode(), PASSWORD.encode()))
        f.flush()
        caps = f.readline()
        assert b"AUTH=PLAIN" in caps and b"LOGINDISABLED" not in caps
        assert f.readline().startswith(b"c OK")
        assert f.readline().startswith(b"l OK")
        f.close()
        tls.close()
        local = imaplib.IMAP4("127.0.0.1", running.port)
        assert local.login(ALICE, PASSWORD)[0] == "OK"
        local.logout()


@pytest.mark.parametrize(
    ("peer", "allowed"),
    [
        ("127.0.0.1", True),
        ("127.9.9.9", True),
        ("::1", True),
        ("::ffff:127.0.0.1", True),  # a v4 client on a dual-stack socket
        ("10.0.0.1", False),
        ("::ffff:10.0.0.1", False),
        ("2001:db8::1", False),
        ("fe80::1%eth0", False),
        ("?", False),
        ("local", False),
    ],
)
def test_which_peers_may_log_in_in_clear_by_default(peer: str, allowed: bool) -> None:
    assert within(peer, parse_networks(LOOPBACK)) is allowed


def test_a_fetch_of_many_letters_reads_them_in_batches_in_order(imap: Running) -> None:
    """More letters than one store call reads (64): each answered once, in order, and a
    FETCH that reads bodies marks every one of them seen."""
    c = imaplib.IMAP4("127.0.0.1", imap.port)
    c.login(ALICE, PASSWORD)
    c.create("Many")
    for n in range(70):
        c.append("Many", None, None, letter(subject=f"many {n:02d}"))
    c.select("Many")
    typ, data = c.fetch("1:*", "(FLAGS BODY[HEADER.FIELDS (SUBJECT)])")
    assert typ == "OK"
    bodies = [item for item in data if isinstance(item, tuple)]
    assert [b[1].strip() for b in bodies] == [b"Subject: many %02d" % n for n in range(70)]
    typ, data = c.search(None, "UNSEEN")
    assert data == [b""]
    c.logout()


def test_a_whole_letter_with_uid_and_flags_around_it_is_answered_in_the_order_asked(
    imap: Running,
) -> None:
    """BODY.PEEK[] (or RFC822) with UID and FLAGS before or after it, for letters with and
    without attachments: each attribute where the client put it (UID, when named, first),
    the letter byte for byte; RFC822 marks the letter seen, and the FLAGS after it say so."""
    c = imaplib.IMAP4("127.0.0.1", imap.port)
    c.login(ALICE, PASSWORD)
    c.create("Shapes")
    raws = [
        letter(subject="plain"),
        letter(subject="with a part", attachments=[("a.bin", payload(5, 6000))]),
    ]
    for raw in raws:
        c.append("Shapes", None, None, raw)
    c.select("Shapes")
    _, data = c.uid("SEARCH", "ALL")
    uids = data[0].split()  # type: ignore[union-attr]
    typ, data = c.fetch("1:*", "(FLAGS BODY.PEEK[] UID)")
    assert typ == "OK"
    got = [item for item in data if isinstance(item, tuple)]
    assert [item[1] for item in got] == raws
    for n, item in enumerate(got, 1):
        assert item[0] == b"%d (UID %s FLAGS () BODY[] {%d}" % (n, uids[n - 1], len(raws[n - 1]))
    assert [item for item in data if isinstance(item, bytes)] == [b")", b")"]
    typ, data = c.fetch("2", "(RFC822 FLAGS)")
    assert typ == "OK" and data[0][1] == raws[1]  # type: ignore[index]
    assert data[0][0] == b"2 (RFC822 {%d}" % len(raws[1])  # type: ignore[index]
    assert data[1] == b" FLAGS (\\Seen))"
    c.logout()


class CountingIndex:
    """The mailbox index, recording the reads of letters that FETCH makes."""

    def __init__(self, index: Any) -> None:
        self.index = index
        self.reads: list[tuple[str, int, int | None]] = []

    def skeletons(self, user_id: int, letter_ids: Any, max_size: int | None = None) -> Any:
        self.reads.append(("skeletons", len(letter_ids), max_size))
        return self.index.skeletons(user_id, letter_ids, max_size)

    def letter(self, user_id: int, letter_id: int) -> Any:
        self.reads.append(("letter", 1, None))
        return self.index.letter(user_id, letter_id)

    def content(self, letter_id: int) -> Any:
        self.reads.append(("content", 1, None))
        return self.index.content(letter_id)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.index, name)


def test_a_fetch_reads_the_index_once_per_batch(
    pochta: Pochta, monkeypatch: pytest.MonkeyPatch
) -> None:
    """FETCH 1:* of 70 letters is two index reads, one for each batch (64, then 6), and one
    more for the letter whose skeleton is over the batch's bound, read on its own when its
    turn comes; every letter comes back byte for byte, and UID FETCH of one letter is one
    read."""
    monkeypatch.setattr(imapstore, "BATCH_SKELETON", 2000)
    store = ImapStore(pochta.mailbox)
    counting = CountingIndex(pochta.mailbox.index)
    store.index = counting
    raws = [letter(subject=f"batched {n:02d}") for n in range(70)]
    raws[5] = letter(subject="batched 05", text="a long line of text\n" * 150)
    for running in start(pochta, LIMITS, store=store):
        c = imaplib.IMAP4("127.0.0.1", running.port)
        c.login(ALICE, PASSWORD)
        c.create("Batched")
        for raw in raws:
            c.append("Batched", None, None, raw)
        c.select("Batched")
        counting.reads.clear()
        typ, data = c.fetch("1:*", "(BODY.PEEK[])")
        assert typ == "OK"
        assert [item[1] for item in data if isinstance(item, tuple)] == raws
        assert counting.reads == [
            ("skeletons", 64, 2000),
            ("skeletons", 1, None),  # letter 6's skeleton, over the bound
            ("skeletons", 6, 2000),
        ]
        counting.reads.clear()
        typ, data = c.uid("FETCH", "6", "(BODY.PEEK[])")
        assert typ == "OK" and data[0][1] == raws[5]  # type: ignore[index]
        assert counting.reads == [("skeletons", 1, None)]
        c.logout()


def test_letter_after_letter_is_read_ahead_and_answered_byte_for_byte(
    pochta: Pochta, monkeypatch: pytest.MonkeyPatch
) -> None:
    """UID FETCH of one letter after another (as mbsync fetches) reads the letters after it
    in the same index read, a window that doubles (4, 8, ... 64), and answers the next
    commands from them: 40 letters in 5 index reads, not 40, each letter read once, every
    one byte for byte, one with attachments (its parts read back in, in the store thread,
    with the letters read ahead) among them. A FETCH
    that jumps reads what it asks for alone. The bytes kept are taken from the budget and
    given back."""
    monkeypatch.setattr(imapstore, "BATCH_SKELETON", 2000)
    store = ImapStore(pochta.mailbox)
    counting = CountingIndex(pochta.mailbox.index)
    store.index = counting
    budget = Budget(1 << 24)
    raws = [letter(subject=f"ahead {n:02d}") for n in range(40)]
    raws[9] = letter(subject="ahead 09", attachments=[("a.bin", payload(3, 6000))])
    for running in start(pochta, LIMITS, store=store, budget=budget):
        c = imaplib.IMAP4("127.0.0.1", running.port)
        c.login(ALICE, PASSWORD)
        c.create("Ahead")
        for raw in raws:
            c.append("Ahead", None, None, raw)
        c.select("Ahead")
        typ, data = c.uid("SEARCH", "ALL")
        uids = data[0].split()  # type: ignore[union-attr]
        counting.reads.clear()
        got = []
        for uid in uids:
            typ, data = c.uid("FETCH", uid.decode(), "(BODY.PEEK[])")
            assert typ == "OK"
            got.append(data[0][1])  # type: ignore[index]
        assert got == raws
        sizes = [n for _, n, _ in counting.reads]
        # the first alone; then 1 + 4, 1 + 8 and 1 + 16 ahead (letter 10, with attachments,
        # among them); the remaining 7 with letter 33
        assert sizes == [1, 5, 9, 17, 8]
        counting.reads.clear()
        typ, data = c.uid("FETCH", uids[3].decode(), "(UID RFC822.SIZE BODY.PEEK[HEADER])")
        assert typ == "OK" and counting.reads == [("skeletons", 1, None)]  # a jump
        head = raws[3][: raws[3].index(b"\r\n\r\n") + 4]
        assert data[0][1] == head  # type: ignore[index]
        assert b"RFC822.SIZE %d" % len(raws[3]) in data[0][0]  # type: ignore[index]
        typ, data = c.uid("FETCH", uids[4].decode(), "(FLAGS BODY.PEEK[]<10.20>)")
        assert typ == "OK" and data[0][1] == raws[4][10:30]  # type: ignore[index]
        assert budget.used > 0
        c.logout()
        wait_until(lambda: budget.used == 0)


def test_a_range_of_a_letter_is_its_bytes_with_or_without_attachments(pochta: Pochta) -> None:
    """``read_bytes`` (which slices a letter kept whole in its skeleton at once) gives every
    range of a letter as delivered, for a letter with no extracted part and one with two."""
    user = pochta.mailbox.user(ALICE)
    assert user is not None
    store = ImapStore(pochta.mailbox)
    plain = letter(subject="kept whole")
    split = letter(subject="split", attachments=[("a", payload(1, 6000)), ("b", payload(2, 5000))])
    for raw in (plain, split):
        (letter_id,) = pochta.mailbox.deliver(raw, [user], folder="Inbox").ids
        opened = store.open(user.id, letter_id)
        assert opened is not None and opened.size == len(raw)
        assert (len(opened.layout.segments) == 1) is (raw is plain)
        edges = [-5, 0, 1, *range(2, len(raw), max(1, len(raw) // 40)), len(raw) - 1, len(raw)]
        for start in edges:
            for end in [*edges, len(raw) + 9]:
                got = store.read_bytes(opened, start, end)
                assert got == raw[max(0, start) : max(0, end)], (start, end)


# -- the review of issue 27's IMAP bounds: APPEND and the memory budget


def subjects(pochta: Pochta, folder: str = "Inbox") -> list[str]:
    user = pochta.mailbox.user(ALICE)
    assert user is not None
    return [s.subject for s in pochta.mailbox.letters(user.id, folder, limit=1000)]


def test_an_append_held_in_memory_is_counted_once_and_finishes(
    pochta: Pochta, tmp_path: Path
) -> None:
    """A letter kept in memory is counted by its spool's share alone: a 600 KB APPEND under a
    budget of 1 MB (which it could not take twice) is stored, and the budget is whole after."""
    budget = Budget(1 << 20)
    limits = dataclasses.replace(LIMITS, spool_threshold=1 << 20)
    raw = letter(subject="counted once", attachments=[("a.bin", payload(7, 440_000))])
    assert 500_000 < len(raw) < 1 << 20
    for running in start(pochta, limits, spool_dir=tmp_path / "spool", budget=budget):
        c = Raw(running.port)
        c.login()
        c.send(b"a APPEND INBOX {%d+}\r\n" % len(raw) + raw + b"\r\n")
        assert c.until(b"a")[-1].startswith(b"a OK [APPENDUID")  # not a wait without end
        c.close()
        wait_until(lambda: budget.used == 0)


def test_appends_that_hold_the_whole_budget_all_end(pochta: Pochta, tmp_path: Path) -> None:
    """Four APPENDs at once whose letters together hold the whole budget: each is stored or
    refused (NO [UNAVAILABLE]), none waits for the others without end, and the budget and
    the spool are empty after."""
    budget = Budget(1 << 20)
    limits = dataclasses.replace(LIMITS, spool_threshold=1 << 20)
    raws = [
        letter(subject=f"contention {n}", attachments=[("a.bin", payload(n, 220_000))])
        for n in range(4)
    ]
    spool = tmp_path / "spool"
    for running in start(pochta, limits, spool_dir=spool, budget=budget):
        clients = [Raw(running.port) for _ in raws]
        for c in clients:
            c.login()
        for c, raw in zip(clients, raws, strict=True):  # the letters first, the CRLFs after
            c.send(b"a APPEND INBOX {%d+}\r\n" % len(raw) + raw)
        time.sleep(0.2)
        for c in clients:
            c.send(b"\r\n")
        answers = [c.until(b"a")[-1] for c in clients]
        assert all(a.startswith((b"a OK [APPENDUID", b"a NO [UNAVAILABLE]")) for a in answers)
        assert any(a.startswith(b"a OK") for a in answers), answers
        for c in clients:
            c.close()
        wait_until(lambda: budget.used == 0 and spooled(spool) == [])


class GatedStore(ImapStore):
    """The store, but APPEND's storing waits while ``gate`` is closed (a slow storage node)."""

    def __init__(self, mailbox: Any, gate: threading.Event) -> None:
        super().__init__(mailbox)
        self.gate = gate
        self.storing = threading.Event()

    def append(self, *args: Any, **kwargs: Any) -> int:
        self.storing.set()
        self.gate.wait(30)
        return super().append(*args, **kwargs)


def test_a_letter_in_a_file_waits_its_turn_for_a_while_then_is_refused(
    pochta: Pochta, tmp_path: Path
) -> None:
    """Letters kept in files are prepared and stored ``big_appends`` at a time: another waits
    for its turn at most ``append_wait`` seconds, then gets NO [UNAVAILABLE]; one whose
    client goes away stops waiting and is not stored. The budget plays no part."""
    gate = threading.Event()
    store = GatedStore(pochta.mailbox, gate)
    budget = Budget(64 << 20)
    limits = dataclasses.replace(LIMITS, spool_threshold=64 << 10, big_appends=1, append_wait=1.0)
    spool = tmp_path / "spool"

    def big(name: str) -> bytes:
        return letter(subject=name, attachments=[("a.bin", payload(len(name), 200_000))])

    for running in start(pochta, limits, store=store, spool_dir=spool, budget=budget):
        try:
            first, second, gone = Raw(running.port), Raw(running.port), Raw(running.port)
            for c in (first, second, gone):
                c.login()
            raw = big("turn first")
            first.send(b"a APPEND INBOX {%d+}\r\n" % len(raw) + raw + b"\r\n")
            assert store.storing.wait(10)  # the first holds the one turn now
            raw = big("turn second")
            began = time.monotonic()
            second.send(b"b APPEND INBOX {%d+}\r\n" % len(raw) + raw + b"\r\n")
            assert second.until(b"b")[-1].startswith(b"b NO [UNAVAILABLE]")
            assert 0.9 <= time.monotonic() - began < 8
            raw = big("turn gone")
            gone.send(b"c APPEND INBOX {%d+}\r\n" % len(raw) + raw + b"\r\n")
            time.sleep(0.3)  # waiting for its turn
            gone.close()
            time.sleep(0.3)
            gate.set()
            assert first.until(b"a")[-1].startswith(b"a OK [APPENDUID")
            wait_until(lambda: spooled(spool) == [] and budget.used == 0)
            time.sleep(0.5)
            found = subjects(pochta)
            assert "turn first" in found
            assert "turn second" not in found and "turn gone" not in found
            first.close()
            second.close()
        finally:
            gate.set()


def test_before_the_login_a_literal_may_fill_the_command_exactly(imap: Running) -> None:
    """A literal that brings the command to exactly ``login_command`` bytes still takes the
    CRLF that ends the command."""
    c = Raw(imap.port)
    head = b"a LOGIN %s {%d}\r\n"
    size = 1024 - len(head % (ALICE.encode(), 999))  # the literal's size: 3 digits as 999
    line = head % (ALICE.encode(), size)
    assert len(line) + size == 1024
    c.send(line)
    assert c.f.readline().startswith(b"+")
    c.send(b"w" * size + b"\r\n")
    assert c.f.readline().startswith(b"a NO [AUTHENTICATIONFAILED]")
    c.close()


def emptied(budget: Budget, spool: Path) -> bool:
    return budget.used == 0 and spooled(spool) == []


def test_an_append_no_worker_could_prepare_is_stored_whole_only_within_the_budget(
    pochta: Pochta, tmp_path: Path
) -> None:
    """A letter whose worker runs past the deadline is read whole into the server and stored
    unsplit: its bytes are taken from the budget first, and when the budget cannot hold them
    the APPEND gets NO [UNAVAILABLE] (the client tries again) instead."""
    part = b"--b\r\nContent-Type: text/plain\r\n\r\nword 1 2 3\r\n"
    head = b'Subject: parts\r\nContent-Type: multipart/mixed; boundary="b"\r\n\r\n'
    raw = head + part * 17_000 + b"--b--\r\n"  # little to send, much to parse
    assert 64 << 10 < len(raw) < 1 << 20
    pool = CpuPool(1, initializer=init_pool_process, initargs=(AnalysisSettings(),))
    pool.start()
    intake = Intake(Analyzer(), pool, inline_limit=4096, deadline=0.05, authserv_id="mx.test")
    limits = dataclasses.replace(LIMITS, spool_threshold=64 << 10)
    try:
        for total, answer in ((len(raw) - 1, b"a NO [UNAVAILABLE]"), (len(raw), b"a OK [APPEND")):
            budget = Budget(total)
            spool = tmp_path / f"spool{total}"
            for running in start(pochta, limits, intake=intake, budget=budget, spool_dir=spool):
                c = Raw(running.port)
                c.login()
                c.send(b"a APPEND INBOX {%d+}\r\n" % len(raw) + raw + b"\r\n")
                assert c.until(b"a")[-1].startswith(answer)
                c.close()
                wait_until(functools.partial(emptied, budget, spool))
    finally:
        pool.close()
