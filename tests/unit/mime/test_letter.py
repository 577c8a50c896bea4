"""parse(): addresses, subject, date, bodies and attachments of real-looking letters."""

from __future__ import annotations

import base64
import time
from datetime import UTC, datetime, timedelta, timezone
from email.utils import getaddresses

from hypothesis import given, settings
from hypothesis import strategies as st

from pochta.mime import Address, parse, split
from pochta.mime import letter as letter_mod


def b64w(text: str, charset: str) -> str:
    return f"=?{charset}?B?{base64.b64encode(text.encode(charset)).decode()}?="


def test_russian_letter_in_windows_1251_with_encoded_word_headers() -> None:
    raw = (
        f"From: {b64w('Иван Петров', 'koi8-r')} <ivan@example.ru>\r\n"
        f"To: {b64w('Мария', 'windows-1251')} <maria@example.ru>, bob@example.net\r\n"
        "Cc: =?windows-1251?Q?=CE=EB=E5=E3?= <oleg@example.ru>\r\n"
        f"Subject: {b64w('Отчёт за квартал', 'utf-8')}\r\n"
        "\t=?koi8-r?Q?_=C9_=D0=CC=C1=CE?=\r\n"  # blanks between encoded words vanish
        "Date: Mon, 23 Nov 2026 10:00:00 +0300\r\n"
        "Message-ID: <abc.123@example.ru>\r\n"
        "MIME-Version: 1.0\r\n"
        "Content-Type: text/plain; charset=windows-1251\r\n"
        "Content-Transfer-Encoding: 8bit\r\n"
        "\r\n"
    ).encode("ascii") + "Добрый день!\r\nОтчёт во вложении.\r\n".encode("windows-1251")
    s = parse(raw)
    assert s.from_ == Address("Иван Петров", "ivan@example.ru")
    assert s.sender == "Иван Петров <ivan@example.ru>"
    assert s.to_addresses == (Address("Мария", "maria@example.ru"), Address("", "bob@example.net"))
    assert s.to == ("Мария <maria@example.ru>", "bob@example.net")
    assert s.cc == ("Олег <oleg@example.ru>",)
    assert s.subject == "Отчёт за квартал и план"
    assert s.date == datetime(2026, 11, 23, 10, 0, tzinfo=timezone(timedelta(hours=3)))
    assert s.message_id == "<abc.123@example.ru>"
    assert s.body_text == "Добрый день!\r\nОтчёт во вложении.\r\n"
    assert s.body_html is None
    assert s.attachments == ()
    assert ("subject", "Отчёт за квартал и план") in s.fields


def test_koi8r_base64_body_and_raw_8bit_subject_in_the_letters_charset() -> None:
    body = "Привет из КОИ-8!\n".encode("koi8-r")
    raw = (
        b"From: sender@example.ru\n"
        b"Subject: " + "Сырой заголовок".encode("koi8-r") + b"\n"
        b"Content-Type: text/plain; charset=koi8-r\n"
        b"Content-Transfer-Encoding: base64\n\n" + base64.encodebytes(body)
    )
    s = parse(raw)
    assert s.subject == "Сырой заголовок"
    assert s.body_text == "Привет из КОИ-8!\n"
    assert s.from_ == Address("", "sender@example.ru")


def test_html_only_letter() -> None:
    raw = (
        b"From: =?utf-8?Q?=D0=91=D0=B0=D0=BD=D0=BA?= <no-reply@bank.example>\n"
        b"Subject: =?UTF-8?B?0JLQsNGIINGB0YfRkdGC?=\n"
        b"Content-Type: text/html; charset=utf-8\n"
        b"Content-Transfer-Encoding: quoted-printable\n\n"
        b"<p>=D0=A1=D1=87=D1=91=D1=82 =E2=84=96 42</p>=\n<p>end</p>\n"
    )
    s = parse(raw)
    assert s.body_text is None
    assert s.body_html == "<p>Счёт № 42</p><p>end</p>\n"
    assert s.subject == "Ваш счёт"
    assert s.from_ == Address("Банк", "no-reply@bank.example")


