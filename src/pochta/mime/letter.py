"""A letter, parsed once: everything the rest of pochta reads of it. Pure; never raises.

:func:`parse` reads the raw bytes once into an immutable :class:`Letter`, and every consumer
reads that object: the verdict (signs, features, shingles, sender authentication), the split
into skeleton and attachments (``planned``: the parts :func:`pochta.mime.split.cut` takes
out), the mailbox index (sender, subject, date), the HTTP view of a letter and its warnings.

- The MIME tree comes from pochta's own boundary scanner (:mod:`pochta.mime.tree`), with the
  byte range of every entity. Header values are read with the standard library's compat32
  helpers, each cut to :data:`MAX_FIELD_CHARS` first; at most :data:`MAX_FIELDS` top-level
  fields are kept.
- ``body_text`` joins every inline text/plain part of the letter (not of letters forwarded
  inside it); ``body_html`` is its first inline text/html part, read once by
  :mod:`pochta.mime.html` into ``html``. A multipart whose boundary never occurs is read as text.
- ``attachments`` lists every part the split extracts, every other part with an attachment
  disposition or a file name, every other non-text leaf, and forwarded letters, in document
  order, each with its decoded content and SHA-256.
- ``links``: each HTML anchor with the text it shows, then each URL written in the plain text
  (or, with no plain text, in the HTML's text), normalized once (:mod:`pochta.mime.normalize`).

What the checks read is bounded: ``plain_text``, ``text`` and ``all_text`` are cut to
:data:`MAX_TEXT` characters, ``links`` to :data:`MAX_LINKS`; the HTML reader has its own limits.
Bytes are decoded with the declared charset when it fits, else UTF-8, else the declared
charset with replacement characters, else Latin-1.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from email.utils import getaddresses, parsedate_to_datetime
from typing import Any, Literal

import re2

from pochta.mime import html as html_reader
from pochta.mime import normalize
from pochta.mime.codec import lenient
from pochta.mime.headers import (
    ContentInfo,
    HeaderBlock,
    clean_text,
    decode_bytes,
    field_value,
    has_surrogates,
)
from pochta.mime.split import DEFAULT_INLINE_LIMIT, Planned, is_attachment, plan
from pochta.mime.tree import Entity, Kind, scan

MAX_FIELD_CHARS = 65_536  # a header value is cut to this before it is interpreted
MAX_FIELDS = 1000  # top-level header fields kept
MAX_ADDRESS_CHARS = 4096  # an address field is parsed up to here
MAX_TEXT = 200_000  # characters of text the checks read
MAX_LINKS = 200
MAX_TEXT_URLS = 1000  # URLs looked for in the text before the distinct ones are cut
_LISTED_TYPES = frozenset({"text", "multipart", "message"})
_URL_IN_TEXT = re.compile(r"(?:https?://|ftp://|www\.)[^\s<>\"'\])}]++", re.IGNORECASE)


def _re2(pattern: bytes) -> Any:
    options = re2.Options()
    options.log_errors = False
    options.never_capture = True
    return re2.compile(pattern, options)


_URL_IN_ASCII = _re2(rb"(?i)(?:https?://|ftp://|www\.)[^\t\n\x0b\x0c\r\x1c-\x1f <>\"'\])}]+")
r""":data:`_URL_IN_TEXT` in RE2, for an ASCII text (most): the same matches, found in C rather
than tried at every position by Python's engine. Python's ``\s`` over ASCII is the blanks
listed; the class run ends the pattern, so greedy is possessive; no ASCII character but the
letters' own upper cases compares equal to ``h``, ``t``, ``p``, ``s``, ``f`` or ``w``."""


def _urls_in(text: str) -> Iterator[str]:
    """What :data:`_URL_IN_TEXT` matches in ``text``, in order."""
    if text.isascii():
        for m in _URL_IN_ASCII.finditer(text.encode("ascii")):
            yield m.group(0).decode("ascii")
    else:
        for found in _URL_IN_TEXT.finditer(text):
            yield found.group(0)


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
    n: int  # position in Letter.attachments
    index: int | None  # the split's extracted index; None when the part stays in the skeleton
    filename: str | None
    content_type: str
    size: int  # decoded size
    disposition: str  # "attachment", "inline" or ""
    content: bytes = field(repr=False)  # decoded content
    key: str = field(repr=False, default="")  # SHA-256 of the content, hex


