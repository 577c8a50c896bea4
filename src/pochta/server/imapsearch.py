"""SEARCH without I/O: pymap's parsed search keys evaluated against one letter's facts.

Flags, sizes, dates and UIDs come from the index; header keys read the letter's header
block (from the skeleton); BODY and TEXT read the letter's decoded text parts, and only when
a key asks for them. Matching is case-insensitive substring matching on decoded text
(RFC 3501 §6.4.4). pochta keeps no \\Recent flag and of the keywords only ``$Junk`` and
``$NotJunk`` (the owner's word, :mod:`pochta.mailbox.feedback`): RECENT and NEW match
nothing, OLD everything; KEYWORD / UNKEYWORD test those two as kept, any other keyword is
on no letter (KEYWORD nothing, UNKEYWORD everything).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime

from pymap.parsing.specials.searchkey import SearchKey

from pochta.mime.headers import clean_text, field_value, read_block
from pochta.server.imapproto import letter_flags, resolve
from pochta.types import LetterFlag

_FLAG_KEYS = {
    b"ANSWERED": LetterFlag.ANSWERED,
    b"DELETED": LetterFlag.DELETED,
    b"DRAFT": LetterFlag.DRAFT,
    b"FLAGGED": LetterFlag.FLAGGED,
    b"SEEN": LetterFlag.SEEN,
}
_ADDRESS_KEYS = {b"BCC": "bcc", b"CC": "cc", b"FROM": "from", b"SUBJECT": "subject", b"TO": "to"}


@dataclass
class Facts:
    """One letter as SEARCH sees it. ``header`` and ``text`` are read on first use."""

    seq: int
    uid: int
    flags: LetterFlag
    size: int
    received: float
    sent: float | None
    uids: list[int]  # the selected folder's UIDs (for UID and sequence-set keys)
    read_header: Callable[[], bytes]
    read_text: Callable[[], str]
    max_ranges: int = 10_000
    sets: dict[int, frozenset[int]] = field(default_factory=dict)  # shared by one search
    _fields: list[tuple[str, str]] | None = field(default=None, repr=False)
    _text: str | None = field(default=None, repr=False)

    def fields(self) -> list[tuple[str, str]]:
        if self._fields is None:
            raw = self.read_header()
            block = read_block(raw, 0, len(raw))
            self._fields = [(f.name, clean_text(field_value(raw, f))) for f in block.fields]
        return self._fields

    def text(self) -> str:
        if self._text is None:
            self._text = self.read_text().casefold()
        return self._text


def matches(keys: frozenset[SearchKey] | list[SearchKey], facts: Facts) -> bool:
    return all(_match(key, facts) for key in keys)


def _day(ts: float) -> date:
    return datetime.fromtimestamp(ts, UTC).date()


def _match(key: SearchKey, facts: Facts) -> bool:
    return _test(key, facts) != key.inverse


def _test(key: SearchKey, facts: Facts) -> bool:
    value = key.value
    if value == b"ALL" or value == b"OLD":
        return True
    if value in (b"RECENT", b"NEW"):
        return False
    if value in (b"KEYWORD", b"UNKEYWORD"):
        kept, _ = letter_flags([bytes(key.filter_flag)])
        has = bool(kept) and kept in facts.flags
        return has if value == b"KEYWORD" else not has
    if value in _FLAG_KEYS:
        return _FLAG_KEYS[value] in facts.flags
    if value.startswith(b"UN") and value[2:] in _FLAG_KEYS:
        return _FLAG_KEYS[value[2:]] not in facts.flags
    if value == b"SEQSET":
        seqset = key.filter_sequence_set
        picked = facts.sets.get(id(seqset))
        if picked is None:
            picked = facts.sets[id(seqset)] = frozenset(
                resolve(seqset, facts.uids, facts.max_ranges)
            )
        return facts.seq - 1 in picked
    if value == b"KEYSET":
        return all(_match(k, facts) for k in key.filter_key_set)
    if value == b"OR":
        left, right = key.filter_key_or
        return _match(left, facts) or _match(right, facts)
    if value == b"LARGER":
        return facts.size > key.filter_int
    if value == b"SMALLER":
        return facts.size < key.filter_int
    if value in (b"BEFORE", b"ON", b"SINCE"):
        return _compare(value, _day(facts.received), key.filter_datetime.date())
    if value in (b"SENTBEFORE", b"SENTON", b"SENTSINCE"):
        if facts.sent is None:
            return False
        return _compare(value[4:], _day(facts.sent), key.filter_datetime.date())
    if value in _ADDRESS_KEYS:
        name = _ADDRESS_KEYS[value]
        needle = key.filter_str.casefold()
        return any(n == name and needle in v.casefold() for n, v in facts.fields())
    if value == b"HEADER":
        name, text = key.filter_header
        name, needle = name.lower(), text.casefold()
        return any(n == name and needle in v.casefold() for n, v in facts.fields())
    if value == b"BODY":
        return key.filter_str.casefold() in facts.text()
    if value == b"TEXT":
        needle = key.filter_str.casefold()
        return needle in facts.text() or any(
            needle in f"{n}: {v}".casefold() for n, v in facts.fields()
        )
    return False  # EMAILID, THREADID: pochta has no such ids


def _compare(op: bytes, day: date, given: date) -> bool:
    if op == b"BEFORE":
        return day < given
    if op == b"ON":
        return day == given
    return day >= given


def needs_text(keys: frozenset[SearchKey] | list[SearchKey]) -> bool:
    """Whether any key reads the letter's text (BODY, TEXT): the expensive ones."""
    for key in keys:
        if key.value in (b"BODY", b"TEXT"):
            return True
        if key.value == b"KEYSET" and needs_text(list(key.filter_key_set)):
            return True
        if key.value == b"OR" and needs_text(list(key.filter_key_or)):
            return True
    return False


_LIGHT = {b"ALL", b"OLD", b"NEW", b"RECENT", b"KEYWORD", b"UNKEYWORD", b"SEQSET"}
_LIGHT |= set(_FLAG_KEYS) | {b"UN" + k for k in _FLAG_KEYS}


def needs_letter(keys: frozenset[SearchKey] | list[SearchKey]) -> bool:
    """Whether any key reads more than the flags and the UIDs (sizes, dates, headers, text)."""
    for key in keys:
        if key.value == b"KEYSET":
            if needs_letter(list(key.filter_key_set)):
                return True
        elif key.value == b"OR":
            if needs_letter(list(key.filter_key_or)):
                return True
        elif key.value not in _LIGHT:
            return True
    return False
