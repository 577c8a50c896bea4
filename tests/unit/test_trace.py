"""The header fields pochta prepends (pochta.mailbox.trace): exact bytes, folded by the stdlib,
read back by the stdlib's parser to the value that was meant, whatever a client said."""

from __future__ import annotations

from datetime import UTC, datetime
from email import message_from_bytes
from email.policy import default

from hypothesis import example, given, settings
from hypothesis import strategies as st

from pochta.antispam.auth.results import AuthResults, DkimResult, DmarcResult
from pochta.antispam.auth.spf import SpfResult
from pochta.mailbox.trace import MAX_LINE, _clean, field, received, without_claims

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
@example(helo="hhhhh,", ip=",h,h", recipient=",h" * 60)  # a comma let the client choose the fold
@example(helo="mail.example.org", ip="192.0.2.1", recipient="r" * 80 + ",x")
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


def _cleaned_char_by_char(text: str, limit: int = 255) -> str:
    """``trace._clean`` as it was before its fast path (server29): every character looked at."""
    return "".join(c if 32 < ord(c) < 127 and c not in "()<>;," else "?" for c in text)[:limit]


def test_clean_is_the_character_loop_for_the_first_code_points() -> None:
    """The fast path (a value with nothing to replace is used as it is) changes nothing: each
    code point of ASCII, Latin-1 (C1 controls, NBSP) and beyond, alone and inside a clean
    HELO, is cleaned as the loop cleans it (any other non-ASCII one takes the loop itself)."""
    for n in [*range(0x800), 0x2028, 0x2029, 0x200B, 0xFEFF, 0xFFFD, 0x10FFFF]:
        c = chr(n)
        for text in (c, f"mail{c}.example.org"):
            assert _clean(text) == _cleaned_char_by_char(text), hex(n)


@settings(max_examples=500, deadline=None)
@given(text=st.text(max_size=600) | st.text(st.characters(max_codepoint=0x7F), max_size=600))
@example(text="mail.example.org\r\nX-Spam: no")
@example(text="a" * 300)
@example(text="<a@b>,(c);\x7f \t\u00e9\u200b")
def test_clean_is_the_character_loop_for_any_value(text: str) -> None:
    for limit in (255, 16):
        assert _clean(text, limit) == _cleaned_char_by_char(text, limit)


# -- fields that claim to be pochta's --------------------------------------------------------
OURS = "mx.pochta.test"


def test_forged_claims_are_removed_byte_exactly() -> None:
    head = (
        b"Received: from a by b; Tue, 14 Jan 2025 10:00:00 +0000\r\n"
        b"Authentication-Results: mx.pochta.test; spf=pass smtp.mailfrom=bank.example;\r\n"
        b" dkim=pass header.d=bank.example; dmarc=pass\r\n"
        b"X-Pochta-Spam: ham; probability=0.0001\r\n"
        b"Subject: hello\r\n"
        b"authentication-results : (forged) MX.Pochta.Test 1;\r\n\tspf=pass\r\n"
        b"x-pochta-SPAM: ham\r\n"
        b'AUTHENTICATION-RESULTS: "mx.pochta.test"; dkim=pass\r\n'
        b"Authentication-Results: relay.example; spf=fail smtp.mailfrom=x.example\r\n"
        b"X-Pochta-Spam: ham\r\n"
        b"X-Pochtamt: not ours (no hyphen)\r\n"
        b"From: a@example.org\r\n"
    )
    body = (
        b"\r\nX-Pochta-Spam: ham (in the body: text)\r\nAuthentication-Results: mx.pochta.test\r\n"
    )
    cleaned, removed = without_claims(head + body, OURS)
    assert removed == 6
    assert cleaned == (
        b"Received: from a by b; Tue, 14 Jan 2025 10:00:00 +0000\r\n"
        b"Subject: hello\r\n"
        b"Authentication-Results: relay.example; spf=fail smtp.mailfrom=x.example\r\n"
        b"X-Pochtamt: not ours (no hyphen)\r\n"
        b"From: a@example.org\r\n" + body
    )
    assert without_claims(cleaned, OURS) == (cleaned, 0)