@dataclass(frozen=True, slots=True)
class Link:
    href: str  # as written
    url: str  # normalized (scheme://host/path), "" when it is no web link
    host: str  # normalized host (punycode, lowercase) or an IP address; "" when none
    text: str  # what an HTML anchor shows; "" for a URL in text
    source: Literal["html", "text"]

    @property
    def registrable(self) -> str:
        return (normalize.registrable(self.host) or self.host) if self.host else ""

    @property
    def is_ip(self) -> bool:
        """The host is an IP address, also in the decimal or hex forms browsers accept."""
        return bool(self.host) and normalize.is_ip_host(self.host)


@dataclass(frozen=True, eq=False)
class Letter:
    """One parsed letter. The fields are what :func:`parse` read; the properties derive from
    them on first use (and are then kept: the object never changes)."""

    raw: bytes = field(repr=False)
    root: Entity = field(repr=False)
    fields: tuple[tuple[str, str], ...]  # top-level (lowercased name, decoded value)
    from_: Address | None
    to_addresses: tuple[Address, ...]
    cc_addresses: tuple[Address, ...]
    subject: str
    date: datetime | None  # aware unless the letter's zone is -0000 or missing
    message_id: str | None  # with its angle brackets, as written
    body_text: str | None = field(repr=False)  # the plain text parts, whole
    body_html: str | None = field(repr=False)  # the first HTML part's source, whole
    attachments: tuple[Attachment, ...]
    planned: tuple[Planned, ...] = field(repr=False)  # what the split extracts
    from_pairs: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    """The first From field's (name, address) pairs as ``email.utils.getaddresses`` reads
    them (what ``from_`` was made of), for every reader of the field: parsed once."""

    # -- headers ---------------------------------------------------------------------------
    def headers(self, name: str) -> list[str]:
        return list(self._by_name.get(name.lower(), ()))

    def header(self, name: str) -> str | None:
        found = self._by_name.get(name.lower())
        return found[0] if found else None

    @functools.cached_property
    def _by_name(self) -> dict[str, tuple[str, ...]]:
        """Each field name's values in order (made once: the checks and the features ask
        for some twenty names a letter, each a pass over every field before)."""
        found: dict[str, list[str]] = {}
        for n, v in self.fields:
            found.setdefault(n, []).append(v)
        return {n: tuple(vs) for n, vs in found.items()}

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

    @property
    def from_name(self) -> str:
        return self.from_.name if self.from_ is not None else ""

    @property
    def from_address(self) -> str:
        return self.from_.address if self.from_ is not None else ""

    @functools.cached_property
    def from_domain(self) -> str | None:
        return normalize.address_domain(self.from_address) if self.from_address else None

    # -- bodies ----------------------------------------------------------------------------
    @functools.cached_property
    def html(self) -> html_reader.Html | None:
        return html_reader.parse(self.body_html) if self.body_html else None

    @functools.cached_property
    def plain_text(self) -> str:
        return (self.body_text or "")[:MAX_TEXT]

    @functools.cached_property
    def text(self) -> str:
        """What the reader sees: the plain text, else the HTML's text."""
        if self.plain_text.strip():
            return self.plain_text
        return self.html.text[:MAX_TEXT] if self.html is not None else ""

    @functools.cached_property
    def all_text(self) -> str:
        """Plain and HTML text together (a check that must not miss a part reads this)."""
        parts = [self.plain_text]
        if self.html is not None and self.html.text != self.plain_text:
            parts.append(self.html.text[:MAX_TEXT])
        return "\n".join(p for p in parts if p)

    @functools.cached_property
    def links(self) -> tuple[Link, ...]:
        """HTML anchors, then URLs written in the text; each (href, shown text) once."""
        out: list[Link] = []
        seen: set[tuple[str, str]] = set()
        if self.html is not None:
            for href, shown in self.html.anchors:
                if (href, shown) not in seen:
                    seen.add((href, shown))
                    out.append(_link(href, shown, "html"))
                    if len(out) >= MAX_LINKS:
                        return tuple(out)
        hrefs = {link.href for link in out}
        written = self.plain_text if self.plain_text.strip() else self.text
        for i, found in enumerate(_urls_in(written)):
            if i >= MAX_TEXT_URLS or len(out) >= MAX_LINKS:
                break
            href = found.rstrip(".,;:!?")
            if href not in hrefs:
                hrefs.add(href)
                out.append(_link(href, "", "text"))
        return tuple(out)

    @functools.cached_property
    def web_links(self) -> tuple[Link, ...]:
        return tuple(link for link in self.links if link.host)


