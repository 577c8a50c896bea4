"""What a letter says, for the mailbox index, the API and antispam: addresses, subject, date,
text and HTML bodies, attachments. Best effort and never raises.

The structure comes from pochta's own scanner (:mod:`pochta.mime.tree`), the same one
:func:`pochta.mime.split.split` uses, so an attachment's ``index`` is exactly the index of the
part split() extracted. Header values are read with the standard library's compat32 helpers
(``email.utils``, ``email.header``), which tolerate what ``policy.default`` rejects, and each
value is cut to :data:`MAX_HEADER_CHARS` before it is parsed, so a 1 MB header line costs little.

- ``text`` joins every inline text/plain part of the letter (not of letters forwarded inside
  it) with a newline; ``html`` is the first inline text/html part. A multipart whose boundary
  never occurs is read as text, as mail readers do.
- ``attachments`` lists every part split() extracts, every other part with an attachment
  disposition or a file name, every other non-text leaf, and forwarded letters
  (message/rfc822) — in document order, ``n`` numbering them, ``index`` the extracted index or
  None when the part stays inline in the skeleton.
- Bytes are decoded with the declared charset when it fits, else UTF-8, else the declared
  charset with replacement characters, else Latin-1; raw 8-bit header bytes the same way, with
  the charset of the letter's first text part as the declared one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from email.utils import getaddresses, parsedate_to_datetime

from pochta.mime.codec import lenient
from pochta.mime.headers import clean_text, decode_bytes, field_value, has_surrogates
from pochta.mime.split import DEFAULT_INLINE_LIMIT, is_attachment, plan
from pochta.mime.tree import Entity, Kind, scan

MAX_HEADER_CHARS = 65_536
MAX_HEADERS = 1000
_LISTED_TYPES = frozenset({"text", "multipart", "message"})


@dataclass(frozen=True, slots=True)
class Address:
    name: str  # display name, decoded; "" when there is none
    address: str

    def __str__(self) -> str:
        if not self.name:
            return self.address
        return f"{self.name} <{self.address}>" if self.address else self.name


@dataclass(frozen=True, slots=True)
class Attachment:
    n: int  # position in Summary.attachments
    index: int | None  # split()'s extracted index; None when the part stays in the skeleton
    filename: str | None
    content_type: str
    size: int  # decoded size
    disposition: str  # "attachment", "inline" or ""
    content: bytes = field(repr=False)  # decoded content


@dataclass(frozen=True, slots=True)
class Summary:
    from_: Address | None
    to_addresses: tuple[Address, ...]
    cc_addresses: tuple[Address, ...]
    subject: str
    date: datetime | None  # aware unless the letter's zone is -0000 or missing
    message_id: str | None  # with its angle brackets, as written
    text: str | None
    html: str | None
    attachments: tuple[Attachment, ...]
    headers: tuple[tuple[str, str], ...]  # top-level fields, decoded; values cut to 64 KiB

    @property
    def sender(self) -> str:
        """The From address for display: ``Name <address>``, or ``""``."""
        return str(self.from_) if self.from_ is not None else ""

    @property
    def to(self) -> tuple[str, ...]:
        return tuple(str(a) for a in self.to_addresses)

    @property
    def cc(self) -> tuple[str, ...]:
        return tuple(str(a) for a in self.cc_addresses)


EMPTY = Summary(None, (), (), "", None, None, None, None, (), ())


def summarize(raw: bytes, *, inline_limit: int = DEFAULT_INLINE_LIMIT) -> Summary:
    """Summarize a letter. ``inline_limit`` must be the one given to split() for the indexes
    to match. Never raises: what cannot be read is left empty."""
    try:
        root = scan(raw)
    except Exception:
        return EMPTY
    charset = _letter_charset(root)
    try:
        headers = _headers(raw, root, charset)
    except Exception:
        headers = ()
    first = _first(headers)
    try:
        texts, html, attachments = _bodies(raw, root, inline_limit)
    except Exception:
        texts, html, attachments = [], None, []
    return Summary(
        from_=next(iter(_addresses(first.get("from"))), None),
        to_addresses=_addresses(first.get("to")),
        cc_addresses=_addresses(first.get("cc")),
        subject=first.get("subject", ""),
        date=_date(first.get("date")),
        message_id=_message_id(first.get("message-id")),
        text="\n".join(texts) if texts else None,
        html=html,
        attachments=tuple(attachments),
        headers=headers,
    )


def _letter_charset(root: Entity) -> str | None:
    for entity in _own(root):
        if entity.info.charset and entity.info.content_type.startswith("text/"):
            return entity.info.charset
    return root.info.charset


def _own(root: Entity) -> list[Entity]:
    """The letter's own entities: not those of letters forwarded inside it."""
    out: list[Entity] = []
    stack = [root]
    while stack:
        node = stack.pop()
        out.append(node)
        if node.kind is Kind.MULTIPART:
            stack.extend(reversed(node.children))
    return out


