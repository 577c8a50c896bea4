"""The skeleton format: a letter with some body ranges cut out, and a reference for each.

Version 1, all integers unsigned LEB128 varints unless a width is given::

    magic       4 bytes   b"\\x89PSK"    (never the start of a letter; "pochta skeleton")
    version     1 byte    1
    count       varint    number of references
    count x reference:
        gap         varint    literal bytes since the previous reference (or the start)
        key         32 bytes  SHA-256 of the decoded content (the blob key, raw)
        size        varint    decoded size
        crc32       4 bytes   big-endian zlib.crc32 of the decoded content
        encoded     varint    size of the body bytes the reference stands for
        method      1 byte    0 identity, 1 base64, 2 quoted-printable (pochta.mime.codec)
        base64:     varint line length, 1 byte flags (bit 0: CRLF), varint tail size, tail bytes
        q-p:        1 byte flags (bit 0: CRLF)
        type        varint size + UTF-8 content type (lowercase maintype/subtype)
        filename    varint (size + 1) + UTF-8 name; 0 when the part has no file name
    literal     the rest: the letter's bytes with every referenced body range removed

Reassembly writes literal[0:gap0], the re-encoded part 0, the next ``gap1`` literal bytes, the
re-encoded part 1, ..., then the rest of the literal. A letter nothing was cut from is the
header (6 bytes) followed by the letter itself.
"""

from __future__ import annotations

from dataclasses import dataclass

from pochta.errors import IntegrityError
from pochta.mime.codec import Encoding, Method

MAGIC = b"\x89PSK"
VERSION = 1


@dataclass(frozen=True, slots=True)
class Ref:
    """A reference in a skeleton: which blob stands where, and how to re-encode it."""

    index: int  # 0-based order among the letter's extracted parts
    key: str  # SHA-256 hex of the decoded content
    size: int  # decoded size
    crc32: int
    content_type: str
    filename: str | None
    encoding: Encoding
    encoded_size: int  # size of the body bytes in the letter
    offset: int  # where the part's body starts in the letter


@dataclass(frozen=True, slots=True)
class Layout:
    refs: list[Ref]
    literal_start: int  # where the literal begins in the skeleton
    gaps: list[int]


def pack(raw: bytes, refs: list[Ref]) -> bytes:
    """The skeleton of ``raw`` with each ref's body range ``[offset, offset+encoded_size)``
    cut out. Refs are in document order and do not overlap."""
    out = bytearray(MAGIC)
    out.append(VERSION)
    _varint(out, len(refs))
    pos = 0
    for ref in refs:
        _varint(out, ref.offset - pos)
        out += bytes.fromhex(ref.key)
        _varint(out, ref.size)
        out += ref.crc32.to_bytes(4, "big")
        _varint(out, ref.encoded_size)
        out.append(int(ref.encoding.method))
        if ref.encoding.method is Method.BASE64:
            _varint(out, ref.encoding.line_length)
            out.append(1 if ref.encoding.crlf else 0)
            _blob(out, ref.encoding.tail)
        elif ref.encoding.method is Method.QUOTED_PRINTABLE:
            out.append(1 if ref.encoding.crlf else 0)
        _blob(out, ref.content_type.encode("utf-8"))
        if ref.filename is None:
            _varint(out, 0)
        else:
            name = ref.filename.encode("utf-8", "replace")
            _varint(out, len(name) + 1)
            out += name
        pos = ref.offset + ref.encoded_size
    pieces = [bytes(out)]
    pos = 0
    for ref in refs:
        pieces.append(raw[pos : ref.offset])
        pos = ref.offset + ref.encoded_size
    pieces.append(raw[pos:])
    return b"".join(pieces)


def prepend(skeleton: bytes, prefix: bytes) -> bytes:
    """The skeleton of ``prefix + letter`` from the skeleton of ``letter`` (header lines put
    in front of a letter already split): only the first gap grows."""
    if not prefix:
        return skeleton
    layout = unpack(skeleton)
    r = _Reader(skeleton, 5)
    count = r.varint()
    head = bytearray(skeleton[: r.pos])
    if count:
        start = r.pos
        gap = r.varint()
        _varint(head, gap + len(prefix))
        head += skeleton[r.pos : layout.literal_start]
        assert start < r.pos
    return bytes(head) + prefix + skeleton[layout.literal_start :]


def unpack(skeleton: bytes) -> Layout:
    """Read the references of a skeleton; IntegrityError when it is not a valid one."""
    if skeleton[:4] != MAGIC:
        raise IntegrityError("not a pochta skeleton (bad magic)")
    if len(skeleton) < 5 or skeleton[4] != VERSION:
        version = skeleton[4] if len(skeleton) > 4 else None
        raise IntegrityError(f"unsupported skeleton version {version}")
    r = _Reader(skeleton, 5)
    try:
        count = r.varint()
        refs: list[Ref] = []
        gaps: list[int] = []
        offset = 0
        for index in range(count):
            gap = r.varint()
            key = r.take(32).hex()
            size = r.varint()
            crc = int.from_bytes(r.take(4), "big")
            encoded = r.varint()
            method = Method(r.take(1)[0])
            if method is Method.BASE64:
                length = r.varint()
                crlf = bool(r.take(1)[0] & 1)
                encoding = Encoding(method, length, crlf, r.take(r.varint()))
            elif method is Method.QUOTED_PRINTABLE:
                encoding = Encoding(method, 0, bool(r.take(1)[0] & 1))
            else:
                encoding = Encoding(method)
            ctype = r.take(r.varint()).decode("utf-8")
            n = r.varint()
            filename = r.take(n - 1).decode("utf-8") if n else None
            offset += gap
            refs.append(Ref(index, key, size, crc, ctype, filename, encoding, encoded, offset))
            offset += encoded
            gaps.append(gap)
    except (ValueError, IndexError) as exc:  # truncated, or a byte that is no method
        raise IntegrityError(f"corrupt skeleton: {exc}") from exc
    literal = len(skeleton) - r.pos
    if sum(gaps) > literal:
        raise IntegrityError("corrupt skeleton: references point past its end")
    return Layout(refs, r.pos, gaps)


def _varint(out: bytearray, n: int) -> None:
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _blob(out: bytearray, data: bytes) -> None:
    _varint(out, len(data))
    out += data


class _Reader:
    def __init__(self, data: bytes, pos: int) -> None:
        self.data = data
        self.pos = pos

    def take(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.data):
            raise ValueError("truncated")
        chunk = self.data[self.pos : end]
        self.pos = end
        return chunk

    def varint(self) -> int:
        n = shift = 0
        while True:
            if self.pos >= len(self.data):
                raise ValueError("truncated varint")
            byte = self.data[self.pos]
            self.pos += 1
            n |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return n
            shift += 7
            if shift > 63:
                raise ValueError("varint too long")