@functools.lru_cache(maxsize=8192)
def _link(href: str, text: str, source: Literal["html", "text"]) -> Link:
    normalized = normalize.url(href)
    if normalized is None:
        return Link(href, "", "", text, source)
    return Link(href, normalized[0], normalized[1], text, source)


def parse(raw: bytes, *, inline_limit: int = DEFAULT_INLINE_LIMIT) -> Letter:
    """Parse a letter. ``inline_limit`` is the split's (see :mod:`pochta.mime.split`): the
    parts it extracts are ``planned``, and attachments know their extracted index."""
    try:
        root = scan(raw)
    except Exception:  # a scanner bug met on a hostile letter: the letter as one text
        return _unreadable(raw)
    charset = _letter_charset(root)
    try:
        fields = _fields(raw, root, charset)
    except Exception:
        fields = ()
    first: dict[str, str] = {}
    for name, value in fields:
        first.setdefault(name, value)
    try:
        planned = tuple(plan(raw, root, inline_limit))
    except Exception:
        planned = ()
    try:
        texts, html, attachments = _bodies(raw, root, planned)
    except Exception:
        texts, html, attachments = [], None, []
    from_pairs = _pairs(first.get("from"))
    return Letter(
        raw=raw,
        root=root,
        fields=fields,
        from_=next(iter(_addresses_of(from_pairs)), None),
        to_addresses=_addresses(first.get("to")),
        cc_addresses=_addresses(first.get("cc")),
        subject=first.get("subject", ""),
        date=_date(first.get("date")),
        message_id=_message_id(first.get("message-id")),
        body_text="\n".join(texts) if texts else None,
        body_html=html,
        attachments=tuple(attachments),
        planned=planned,
        from_pairs=from_pairs,
    )


def _unreadable(raw: bytes) -> Letter:
    info = ContentInfo("text/plain", None, "", "", None, None, False)
    root = Entity(Kind.OPAQUE, HeaderBlock(0, 0, 0, ()), 0, len(raw), info, 0)
    return Letter(raw, root, (), None, (), (), "", None, None, None, None, (), ())


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


_ADDRESS_FIELDS = frozenset({"from", "to", "cc", "bcc", "reply-to", "sender"})


def _fields(raw: bytes, root: Entity, charset: str | None) -> tuple[tuple[str, str], ...]:
    out: list[tuple[str, str]] = []
    for f in root.block.fields:
        if not f.name:
            continue  # the mbox envelope line
        if len(out) >= MAX_FIELDS:
            break
        value = field_value(raw, f)[:MAX_FIELD_CHARS]
        if f.name in _ADDRESS_FIELDS:
            if has_surrogates(value):  # encoded words are decoded per display name
                value = decode_bytes(value.encode("ascii", "surrogateescape"), charset)
        else:
            value = clean_text(value, charset)
        out.append((f.name, value))
    return tuple(out)


_BARE_ADDRESS = re.compile(
    r"(?<![\w.+\s-])[ \t\r\n]*+"
    r"([A-Za-z0-9_+-]++(?:\.[A-Za-z0-9_+-]++)*+@[A-Za-z0-9-]++(?:\.[A-Za-z0-9-]++)*+)"
    r"[ \t\r\n]*+"
)
"""A field that is one bare address of ASCII atoms (``user.name@mail.example.com``, half the
From / To / Cc fields of the corpus): ``getaddresses`` reads it, character by character in
Python, as ``[("", address)]``; the test compares the two on the corpus and generated
values. Only ``fullmatch`` reads it (where the look-behind always holds); the look-behind
keeps a search linear too: no match starts inside a run it would read to its end."""


