"""Hostile letters by kind and size, for the linearity tests and ``benchmarks/crafted_cpu.py``.

Pure and deterministic: ``letter(kind, size)`` gives the same bytes every time, about ``size``
bytes long (the repeated piece is repeated until the letter reaches ``size``; fixed headers
add a few hundred bytes). Each kind aims at one way a parser or a pattern can go super-linear:

    kind                what is repeated or stretched
    ------------------- --------------------------------------------------------------------
    digits              body "1 1 1 ..." (amount patterns: a digit, then [digits spaces . ,])
    dollars             body "$1 $1 ..."
    rubles              body "руб 1 руб 1 ..."
    thousands           body "1 000 000 000 ..." (the "000" suffix of the amount patterns)
    earnings            body "Заработок " and then "1 1 1 ..." (an offer: words, then an amount)
    stems               one word of stems glued together: "автомобилкартданнкодпередан..."
    card_words          one sentence (no stop) of "номер карты код из смс данные карты ..."
    whitespace          body of mixed whitespace: NBSP, vertical tab, line separator, spaces
    long_line           one line without a newline or a space: "abcdefghij..."
    long_word           one Cyrillic word without a space: "аааа..."
    link_host           a link to a host name of many labels, in the text: "http://a.a.a....com/"
    html_link_host      the same host in an HTML anchor
    from_host           From: an address at a host of many labels
    display_name        From: a display name of "a.a.a.a..." (an address-like run)
    reply_to            Reply-To: one long run without an "@"
    received_host       Received: from a host of many labels
    url_user            a link with a long user part: "http://aaaa...@example.com/"
    many_at             body "a@a@a@..."
    many_links          HTML with about 1,700 distinct links per 100 KB
    many_headers        thousands of header fields
    params              Content-Type: text/plain followed by thousands of ";"
    many_parts          multipart/mixed with one small part per 40 bytes
    deep_nesting        multipart inside multipart, one level per about 70 bytes
    re_subject          Subject: "Re: Re: Re: ..." (one line)
    tags_subject        Subject: "[list] Re: [list] Re: ..." (one line)
    subject_blanks      Subject: "Re", a long run of spaces, "x" (no colon)
    html_nesting        "<div><div>..." then text then "</div></div>..."
    html_attributes     one <p> tag with thousands of attributes
    base64_junk         a base64 part of junk: characters outside the alphabet, "=" inside
    gift_dashes         a gift card named, "send", then a run of "-" (a word and a gap at once)
"""

from __future__ import annotations

import random
from collections.abc import Callable

CRLF = "\r\n"
SIZES = (10_000, 100_000, 1_000_000)


