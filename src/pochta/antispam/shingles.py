"""Shingles (seed 002): a 64-bit hash of a normalized piece of a letter, with a type number.

The registry below is stable: a number, once given, keeps its meaning (counters are stored by
it). 8, 14, 15, 30, 31, 42 and 62 are the seed's own numbers.

    type name                        value (normalized, see ``pochta.antispam.normalize``)
    ---- --------------------------- ---------------------------------------------------------
       8 subject                     Subject as text, Re:/Fwd:/Fw:/Ответ:... prefixes removed
      10 body_text                   the body's words (letters only: no digits, URLs, e-mails)
      11 body_minhash                near-duplicate: of the body's 4-word runs, the one whose
                                     CRC-32 is least (letters sharing most runs share it)
      14 from_address                From address, local@domain
      15 sender_ip                   the client's IP (envelope; else the top Received [ip])
      16 sender_network              its /24 (IPv4) or /48 (IPv6)
      17 from_domain                 registrable domain of the From address
      18 display_name                From display name as text
      19 return_path_domain          registrable domain of the envelope sender / Return-Path
      20 message_id_domain           the domain after "@" in Message-ID
      21 link_host                   host of each link (http, https, ftp; at most 10 links)
      22 link_url                    each link: scheme://host[:port]/path, no query/fragment
      23 link_domain                 registrable domain of each link's host
      30 sender_recipient            paired: "<sender> <recipient>" for each recipient
      31 sender_recipients_unique    unique of 30: "<sender>": distinct recipients per sender
      32 sender_network_pair         paired: "<sender> <sender_network>"
      33 sender_networks_unique      unique of 32: "<sender>": distinct networks per sender
      42 attachment_name             each attachment's file name as text
      62 attachment_checksum         each attachment's SHA-256 (hex, of the decoded content:
                                     the blob store's key)

"sender" in 30..33 is the envelope sender, else the From address. Recipients are the envelope
recipients, else the To and Cc addresses (at most 50).

Hash: the first 8 bytes of BLAKE2b (person ``pochta-shingle``) of the value's UTF-8, read as
a big-endian unsigned integer; shown as 16 hex digits.

Extraction parses the raw bytes with the stdlib ``email`` package (policy.default) and never
raises: a malformed header or part gives fewer shingles, not an error.
"""

from __future__ import annotations

import enum
import hashlib
import logging
import re
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from email import policy
from email.message import EmailMessage, Message
from email.parser import BytesParser
from email.utils import getaddresses
from html.parser import HTMLParser
from typing import Protocol

from pochta.antispam import normalize
from pochta.antispam.counters import Ref

log = logging.getLogger("pochta.antispam")

MAX_LINKS = 10
MAX_ATTACHMENTS = 10
MAX_RECIPIENTS = 50
MAX_BODY_WORDS = 5000
MINHASH_WORDS = 4


class ShingleType(enum.IntEnum):
    SUBJECT = 8
    BODY_TEXT = 10
    BODY_MINHASH = 11
    FROM_ADDRESS = 14
    SENDER_IP = 15
    SENDER_NETWORK = 16
    FROM_DOMAIN = 17
    DISPLAY_NAME = 18
    RETURN_PATH_DOMAIN = 19
    MESSAGE_ID_DOMAIN = 20
    LINK_HOST = 21
    LINK_URL = 22
    LINK_DOMAIN = 23
    SENDER_RECIPIENT = 30
    SENDER_RECIPIENTS_UNIQUE = 31
    SENDER_NETWORK_PAIR = 32
    SENDER_NETWORKS_UNIQUE = 33
    ATTACHMENT_NAME = 42
    ATTACHMENT_CHECKSUM = 62

    @property
    def label(self) -> str:
        return self.name.lower()


PAIRED = {
    ShingleType.SENDER_RECIPIENT: ShingleType.SENDER_RECIPIENTS_UNIQUE,
    ShingleType.SENDER_NETWORK_PAIR: ShingleType.SENDER_NETWORKS_UNIQUE,
}
"""Paired type -> the type of its unique."""


def type_name(number: int) -> str:
    try:
        return ShingleType(number).label
    except ValueError:
        return f"type_{number}"


