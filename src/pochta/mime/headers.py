"""Header blocks read straight from the raw bytes: where they end, which fields they hold.

A header block is scanned the way the standard library's feedparser reads one, so that pochta
and any mail reader agree on where a part's body begins: a line is a header line when it
starts with ``From ``, with a field name and a colon, or with a space or tab (a continuation);
an empty line ends the block; any other line ends it too and is the first line of the body.
Only ``\\n`` ends a line (``\\r\\n`` is read as a line ending in ``\\n``; a lone ``\\r`` is an
ordinary byte).

Values are decoded from bytes the way ``email`` with ``policy.compat32`` does (ASCII with
surrogate escapes) and interpreted with ``email.message.Message`` (parameters, RFC 2231);
:func:`clean_text` turns them into plain, printable ``str``.
"""

from __future__ import annotations

import codecs
import contextlib
import re
from dataclasses import dataclass
from email.header import decode_header, make_header
from email.message import Message
from email.utils import collapse_rfc2231_value
from typing import Any, NamedTuple

_HEADER_LINE = re.compile(rb"From |[\x21-\x39\x3b-\x7e]*+:|[\t ]")  # the name cannot hold ":"
_MAX_FIELDS = 10_000  # a block with more fields is read up to here; the rest counts as one
MAX_PARAM_VALUE = 8192  # longer Content-* values are not interpreted (their parser is slow)


class Field(NamedTuple):
    """One header field: its lowercased name and the byte range of all its lines (a tuple:
    a letter has dozens, and a tuple is made in half a frozen dataclass's time)."""

    name: str
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class HeaderBlock:
    """The header block of an entity at ``[start, end)``; its body begins at ``body_start``
    (after the empty line, or at the first line that is not a header line)."""

    start: int
    end: int
    body_start: int
    fields: tuple[Field, ...]


def read_block(raw: bytes, start: int, end: int) -> HeaderBlock:
    """Find the header block at the start of ``raw[start:end]``."""
    fields: list[Field] = []
    append = fields.append
    match = _HEADER_LINE.match
    pos = start
    name: str | None = None
    field_start = start
    while pos < end:
        first = raw[pos]
        if first == 0x0A or (first == 0x0D and raw.startswith(b"\r\n", pos, end)):
            if name is not None:
                append(Field(name, field_start, pos))
            nl = raw.find(b"\n", pos, end)
            return HeaderBlock(start, pos, end if nl < 0 else nl + 1, tuple(fields))
        line = match(raw, pos, end)  # it cannot pass a line's end: no \n in it
        if line is None:
            break
        after = line.end()
        if first != 0x20 and first != 0x09 and len(fields) < _MAX_FIELDS:
            if name is not None:
                append(Field(name, field_start, pos))
            # "name:" (the name holds no ":"), or "From ": the mbox envelope line, not a field
            name = raw[pos : after - 1].decode("ascii").lower() if raw[after - 1] == 0x3A else ""
            field_start = pos
        nl = raw.find(b"\n", after, end)
        pos = end if nl < 0 else nl + 1
    if name is not None:
        append(Field(name, field_start, pos))
    return HeaderBlock(start, pos, pos, tuple(fields))


def field_value(raw: bytes, field: Field) -> str:
    """A field's value as ``compat32`` keeps it: folding kept, leading blanks and the final
    line ending dropped; bytes outside ASCII as surrogate escapes."""
    text = raw[field.start : field.end].decode("ascii", "surrogateescape")
    _, _, value = text.partition(":")
    return value.lstrip(" \t").rstrip("\r\n")


def first_value(raw: bytes, block: HeaderBlock, name: str) -> str | None:
    for f in block.fields:
        if f.name == name:
            return field_value(raw, f)
    return None


@dataclass(frozen=True, slots=True)
class ContentInfo:
    """What the Content-* fields of one entity say, with the defaults of RFC 2045/2046."""

    content_type: str  # lowercase maintype/subtype
    boundary: bytes | None  # for multipart
    transfer_encoding: str  # lowercase; "" when absent
    disposition: str  # lowercase disposition type; "" when absent
    filename: str | None  # decoded (RFC 2231 and encoded words)
    charset: str | None
    readable: bool  # False when a Content-* value was too long to interpret


def content_info(raw: bytes, block: HeaderBlock, default_type: str = "text/plain") -> ContentInfo:
    """What the entity's Content-* fields say; ``readable`` is False (and only the type and
    transfer encoding are known) when they are too long or too broken to interpret."""
    wanted = ("content-type", "content-transfer-encoding", "content-disposition")
    values: dict[str, str] = {}
    for f in block.fields:
        if f.name in wanted and f.name not in values:
            values[f.name] = field_value(raw, f)
    if all(len(v) <= MAX_PARAM_VALUE for v in values.values()):
        # a bug of the email package met on a hostile value makes the entity unreadable
        with contextlib.suppress(Exception):
            return _interpret(values, default_type)
    ctype = _media_type(values.get("content-type", default_type)[:200], default_type)
    cte = values.get("content-transfer-encoding", "")[:200]
    return ContentInfo(ctype, None, cte.strip().lower(), "", None, None, False)