_NAMED_ADDRESS = re.compile(
    r'(?<!\s)(?<![^\s()<>@,:;"\[\]\\\x00-\x1f\x7f])[ \t\r\n]*+'
    r'(?:"([^"\\\r\n]*+)"|((?:[^\s()<>@,:;"\[\]\\\x00-\x1f\x7f]++[ \t]*+)*+))'
    r"[ \t]*+<([A-Za-z0-9_+-]++(?:\.[A-Za-z0-9_+-]++)*+@[A-Za-z0-9-]++(?:\.[A-Za-z0-9-]++)*+)>"
    r"[ \t\r\n]*+"
)
"""A field that is one display name and an address of ASCII atoms in angle brackets
(``"Name" <user@example.org>``, ``Jane Q. Doe <user@example.org>``, ``<user@example.org>``:
four fifths of the corpus's From / To / Cc fields that are not bare): the name is one quoted
string without escapes or line breaks, or words of characters ``getaddresses`` reads as one
atom, blanks between them; ``getaddresses`` gives the quoted string as it is, the words one
space apart. Only ``fullmatch`` reads it; possessive throughout, so linear. The test compares
it with ``getaddresses`` on the corpus and generated values. The look-behinds (no blank or
atom character before) keep a search linear too, as :data:`_BARE_ADDRESS`'s does: no match
starts inside a run an earlier try read to its end."""


def _pairs(value: str | None) -> tuple[tuple[str, str], ...]:
    if not value:
        return ()
    value = value[:MAX_ADDRESS_CHARS]
    bare = _BARE_ADDRESS.fullmatch(value)
    if bare is not None:
        return (("", bare.group(1)),)
    named = _NAMED_ADDRESS.fullmatch(value)
    if named is not None:
        quoted, words, address = named.groups()
        return ((quoted if quoted is not None else " ".join(words.split()), address),)
    try:
        return tuple(getaddresses([value]))
    except Exception:
        return ()


def _addresses(value: str | None) -> tuple[Address, ...]:
    return _addresses_of(_pairs(value))


def _addresses_of(pairs: tuple[tuple[str, str], ...]) -> tuple[Address, ...]:
    out: list[Address] = []
    for name, address in pairs:
        if name or address:  # an encoded word in an address is not allowed, yet it is met
            out.append(
                Address(
                    clean_text(name), clean_text(address) if "=?" in address else address.strip()
                )
            )
    return tuple(out)


def _date(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return parsedate_to_datetime(value.strip()[:200])
    except Exception:
        return None


_MSGID = re.compile(r"<[^<>\s]*+>")


def _message_id(value: str | None) -> str | None:
    if not value:
        return None
    m = _MSGID.search(value[:1000])
    text = m.group(0) if m else value.strip()[:1000]
    return text or None


def _bodies(
    raw: bytes, root: Entity, planned: tuple[Planned, ...]
) -> tuple[list[str], str | None, list[Attachment]]:
    extracted = {id(p.entity): (i, p.content, p.key) for i, p in enumerate(planned)}
    own = {id(e) for e in _own(root)}
    texts: list[str] = []
    html: str | None = None
    attachments: list[Attachment] = []
    for entity in root.walk():
        info = entity.info
        body = raw[entity.body_start : entity.body_end]
        done = extracted.get(id(entity))
        if done is not None:
            attachments.append(_attachment(len(attachments), entity, *done))
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


def _attachment(
    n: int, entity: Entity, index: int | None, content: bytes, key: str | None = None
) -> Attachment:
    info = entity.info
    return Attachment(
        n,
        index,
        info.filename,
        info.content_type,
        len(content),
        info.disposition,
        content,
        key if key is not None else hashlib.sha256(content).hexdigest(),
    )
