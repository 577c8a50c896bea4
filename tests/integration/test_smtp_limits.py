"""SMTP against hostile and careless clients (issue 21), on a real `pochta serve`: recipient
limit, error limit, command timeout, size and line limits enforced while receiving, spooling,
SMTP smuggling and early talkers."""

from __future__ import annotations

import smtplib
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.conftest import Server, start_server
from tests.integration.test_smtp import add_users, raws, received, strip_trace
from tests.mailtools import letter

pytestmark = pytest.mark.integration


class Client:
    """A raw SMTP client: bytes exactly as given, replies as (code, text)."""

    def __init__(self, port: int, timeout: float = 30) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.file = self.sock.makefile("rb")
        assert self.reply()[0] == 220

    def reply(self) -> tuple[int, bytes]:
        lines = []
        while True:
            line = self.file.readline()
            if not line:
                return 0, b"".join(lines)  # closed
            lines.append(line)
            if line[3:4] != b"-":
                return int(line[:3]), b"".join(lines)

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def command(self, line: str) -> tuple[int, bytes]:
        self.send(line.encode() + b"\r\n")
        return self.reply()

    def closed(self) -> bool:
        """Whether the server closed the connection (EOF within the socket's timeout)."""
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True

    def close(self) -> None:
        self.file.close()
        self.sock.close()


@pytest.fixture
def mx(tmp_path: Path) -> Iterator[Server]:
    data = tmp_path / "data"
    add_users(data, "alice@example.org", "bob@example.org")
    srv = start_server(data, tmp_path / "serve.log")
    yield srv
    if srv.proc.poll() is None:
        srv.stop()


def limited(tmp_path: Path, **settings: str) -> Server:
    data = tmp_path / "data"
    add_users(data, "alice@example.org", "bob@example.org")
    env = {f"POCHTA_SMTP__{k.upper()}": v for k, v in settings.items()}
    return start_server(data, tmp_path / "serve.log", settings=env)


def test_recipient_limit_452_past_1000_and_the_letter_still_goes(mx: Server) -> None:
    """Issue 21: one letter was accepted for 10,000 RCPT TO."""
    c = Client(mx.smtp_port)
    assert c.command("EHLO client.example")[0] == 250
    assert c.command("MAIL FROM:<s@example.net>")[0] == 250
    # pipelined, as a bulk sender would: 1,000 accepted, then 452 4.5.3 (not an "error":
    # the session is not closed by the error limit after 20 of them)
    c.send(b"RCPT TO:<alice@example.org>\r\n" * 1030)
    codes = [c.reply() for _ in range(1030)]
    assert [code for code, _ in codes[:1000]] == [250] * 1000
    assert {code for code, _ in codes[1000:]} == {452}
    assert codes[1000][1].startswith(b"452 4.5.3 ")
    assert c.command("DATA")[0] == 354
    c.send(letter() + b".\r\n")
    assert c.reply()[0] == 250
    c.close()
    assert len(received(mx, "alice@example.org", 1)) == 1


def test_error_limit_closes_with_421(mx: Server) -> None:
    c = Client(mx.smtp_port)
    c.command("EHLO client.example")
    c.command("MAIL FROM:<s@example.net>")
    for i in range(19):
        assert c.command(f"RCPT TO:<nobody{i}@example.org>")[0] == 550
    assert c.command("RCPT TO:<nobody19@example.org>")[0] == 550  # the 20th error
    assert c.reply()[0] == 421
    assert c.closed()
    c.close()
    # a delivered letter starts the count again: 19 errors, a letter, 19 more are fine
    c = Client(mx.smtp_port)
    c.command("EHLO client.example")
    for _ in range(2):
        c.command("MAIL FROM:<s@example.net>")
        for i in range(19):
            assert c.command(f"RCPT TO:<nobody{i}@example.org>")[0] == 550
        assert c.command("RCPT TO:<alice@example.org>")[0] == 250
        assert c.command("DATA")[0] == 354
        c.send(letter() + b".\r\n")
        assert c.reply()[0] == 250
    assert c.command("NOOP")[0] == 250
    c.close()


def test_an_address_that_is_not_utf8_is_refused_without_a_traceback(mx: Server) -> None:
    """Found by scripts/fuzz: ``RCPT TO:<\\xff@...>`` reached the account lookup as a lone
    surrogate, which SQLite cannot encode: a traceback and a 500."""
    c = Client(mx.smtp_port)
    c.command("EHLO client.example")
    c.command("MAIL FROM:<s@example.net>")
    c.send(b"RCPT TO:<\xff@example.org>\r\n")
    code, text = c.reply()
    assert code == 553, text
    assert b"not valid UTF-8" in text
    assert c.command("RCPT TO:<alice@example.org>")[0] == 250  # the session goes on
    assert c.command("DATA")[0] == 354
    c.send(letter() + b".\r\n")
    assert c.reply()[0] == 250
    c.close()
    assert b"Traceback" not in mx.log.read_bytes()