def shingle_hash(value: str) -> int:
    digest = hashlib.blake2b(
        value.encode("utf-8", "surrogatepass"), digest_size=8, person=b"pochta-shingle"
    ).digest()
    return int.from_bytes(digest, "big")


@dataclass(frozen=True, slots=True)
class Shingle:
    type: ShingleType
    value: str
    hash: int
    unique: Shingle | None = None

    @classmethod
    def of(cls, type_: ShingleType, value: str, unique: Shingle | None = None) -> Shingle:
        return cls(type_, value, shingle_hash(value), unique)

    @property
    def hex(self) -> str:
        return f"{self.hash:016x}"

    @property
    def ref(self) -> Ref:
        return Ref(int(self.type), self.hash, None if self.unique is None else self.unique.ref)


@dataclass(frozen=True, slots=True)
class Envelope:
    """What the SMTP session knew: the client's IP, MAIL FROM ('' for a bounce), RCPT TOs."""

    ip: str | None = None
    sender: str | None = None
    recipients: Sequence[str] = ()


# -- parsing helpers: each returns nothing rather than raise ---------------------------------
def _parse(raw: bytes) -> EmailMessage | None:
    try:
        msg = BytesParser(policy=policy.default).parsebytes(raw)
    except Exception:  # the email package is lenient; a bug in it must not stop delivery
        log.debug("letter not parseable for shingles", exc_info=True)
        return None
    return msg if isinstance(msg, EmailMessage) else None


def _raw_values(msg: Message, name: str) -> list[str]:
    try:
        return [str(v) for k, v in msg.raw_items() if k.lower() == name.lower()]
    except Exception:
        return []


def _header(msg: Message, name: str) -> str | None:
    try:
        value = msg.get(name)
        return None if value is None else str(value)
    except Exception:
        raw = _raw_values(msg, name)
        return raw[0] if raw else None


def _addresses(msg: Message, name: str) -> list[tuple[str, str]]:
    """(display name, addr-spec) of every address in the headers called ``name``."""
    out: list[tuple[str, str]] = []
    try:
        for header in msg.get_all(name) or []:
            addresses = getattr(header, "addresses", ())  # an AddressHeader
            out.extend((a.display_name, a.addr_spec) for a in addresses)
        return out
    except Exception:
        try:
            return [(n, a) for n, a in getaddresses(_raw_values(msg, name)) if a]
        except Exception:
            return []


def _is_attachment(part: Message) -> bool:
    try:
        return part.get_content_disposition() == "attachment" or bool(part.get_filename())
    except Exception:
        return False


def _text_of(part: Message) -> str:
    try:
        content = part.get_content()  # type: ignore[attr-defined]
        if isinstance(content, str):
            return content
    except Exception:  # unknown charset and the like: the bytes as UTF-8 will do
        log.debug("text part not decodable as declared", exc_info=True)
    try:
        payload = part.get_payload(decode=True)
        if isinstance(payload, bytes):
            return payload.decode("utf-8", "replace")
    except Exception:
        log.debug("text part not decodable", exc_info=True)
    return ""


