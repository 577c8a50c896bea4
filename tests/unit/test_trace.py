"""The header fields pochta prepends (pochta.mailbox.trace): exact bytes, folded by the stdlib,
read back by the stdlib's parser to the value that was meant, whatever a client said."""

from __future__ import annotations

from datetime import UTC, datetime
from email import message_from_bytes
from email.policy import default

from hypothesis import given, settings
from hypothesis import strategies as st

from pochta.antispam.auth.results import AuthResults, DkimResult, DmarcResult
from pochta.antispam.auth.spf import SpfResult
from pochta.mailbox.trace import MAX_LINE, field, received

WHEN = datetime(2025, 1, 14, 10, 0, tzinfo=UTC)


def read_back(head: bytes, name: str) -> str:
    """The field's value as a mail reader sees it (unfolded)."""
    msg = message_from_bytes(head + b"\r\nbody\r\n", policy=default)
    assert len(msg.get_all(name) or []) == 1, head
    return str(msg[name])


def test_received_for_one_recipient_is_byte_exact() -> None:
    got = received(
        helo="mail.example.org",
        ip="192.0.2.1",
        hostname="mx.pochta.test",
        protocol="ESMTP",
        queue_id="ABCDEF0123",
        recipient="alice@example.org",
        when=WHEN,
    )
    assert got == (
        b"Received: from mail.example.org ([192.0.2.1]) by mx.pochta.test (pochta) with\r\n"
        b" ESMTP id ABCDEF0123 for <alice@example.org>; Tue, 14 Jan 2025 10:00:00 +0000\r\n"
    )


def test_received_for_many_recipients_and_lf_letters() -> None:
    got = received(
        helo="relay.example.net",
        ip="2001:db8::25",
        hostname="mx.pochta.test",
        protocol="LMTP",
        queue_id="Q1",
        recipient=None,
        when=WHEN,
        eol=b"\n",
    )
    assert got == (
        b"Received: from relay.example.net ([2001:db8::25]) by mx.pochta.test (pochta)\n"
        b" with LMTP id Q1; Tue, 14 Jan 2025 10:00:00 +0000\n"
    )
    assert b"\r" not in got


def test_authentication_results_break_after_each_result() -> None:
    ar = AuthResults(
        SpfResult(
            "pass",
            "mailfrom",
            "bounce@example.org",
            "example.org",
            "ip4:192.0.2.0/24",
            "192.0.2.10 matched ip4:192.0.2.0/24 of example.org",
        ),
        (DkimResult("pass", "example.org", "mail", "AbCdEfGhIjKl"),),
        DmarcResult("pass", "example.org", "reject", "example.org", True, True),
    )
    got = field("Authentication-Results", ar.header("mx.pochta.test"))
    assert got == (
        b"Authentication-Results: mx.pochta.test;\r\n"
        b" spf=pass (192.0.2.10 matched ip4:192.0.2.0/24 of example.org)\r\n"
        b" smtp.mailfrom=bounce@example.org;\r\n"
        b" dkim=pass header.d=example.org header.s=mail header.b=AbCdEfGhIjKl;\r\n"
        b" dmarc=pass (p=reject) header.from=example.org\r\n"
    )
    assert read_back(got, "Authentication-Results") == ar.header("mx.pochta.test")


def test_a_short_field_stays_on_one_line_and_a_long_word_is_kept_whole() -> None:
    assert field("X-Pochta-Spam", "ham; score=-1.5") == b"X-Pochta-Spam: ham; score=-1.5\r\n"
    word = "w" * 120
    got = field("X-Pochta-Spam", f"spam; {word} tail")
    assert got == b"X-Pochta-Spam: spam;\r\n " + word.encode() + b"\r\n tail\r\n"
    assert b"=?" not in got  # never an encoded word


ascii_or_not = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)))


@settings(max_examples=300, deadline=None)
@given(helo=ascii_or_not, ip=ascii_or_not, recipient=st.none() | ascii_or_not)
def test_whatever_a_client_says_gives_one_well_formed_field(
    helo: str, ip: str, recipient: str | None
) -> None:
    got = received(
        helo=helo,
        ip=ip,
        hostname="mx.pochta.test",
        protocol="ESMTP",
        queue_id="Q1",
        recipient=recipient,
        when=WHEN,
    )
    lines = got.split(b"\r\n")
    assert lines[-1] == b"" and all(b"\r" not in x and b"\n" not in x for x in lines)
    # a HELO name too long for the first line goes on the next one (folding, not a new field)
    assert got.replace(b"\r\n ", b" ").startswith(b"Received: from ")
    assert all(x.startswith(b" ") for x in lines[1:-1])  # continuation lines only
    assert all(len(x) <= MAX_LINE or b" " not in x.strip() for x in lines[:-1])
    assert max(len(x) for x in lines) <= 998  # RFC 5322's hard limit
    value = read_back(got, "Received")
    assert value.startswith("from ") and value.endswith("Tue, 14 Jan 2025 10:00:00 +0000")
    assert (" for <" in value) == (recipient is not None)
    assert all(32 <= ord(c) < 127 for c in value)
