"""Helpers for the mime tests: a round trip through a dict blob store, and random MIME trees
for hypothesis, rendered to bytes together with what split() should extract.

A tree is built from :class:`Leaf`, :class:`Multi` and :class:`Forward` (message/rfc822) nodes;
:func:`render` writes the letter and returns, in document order, the parts that split() must
take out of it (given the same ``inline_limit``).
"""

from __future__ import annotations

import base64
import binascii
import urllib.parse
from dataclasses import dataclass, field
from email import quoprimime

from hypothesis import strategies as st

from pochta.mime import Ref, Split, reassemble, split

INLINE_LIMIT = 64


def roundtrip(raw: bytes, inline_limit: int = INLINE_LIMIT) -> tuple[bytes, Split]:
    """split() into a dict keyed by blob key, then reassemble() from it."""
    result = split(raw, inline_limit=inline_limit)
    store = {p.key: p.content for p in result.parts}

    def fetch(index: int, ref: Ref) -> bytes:
        return store[ref.key]

    return reassemble(result.skeleton, fetch), result


TEXT_TYPES = ["text/plain", "text/html", "text/csv"]
OTHER_TYPES = ["application/octet-stream", "application/pdf", "image/png", "audio/ogg"]
FILENAME_CHARS = st.sampled_from(list("abcXYZ019 -_.()фывДЖЁ€ü"))


@dataclass(frozen=True)
class Leaf:
    content_type: str
    payload: bytes
    cte: str  # base64, quoted-printable, 7bit, 8bit, binary, "" (no header)
    line_length: int  # base64 only
    blank_tail: int  # base64 only: extra empty lines after the last line
    filename: str | None
    filename_style: str  # plain, rfc2231, encoded-word
    disposition: str | None  # attachment, inline, None


@dataclass(frozen=True)
class Multi:
    subtype: str
    boundary: str
    children: tuple[Node, ...]
    preamble: bytes
    epilogue: bytes
    close: bool  # write the close delimiter


@dataclass(frozen=True)
class Forward:
    inner: Node


Node = Leaf | Multi | Forward


@dataclass(frozen=True)
class Expected:
    content: bytes
    content_type: str
    filename: str | None


@dataclass
class _Out:
    eol: bytes
    inline_limit: int
    expected: list[Expected] = field(default_factory=list)
    multiparts: int = 0

    def boundary(self, text: str) -> bytes:
        """Unique per letter: a number no other boundary starts with, then the drawn text."""
        self.multiparts += 1
        return f"{self.multiparts}.{text}".encode()


def render(
    root: Node, *, eol: bytes, inline_limit: int = INLINE_LIMIT
) -> tuple[bytes, list[Expected]]:
    out = _Out(eol, inline_limit)
    head = eol.join(
        [
            b"From: Sender <sender@example.net>",
            b"To: rcpt@example.org",
            b"Subject: generated",
            b"MIME-Version: 1.0",
        ]
    )
    raw = head + eol + _entity(root, out)
    if _ends_open(root):
        raw += eol  # a letter that lost its close delimiter still ends with a line break
    return raw, out.expected


def _ends_open(node: Node) -> bool:
    """Whether the letter ends inside the last part of a multipart with no close delimiter."""
    if isinstance(node, Multi):
        return not node.close
    if isinstance(node, Forward):
        return _ends_open(node.inner)
    return False


def _entity(node: Node, out: _Out) -> bytes:
    """Content headers, the empty line and the body of one node."""
    eol = out.eol
    if isinstance(node, Multi):
        boundary = out.boundary(node.boundary)
        headers = f"Content-Type: multipart/{node.subtype}; boundary=".encode()
        headers += b'"' + boundary + b'"'
        delim = b"--" + boundary
        body = node.preamble
        for child in node.children:
            body += eol + delim + eol + _entity(child, out)
        if node.close:
            body += eol + delim + b"--" + eol + node.epilogue
        return headers + eol + eol + body
    if isinstance(node, Forward):
        inner = b"From: inner@example.com" + eol + b"Subject: forwarded" + eol
        return b"Content-Type: message/rfc822" + eol + eol + inner + _entity(node.inner, out)
    return _leaf(node, out)


