"""Letter-shaped bytes for fuzzing: headers, MIME trees, encodings and their usual breakage
(odd line endings, broken base64, truncation), built by hypothesis strategies."""

from __future__ import annotations

import base64
import quopri

from hypothesis import strategies as st

EOLS = st.sampled_from([b"\r\n", b"\n", b"\r", b"\r\r\n"])
NAMES = st.sampled_from(
    [
        b"From",
        b"To",
        b"Subject",
        b"Content-Type",
        b"Content-Transfer-Encoding",
        b"Content-Disposition",
        b"Message-ID",
        b"Date",
        b"Reply-To",
        b"Received",
        b"X-Odd",
        b"MIME-Version",
        b"from",
        b"CONTENT-TYPE",
        b"Return-Path",
    ]
)
TEXT = st.binary(max_size=60) | st.text(max_size=40).map(lambda t: t.encode("utf-8"))
VALUES = st.one_of(
    TEXT,
    st.sampled_from(
        [
            b"Ivan <ivan@example.org>",
            b"=?utf-8?B?0J/RgNC40LLQtdGC?=",
            b"=?koi8-r?Q?=F0?=",
            b"multipart/mixed; boundary=b1",
            b'multipart/alternative; boundary="b2"',
            b"text/plain; charset=utf-8",
            b"text/html",
            b"application/octet-stream; name=a.pdf",
            b"base64",
            b"quoted-printable",
            b"8bit",
            b'attachment; filename="r.zip"',
            b"message/rfc822",
            b"<a@b>",
            b"Mon, 23 Nov 2026 10:00:00 +0000",
            b"",
        ]
    ),
)


@st.composite
def header(draw: st.DrawFn) -> bytes:
    eol = draw(EOLS)
    folded = draw(st.booleans())
    value = draw(VALUES)
    out = draw(NAMES) + draw(st.sampled_from([b": ", b":", b" : "])) + value
    if folded:
        out += eol + draw(st.sampled_from([b" ", b"\t"])) + draw(VALUES)
    return out + eol


@st.composite
def body(draw: st.DrawFn, depth: int = 0) -> bytes:
    kind = draw(st.sampled_from(["text", "b64", "b64-odd", "qp", "multipart", "binary"]))
    eol = draw(EOLS)
    data = draw(st.binary(max_size=400))
    if kind == "b64":
        width = draw(st.sampled_from([76, 64, 72, 1000]))
        enc = base64.b64encode(data)
        return eol.join(enc[i : i + width] for i in range(0, len(enc), width)) + eol
    if kind == "b64-odd":
        enc = bytearray(base64.b64encode(data))
        for _ in range(draw(st.integers(0, 3))):
            if enc:
                enc[draw(st.integers(0, len(enc) - 1))] = draw(st.sampled_from(b"=!\n\r-A"))
        return bytes(enc) + eol
    if kind == "qp":
        return quopri.encodestring(data).replace(b"\n", eol)
    if kind == "multipart" and depth < 3:
        boundary = draw(st.sampled_from([b"b1", b"b2", b"x", b"--", b"b1 "]))
        parts = draw(st.lists(part(depth + 1), max_size=4))
        out = b"preamble" + eol
        for p in parts:
            out += b"--" + boundary + eol + p + eol
        if draw(st.booleans()):
            out += b"--" + boundary + b"--" + eol
        return out
    return data.replace(b"\n", eol) + eol


@st.composite
def part(draw: st.DrawFn, depth: int = 0) -> bytes:
    eol = draw(EOLS)
    headers = b"".join(draw(st.lists(header(), max_size=5)))
    return headers + eol + draw(body(depth))


@st.composite
def letter(draw: st.DrawFn) -> bytes:
    raw = draw(part())
    if draw(st.integers(0, 9)) == 0:  # truncated anywhere
        raw = raw[: draw(st.integers(0, len(raw)))]
    return raw