def _headers(raw: bytes, root: Entity, charset: str | None) -> tuple[tuple[str, str], ...]:
    out: list[tuple[str, str]] = []
    for f in root.block.fields[:MAX_HEADERS]:
        if not f.name:
            continue  # the mbox envelope line
        value = field_value(raw, f)[:MAX_HEADER_CHARS]
        if f.name in ("from", "to", "cc", "bcc", "reply-to", "sender"):
            value = _raw_text(value, charset)  # encoded words are decoded per display name
        else:
            value = clean_text(value, charset)
        out.append((f.name, value))
    return tuple(out)


def _raw_text(value: str, charset: str | None) -> str:
    if has_surrogates(value):
        value = decode_bytes(value.encode("ascii", "surrogateescape"), charset)
    return value


def _first(headers: tuple[tuple[str, str], ...]) -> dict[str, str]:
    first: dict[str, str] = {}
    for name, value in headers:
        first.setdefault(name, value)
    return first


def _addresses(value: str | None) -> tuple[Address, ...]:
    if not value:
        return ()
    try:
        pairs = getaddresses([value])
    except Exception:
        return ()
    out: list[Address] = []
    for name, address in pairs:
        if not name and not address:
            continue
        out.append(Address(clean_text(name), address.strip()))
    return tuple(out)


def _date(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return parsedate_to_datetime(value.strip())
    except Exception:
        return None


_MSGID = re.compile(r"<[^<>\s]*>")


def _message_id(value: str | None) -> str | None:
    if not value:
        return None
    m = _MSGID.search(value)
    text = m.group(0) if m else value.strip()
    return text or None


def _bodies(
    raw: bytes, root: Entity, inline_limit: int
) -> tuple[list[str], str | None, list[Attachment]]:
    extracted = {id(p.entity): (i, p.content) for i, p in enumerate(plan(raw, root, inline_limit))}
    own = {id(e) for e in _own(root)}
    texts: list[str] = []
    html: str | None = None
    attachments: list[Attachment] = []
    for entity in root.walk():
        info = entity.info
        body = raw[entity.body_start : entity.body_end]
        done = extracted.get(id(entity))
        if done is not None:
            attachments.append(_attachment(len(attachments), entity, done[0], done[1]))
        if entity.kind is Kind.MESSAGE:
            attachments.append(_attachment(len(attachments), entity, None, body))
            continue
        is_text_body = id(entity) in own and _shown_inline(entity)
        if entity.kind is Kind.MULTIPART and not entity.children and is_text_body:
            texts.append(decode_bytes(body, info.charset))  # boundary never found: read as text
            continue
        if entity.kind in (Kind.MULTIPART, Kind.UNREAD) or (
            entity.kind is Kind.OPAQUE and info.readable
        ):
            continue  # an unreadable (too long) Content-Type is still read as a leaf
        maintype = info.content_type.partition("/")[0]
        if is_text_body and info.content_type == "text/plain":
            texts.append(decode_bytes(lenient(info.transfer_encoding, body), info.charset))
        elif is_text_body and info.content_type == "text/html":
            if html is None:
                html = decode_bytes(lenient(info.transfer_encoding, body), info.charset)
        elif done is None and (is_attachment(entity) or maintype not in _LISTED_TYPES):
            content = lenient(info.transfer_encoding, body)
            attachments.append(_attachment(len(attachments), entity, None, content))
    return texts, html, attachments


def _shown_inline(entity: Entity) -> bool:
    """A text part is part of the body unless it is an attachment: disposition attachment, or
    a file name with no disposition at all."""
    info = entity.info
    if info.disposition == "attachment":
        return False
    return info.filename is None or info.disposition == "inline"


def _attachment(n: int, entity: Entity, index: int | None, content: bytes) -> Attachment:
    info = entity.info
    return Attachment(
        n, index, info.filename, info.content_type, len(content), info.disposition, content
    )