def test_multipart_letter_bodies_and_attachments_with_split_indexes() -> None:
    pdf = bytes(range(256)) * 40
    broken = base64.b64encode(b"\x89PNG" + bytes(3000)).decode()[:-3] + "*"
    raw = (
        "From: a@example.org\n"
        "Subject: mixed\n"
        'Content-Type: multipart/mixed; boundary="m"\n\n'
        "--m\n"
        'Content-Type: multipart/alternative; boundary="a"\n\n'
        "--a\nContent-Type: text/plain; charset=koi8-r\nContent-Transfer-Encoding: 8bit\n\n"
        "@@TEXT@@\n"
        "--a\nContent-Type: text/html; charset=utf-8\n\n<b>html</b>\n"
        "--a--\n"
        "--m\n"
        "Content-Type: application/pdf\nContent-Transfer-Encoding: base64\n"
        "Content-Disposition: attachment; filename*=utf-8''%D1%81%D1%87%D1%91%D1%82.pdf\n\n"
        + base64.encodebytes(pdf).decode()
        + "--m\n"
        'Content-Type: image/png; name="broken.png"\nContent-Transfer-Encoding: base64\n\n'
        + broken
        + "\n--m--\n"
    ).encode()
    raw = raw.replace(b"@@TEXT@@", "текст".encode("koi8-r"))
    s = parse(raw)
    assert s.body_text == "текст"
    assert s.body_html == "<b>html</b>"
    [att_pdf, att_png] = s.attachments
    assert (att_pdf.n, att_pdf.index, att_pdf.filename) == (0, 0, "счёт.pdf")
    assert (att_pdf.content, att_pdf.size, att_pdf.content_type) == (
        pdf,
        len(pdf),
        "application/pdf",
    )
    assert (att_png.n, att_png.index, att_png.filename) == (1, None, "broken.png")  # inline
    assert att_png.content.startswith(b"\x89PNG")
    assert [p.index for p in split(raw).parts] == [0]


def test_forwarded_letter_is_an_attachment_and_its_text_is_not_the_letters() -> None:
    raw = (
        b"From: a@example.org\n"
        b'Content-Type: multipart/mixed; boundary="m"\n\n'
        b"--m\nContent-Type: text/plain\n\nsee below\n"
        b"--m\nContent-Type: message/rfc822\n\n"
        b"From: b@example.org\nSubject: inner\n\ninner text\n"
        b"--m--\n"
    )
    s = parse(raw)
    assert s.body_text == "see below"
    assert [a.content_type for a in s.attachments] == ["message/rfc822"]
    assert s.attachments[0].content.startswith(b"From: b@example.org")


def test_malformed_headers_and_structure_never_raise() -> None:
    assert parse(b"").subject == ""
    s = parse(b"garbage without headers\n\x00\xff")
    assert s.from_ is None and s.body_text == "garbage without headers\n\x00ÿ"
    s = parse(b"Date: not a date\nFrom: <<<@@@>>>\nSubject: =?bogus?Q?x?=\n\nbody")
    assert s.date is None and s.subject == "=?bogus?Q?x?="
    s = parse(b"Date: Mon, 23 Nov 2026 10:00:00 -0000\n\nbody")
    assert s.date is not None and s.date.replace(tzinfo=UTC) == datetime(
        2026, 11, 23, 10, tzinfo=UTC
    )
    started = time.process_time()  # CPU: holds on a loaded machine
    huge = b"To: " + b"x@example.org, " * 70_000 + b"\nSubject: " + b"s" * 2**20 + b"\n\nbody"
    s = parse(huge)
    assert s.body_text == "body" and len(s.subject) <= 65_536
    deep = b"".join(
        b'Content-Type: multipart/mixed; boundary="%d"\n\n--%d\n' % (i, i) for i in range(3000)
    )
    assert parse(deep + b"Content-Type: text/plain\n\ndeep\n").body_text is None
    assert time.process_time() - started < 5


_ADDRESS_PIECES = st.sampled_from(
    ["a", "Z", "0", "_", "+", "-", ".", "@", " ", "\t", "\r\n", "<", ">", '"', "(", ")",
     ",", ";", ":", "[", "]", "\\", "é", "x.y", "@b.c"]
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(_ADDRESS_PIECES, max_size=12).map("".join))
def test_a_bare_address_is_read_as_getaddresses_reads_it(value: str) -> None:
    """A field of one bare ASCII address skips ``getaddresses``' character-by-character
    reading (letter._BARE_ADDRESS): every value gives what ``getaddresses`` gives."""
    try:
        expected = tuple(getaddresses([value]))
    except Exception:
        expected = ()
    assert letter_mod._pairs(value) == (expected if value else ())


