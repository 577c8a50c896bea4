"""Transfer encodings that pochta can redo byte for byte, and lenient decoding for reading.

:func:`exact` decodes a body and returns the :class:`Encoding` that turns the decoded bytes back
into exactly that body, or None. Extraction can therefore never change a letter; this module
only decides how often extraction is possible:

- identity (7bit, 8bit, binary, or no Content-Transfer-Encoding): the body is the content.
- base64: lines of one length ``L`` (the last one 1..L characters) joined by one line ending,
  LF or CRLF, the canonical alphabet and padding, followed by a ``tail`` of blanks and line
  endings (kept verbatim). Any other shape — mixed line lengths or endings, characters outside
  the alphabet, non-zero padding bits, trailing garbage — stays inline. The layout is checked
  with a few whole-buffer operations (every line break right after a full line, and
  ``b64encode(decoded)`` equal to the body without its line breaks), which is the same as
  encoding again and comparing, at a fifth of the cost.
- quoted-printable: only when the standard library's encoder (``email.quoprimime``, lines of at
  most 76 characters, the body's own line ending) reproduces the body; other encoders make
  other choices that cannot be recovered from the decoded bytes.

:func:`lenient` decodes any body the way a mail reader would, for display and search.
"""

from __future__ import annotations

import base64
import binascii
import enum
import re
from dataclasses import dataclass
from email import quoprimime

from pochta.mime.tree import IDENTITY_ENCODINGS

_BLANKS = b" \t\r\n"


class Method(enum.IntEnum):
    IDENTITY = 0
    BASE64 = 1
    QUOTED_PRINTABLE = 2


@dataclass(frozen=True, slots=True)
class Encoding:
    """How to turn decoded content back into the body bytes it came from."""

    method: Method
    line_length: int = 0  # base64: characters per full line
    crlf: bool = False  # base64, quoted-printable: lines end in CRLF (else LF)
    tail: bytes = b""  # base64: blanks and line endings after the last line, verbatim

    @property
    def eol(self) -> bytes:
        return b"\r\n" if self.crlf else b"\n"


IDENTITY = Encoding(Method.IDENTITY)


def encode(encoding: Encoding, content: bytes) -> bytes:
    if encoding.method is Method.IDENTITY:
        return content
    if encoding.method is Method.BASE64:
        return _b64_lines(content, encoding.line_length, encoding.eol) + encoding.tail
    text = quoprimime.body_encode(content.decode("latin-1"), 76, encoding.eol.decode("ascii"))
    return text.encode("latin-1")


def exact(transfer_encoding: str, body: bytes) -> tuple[bytes, Encoding] | None:
    """The decoded content of ``body`` and how to re-encode it exactly; None when pochta
    cannot reproduce it byte for byte (the part then stays inline)."""
    if transfer_encoding in IDENTITY_ENCODINGS:
        return body, IDENTITY
    if transfer_encoding == "base64":
        return _exact_base64(body)
    if transfer_encoding == "quoted-printable":
        return _exact_qp(body)
    return None


def _exact_base64(body: bytes) -> tuple[bytes, Encoding] | None:
    core = body.rstrip(_BLANKS)
    if not core:
        return None
    first_nl = core.find(b"\n")
    crlf = first_nl > 0 and core[first_nl - 1] == 0x0D
    eol = b"\r\n" if crlf else b"\n"
    length = (first_nl - len(eol) + 1) if first_nl >= 0 else len(core)
    if length <= 0:
        return None
    joined = core.replace(eol, b"")
    breaks = (len(joined) - 1) // length
    if len(core) != len(joined) + breaks * len(eol) or not _breaks_at(core, length, eol, breaks):
        return None  # lines of uneven length
    try:
        content = base64.b64decode(joined, validate=True)
    except (binascii.Error, ValueError):
        return None
    if base64.b64encode(content) != joined:
        return None  # non-canonical: padding bits set, or padding in the middle
    return content, Encoding(Method.BASE64, length, crlf, body[len(core) :])


def _breaks_at(core: bytes, length: int, eol: bytes, breaks: int) -> bool:
    """Whether every line break of ``core`` sits right after a full line of ``length``."""
    stride = length + len(eol)
    for i, byte in enumerate(eol):
        found = core[length + i :: stride]
        if len(found) < breaks or found[:breaks].count(byte) != breaks:
            return False
    return core.count(b"\n") == breaks


def _b64_lines(content: bytes, length: int, eol: bytes) -> bytes:
    if length % 4 == 0:
        step = length // 4 * 3
        return eol.join(
            binascii.b2a_base64(content[i : i + step], newline=False)
            for i in range(0, len(content), step)
        )
    text = base64.b64encode(content)
    return eol.join(text[i : i + length] for i in range(0, len(text), length))


def _exact_qp(body: bytes) -> tuple[bytes, Encoding] | None:
    if not body:
        return None
    content = binascii.a2b_qp(body)
    encoding = Encoding(Method.QUOTED_PRINTABLE, 0, b"\r\n" in body)
    if encode(encoding, content) != body:
        return None
    return content, encoding


_NOT_B64 = re.compile(rb"[^A-Za-z0-9+/]")


def lenient(transfer_encoding: str, body: bytes) -> bytes:
    """Decode a body as a forgiving mail reader would: base64 with stray characters dropped and
    missing padding supplied; quoted-printable; anything else as it stands."""
    if transfer_encoding == "base64":
        data = _NOT_B64.sub(b"", body.split(b"=", 1)[0] if b"=" in body else body)
        if len(data) % 4 == 1:
            data = data[:-1]
        data += b"=" * (-len(data) % 4)
        try:
            return base64.b64decode(data)
        except (binascii.Error, ValueError):
            return b""
    if transfer_encoding == "quoted-printable":
        return binascii.a2b_qp(body)
    return body
