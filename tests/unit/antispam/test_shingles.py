"""Shingle extraction (pochta.antispam.shingles): the registry, each type, hashes,
robustness."""

from __future__ import annotations

import hashlib
from email.message import EmailMessage

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pochta.antispam.shingles import extract as extraction
from pochta.antispam.shingles import registry as sh
from pochta.antispam.shingles.counters.buckets import shard_of
from pochta.antispam.shingles.registry import Shingle, ShingleType
from pochta.mime.letter import parse
from pochta.types import Envelope


def extract(raw: bytes, envelope: Envelope | None = None) -> list[Shingle]:
    return extraction.extract(parse(raw), envelope)

T = ShingleType

REGISTRY = {
    "subject": 8,
    "body_text": 10,
    "body_minhash": 11,
    "from_address": 14,
    "sender_ip": 15,
    "sender_network": 16,
    "from_domain": 17,
    "display_name": 18,
    "return_path_domain": 19,
    "message_id_domain": 20,
    "link_host": 21,
    "link_url": 22,
    "link_domain": 23,
    "sender_recipient": 30,
    "sender_recipients_unique": 31,
    "sender_network_pair": 32,
    "sender_networks_unique": 33,
    "attachment_name": 42,
    "attachment_checksum": 62,
}


def test_registry_numbers_are_stable() -> None:
    assert {t.label: int(t) for t in ShingleType} == REGISTRY


def test_every_type_is_documented_in_the_registry_table() -> None:
    doc = sh.__doc__ or ""
    for t in ShingleType:
        assert f"{int(t):>4} {t.label}" in doc, t


def test_hash_is_64_bit_blake2b_and_stable_across_processes() -> None:
    assert sh.shingle_hash("hello") == 0x3F3721F18944EF42
    assert sh.shingle_hash("") == 0x2ED1358259AD6F4C
    s = Shingle.of(T.SUBJECT, "hello")
    assert s.hex == "3f3721f18944ef42"
    assert 0 <= s.hash < 2**64


ATTACHMENT = b"%PDF-1.4 pretend this is an invoice\n" * 50


def letter(**headers: str) -> EmailMessage:
    msg = EmailMessage()
    defaults = {
        "From": '"Служба Поддержки" <Support@Пример.РФ>',
        "To": "alice@pochta.test, Bob <bob@pochta.test>",
        "Cc": "carol@pochta.test",
        "Subject": "Re: Fwd:  Ваш   СЧЁТ  готов",
        "Message-ID": "<abc.123@MX1.Mailer.Example.NET>",
        "Return-Path": "<bounces@news.mailer.example.net>",
        "Received": "from relay ([203.0.113.9]) by mx.pochta.test (pochta) with ESMTP id 1",
    }
    defaults.update(headers)
    for name, value in defaults.items():
        if value:
            msg[name] = value
    msg.set_content(
        "Dear customer 12345,\nyour invoice is ready: https://Billing.Example.co.uk/pay/./now?id=9\n"
        "Pay before Friday or your account will be closed.\n"
    )
    msg.add_alternative(
        '<p>Dear customer 12345, <a href="https://evil.example.org/login#x">log in</a> to pay.</p>',
        subtype="html",
    )
    msg.add_attachment(
        ATTACHMENT, maintype="application", subtype="pdf", filename="Invoice  2024.PDF"
    )
    return msg


def by_type(shingles: list[Shingle]) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for s in shingles:
        out.setdefault(int(s.type), []).append(s.value)
    return out


ENVELOPE = Envelope(
    ip="198.51.100.23", sender="Bounce@Lists.Example.net", recipients=["Alice@pochta.test"]
)


