"""The MIME tree of a letter as byte ranges of the original bytes: an own boundary scanner.

Every entity knows where its header block starts and where its body starts and ends in the
raw letter, so that the skeleton can be the letter itself with some body ranges cut out.

Boundaries are found as the standard library finds them: a delimiter is a line that starts
with ``--`` and the boundary, optionally followed by ``--`` (the close delimiter) and blanks,
and ends there. The line break before a delimiter belongs to the delimiter (RFC 2046), so a
part's body ends before it. A multipart is split by its own delimiters only; each part is then
read on its own, so a part cut short by its parent's delimiter simply ends there. A missing
close delimiter makes the last part run to the end of its parent (less a final line break at
the very end of the letter, as the standard library reads it); text after the close delimiter
is the epilogue.

Limits keep hostile letters cheap: nesting deeper than :data:`MAX_DEPTH` is
:attr:`Kind.OPAQUE` (kept as it is, never looked into), and so is an entity whose Content-*
values are too long to interpret; entities beyond :data:`MAX_ENTITIES` are :attr:`Kind.UNREAD`.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from pochta.mime.headers import ContentInfo, HeaderBlock, content_info, read_block

MAX_DEPTH = 32
MAX_ENTITIES = 5000
IDENTITY_ENCODINGS = frozenset({"", "7bit", "8bit", "binary"})
_NONE = ContentInfo("application/octet-stream", None, "", "", None, None, False)


class Kind(enum.Enum):
    LEAF = "leaf"
    MULTIPART = "multipart"
    MESSAGE = "message"  # message/rfc822 read as a letter of its own: one child
    OPAQUE = "opaque"  # not looked into: too deep, or Content-* values too long to read
    UNREAD = "unread"  # beyond MAX_ENTITIES: not even its headers were read


@dataclass(frozen=True, slots=True)
class Entity:
    kind: Kind
    block: HeaderBlock
    body_start: int
    body_end: int
    info: ContentInfo
    depth: int
    children: tuple[Entity, ...] = ()

    @property
    def start(self) -> int:
        return self.block.start

    def walk(self) -> list[Entity]:
        """This entity and all below it, in document order (iteratively: no recursion)."""
        out: list[Entity] = []
        stack = [self]
        while stack:
            node = stack.pop()
            out.append(node)
            stack.extend(reversed(node.children))
        return out


def scan(raw: bytes) -> Entity:
    """Read the MIME tree of ``raw``. Never raises on any input."""
    return _Scanner(raw).entity(0, len(raw), 0, "text/plain")


class _Scanner:
    def __init__(self, raw: bytes) -> None:
        self.raw = raw
        self.budget = MAX_ENTITIES

    def entity(self, start: int, end: int, depth: int, default_type: str) -> Entity:
        raw = self.raw
        self.budget -= 1
        if self.budget < 0:  # not even its headers are read
            return Entity(
                Kind.UNREAD, HeaderBlock(start, start, start, ()), start, end, _NONE, depth
            )
        block = read_block(raw, start, end)
        info = content_info(raw, block, default_type)
        body = block.body_start
        if not info.readable or depth >= MAX_DEPTH:
            return Entity(Kind.OPAQUE, block, body, end, info, depth)
        maintype = info.content_type.partition("/")[0]
        if maintype == "multipart" and info.boundary:
            default = "message/rfc822" if info.content_type == "multipart/digest" else "text/plain"
            children = tuple(
                self.entity(s, e, depth + 1, default)
                for s, e in _parts(raw, body, end, info.boundary, max(self.budget, 0) + 1)
            )
            return Entity(Kind.MULTIPART, block, body, end, info, depth, children)
        if info.content_type == "message/rfc822" and info.transfer_encoding in IDENTITY_ENCODINGS:
            inner = self.entity(body, end, depth + 1, "text/plain")
            return Entity(Kind.MESSAGE, block, body, end, info, depth, (inner,))
        return Entity(Kind.LEAF, block, body, end, info, depth)


def _delimiter(boundary: bytes) -> re.Pattern[bytes]:
    return re.compile(rb"^--" + re.escape(boundary) + rb"(--)?[ \t]*(?:\r\n|\n|\Z)", re.M)


def _parts(raw: bytes, start: int, end: int, boundary: bytes, limit: int) -> list[tuple[int, int]]:
    """The byte ranges of the parts of a multipart body ``raw[start:end]``; after ``limit``
    parts, the rest of the body is one more (which the scanner then does not read)."""
    parts: list[tuple[int, int]] = []
    segment = start  # start of the preamble, then of the current part
    in_part = False
    for m in _delimiter(boundary).finditer(raw, start, end):
        if len(parts) >= limit:
            return [*parts, (segment, end)]
        cut = _strip_eol(raw, segment, m.start())
        if in_part:
            parts.append((segment, cut))
        if m.group(1):  # the close delimiter: the rest is the epilogue
            return parts
        segment = m.end()
        in_part = True
    if in_part:
        stop = end
        if end == len(raw):  # no close delimiter before the end of the letter: as Python reads
            stop = _strip_eol(raw, segment, end)  # it, the last line break ends the part
        parts.append((segment, stop))
    return parts


def _strip_eol(raw: bytes, start: int, end: int) -> int:
    if end > start and raw[end - 1] == 0x0A:
        end -= 1
        if end > start and raw[end - 1] == 0x0D:
            end -= 1
    return end