class _Html(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.words: list[str] = []
        self.links: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("script", "style"):
            self._skip += 1
        elif tag in ("a", "area"):
            for name, value in attrs:
                if name == "href" and value:
                    self.links.append(value)
        if tag in ("br", "p", "div", "tr", "li", "td"):
            self.words.append(" ")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style") and self._skip:
            self._skip -= 1

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.words.append(data)


def _html(source: str) -> tuple[str, list[str]]:
    parser = _Html()
    try:
        parser.feed(source)
        parser.close()
    except Exception:  # what was parsed until then still counts
        log.debug("HTML part not fully parseable", exc_info=True)
    return " ".join(parser.words), parser.links


_URL_IN_TEXT = re.compile(r"(?:https?://|ftp://|www\.)[^\s<>\"'\])}]+", re.IGNORECASE)
_EMAIL_IN_TEXT = re.compile(r"\S+@\S+")
_WORD = re.compile(r"[^\W\d_]+")
_BRACKET_IP = re.compile(r"\[(?:IPv6:)?([0-9A-Fa-f:.]+)\]")


def _urls_in(text_: str) -> list[str]:
    return [m.group(0).rstrip(".,;:!?") for m in _URL_IN_TEXT.finditer(text_)]


def body_words(text_: str) -> list[str]:
    """The words a body shingle is made of: normalized text, URLs and e-mail addresses
    removed, letters only (digits, which carry per-recipient numbers, dropped)."""
    s = normalize.text(text_)
    s = _URL_IN_TEXT.sub(" ", s)
    s = _EMAIL_IN_TEXT.sub(" ", s)
    return _WORD.findall(s)[:MAX_BODY_WORDS]


def minhash_run(words: Sequence[str]) -> str | None:
    """The run of MINHASH_WORDS words whose CRC-32 is least (ties: the smallest run)."""
    if len(words) < MINHASH_WORDS:
        return None
    best: tuple[int, str] | None = None
    for i in range(len(words) - MINHASH_WORDS + 1):
        run = " ".join(words[i : i + MINHASH_WORDS])
        key = (zlib.crc32(run.encode("utf-8", "surrogatepass")), run)
        if best is None or key < best:
            best = key
    return None if best is None else best[1]


# -- extraction -----------------------------------------------------------------------------
@dataclass
class _Letter:
    subject: str | None = None
    from_name: str = ""
    from_addr: str | None = None
    return_path: str | None = None
    message_id: str | None = None
    received_ip: str | None = None
    recipients: tuple[str, ...] = ()
    body: str = ""
    links: tuple[str, ...] = ()
    attachments: tuple[tuple[str | None, bytes | None], ...] = ()


def _read(msg: EmailMessage) -> _Letter:
    letter = _Letter()
    letter.subject = _header(msg, "Subject")
    froms = _addresses(msg, "From")
    if froms:
        letter.from_name, letter.from_addr = froms[0]
    letter.return_path = _header(msg, "Return-Path")
    letter.message_id = _header(msg, "Message-ID")
    for value in _raw_values(msg, "Received"):
        m = _BRACKET_IP.search(value)
        if m:
            letter.received_ip = m.group(1)
            break
    letter.recipients = tuple(a for _, a in _addresses(msg, "To") + _addresses(msg, "Cc"))
    plain: list[str] = []
    html: list[str] = []
    links: list[str] = []
    attachments: list[tuple[str | None, bytes | None]] = []
    try:
        parts: Iterator[Message] = msg.walk()
        for part in parts:
            if part.is_multipart():
                continue
            if _is_attachment(part):
                if len(attachments) < MAX_ATTACHMENTS:
                    attachments.append(_attachment(part))
                continue
            ctype = part.get_content_type()
            if ctype == "text/plain":
                plain.append(_text_of(part))
            elif ctype == "text/html":
                html.append(_text_of(part))
    except Exception:
        log.debug("letter structure partly unreadable for shingles", exc_info=True)
    html_text = ""
    for source in html:
        words, hrefs = _html(source)
        html_text += " " + words
        links.extend(hrefs)
    body = " ".join(plain) if any(p.strip() for p in plain) else html_text
    links.extend(_urls_in(" ".join(plain)))
    if not plain:
        links.extend(_urls_in(html_text))
    letter.body = body
    letter.links = tuple(links)
    letter.attachments = tuple(attachments)
    return letter


def _attachment(part: Message) -> tuple[str | None, bytes | None]:
    try:
        name = part.get_filename()
    except Exception:
        name = None
    try:
        payload = part.get_payload(decode=True)
    except Exception:
        payload = None
    return name, payload if isinstance(payload, bytes) else None


def extract(raw: bytes, envelope: Envelope | None = None) -> list[Shingle]:
    """Every shingle of a letter, each (type, hash) once, in registry order. Never raises."""
    env = envelope or Envelope()
    msg = _parse(raw)
    letter = _read(msg) if msg is not None else _Letter()
    out: list[Shingle] = []

    def add(type_: ShingleType, value: str | None, unique: Shingle | None = None) -> None:
        if value:
            out.append(Shingle.of(type_, value, unique))

    try:
        _collect(add, letter, env)
    except Exception:  # a normalization bug must not stop delivery
        log.warning("shingle extraction stopped early", exc_info=True)
    seen: set[tuple[int, int]] = set()
    unique: list[Shingle] = []
    for s in sorted(out, key=lambda s: int(s.type)):
        if (s.type, s.hash) not in seen:
            seen.add((s.type, s.hash))
            unique.append(s)
    return unique


class _Add(Protocol):
    def __call__(
        self, type_: ShingleType, value: str | None, unique: Shingle | None = None
    ) -> None: ...


def _collect(add: _Add, letter: _Letter, env: Envelope) -> None:
    t = ShingleType
    if letter.subject is not None:
        add(t.SUBJECT, normalize.subject(letter.subject))
    words = body_words(letter.body)
    if words:
        add(t.BODY_TEXT, " ".join(words))
        add(t.BODY_MINHASH, minhash_run(words))
    from_addr = normalize.address(letter.from_addr) if letter.from_addr else None
    add(t.FROM_ADDRESS, from_addr)
    if from_addr:
        add(t.FROM_DOMAIN, normalize.registrable(from_addr.rpartition("@")[2]))
    add(t.DISPLAY_NAME, normalize.text(letter.from_name) if letter.from_name else None)
    ip = normalize.ip(env.ip) if env.ip else None
    if ip is None and letter.received_ip:
        ip = normalize.ip(letter.received_ip)
    net = normalize.network(ip) if ip else None
    add(t.SENDER_IP, ip)
    add(t.SENDER_NETWORK, net)
    bounce_or_sender = env.sender if env.sender is not None else letter.return_path
    envelope_from = normalize.address(bounce_or_sender) if bounce_or_sender else None
    if envelope_from:
        add(t.RETURN_PATH_DOMAIN, normalize.registrable(envelope_from.rpartition("@")[2]))
    if letter.message_id:
        mid = letter.message_id.strip().strip("<>")
        if "@" in mid:
            add(t.MESSAGE_ID_DOMAIN, normalize.domain(mid.rpartition("@")[2].strip("<> ")))
    for link in _distinct(letter.links, MAX_LINKS):
        normal = normalize.url(link)
        if normal is None:
            continue
        add(t.LINK_URL, normal[0])
        add(t.LINK_HOST, normal[1])
        add(t.LINK_DOMAIN, normalize.registrable(normal[1]))
    for name, payload in letter.attachments:
        if name:
            add(t.ATTACHMENT_NAME, normalize.text(name))
        if payload:
            add(t.ATTACHMENT_CHECKSUM, hashlib.sha256(payload).hexdigest())
    sender = envelope_from or from_addr
    if sender:
        raw_rcpts = env.recipients or letter.recipients
        rcpts = _distinct(
            (a for a in (normalize.address(r) for r in raw_rcpts) if a), MAX_RECIPIENTS
        )
        if rcpts:
            uniq = Shingle.of(t.SENDER_RECIPIENTS_UNIQUE, sender)
            for rcpt in rcpts:
                add(t.SENDER_RECIPIENT, f"{sender} {rcpt}", uniq)
            add(t.SENDER_RECIPIENTS_UNIQUE, sender)
        if net:
            uniq = Shingle.of(t.SENDER_NETWORKS_UNIQUE, sender)
            add(t.SENDER_NETWORK_PAIR, f"{sender} {net}", uniq)
            add(t.SENDER_NETWORKS_UNIQUE, sender)


def _distinct(items: Iterable[str], limit: int) -> list[str]:
    out: list[str] = []
    seen: set[str] = set()
    for item in items:
        if item not in seen:
            seen.add(item)
            out.append(item)
            if len(out) >= limit:
                break
    return out


UNIQUE_TYPES = frozenset(PAIRED.values())


def update_refs(shingles: Iterable[Shingle]) -> list[Ref]:
    """What an update of a letter's counters takes: every shingle but the uniques, which
    count through their pairs (one per distinct pair and bucket)."""
    return [s.ref for s in shingles if s.type not in UNIQUE_TYPES]


def query_refs(shingles: Iterable[Shingle]) -> list[Ref]:
    return [s.ref for s in shingles]