def _leaf(leaf: Leaf, out: _Out) -> bytes:
    eol = out.eol
    lines = [f"Content-Type: {leaf.content_type}".encode()]
    if leaf.filename is not None and leaf.disposition is None:
        lines[0] += b"; name=" + _filename_param(leaf)
    if leaf.cte:
        lines.append(f"Content-Transfer-Encoding: {leaf.cte}".encode())
    if leaf.disposition is not None:
        disp = f"Content-Disposition: {leaf.disposition}".encode()
        if leaf.filename is not None:
            if leaf.filename_style == "rfc2231":
                quoted = urllib.parse.quote(leaf.filename.encode("utf-8"), safe="")
                disp += f"; filename*=utf-8''{quoted}".encode()
            else:
                disp += b"; filename=" + _filename_param(leaf)
        lines.append(disp)
    body = _body(leaf, eol)
    _expect(leaf, body, eol, out)
    return eol.join(lines) + eol + eol + body


def _filename_param(leaf: Leaf) -> bytes:
    assert leaf.filename is not None
    if leaf.filename_style == "encoded-word" or not leaf.filename.isascii():
        word = base64.b64encode(leaf.filename.encode("utf-8")).decode()
        return f'"=?utf-8?B?{word}?="'.encode()
    return f'"{leaf.filename}"'.encode()


def _body(leaf: Leaf, eol: bytes) -> bytes:
    if leaf.cte == "base64":
        text = base64.b64encode(leaf.payload)
        n = leaf.line_length
        return eol.join(text[i : i + n] for i in range(0, len(text), n)) + eol * leaf.blank_tail
    if leaf.cte == "quoted-printable":
        return quoprimime.body_encode(leaf.payload.decode("latin-1"), 76, eol.decode()).encode(
            "latin-1"
        )
    return leaf.payload


def _expect(leaf: Leaf, body: bytes, eol: bytes, out: _Out) -> None:
    attachment = leaf.disposition == "attachment" or leaf.filename is not None
    big = leaf.content_type.split("/")[0] != "text" and len(body) > out.inline_limit
    if not body or not (attachment or big):
        return
    if leaf.cte == "base64":
        content = leaf.payload
    elif leaf.cte == "quoted-printable":
        content = binascii.a2b_qp(body)
    else:
        content = body
    if content:
        out.expected.append(Expected(content, leaf.content_type, leaf.filename))


# -- strategies ------------------------------------------------------------------------------

boundaries = st.text(alphabet="abcdefXYZ0123456789'()+_,-./:=?", min_size=0, max_size=40)
filenames = st.text(FILENAME_CHARS, min_size=1, max_size=20).map(lambda s: s.strip() or "x")


@st.composite
def leaves(draw: st.DrawFn) -> Leaf:
    cte = draw(
        st.sampled_from(["base64", "base64", "quoted-printable", "7bit", "8bit", "binary", ""])
    )
    content_type = draw(st.sampled_from(TEXT_TYPES + OTHER_TYPES))
    if cte in ("7bit", ""):
        payload = draw(st.text(alphabet="abc xyz.\n\t=", max_size=300)).encode()
    elif cte == "quoted-printable":
        payload = draw(st.text(alphabet="abc xyz.=\t\nабв\xff", max_size=300)).encode("utf-8")
    else:
        # a final "\r" would join the line break before the next delimiter (RFC 2046: that
        # break belongs to the delimiter), so the part could not end in one
        payload = draw(st.binary(max_size=600)).rstrip(b"\r")
    has_name = draw(st.booleans())
    return Leaf(
        content_type=content_type,
        payload=payload,
        cte=cte,
        line_length=draw(st.sampled_from([76, 72, 64, 60]) | st.integers(4, 120)),
        blank_tail=draw(st.integers(0, 2)),
        filename=draw(filenames) if has_name else None,
        filename_style=draw(st.sampled_from(["plain", "rfc2231", "encoded-word"])),
        disposition=draw(st.sampled_from(["attachment", "inline", None])),
    )


def _extend(children: st.SearchStrategy[Node]) -> st.SearchStrategy[Node]:
    multi = st.builds(
        Multi,
        subtype=st.sampled_from(["mixed", "alternative", "related"]),
        boundary=boundaries,
        children=st.lists(children, min_size=1, max_size=4).map(tuple),
        preamble=st.sampled_from([b"", b"This is a multi-part message in MIME format."]),
        epilogue=st.sampled_from([b"", b"epilogue text\n", b"\n\n"]),
        close=st.booleans(),
    )
    return multi | st.builds(Forward, children)


def trees(max_leaves: int = 8) -> st.SearchStrategy[Node]:
    return st.recursive(leaves(), _extend, max_leaves=max_leaves)
