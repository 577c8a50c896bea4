"""FETCH without I/O: which byte range of a letter a section names, HEADER.FIELDS filtering,
ENVELOPE and BODYSTRUCTURE, from the letter's MIME tree (``pochta.mime.ranges.tree``, offsets
in the letter) and the bytes of its header blocks.

Header values are read by the standard library (``email``, ``policy.compat32``: values as
they stand, encoded words not decoded, as IMAP wants them); the tree's limits (depth,
entities) bound the work on a hostile letter.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from email.message import Message
from email.parser import BytesHeaderParser
from email.policy import compat32
from email.utils import collapse_rfc2231_value, getaddresses

from pochta.mime.headers import read_block
from pochta.mime.tree import Entity, Kind
from pochta.server.imapproto import nstring, string

Read = Callable[[int, int], bytes]
"""``read(start, end)``: bytes [start, end) of the letter (only header blocks are read so)."""
Lines = Callable[[int, int], int]
"""``lines(start, end)``: how many lines bytes [start, end) of the letter hold."""
Value = bytes | tuple[bytes, bytes | memoryview] | tuple[bytes, int, Iterator[bytes]]
"""A FETCH attribute's value: its bytes; a body's head (its name, size and the literal's
CRLF) and its bytes, kept apart so that they are not copied; or a big body's head, size and
blocks."""
Piece = bytes | memoryview | Iterator[bytes]
"""Of a FETCH response: bytes (or a view of them), or a big body's blocks (read as they are
sent)."""


@dataclass(frozen=True, slots=True)
class Section:
    """What a BODY[...] section names: bytes [start, end) of the letter, and for
    HEADER.FIELDS (``fields``, with ``exclude`` for .NOT) the fields to keep of that header."""

    start: int
    end: int
    fields: frozenset[bytes] | None = None
    exclude: bool = False


EMPTY = Section(0, 0)


def _numbered(node: Entity, top: bool) -> Sequence[Entity]:
    """The entities that part numbers count below ``node``. A message/rfc822 part counts the
    parts of the letter it holds; a letter that is not multipart has one part, its body."""
    if node.kind is Kind.MESSAGE and not top and node.children:
        return _numbered(node.children[0], True)
    if node.kind is Kind.MULTIPART:
        return node.children
    return (node,) if top else ()


def locate(root: Entity, parts: Sequence[int]) -> Entity | None:
    node, top = root, True
    for number in parts:
        kids = _numbered(node, top)
        if not 1 <= number <= len(kids):
            return None
        node, top = kids[number - 1], False
    return node


def section(
    root: Entity,
    size: int,
    parts: Sequence[int],
    specifier: bytes | None,
    headers: frozenset[bytes] | None = None,
) -> Section:
    """The bytes a BODY[parts.specifier] names (RFC 3501 §6.4.5); EMPTY for a part that
    does not exist."""
    node = locate(root, parts)
    if node is None:
        return EMPTY
    spec = (specifier or b"").upper()
    if not spec:
        if not parts:
            return Section(0, size)
        return Section(node.body_start, node.body_end)
    if spec == b"MIME":
        return Section(node.block.start, node.body_start) if parts else EMPTY
    message = node if not parts else None
    if parts and node.kind is Kind.MESSAGE and node.children:
        message = node.children[0]
    if message is None:
        return EMPTY
    if spec == b"TEXT":
        return Section(message.body_start, message.body_end)
    header = Section(message.block.start, message.body_start)
    if spec == b"HEADER":
        return header
    names = frozenset(h.lower() for h in headers or ())
    return Section(header.start, header.end, names, spec == b"HEADER.FIELDS.NOT")


def filter_fields(header: bytes, names: frozenset[bytes], exclude: bool) -> bytes:
    """The fields of a header block named in ``names`` (or, with ``exclude``, the others),
    each with its folded lines, and the empty line that ends a header."""
    block = read_block(header, 0, len(header))
    wanted = {n.decode("ascii", "replace") for n in names}
    kept = [
        header[f.start : f.end] for f in block.fields if f.name and ((f.name in wanted) != exclude)
    ]
    eol = b"\r\n" if b"\r\n" in header[:200] or not header else b"\n"
    return b"".join(kept) + eol


def response(
    seq: int, uid: int, flags: bytes, names: Sequence[bytes], values: Sequence[Value | None]
) -> list[Piece]:
    """The untagged FETCH response of one letter, ``values`` the attributes' (None for UID
    and FLAGS, given as ``uid`` and ``flags``): one piece of bytes, or for each body kept
    apart its head, its bytes and what follows it, for each big body its head, its blocks
    and what follows it."""
    out: list[Piece] = []
    line = [b"* %d FETCH (" % seq]
    for i, name in enumerate(names):
        sep = b" " if i else b""
        if name == b"UID":
            line.append(sep + b"UID %d" % uid)
        elif name == b"FLAGS":
            line.append(sep + b"FLAGS " + flags)
        else:
            value = values[i]
            assert value is not None
            if isinstance(value, bytes):
                line.append(sep + value)
            elif len(value) == 2:
                head, body = value
                line.append(sep + head)
                out += (b"".join(line), body)
                line = []
            else:
                head, size, chunks = value
                line.append(sep + head + b"{%d}\r\n" % size)
                out += (b"".join(line), chunks)
                line = []
    line.append(b")\r\n")
    out.append(b"".join(line))
    return out


# -- ENVELOPE -------------------------------------------------------------------------------------
def headers(header: bytes) -> Message:
    return BytesHeaderParser(policy=compat32).parsebytes(header)


def _value(msg: Message, name: str) -> bytes | None:
    value = msg.get(name)
    if value is None:
        return None
    return str(value).encode("utf-8", "surrogateescape").replace(b"\r", b"").replace(b"\n", b"")


def _addresses(msg: Message, name: str) -> bytes:
    values = msg.get_all(name)
    if not values:
        return b"NIL"
    out = []
    for display, address in getaddresses([str(v) for v in values]):
        if not address and not display:
            continue
        mailbox, at, host = address.rpartition("@")
        if not at:
            mailbox, host = address, ""
        out.append(
            b"(%s NIL %s %s)"
            % (
                nstring(display or None),
                nstring(mailbox or None),
                nstring(host or None),
            )
        )
    return b"(" + b"".join(out) + b")" if out else b"NIL"


def envelope(header: bytes) -> bytes:
    """ENVELOPE of a letter from its header block."""
    msg = headers(header)
    sender = "sender" if msg.get("sender") else "from"
    reply_to = "reply-to" if msg.get("reply-to") else "from"
    return b"(%s)" % b" ".join(
        [
            nstring(_value(msg, "date")),
            nstring(_value(msg, "subject")),
            _addresses(msg, "from"),
            _addresses(msg, sender),
            _addresses(msg, reply_to),
            _addresses(msg, "to"),
            _addresses(msg, "cc"),
            _addresses(msg, "bcc"),
            nstring(_value(msg, "in-reply-to")),
            nstring(_value(msg, "message-id")),
        ]
    )


# -- BODYSTRUCTURE --------------------------------------------------------------------------------
def _params(msg: Message, header: str, skip_first: bool) -> bytes:
    params = msg.get_params(header=header) or []
    if skip_first:
        params = params[1:]
    out = []
    for key, value in params:
        if not key:
            continue
        text = collapse_rfc2231_value(value)  # an RFC 2231 (charset, language, value) too
        out.append(string(key.upper().encode("utf-8", "surrogateescape")))
        out.append(nstring(text))
    return b"(" + b" ".join(out) + b")" if out else b"NIL"


def _disposition(msg: Message) -> bytes:
    value = msg.get("content-disposition")
    if value is None:
        return b"NIL"
    kind = str(value).split(";", 1)[0].strip()
    if not kind:
        return b"NIL"
    return b"(%s %s)" % (nstring(kind), _params(msg, "content-disposition", True))


def _extension(msg: Message) -> list[bytes]:
    language = _value(msg, "content-language")
    return [_disposition(msg), nstring(language), nstring(_value(msg, "content-location"))]


def bodystructure(root: Entity, read: Read, lines: Lines, extended: bool = True) -> bytes:
    """BODYSTRUCTURE (``extended``) or BODY of a letter."""
    return _structure(root, read, lines, extended)


def _structure(node: Entity, read: Read, lines: Lines, extended: bool) -> bytes:
    msg = headers(read(node.block.start, node.body_start))
    maintype, _, subtype = node.info.content_type.partition("/")
    if node.kind is Kind.MULTIPART and node.children:
        kids = b"".join(_structure(c, read, lines, extended) for c in node.children)
        out = [kids + b" " + string(subtype.upper().encode())]
        if extended:
            out.append(_params(msg, "content-type", True))
            out += _extension(msg)
        return b"(" + b" ".join(out) + b")"
    if node.kind is Kind.MULTIPART:  # no part at all: shown as an empty text part
        maintype, subtype = "text", "plain"
    cte = (_value(msg, "content-transfer-encoding") or b"7BIT").strip().upper()
    size = node.body_end - node.body_start
    out = [
        string(maintype.upper().encode()),
        string(subtype.upper().encode()),
        _params(msg, "content-type", True),
        nstring(_value(msg, "content-id")),
        nstring(_value(msg, "content-description")),
        string(cte),
        b"%d" % size,
    ]
    if node.kind is Kind.MESSAGE and node.children:
        inner = node.children[0]
        out.append(envelope(read(inner.block.start, inner.body_start)))
        out.append(_structure(inner, read, lines, extended))
        out.append(b"%d" % lines(node.body_start, node.body_end))
    elif maintype == "text":
        out.append(b"%d" % lines(node.body_start, node.body_end))
    if extended:
        out.append(nstring(_value(msg, "content-md5")))
        out += _extension(msg)
    return b"(" + b" ".join(out) + b")"