def test_lf_letters_first_and_last_fields_and_no_body() -> None:
    raw = b"X-Pochta-Spam: a\n b\nSubject: s\nX-Pochta-Verdict: c\n\nbody\n"
    assert without_claims(raw, OURS) == (b"Subject: s\n\nbody\n", 2)
    assert without_claims(b"X-Pochta-Spam: only", OURS) == (b"", 1)
    assert without_claims(b"Subject: x\r\nX-Pochta-A: 1\r\n", OURS) == (b"Subject: x\r\n", 1)


def test_other_authserv_ids_and_lookalikes_stay() -> None:
    for value in (
        b"mx.pochta.test.evil.example; spf=pass",
        b"evil-mx.pochta.test; spf=pass",
        b"(mx.pochta.test) other.example; spf=pass",
        b"",
    ):
        raw = b"Authentication-Results: " + value + b"\r\nSubject: s\r\n\r\nbody"
        assert without_claims(raw, OURS) == (raw, 0), value


def test_an_attached_letters_header_is_its_content() -> None:
    raw = (
        b"Content-Type: message/rfc822\r\n\r\n"
        b"X-Pochta-Spam: ham\r\nAuthentication-Results: mx.pochta.test; spf=pass\r\n\r\nhi\r\n"
    )
    assert without_claims(raw, OURS) == (raw, 0)


_names = st.sampled_from(
    [b"Subject", b"From", b"X-Pochta-Spam", b"x-pochta-verdict", b"Authentication-Results",
     b"authentication-RESULTS", b"X-Other", b"Received"]
)  # fmt: skip
_value = st.text(alphabet='abc .;=()"', max_size=20).map(lambda t: t.encode())
_authserv = st.sampled_from(
    [b"mx.pochta.test", b"MX.POCHTA.TEST", b"other.example", b"(c) mx.pochta.test"]
)


@st.composite
def _fields(draw: st.DrawFn) -> tuple[bytes, bool]:
    """One field and whether it claims to be pochta's."""
    name = draw(_names)
    eol = draw(st.sampled_from([b"\r\n", b"\n"]))
    lower = name.lower()
    if lower == b"authentication-results":
        serv = draw(_authserv)
        value = serv + b"; " + draw(_value)
        ours = serv.replace(b"(c) ", b"").lower() == OURS.encode()
    else:
        value, ours = draw(_value).strip(b" "), lower.startswith(b"x-pochta-")
    folds = draw(st.lists(st.tuples(st.sampled_from([b" ", b"\t"]), _value), max_size=2))
    text = name + draw(st.sampled_from([b":", b": ", b" :"])) + value + eol
    return text + b"".join(wsp + v + eol for wsp, v in folds), ours


@given(st.lists(_fields(), max_size=12), st.binary(max_size=60))
@settings(max_examples=300)
def test_exactly_the_claims_go(fields: list[tuple[bytes, bool]], body: bytes) -> None:
    raw = b"".join(f for f, _ in fields) + b"\r\n" + body
    expected = b"".join(f for f, ours in fields if not ours) + b"\r\n" + body
    assert without_claims(raw, OURS) == (expected, sum(ours for _, ours in fields))


@settings(max_examples=500, deadline=None)
@given(
    st.sampled_from(["Received", "X-Pochta-Spam", "Authentication-Results", "X" * 80]),
    st.text(alphabet=st.sampled_from("ab;, \t\r\n\u00e9"), max_size=300)
    | st.lists(st.text(alphabet="xy;,", min_size=1, max_size=90), max_size=6).map(" ".join),
    st.sampled_from([b"\r\n", b"\n"]),
)
def test_fields_are_folded_exactly_as_the_stdlib_folds_them(
    name: str, value: str, eol: bytes
) -> None:
    """``field`` folds by its own loop (the stdlib's Header is slow): the same bytes as
    ``email.policy.compat32`` for any value, after the reduction to printable ASCII."""
    from email.policy import compat32

    clean = "".join(c if 32 <= ord(c) < 127 else "?" for c in value)
    policy = compat32.clone(linesep=eol.decode("ascii"), max_line_length=MAX_LINE)
    assert field(name, value, eol) == policy.fold_binary(name, clean)