_NAMED_PIECES = st.sampled_from(
    ["Jane", "Q.", "é", "Иван", " ", "\t", "\r\n", '"', "\\", "(", ")", ".", "'", "=?utf-8?q?a?=",
     "\x0b", "\xa0", "\x00", ",", "<", ">", "<a.b@c.d>", "<a@b>", "x@y.z", "[", ";", ":"]
)  # fmt: skip


@settings(max_examples=500, deadline=None)
@given(st.lists(_NAMED_PIECES, max_size=10).map("".join))
def test_a_named_address_is_read_as_getaddresses_reads_it(value: str) -> None:
    """A display name and an address in angle brackets skip ``getaddresses``' reading
    (letter._NAMED_ADDRESS): every value gives what ``getaddresses`` gives."""
    try:
        expected = tuple(getaddresses([value]))
    except Exception:
        expected = ()
    assert letter_mod._pairs(value) == (expected if value else ())


_NAMES = st.lists(_NAMED_PIECES, max_size=5).map("".join)
_BLANKS = st.sampled_from(["", " ", "\t", "  ", "\r\n", " \r\n "])


@settings(max_examples=500, deadline=None)
@given(_BLANKS, _NAMES, st.booleans(), _BLANKS, st.sampled_from(["a.b@c.d", "a@b", "a @b", "@b"]),
       _BLANKS)  # fmt: skip
def test_a_name_and_an_address_are_read_as_getaddresses_reads_them(
    before: str, name: str, quoted: bool, between: str, address: str, after: str
) -> None:
    """The same, the values made in the named form (most of them match the short way)."""
    shown = '"' + name + '"' if quoted else name
    value = f"{before}{shown}{between}<{address}>{after}"
    try:
        expected = tuple(getaddresses([value]))
    except Exception:
        expected = ()
    assert letter_mod._pairs(value) == expected


def test_named_addresses_take_the_short_way() -> None:
    for value, pair in (
        ('"Doe, Jane" <jane.doe@example.org>', ("Doe, Jane", "jane.doe@example.org")),
        ("  Jane  Q.\tDoe <j@mail.example.org>\r\n", ("Jane Q. Doe", "j@mail.example.org")),
        ("Иван Петров<ivan@example.ru>", ("Иван Петров", "ivan@example.ru")),
        ("<a@b>", ("", "a@b")),
        ('"" <a@b>', ("", "a@b")),
    ):
        assert letter_mod._NAMED_ADDRESS.fullmatch(value)
        assert letter_mod._pairs(value) == (pair,) == tuple(getaddresses([value]))
    for other in ('"a\\"b" <a@b>', "Jane (x) <a@b>", "a <b@c>, d <e@f>", "Jane\r\n <a@b>",
                  "Ja\xa0ne <a@b>", '"a"b <c@d>', "Jane <a @b>"):  # fmt: skip
        assert letter_mod._NAMED_ADDRESS.fullmatch(other) is None
        assert letter_mod._pairs(other) == tuple(getaddresses([other]))


def test_bare_addresses_take_the_short_way() -> None:
    assert letter_mod._BARE_ADDRESS.fullmatch(" first.last+tag@mail.example-1.com\r\n")
    assert letter_mod._pairs("\tA.B@C.D ") == (("", "A.B@C.D"),)
    for not_bare in ("a..b@c", "a@b.", ".a@b", "<a@b>", "a@b, c@d", "Name a@b", "a@[1.2.3.4]"):
        assert letter_mod._BARE_ADDRESS.fullmatch(not_bare) is None
        assert letter_mod._pairs(not_bare) == tuple(getaddresses([not_bare]))


def test_fields_by_name_in_order_any_case_and_each_answer_a_new_list() -> None:
    raw = (
        b"Received: from a.example (a.example [192.0.2.1])\r\n"
        b"Subject: hello\r\n"
        b"RECEIVED: from b.example\r\n"
        b"received: from c.example\r\n"
        b"X-Empty:\r\n"
        b"\r\nbody\r\n"
    )
    s = parse(raw)
    hops = ["from a.example (a.example [192.0.2.1])", "from b.example", "from c.example"]
    assert s.headers("Received") == s.headers("received") == hops
    assert s.header("rEcEiVeD") == hops[0]
    assert s.header("x-empty") == "" and s.headers("X-Empty") == [""]
    assert s.header("cc") is None and s.headers("cc") == []
    s.headers("received").clear()  # a caller's list is its own: the letter does not change
    s.headers("cc").append("x")
    assert s.headers("received") == hops and s.headers("cc") == []
    assert [v for n, v in s.fields if n == "received"] == hops