def _interpret(values: dict[str, str], default_type: str) -> ContentInfo:
    wanted = ("content-type", "content-transfer-encoding", "content-disposition")
    cte = values.get("content-transfer-encoding", "")
    # compat32 would turn raw 8-bit bytes into U+FFFD: give Message text instead, as UTF-8 when
    # the bytes are UTF-8, else as Latin-1 (one character per byte, so nothing is lost)
    msg = Message()
    if default_type != "text/plain":
        msg.set_default_type(default_type)
    latin: set[str] = set()
    for name in wanted:
        if name in values:
            value = values[name]
            if has_surrogates(value):
                data = value.encode("ascii", "surrogateescape")
                try:
                    value = data.decode("utf-8")
                except UnicodeDecodeError:
                    value = data.decode("latin-1")
                    latin.add(name)
            msg[name] = value
    ctype = _media_type(msg.get_content_type(), default_type)
    # each field's parameters parsed once (``get_param``, ``get_boundary`` and ``get_filename``
    # parse them again at every call: four times a part), then looked up as they look
    typed = msg.get_params(header="content-type")
    charset = _param_text(_param(typed, "charset"))
    filename = _param(msg.get_params(header="content-disposition"), "filename")
    if filename is _MISSING:
        filename = _param(typed, "name")
    filename = None if filename is _MISSING else collapse_rfc2231_value(filename).strip()
    if filename is not None and latin & {"content-type", "content-disposition"}:
        with contextlib.suppress(UnicodeEncodeError):
            filename = decode_bytes(filename.encode("latin-1"), charset)
    boundary = _param(typed, "boundary")
    return ContentInfo(
        content_type=ctype,
        boundary=(
            None
            if boundary is _MISSING
            else _boundary(collapse_rfc2231_value(boundary).rstrip(), "content-type" in latin)
        ),
        transfer_encoding=cte.strip().lower(),
        disposition=msg.get_content_disposition() or "",
        filename=clean_text(filename, charset) if filename is not None else None,
        charset=charset.strip().lower() if charset else None,
        readable=True,
    )


_MISSING: Any = object()


def _param(params: list[tuple[str, Any]] | None, name: str) -> Any:
    """What ``Message.get_param(name, _MISSING, header)`` gives, from that header's
    ``Message.get_params(header=...)`` (None: no such header): the first parameter of that
    name, in any case, unquoted."""
    for key, value in params or ():
        if key.lower() == name:
            return value
    return _MISSING


def _boundary(boundary: str, latin: bool) -> bytes | None:
    if not boundary:
        return None
    try:
        return boundary.encode("latin-1" if latin else "utf-8")
    except UnicodeEncodeError:
        return None


_SURROGATE = re.compile("[\udc80-\udcff]")


def has_surrogates(value: str) -> bool:
    """Raw 8-bit bytes kept as surrogate escapes (``decode("ascii", "surrogateescape")``)."""
    return not value.isascii() and _SURROGATE.search(value) is not None


_TCHARS = r"[!#$%&'*+.^_`|~0-9a-z-]++"  # possessive: "/" is not one of them
_MEDIA_TYPE = re.compile(rf"\s*+({_TCHARS}/{_TCHARS})")


def _media_type(value: str, default_type: str) -> str:
    """``type/subtype`` in lowercase; what follows it without a ``;`` is dropped."""
    m = _MEDIA_TYPE.match(value.lower())
    return m.group(1) if m else default_type


def _param_text(value: object) -> str | None:
    if isinstance(value, tuple):  # an RFC 2231 (charset, language, value) triple
        return str(value[2])
    return value if isinstance(value, str) else None


def decode_bytes(data: bytes, charset: str | None) -> str:
    """Bytes to text, best effort: the declared charset if it decodes cleanly, else UTF-8,
    else the declared charset with replacement characters, else Latin-1. Never a lone
    surrogate (UTF-7's ``+2D0-`` decodes to one, and no encoder, SQLite's included, takes
    it): each becomes U+FFFD."""
    known = _codec(charset)
    if known is not None:
        try:
            return no_surrogates(data.decode(known))
        except (UnicodeError, LookupError):  # LookupError: base64, zlib... are no charsets
            pass
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    if known is not None:
        try:
            return no_surrogates(data.decode(known, "replace"))
        except (UnicodeError, LookupError):
            pass
    return data.decode("latin-1")


_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")
PYTHON_CODECS = frozenset(
    {"unicode-escape", "raw-unicode-escape", "punycode", "idna", "undefined", "mbcs", "oem"}
)
"""Codecs Python has that are no charset of mail (they read escapes, host names, or fail)."""


def no_surrogates(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD (one pass in C when there is
    none)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _LONE_SURROGATE.sub("\ufffd", text)
    return text


def _codec(charset: str | None) -> str | None:
    if not charset:
        return None
    name = charset.strip().strip('"').lower()
    if name in ("", "unknown-8bit", "x-unknown", "default", "us-ascii", "ascii"):
        return None  # "us-ascii" letters that carry 8-bit text are usually UTF-8 or Latin-1
    try:
        info = codecs.lookup(name)
    except (LookupError, ValueError):
        return None
    if info.name in PYTHON_CODECS:
        return None
    return info.name


def clean_text(value: str, charset: str | None = None) -> str:
    """A header value as plain text: raw 8-bit bytes (surrogate escapes) decoded best effort,
    then RFC 2047 encoded words decoded; folding collapsed."""
    if has_surrogates(value):
        value = decode_bytes(value.encode("ascii", "surrogateescape"), charset)
    if "=?" in value:
        try:
            value = no_surrogates(str(make_header(decode_header(value))))
        except Exception:  # any malformed encoded word: keep the text as it stands
            return _unfold(value)
    return _unfold(value)


_FOLD = re.compile(r"\r?\n[ \t]*")


def _unfold(value: str) -> str:
    if "\n" not in value:  # most values: one line
        return value.strip()
    return _FOLD.sub(" ", value).strip()