def test_every_type_of_a_full_letter() -> None:
    got = by_type(extract(letter().as_bytes(), ENVELOPE))
    sender = "bounce@lists.example.net"
    assert got[8] == ["ваш счёт готов"]
    assert got[14] == ["support@xn--e1afmkfd.xn--p1ai"]
    assert got[15] == ["198.51.100.23"]  # the envelope's, not the Received header's
    assert got[16] == ["198.51.100.0/24"]
    assert got[17] == ["xn--e1afmkfd.xn--p1ai"]
    assert got[18] == ["служба поддержки"]
    assert got[19] == ["example.net"]  # the envelope sender's registrable domain
    assert got[20] == ["mx1.mailer.example.net"]
    assert sorted(got[21]) == ["billing.example.co.uk", "evil.example.org"]
    assert sorted(got[22]) == [
        "https://billing.example.co.uk/pay/now",
        "https://evil.example.org/login",
    ]
    assert sorted(got[23]) == ["example.co.uk", "example.org"]
    assert got[30] == [f"{sender} alice@pochta.test"]
    assert got[31] == [sender]
    assert got[32] == [f"{sender} 198.51.100.0/24"]
    assert got[33] == [sender]
    assert got[42] == ["invoice 2024.pdf"]
    assert got[62] == [hashlib.sha256(ATTACHMENT).hexdigest()]  # the blob store's key
    # the plain part is the body: letters only, digits and the URL gone
    assert got[10] == [
        "dear customer your invoice is ready pay before friday or your account will be closed"
    ]
    assert got[11][0] in got[10][0]
    assert len(got[11][0].split()) == extraction.MINHASH_WORDS


def test_without_an_envelope_the_headers_stand_in() -> None:
    got = by_type(extract(letter().as_bytes()))
    assert got[15] == ["203.0.113.9"]  # the top Received header's [ip]
    assert got[19] == ["example.net"]  # Return-Path
    sender = "bounces@news.mailer.example.net"
    assert sorted(got[30]) == [
        f"{sender} alice@pochta.test",
        f"{sender} bob@pochta.test",
        f"{sender} carol@pochta.test",
    ]


def test_pairs_name_their_unique_and_live_on_its_shard() -> None:
    shingles = extract(letter().as_bytes(), ENVELOPE)
    pairs = [s for s in shingles if s.type in sh.PAIRED]
    assert {int(s.type) for s in pairs} == {30, 32}
    for pair in pairs:
        assert pair.unique is not None
        assert pair.unique.type == sh.PAIRED[pair.type]
        assert pair.unique.hash == sh.shingle_hash("bounce@lists.example.net")
        assert pair.ref.shard == shard_of(pair.unique.hash)
        assert pair.ref.unique == pair.unique.ref
    updated = {r.type for r in sh.update_refs(shingles)}
    assert 31 not in updated and 33 not in updated  # uniques count through their pairs
    assert {31, 33} <= {r.type for r in sh.query_refs(shingles)}


def test_each_type_and_hash_appears_once_in_registry_order() -> None:
    msg = EmailMessage()
    msg["From"] = "a@example.com"
    msg["To"] = "b@example.com, B@Example.com"
    msg.set_content("see https://a.example/x and https://a.example/x and https://A.example/x?y")
    shingles = extract(msg.as_bytes())
    keys = [(s.type, s.hash) for s in shingles]
    assert len(keys) == len(set(keys))
    assert [int(s.type) for s in shingles] == sorted(int(s.type) for s in shingles)
    assert by_type(shingles)[22] == ["https://a.example/x"]
    assert by_type(shingles)[30] == ["a@example.com b@example.com"]


def test_links_are_capped() -> None:
    msg = EmailMessage()
    msg["From"] = "a@example.com"
    msg.set_content(" ".join(f"http://host{i}.example.com/" for i in range(50)))
    got = by_type(extract(msg.as_bytes()))
    assert len(got[21]) == extraction.MAX_LINKS


def test_html_only_letter_gives_text_and_links() -> None:
    msg = EmailMessage()
    msg["From"] = "a@example.com"
    msg.set_content(
        "<html><style>p {color: red}</style><script>var x = 'hidden words';</script>"
        "<p>Win a <b>FREE</b> iPhone <a href='http://www.Prize.example.com/claim'>now</a></p>"
        "</html>",
        subtype="html",
    )
    got = by_type(extract(msg.as_bytes()))
    assert got[10] == ["win a free iphone now"]
    assert got[21] == ["www.prize.example.com"]
    assert got[23] == ["example.com"]