def _repeat(piece: str, size: int) -> str:
    """``piece`` repeated until it fills ``size`` bytes of UTF-8 (at least once)."""
    unit = len(piece.encode("utf-8"))
    return piece * max(1, size // unit)


def _fill(piece: Callable[[int], str], size: int) -> str:
    """``piece(0) + piece(1) + ...`` until it fills ``size`` bytes of UTF-8 (at least one)."""
    out: list[str] = []
    total = i = 0
    while total < size or not out:
        out.append(piece(i))
        total += len(out[-1].encode("utf-8"))
        i += 1
    return "".join(out)


def _letter(
    body: str,
    *,
    headers: dict[str, str] | None = None,
    content_type: str = "text/plain; charset=utf-8",
    cte: str = "8bit",
) -> bytes:
    fields = {
        "From": "Sender <sender@example.net>",
        "To": "alice@example.org",
        "Subject": "Hello",
        "Date": "Mon, 23 Nov 2026 10:00:00 +0000",
        "Message-ID": "<crafted.1@example.net>",
        "MIME-Version": "1.0",
        "Content-Type": content_type,
        "Content-Transfer-Encoding": cte,
    }
    fields.update(headers or {})
    head = "".join(f"{name}: {value}{CRLF}" for name, value in fields.items() if value)
    return (head + CRLF + body).encode("utf-8")


def _body(piece: str, prefix: str = "", suffix: str = "") -> Callable[[int], bytes]:
    def make(size: int) -> bytes:
        return _letter(prefix + _repeat(piece, size) + suffix)

    return make


def _header(name: str, piece: str, prefix: str = "", suffix: str = "") -> Callable[[int], bytes]:
    def make(size: int) -> bytes:
        return _letter("Hello.\r\n", headers={name: prefix + _repeat(piece, size) + suffix})

    return make


def _html(content: str) -> bytes:
    return _letter(f"<html><body>{content}</body></html>", content_type="text/html; charset=utf-8")


def link_host(size: int) -> bytes:
    host = _repeat("a.", size) + "com"
    return _letter(f"Visit http://{host}/path today.\r\n")


def html_link_host(size: int) -> bytes:
    host = _repeat("a.", size) + "com"
    return _html(f'<a href="http://{host}/">http://{host}/</a>')


def url_user(size: int) -> bytes:
    user = _repeat("a", size)
    url = f"http://{user}@example.com/login"
    return _letter(f'Log in: {url}\r\n<a href="{url}">x</a>\r\n')


def many_links(size: int) -> bytes:
    return _html(_fill(lambda i: f'<a href="http://h{i}.ex{i % 97}.com/p?{i}">link {i}</a> ', size))


def many_headers(size: int) -> bytes:
    fields = _fill(lambda i: f"X-Crafted-{i}: value {i}{CRLF}", size)
    return fields.encode() + _letter("Hello.\r\n")


def many_parts(size: int) -> bytes:
    parts = _fill(lambda _: f"--b{CRLF}Content-Type: text/plain{CRLF}{CRLF}x{CRLF}", size)
    return _letter(parts + f"--b--{CRLF}", content_type='multipart/mixed; boundary="b"')


def deep_nesting(size: int) -> bytes:
    level = "--b{0}" + CRLF + 'Content-Type: multipart/mixed; boundary="b{1}"' + CRLF + CRLF
    opening = _fill(lambda i: level.format(i, i + 1), size * 5 // 6)  # the closings: the rest
    depth = opening.count("Content-Type")
    closing = "".join(f"--b{i}--{CRLF}" for i in reversed(range(depth + 1)))
    inner = f"--b{depth}{CRLF}Content-Type: text/plain{CRLF}{CRLF}deep{CRLF}"
    return _letter(opening + inner + closing, content_type='multipart/mixed; boundary="b0"')


def base64_junk(size: int) -> bytes:
    rng = random.Random(size)
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=!*-. "
    lines = []
    total = 0
    while total < size:
        line = "".join(rng.choice(alphabet) for _ in range(76))
        lines.append(line)
        total += 78
    return _letter(CRLF.join(lines) + CRLF, content_type="text/plain; charset=utf-8", cte="base64")


def html_nesting(size: int) -> bytes:
    n = max(1, size // 11)
    return _html("<div>" * n + "text" + "</div>" * n)


def html_attributes(size: int) -> bytes:
    attrs = _fill(lambda i: f'a{i}="v{i}" ', size)
    return _html(f"<p {attrs}>text</p>")


KINDS: dict[str, Callable[[int], bytes]] = {
    "digits": _body("1 "),
    "dollars": _body("$1 "),
    "rubles": _body("руб 1 "),
    "thousands": _body("000 ", prefix="1 "),
    "earnings": _body("1 ", prefix="Заработок "),
    "stems": _body("автомобилкартданнкодпереданкомпенсацисроклично"),
    "card_words": _body("номер карты код из смс данные карты срок действия "),
    "whitespace": _body("\u00a0 \v\u2028\u3000\x1f", prefix="a", suffix="b"),
    "long_line": _body("abcdefghij"),
    "long_word": _body("а"),
    "link_host": link_host,
    "html_link_host": html_link_host,
    "from_host": _header("From", "a.", prefix="Sender <sender@", suffix="com>"),
    "display_name": _header("From", "a.", prefix='"', suffix='" <sender@example.net>'),
    "reply_to": _header("Reply-To", "a"),
    "received_host": _header("Received", "a.", prefix="from ", suffix="com by mx.example.org"),
    "url_user": url_user,
    "many_at": _body("a@"),
    "many_links": many_links,
    "many_headers": many_headers,
    "params": _header("Content-Type", ";", prefix="text/plain; charset=utf-8"),
    "many_parts": many_parts,
    "deep_nesting": deep_nesting,
    "re_subject": _header("Subject", "Re: ", suffix="hello"),
    "tags_subject": _header("Subject", "[list] Re: ", suffix="hello"),
    "subject_blanks": _header("Subject", " ", prefix="Re", suffix="x"),
    "html_nesting": html_nesting,
    "html_attributes": html_attributes,
    "base64_junk": base64_junk,
    "gift_dashes": _body("-", prefix="Buy a Steam gift card and send ", suffix=" the codes"),
}


def letter(kind: str, size: int) -> bytes:
    """A hostile letter of ``kind`` (one of :data:`KINDS`), about ``size`` bytes."""
    return KINDS[kind](size)