def test_command_timeout_closes_a_silent_client(tmp_path: Path) -> None:
    srv = limited(tmp_path, command_timeout="1.5")
    try:
        c = Client(srv.smtp_port, timeout=10)
        c.command("EHLO client.example")
        began = time.monotonic()
        assert c.closed()
        assert 1.0 < time.monotonic() - began < 6
        c.close()
        c = Client(srv.smtp_port, timeout=10)  # a DATA that stalls halfway
        c.command("EHLO client.example")
        c.command("MAIL FROM:<s@example.net>")
        c.command("RCPT TO:<alice@example.org>")
        assert c.command("DATA")[0] == 354
        c.send(b"Subject: stalled\r\n\r\nhalf a letter")
        began = time.monotonic()
        assert c.closed()
        assert time.monotonic() - began < 6
        c.close()
        assert raws(srv, "alice@example.org") == []
        assert list((srv.data / "spool").glob("*")) == []
    finally:
        srv.stop()


def test_too_big_is_dropped_while_received_and_nothing_kept(tmp_path: Path) -> None:
    srv = limited(tmp_path, max_message_size="100000", spool_threshold="10000")
    try:
        c = Client(srv.smtp_port)
        c.command("EHLO client.example")
        c.command("MAIL FROM:<s@example.net>")  # no SIZE: the limit applies while reading
        c.command("RCPT TO:<alice@example.org>")
        assert c.command("DATA")[0] == 354
        c.send(b"Subject: big\r\n\r\n" + b"y" * 76 + b"\r\n")
        c.send((b"z" * 998 + b"\r\n") * 2000)  # 2 MB, 20 times the limit
        time.sleep(0.5)
        spooled = list((srv.data / "spool").glob("*"))
        assert spooled == [], "the letter was dropped once past the limit, not kept"
        c.send(b".\r\n")
        code, text = c.reply()
        assert code == 552 and b"5.3.4" in text
        assert c.command("NOOP")[0] == 250  # the session goes on
        c.close()
        assert raws(srv, "alice@example.org") == []
    finally:
        srv.stop()


def test_big_letters_are_spooled_to_disk_and_stored_byte_exactly(tmp_path: Path) -> None:
    srv = limited(tmp_path, spool_threshold="65536")
    try:
        raw = letter(attachments=[("big.bin", bytes(range(256)) * 8000)])  # ~2.7 MB
        assert len(raw) > 2_000_000
        c = Client(srv.smtp_port)
        c.command("EHLO client.example")
        c.command("MAIL FROM:<s@example.net>")
        c.command("RCPT TO:<alice@example.org>")
        assert c.command("DATA")[0] == 354
        half = len(raw) // 2
        c.send(raw[:half])
        time.sleep(0.5)
        (spooled,) = (srv.data / "spool").glob("*.letter")
        assert spooled.stat().st_size >= half - 2 and spooled.stat().st_mode & 0o777 == 0o600
        c.send(raw[half:] + b".\r\n")
        assert c.reply()[0] == 250
        c.close()
        assert list((srv.data / "spool").glob("*")) == []  # removed once answered
        (got,) = received(srv, "alice@example.org", 1)
        assert strip_trace(got) == raw
    finally:
        srv.stop()


LINE = 1_000_000


