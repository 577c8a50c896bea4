"""One client's costly letters do not hold up another's: letters are parsed and analyzed in
worker processes (never under the server's GIL), small letters are taken before big ones, and
a worker past its deadline is replaced while its letter is stored unscored."""

from __future__ import annotations

import smtplib
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.integration.conftest import DELIVERED, Server, start_server
from tests.integration.test_smtp import add_users, raws, received
from tests.mailtools import letter

pytestmark = pytest.mark.integration

COSTLY = 12
# The scoring deadline of the tests below: a many_parts(30_000) letter takes its worker about
# 0.3 s (8 times over), a small letter about 10 ms. On a loaded machine a small letter can
# overrun it too: the tests identify the costly letter by its bytes and let a sender retry.
DEADLINE = "0.05"


def many_parts(n: int, tag: int) -> bytes:
    """A letter of ``n`` tiny MIME parts: little to send, much to parse (past the scanner's
    5,000 entities the rest is not read)."""
    head = (
        f"From: flood{tag}@example.net\r\nTo: alice@example.org\r\nSubject: parts {tag}\r\n"
        f"Message-ID: <parts.{tag}@example.net>\r\nMIME-Version: 1.0\r\n"
        'Content-Type: multipart/mixed; boundary="b"\r\n\r\n'
    ).encode()
    part = b"--b\r\nContent-Type: text/plain\r\n\r\nword 1 2 3 $4 5 \xd1\x80\xd1\x83\r\n"
    return head + part * n + b"--b--\r\n"


def send(
    port: int,
    raw: bytes,
    done: dict[str, float],
    name: str,
    transmitted: threading.Event | None = None,
) -> None:
    """Deliver ``raw`` (CRLF lines, none starting with a dot); ``transmitted`` is set once the
    whole letter is on the wire, before the server's answer."""
    with smtplib.SMTP("127.0.0.1", port, timeout=120) as smtp:
        smtp.ehlo()
        assert smtp.mail("sender@example.net")[0] == 250
        assert smtp.rcpt("alice@example.org")[0] == 250
        smtp.putcmd("data")
        assert smtp.getreply()[0] == 354
        smtp.send(raw + b".\r\n")
        if transmitted is not None:
            transmitted.set()
        code, reply = smtp.getreply()
        assert code == 250, reply
    done[name] = time.monotonic()