def test_near_duplicates_share_the_minhash_shingle() -> None:
    words = [
        "we",
        "are",
        "pleased",
        "to",
        "inform",
        "you",
        "that",
        "your",
        "email",
        "address",
        "has",
        "won",
        "the",
        "annual",
        "lottery",
        "draw",
        "please",
        "contact",
        "our",
        "agent",
        "to",
        "claim",
        "the",
        "prize",
        "of",
        "one",
        "million",
        "dollars",
        "without",
        "delay",
    ]
    a = " ".join(words)
    b = " ".join(["Hello", "John,", *words[:10], "certainly", *words[10:]])  # a few words off
    c = a.replace("million", "billion") + " 12345 https://x.example/"
    digests = []
    for body in (a, b, c):
        msg = EmailMessage()
        msg.set_content(body)
        digests.append(by_type(extract(msg.as_bytes())))
    assert digests[0][11] == digests[1][11] == digests[2][11]
    assert digests[0][10] != digests[1][10]  # the whole-text shingle tells them apart


def test_body_text_ignores_digits_urls_and_addresses() -> None:
    def body(text: str) -> list[str]:
        msg = EmailMessage()
        msg.set_content(text)
        return by_type(extract(msg.as_bytes()))[10]

    assert body("Your code is 1234. Visit https://a.example/1 or write to a@b.example") == body(
        "YOUR CODE IS 9876!  Visit http://b.example/2 or write to c@d.example"
    )


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"\x00\xff\xfe" * 100,
        b"From: <<<@@@>>>\r\nSubject: =?utf-8?b?!!!?=\r\n\r\nbody",
        b"From: a@b\r\nContent-Type: text/plain; charset=no-such-charset\r\n\r\n\xe9\xe8",
        b"Content-Type: multipart/mixed; boundary=x\r\n\r\n--x\r\nContent-Type: text/html\r\n\r\n"
        b"<a href='http://[::1'>x</a><p",  # unterminated multipart and broken HTML
        b'Content-Type: application/pdf; name="a.pdf"\r\nContent-Transfer-Encoding: base64\r\n'
        b"Content-Disposition: attachment\r\n\r\n!!!not base64!!!",
        b"Subject: " + b"x" * 100_000 + b"\r\nFrom: " + b'"' * 5000 + b"\r\n\r\n",
        b"Received: from x ([999.1.1.1])\r\nMessage-ID: <@>\r\nReturn-Path: <>\r\n\r\n",
        b"To: "
        + b", ".join(b"u%d@example.com" % i for i in range(500))
        + b"\r\nFrom: a@b.c\r\n\r\n",
    ],
    ids=[
        "empty",
        "binary",
        "broken-headers",
        "unknown-charset",
        "unterminated-multipart",
        "bad-base64",
        "huge-headers",
        "bad-ip-and-ids",
        "500-recipients",
    ],
)
def test_malformed_letters_give_fewer_shingles_never_an_error(raw: bytes) -> None:
    shingles = extract(raw, Envelope(ip="not-an-ip", sender="", recipients=["x"]))
    assert all(s.value for s in shingles)
    pairs = [s for s in shingles if s.type == T.SENDER_RECIPIENT]
    assert len(pairs) <= extraction.MAX_RECIPIENTS


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=2000))
def test_any_bytes_never_raise(raw: bytes) -> None:
    extract(raw)
    extract(b"From: a@b.example\r\nSubject: x\r\n\r\n" + raw)


@settings(max_examples=100, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["From", "To", "Subject", "Message-ID", "Return-Path", "Received"]),
        st.text(max_size=200),
    ),
    st.text(max_size=500),
)
def test_any_header_values_never_raise(headers: dict[str, str], body: str) -> None:
    head = "".join(
        f"{k}: {v.replace(chr(13), ' ').replace(chr(10), ' ')}\r\n" for k, v in headers.items()
    )
    extract((head + "\r\n" + body).encode("utf-8", "surrogatepass"))
