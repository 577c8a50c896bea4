"""A parsed letter's shingles (the registry is in :mod:`pochta.antispam.shingles.registry`).
Pure; never raises. Every piece read is bounded:

- the body: the first :data:`MAX_BODY_CHARS` characters of the text (the plain text, else the
  HTML's), cut into at most :data:`MAX_BODY_WORDS` words; the near-duplicate shingle looks at
  the first :data:`MINHASH_SPAN` of them;
- at most :data:`MAX_LINKS` distinct links, :data:`MAX_ATTACHMENTS` attachments and
  :data:`MAX_RECIPIENTS` recipients; the first :data:`MAX_RECEIVED` Received fields.
"""

from __future__ import annotations

import logging
import re
import zlib
from collections.abc import Iterable, Sequence
from typing import Protocol

from pochta.antispam.shingles.registry import Shingle, ShingleType
from pochta.mime import normalize
from pochta.mime.letter import Letter, Link
from pochta.types import Envelope

log = logging.getLogger("pochta.antispam")

MAX_LINKS = 10
MAX_ATTACHMENTS = 10
MAX_RECIPIENTS = 50
MAX_RECEIVED = 20
MAX_BODY_CHARS = 100_000
MAX_BODY_WORDS = 5000
MINHASH_WORDS = 4  # minhash_run's zip of four slices reads exactly this many
MINHASH_SPAN = 2000

_WORD = re.compile(r"[^\W\d_]++")
# a blank-separated token that is an address or a link: one with "@" or "://", or "www."
# first; a match starts only at a token's start, so no token is read twice
_DROPPED = re.compile(r"(?<!\S)(?:[^\s@]*+@|\S*?://|www\.)\S*+")
_SPACE = b" "
_BRACKET_IP = re.compile(r"\[(?:IPv6:)?([0-9A-Fa-f:.]{2,45})\]")


_NOT_LETTERS = str.maketrans({c: " " for c in map(chr, range(128)) if not c.isalpha()})
"""Every ASCII character that is no letter, as a blank: an ASCII text's :data:`_WORD` runs are
its blank-separated pieces once these are blanks (one C pass each, not the regex engine's)."""


def body_words(text: str) -> list[str]:
    """The words a body shingle is made of: normalized text, tokens that are URLs or e-mail
    addresses dropped, letters only (digits, which carry per-recipient numbers, dropped).

    Python's regex engine, which tries every position, reads only a non-ASCII text's words:
    :data:`_DROPPED`'s tokens are cut out by looking for its markers (:func:`_without_links`),
    and an ASCII text's words are its pieces once every character but a letter is a blank."""
    kept = _without_links(normalize.text(text[:MAX_BODY_CHARS]))
    if not kept.isascii():
        return _WORD.findall(kept)[:MAX_BODY_WORDS]
    return kept.translate(_NOT_LETTERS).split()[:MAX_BODY_WORDS]


def _without_links(normal: str) -> str:
    """``_DROPPED.sub(" ", normal)`` for a text :func:`normalize.text` wrote (single blanks
    between its tokens, no other white space): the tokens around each "@" and "://", and
    those that start with "www.", are cut out, found by looking for those markers alone (a
    letter's few addresses and links, not each of its tokens). Linear: a token is cut whole
    and the search goes on after it."""
    cuts: set[tuple[int, int]] = set()
    for marker in ("@", "://", "www."):
        at = normal.find(marker)
        while at >= 0:
            if marker == "www." and at and normal[at - 1] != " ":
                at = normal.find(marker, at + 1)  # inside a token: no link's start
                continue
            start = normal.rfind(" ", 0, at) + 1
            end = normal.find(" ", at)
            end = len(normal) if end < 0 else end
            cuts.add((start, end))
            at = normal.find(marker, end)  # the token is cut whole: each one read once
    if not cuts:
        return normal
    pieces = []
    done = 0
    for start, end in sorted(cuts):  # whole tokens: the same one, or apart
        pieces.append(normal[done:start])
        done = end
    pieces.append(normal[done:])
    return " ".join(pieces)