def test_a_normal_letter_is_delivered_promptly_while_costly_ones_are_scored(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    add_users(data, "alice@example.org")
    # the replies' times are the deliveries' ("delivered"; queued, every 250 is at once)
    srv: Server = start_server(
        data,
        tmp_path / "serve.log",
        settings={"POCHTA_ANTISPAM__POOL_PROCESSES": "1", **DELIVERED},
    )
    try:
        costly = [many_parts(14_000, i) for i in range(COSTLY)]
        assert all(len(raw) > 512 << 10 for raw in costly)  # not "small": they wait behind
        done: dict[str, float] = {}
        transmitted = [threading.Event() for _ in costly]
        threads = [
            threading.Thread(
                target=send, args=(srv.smtp_port, raw, done, f"costly {i}", transmitted[i])
            )
            for i, raw in enumerate(costly)
        ]
        start = time.monotonic()
        for t in threads:
            t.start()
        for event in transmitted:  # every costly letter is in: the workers have a queue
            assert event.wait(60)
        health: list[float] = []
        sent = time.monotonic()
        waiting = sum(f"costly {i}" not in done for i in range(COSTLY))
        normal = threading.Thread(
            target=send,
            args=(srv.smtp_port, letter(text="Hello Alice, lunch at noon?\n"), done, "normal"),
        )
        normal.start()
        while normal.is_alive() or any(t.is_alive() for t in threads):
            t0 = time.monotonic()
            assert httpx.get(f"{srv.url}/healthz", timeout=10).status_code == 200
            health.append(time.monotonic() - t0)
            time.sleep(0.05)
        normal_took = done["normal"] - sent
        costly_done = sorted(done[f"costly {i}"] for i in range(COSTLY))
        assert normal_took < 3.0, f"the normal letter took {normal_took:.2f} s"
        # taken before many of the costly letters that were waiting: first in, first out
        # would put it after all of them (one worker; storage batches a few together)
        assert waiting >= COSTLY // 2, f"only {waiting} costly letters were waiting"
        after = sum(t > done["normal"] for t in costly_done)
        assert after >= waiting // 3, (waiting, [t - start for t in costly_done])
        # the server answered all along (scoring in a thread of the server took 27 s)
        assert max(health) < 3.0, f"/healthz took up to {max(health):.2f} s"
        assert len(raws(srv, "alice@example.org")) == COSTLY + 1
    finally:
        srv.stop()


def test_a_letter_past_the_deadline_is_stored_whole_and_unscored(tmp_path: Path) -> None:
    data = tmp_path / "data"
    add_users(data, "alice@example.org")
    settings = {
        "POCHTA_ANTISPAM__POOL_PROCESSES": "1",
        "POCHTA_ANTISPAM__DEADLINE_SECONDS": DEADLINE,
    }
    srv = start_server(data, tmp_path / "serve.log", settings=settings)
    try:
        raw = many_parts(30_000, 1)
        with smtplib.SMTP("127.0.0.1", srv.smtp_port, timeout=60) as smtp:
            smtp.sendmail("sender@example.net", ["alice@example.org"], raw)
            smtp.sendmail("sender@example.net", ["alice@example.org"], letter(text="after it\n"))
        stored = received(srv, "alice@example.org", 2)
        assert len(stored) == 2
        (costly,) = [r for r in stored if r.endswith(raw)]
        assert b"partial=timeout" in costly.split(b"\r\n\r\n")[0]
        assert any(r.endswith(b"after it\r\n") for r in stored)
        assert "stored unscored" in srv.log.read_text()
    finally:
        srv.stop()


def test_the_operator_can_defer_a_letter_that_could_not_be_scored(tmp_path: Path) -> None:
    """antispam.on_timeout = "defer": a letter past the deadline is answered 451 4.7.1 and not
    stored (the sender retries, as with Postfix's milter_default_action = tempfail); counted in
    /metrics; the next letter is delivered as usual."""
    data = tmp_path / "data"
    add_users(data, "alice@example.org")
    settings = {
        "POCHTA_ANTISPAM__POOL_PROCESSES": "1",
        "POCHTA_ANTISPAM__DEADLINE_SECONDS": DEADLINE,
        "POCHTA_ANTISPAM__ON_TIMEOUT": "defer",
        **DELIVERED,  # the 451 at the end of DATA (queued: the letter is retried, 250)
    }
    srv = start_server(data, tmp_path / "serve.log", settings=settings)
    try:
        with smtplib.SMTP("127.0.0.1", srv.smtp_port, timeout=60) as smtp:
            smtp.ehlo()
            smtp.mail("sender@example.net")
            smtp.rcpt("alice@example.org")
            code, reply = smtp.data(many_parts(30_000, 1))
            assert (code, reply[:5]) == (451, b"4.7.1"), reply
            deferred = 1
            # a sender retries a 451 later: a small letter overruns while the one worker still
            # reads the costly letter (seconds on a loaded machine), or under load
            for _ in range(60):
                smtp.mail("sender@example.net")
                smtp.rcpt("alice@example.org")
                code, reply = smtp.data(letter(text="after it\n"))
                if code == 250:
                    break
                assert (code, reply[:5]) == (451, b"4.7.1"), reply
                deferred += 1
                time.sleep(0.5)
        (stored,) = raws(srv, "alice@example.org")
        assert b"after it" in stored and b"partial=timeout" not in stored
        exposed = httpx.get(f"{srv.url}/metrics", timeout=10).text
        counted = f'pochta_letters_unscored_total{{action="defer",reason="timeout"}} {deferred}.0'
        assert counted in exposed
    finally:
        srv.stop()


def test_an_unscored_letter_the_memory_budget_cannot_hold_is_deferred(tmp_path: Path) -> None:
    """A letter past the deadline is read whole into the server to be stored unscored: its
    bytes come from memory_budget, and when that cannot hold them the letter is deferred
    (451 4.3.0) rather than loaded; the next letter is delivered as usual."""
    data = tmp_path / "data"
    add_users(data, "alice@example.org")
    settings = {
        "POCHTA_ANTISPAM__POOL_PROCESSES": "1",
        "POCHTA_ANTISPAM__DEADLINE_SECONDS": DEADLINE,
        "POCHTA_MEMORY_BUDGET": str(1 << 20),
        **DELIVERED,  # the 451 at the end of DATA (queued: the letter is retried, 250)
    }
    srv = start_server(data, tmp_path / "serve.log", settings=settings)
    try:
        raw = many_parts(30_000, 1)
        assert len(raw) > 1 << 20
        with smtplib.SMTP("127.0.0.1", srv.smtp_port, timeout=60) as smtp:
            smtp.ehlo()
            smtp.mail("sender@example.net")
            smtp.rcpt("alice@example.org")
            code, reply = smtp.data(raw)
            assert (code, reply[:5]) == (451, b"4.3.0"), reply
            smtp.sendmail("sender@example.net", ["alice@example.org"], letter(text="after it\n"))
        (stored,) = raws(srv, "alice@example.org")
        assert b"after it" in stored
    finally:
        srv.stop()