@pytest.mark.parametrize(
    "shape",
    [
        b"x" * LINE,
        b"a " * (LINE // 2),
        b"<a href='http://example.com/'>" * (LINE // 30),
        b"=" * LINE,
    ],
    ids=["one-char", "words", "html", "qp-like"],
)
def test_a_letter_that_is_one_million_byte_line_is_answered_promptly(
    mx: Server, shape: bytes
) -> None:
    """Issue 21: a letter that is one 1,000,000-byte line got no reply at all. Policy: lines
    up to line_length_limit (1 MiB) are stored byte-exactly; longer ones get 500."""
    raw = shape + b"\r\n"
    began = time.monotonic()
    with smtplib.SMTP("127.0.0.1", mx.smtp_port, timeout=60) as smtp:
        assert smtp.sendmail("s@example.net", ["alice@example.org"], raw) == {}
    assert time.monotonic() - began < 30
    (got,) = received(mx, "alice@example.org", 1)
    assert got.endswith(raw) and len(got) - len(raw) < 2000


def test_a_line_past_the_limit_is_refused_promptly_and_the_session_goes_on(mx: Server) -> None:
    c = Client(mx.smtp_port)
    c.command("EHLO client.example")
    c.command("MAIL FROM:<s@example.net>")
    c.command("RCPT TO:<alice@example.org>")
    assert c.command("DATA")[0] == 354
    began = time.monotonic()
    c.send(b"Subject: long\r\n\r\n" + b"q" * (3 << 20) + b"\r\n.\r\n")
    code, text = c.reply()
    assert code == 500 and b"line too long" in text
    assert time.monotonic() - began < 10
    assert c.command("RSET")[0] == 250
    c.close()
    assert raws(mx, "alice@example.org") == []


SMUGGLED = (
    b"MAIL FROM:<ceo@example.org>\r\nRCPT TO:<bob@example.org>\r\nDATA\r\n"
    b"From: ceo@example.org\r\nSubject: smuggled\r\n\r\nwire the money\r\n"
)
ENDINGS = {
    "LF.LF": b"\n.\n",
    "CR.CR": b"\r.\r",
    "LF.CRLF": b"\n.\r\n",
    "CRLF.LF": b"\r\n.\n",
    "CR.LF": b"\r.\n",
    "CR.CRLF": b"\r.\r\n",
    "LF.CR": b"\n.\r",
    "CRLF.CR": b"\r\n.\r",
    "CRLF.NUL": b"\r\n.\x00\r\n",
    "CRLF.SP": b"\r\n. \r\n",
}


def test_smtp_smuggling_variants_stay_inside_one_letter(mx: Server) -> None:
    """Only CRLF.CRLF ends DATA: each fake ending with a second transaction behind it is
    stored as text of one letter to alice; bob gets nothing."""
    sent = {}
    c = Client(mx.smtp_port)
    c.command("EHLO client.example")
    for name, fake_end in ENDINGS.items():
        assert c.command("MAIL FROM:<s@example.net>")[0] == 250
        assert c.command("RCPT TO:<alice@example.org>")[0] == 250
        assert c.command("DATA")[0] == 354
        raw = b"Subject: " + name.encode() + b"\r\n\r\nhello" + fake_end + SMUGGLED
        c.send(raw + b".\r\n")
        code, text = c.reply()
        assert code == 250, (name, text)
        # sent as an attacker would, not dot-stuffed: a dot after CRLF is taken as stuffing
        sent[name] = raw.replace(b"\r\n.", b"\r\n")
    assert c.command("QUIT")[0] == 221
    c.close()
    got = sorted(strip_trace(r) for r in received(mx, "alice@example.org", len(sent)))
    assert got == sorted(sent.values())  # byte-exact, bare CR and LF included
    assert all(SMUGGLED in g for g in got)
    assert raws(mx, "bob@example.org") == []


def test_data_sent_before_the_354_reply_is_never_read_as_commands(mx: Server) -> None:
    c = Client(mx.smtp_port)
    c.command("EHLO client.example")
    c.command("MAIL FROM:<s@example.net>")
    c.command("RCPT TO:<alice@example.org>")
    c.send(b"DATA\r\nSubject: early\r\n\r\nbody\r\n.\r\n" + SMUGGLED + b".\r\n")
    code, text = c.reply()
    assert code == 554 and b"synchronization" in text
    assert c.closed()
    c.close()
    assert raws(mx, "alice@example.org") == []
    assert raws(mx, "bob@example.org") == []


def test_pipelined_transaction_after_the_end_of_data_is_served(mx: Server) -> None:
    """The legitimate neighbour of smuggling: a client that pipelines the next transaction
    after a real CRLF.CRLF (RFC 2920) gets both letters delivered."""
    c = Client(mx.smtp_port)
    c.command("EHLO client.example")
    c.send(b"MAIL FROM:<s@example.net>\r\nRCPT TO:<alice@example.org>\r\nDATA\r\n")
    assert [c.reply()[0] for _ in range(3)] == [250, 250, 354]
    c.send(letter(subject="one") + b".\r\nMAIL FROM:<s@example.net>\r\n")
    assert [c.reply()[0] for _ in range(2)] == [250, 250]
    assert c.command("RCPT TO:<bob@example.org>")[0] == 250
    assert c.command("DATA")[0] == 354
    c.send(letter(subject="two", to="bob@example.org") + b".\r\n")
    assert c.reply()[0] == 250
    c.close()
    assert len(received(mx, "alice@example.org", 1)) == 1
    assert len(received(mx, "bob@example.org", 1)) == 1


def test_a_pipelining_flood_does_not_hold_the_event_loop(mx: Server) -> None:
    """Two clients pipeline 40,000 NOOPs each in one write (and read the replies): aiosmtpd
    reads a buffered command without waiting, and before every reply let the loop go, a
    greeting of another client waited for the whole flood (3.2 s here; /healthz too). Now
    the others are served between two of its commands."""
    n = 40_000

    def flood() -> None:
        with socket.create_connection(("127.0.0.1", mx.smtp_port), timeout=60) as s:
            s.recv(1000)
            replies = threading.Thread(target=lambda: _read_lines(s, n))
            replies.start()
            s.sendall(b"NOOP\r\n" * n)
            replies.join()

    floods = [threading.Thread(target=flood) for _ in range(2)]
    for t in floods:
        t.start()
    waits = []
    while any(t.is_alive() for t in floods):
        start = time.monotonic()
        with socket.create_connection(("127.0.0.1", mx.smtp_port), timeout=60) as c:
            assert c.recv(100).startswith(b"220")
        waits.append(time.monotonic() - start)
        time.sleep(0.02)
    assert len(waits) >= 3 and max(waits) < 1.0, waits


def _read_lines(s: socket.socket, n: int) -> None:
    got = 0
    while got < n:
        data = s.recv(65536)
        if not data:
            return
        got += data.count(b"\r\n")