def minhash_run(words: Sequence[str]) -> str | None:
    """The run of MINHASH_WORDS words whose CRC-32 is least (ties: the smallest run).
    ``words``: :func:`body_words`' (none holds a blank)."""
    if len(words) < MINHASH_WORDS:
        return None
    # the words encoded at once: a word holds no blank (letters only), nor does UTF-8 put one
    # inside a character's bytes, so the pieces between blanks are the words' bytes
    span = " ".join(words[:MINHASH_SPAN]).encode("utf-8", "surrogatepass").split(_SPACE)
    # each run of MINHASH_WORDS (4) consecutive words, in order
    runs = list(map(_SPACE.join, zip(span, span[1:], span[2:], span[3:], strict=False)))
    crcs = list(map(zlib.crc32, runs))
    least = min(crcs)
    if crcs.count(least) == 1:
        best = runs[crcs.index(least)]
    else:
        best = min(run for run, crc in zip(runs, crcs, strict=True) if crc == least)
    return best.decode("utf-8", "surrogatepass")


class _Add(Protocol):
    def __call__(
        self, type_: ShingleType, value: str | None, unique: Shingle | None = None
    ) -> None: ...


def extract(letter: Letter, envelope: Envelope | None = None) -> list[Shingle]:
    """Every shingle of a letter, each (type, hash) once, in registry order."""
    env = envelope or Envelope()
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


def _received_ip(letter: Letter) -> str | None:
    for value in letter.headers("received")[:MAX_RECEIVED]:
        m = _BRACKET_IP.search(value[:2000])
        if m:
            return m.group(1)
    return None


def _collect(add: _Add, letter: Letter, env: Envelope) -> None:
    t = ShingleType
    if letter.header("subject") is not None:
        add(t.SUBJECT, normalize.subject(letter.subject[:2000]))
    words = body_words(letter.text)
    if words:
        add(t.BODY_TEXT, " ".join(words))
        add(t.BODY_MINHASH, minhash_run(words))
    from_addr = normalize.address(letter.from_address) if letter.from_address else None
    add(t.FROM_ADDRESS, from_addr)
    if from_addr:
        add(t.FROM_DOMAIN, normalize.registrable(from_addr.rpartition("@")[2]))
    name = letter.from_name[:1000]
    add(t.DISPLAY_NAME, normalize.text(name) if name else None)
    ip = normalize.ip(env.ip) if env.ip else None
    if ip is None:
        received = _received_ip(letter)
        ip = normalize.ip(received) if received else None
    net = normalize.network(ip) if ip else None
    add(t.SENDER_IP, ip)
    add(t.SENDER_NETWORK, net)
    bounce_or_sender = env.sender if env.sender is not None else letter.header("return-path")
    envelope_from = normalize.address(bounce_or_sender[:1000]) if bounce_or_sender else None
    if envelope_from:
        add(t.RETURN_PATH_DOMAIN, normalize.registrable(envelope_from.rpartition("@")[2]))
    if letter.message_id:
        mid = letter.message_id.strip().strip("<>")
        if "@" in mid:
            add(t.MESSAGE_ID_DOMAIN, normalize.domain(mid.rpartition("@")[2].strip("<> ")))
    first: dict[str, Link] = {}  # each distinct href's first link, in the letter's order
    for link in letter.links:
        first.setdefault(link.href, link)
    for link in list(first.values())[:MAX_LINKS]:
        # the letter's links are normalized already: ``Link.url`` and ``Link.host`` are
        # ``normalize.url(href)``'s, "" when it is None (it never gives an empty URL)
        if not link.url:
            continue
        add(t.LINK_URL, link.url)
        add(t.LINK_HOST, link.host)
        add(t.LINK_DOMAIN, normalize.registrable(link.host))
    for attachment in letter.attachments[:MAX_ATTACHMENTS]:
        if attachment.filename:
            add(t.ATTACHMENT_NAME, normalize.text(attachment.filename[:1000]))
        if attachment.content:
            add(t.ATTACHMENT_CHECKSUM, attachment.key)
    sender = envelope_from or from_addr
    if sender:
        _pairs(add, sender, net, env.recipients or _recipients(letter))


def _recipients(letter: Letter) -> list[str]:
    return [a.address for a in (*letter.to_addresses, *letter.cc_addresses)][:MAX_RECIPIENTS]


def _pairs(add: _Add, sender: str, net: str | None, raw_rcpts: Sequence[str]) -> None:
    t = ShingleType
    rcpts = _distinct(
        (a for a in (normalize.address(r) for r in raw_rcpts[: 4 * MAX_RECIPIENTS]) if a),
        MAX_RECIPIENTS,
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
