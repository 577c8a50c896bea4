"""IMAP4rev1 on the wire, without I/O: reading commands and writing responses.

Commands are parsed by pymap's parser (``pymap.parsing``, RFC 3501 and the extensions pochta
speaks), fed one whole command at a time: the server reads the command line and every
literal in it first (each bounded, see ``pochta.server.imap``) and hands the parser the
command with its literals inline in LITERAL+ form (``{n+}``), so the parser never has to ask
for more. pymap's parser lacks UNSELECT and NAMESPACE, two commands with no arguments, which
:func:`parse` reads itself.

Responses are written here: strings quoted when they can be and sent as literals when not,
flags, dates, folder names in modified UTF-7, and the resolution of sequence sets against a
selected folder's UIDs.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from pymap.parsing import Params
from pymap.parsing.command import Command
from pymap.parsing.command.select import FetchCommand, UidFetchCommand
from pymap.parsing.commands import Commands, InvalidCommand
from pymap.parsing.exceptions import NotParseable
from pymap.parsing.modutf7 import modutf7_encode
from pymap.parsing.specials.fetchattr import FetchAttribute
from pymap.parsing.specials.sequenceset import MaxValue, SequenceSet
from pymap.parsing.state import ParsingInterrupt, ParsingState

from pochta.types import FolderEntry, LetterFlag

INBOX = "Inbox"  # pochta's name of the folder IMAP calls INBOX
SPAM = "Spam"

_COMMANDS = Commands()
LITERAL = re.compile(rb"\{(\d{1,19})(\+?)\}\r?\n\Z")
"""A command line that ends in a literal: ``{n}`` (the client waits for "+") or ``{n+}``."""

_NO_ARGS = re.compile(rb"([!#$&'+,\-./0-9:;<=>?@A-Z^_`a-z|}~]+) (UNSELECT|NAMESPACE)\r?\n\Z", re.I)
_TAG = re.compile(rb"[!#$&'+,\-./0-9:;<=>?@A-Z^_`a-z|}~]{1,64}")


@dataclass(frozen=True, slots=True)
class Simple:
    """A command pymap does not parse: UNSELECT or NAMESPACE."""

    tag: bytes
    name: bytes


class Reply(Exception):
    """Ends a command with a tagged NO or BAD."""

    def __init__(self, kind: bytes, text: str) -> None:
        super().__init__(text)
        self.kind = kind
        self.text = text


def no(text: str) -> Reply:
    return Reply(b"NO", text)


def bad(text: str) -> Reply:
    return Reply(b"BAD", text)


class Unparsed(Exception):
    """A command that cannot be read; ``tag`` is its tag when one could be read, else b"*"."""

    def __init__(self, tag: bytes, reason: str) -> None:
        super().__init__(reason)
        self.tag = tag
        self.reason = reason


def tag_of(line: bytes) -> bytes:
    m = _TAG.match(line)
    return m.group(0) if m else b"*"


_FETCH = re.compile(rb"(\S{1,64}) (UID )?FETCH ([0-9:*,]+) ([^\r\n{}]{1,1000})\r?\n\Z", re.I)
_NUMBER = re.compile(rb"[1-9][0-9]{0,18}")
_ATTRIBUTES: OrderedDict[tuple[bool, bytes], Sequence[FetchAttribute]] = OrderedDict()
_CACHED = 256


def parse(command: bytes) -> Command | Simple:
    """One whole command (its literals inline as ``{n+}``), or Unparsed.

    A FETCH whose attribute list was parsed before (a client fetching letter after letter)
    reuses that parse and has pymap read only its sequence set (a small cache)."""
    m = _NO_ARGS.match(command)
    if m:
        return Simple(m.group(1), m.group(2).upper())
    fetch = _FETCH.match(command)
    if fetch is not None:
        by_uid = fetch.group(2) is not None
        attrs = _ATTRIBUTES.get((by_uid, fetch.group(4)))
        if attrs is not None:
            numbers = fetch.group(3)
            if _NUMBER.fullmatch(numbers):  # one letter: what pymap's parse would give
                seqset, rest = SequenceSet([int(numbers)], uid=by_uid), memoryview(b"")
            else:
                try:
                    seqset, rest = SequenceSet.parse(memoryview(numbers), Params(uid=by_uid))
                except NotParseable:
                    rest = memoryview(b"?")
            if not rest:
                kind = UidFetchCommand if by_uid else FetchCommand
                return kind(fetch.group(1), seqset, attrs)
    try:
        cmd, _ = _COMMANDS.parse(memoryview(command), Params(state=ParsingState()))
    except ParsingInterrupt:  # a literal without its bytes: the reader inlines them all
        raise Unparsed(tag_of(command), "incomplete command") from None
    except NotParseable as exc:
        raise Unparsed(tag_of(command), f"cannot read the command: {exc}") from None
    except (ValueError, TypeError, LookupError, OverflowError) as exc:  # a bad charset too
        raise Unparsed(tag_of(command), f"cannot read the command: {exc}") from None
    if isinstance(cmd, InvalidCommand):
        what = cmd.message.decode("utf-8", "replace")
        raise Unparsed(tag_of(command), what or "cannot read the command")
    if fetch is not None and isinstance(cmd, FetchCommand):
        _ATTRIBUTES[(fetch.group(2) is not None, fetch.group(4))] = cmd.attributes
        if len(_ATTRIBUTES) > _CACHED:
            _ATTRIBUTES.popitem(last=False)
    return cmd


# -- strings --------------------------------------------------------------------------------
_QUOTABLE = re.compile(rb"[\x01-\x09\x0b\x0c\x0e-\x7f]{0,1000}")


def string(value: bytes) -> bytes:
    """An IMAP string: quoted when it can be, else a literal."""
    if _QUOTABLE.fullmatch(value):
        return b'"' + value.replace(b"\\", b"\\\\").replace(b'"', b'\\"') + b'"'
    return b"{%d}\r\n" % len(value) + value


def nstring(value: bytes | str | None) -> bytes:
    if value is None:
        return b"NIL"
    return string(value.encode("utf-8", "surrogateescape") if isinstance(value, str) else value)


def folder_name(name: str) -> bytes:
    """A pochta folder's name as IMAP shows it: INBOX for Inbox, modified UTF-7, quoted."""
    if name == INBOX:
        return b"INBOX"
    return string(modutf7_encode(name))


def pochta_folder(name: str) -> str:
    """The pochta folder an IMAP name (already decoded from modified UTF-7) stands for."""
    return INBOX if name.upper() == "INBOX" else name


# -- flags and dates --------------------------------------------------------------------------
FLAG_NAMES: tuple[tuple[LetterFlag, bytes], ...] = (
    (LetterFlag.SEEN, b"\\Seen"),
    (LetterFlag.ANSWERED, b"\\Answered"),
    (LetterFlag.FLAGGED, b"\\Flagged"),
    (LetterFlag.DELETED, b"\\Deleted"),
    (LetterFlag.DRAFT, b"\\Draft"),
    (LetterFlag.JUNK, b"$Junk"),
    (LetterFlag.NOT_JUNK, b"$NotJunk"),
)
_BY_NAME = {name.lower(): flag for flag, name in FLAG_NAMES}
ALL_FLAGS = b"(" + b" ".join(name for _, name in FLAG_NAMES) + b")"


@functools.lru_cache(maxsize=256)  # 128 combinations; enum arithmetic is slow
def flags(value: LetterFlag) -> bytes:
    return b"(" + b" ".join(name for flag, name in FLAG_NAMES if flag in value) + b")"


def letter_flags(names: Sequence[bytes]) -> tuple[LetterFlag, list[bytes]]:
    """The system flags among ``names`` and the names pochta does not keep (keywords,
    \\Recent)."""
    out = LetterFlag.NONE
    unknown = []
    for name in names:
        flag = _BY_NAME.get(name.lower())
        if flag is None:
            unknown.append(name)
        else:
            out |= flag
    return out, unknown


_MONTHS = b"Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split()


def internal_date(ts: float) -> bytes:
    """``"17-Jul-1996 02:44:25 +0000"``: INTERNALDATE in UTC."""
    t = datetime.fromtimestamp(ts, UTC)
    return b'"%02d-%s-%04d %02d:%02d:%02d +0000"' % (
        t.day,
        _MONTHS[t.month - 1],
        t.year,
        t.hour,
        t.minute,
        t.second,
    )


# -- sequence sets ------------------------------------------------------------------------------
class TooManyRanges(ValueError):
    pass


def resolve(seqset: SequenceSet, uids: Sequence[int], max_ranges: int) -> list[int]:
    """The 0-based positions, ascending, of the messages a sequence set names in a folder
    whose messages have ``uids`` (ascending). A UID set names existing UIDs in its ranges
    (``*`` is the highest UID); a sequence set names positions 1..len (``*`` is the last);
    numbers past the end name nothing. TooManyRanges past ``max_ranges`` elements."""
    elems = seqset.value
    if len(elems) > max_ranges:
        raise TooManyRanges(f"more than {max_ranges} ranges in a sequence set")
    if not uids:
        return []
    by_uid = bool(seqset.uid)
    if len(elems) == 1 and type(elems[0]) is int:  # one letter (letter after letter)
        n = elems[0]
        if not by_uid:
            return [n - 1] if n <= len(uids) else []
        at = bisect.bisect_left(uids, n)
        return [at] if at < len(uids) and uids[at] == n else []
    top = uids[-1] if by_uid else len(uids)
    picked: set[int] = set()
    for elem in elems:
        if isinstance(elem, tuple):
            a, b = (top if isinstance(x, MaxValue) else x for x in elem)
        else:
            a = b = top if isinstance(elem, MaxValue) else elem
        lo, hi = min(a, b), max(a, b)
        if by_uid:
            first, last = bisect.bisect_left(uids, lo), bisect.bisect_right(uids, hi)
        else:
            first, last = lo - 1, min(hi, len(uids))
        picked.update(range(first, last))
        if len(picked) >= len(uids):
            break
    return sorted(picked)


def uid_set(uids: Sequence[int]) -> bytes:
    """A compact UID set (``1:3,7``) of ascending UIDs, for COPYUID."""
    out: list[bytes] = []
    i = 0
    while i < len(uids):
        j = i
        while j + 1 < len(uids) and uids[j + 1] == uids[j] + 1:
            j += 1
        out.append(b"%d" % uids[i] if i == j else b"%d:%d" % (uids[i], uids[j]))
        i = j + 1
    return b",".join(out)


# -- a selected folder's changes ------------------------------------------------------------------
def changes(old: Sequence[FolderEntry], new: Sequence[FolderEntry]) -> list[bytes]:
    """The untagged responses that bring a client from ``old`` to ``new`` (both in UID
    order; letters only ever join at the end): EXPUNGE for letters gone (highest first, so
    each number is still right when it is read), FETCH FLAGS for changed flags, EXISTS when
    letters joined."""
    out: list[bytes] = []
    now = {e.uid: e for e in new}
    for pos in range(len(old), 0, -1):
        if old[pos - 1].uid not in now:
            out.append(b"* %d EXPUNGE\r\n" % pos)
    kept = [e for e in old if e.uid in now]
    for pos, entry in enumerate(kept, 1):
        fresh = now[entry.uid]
        if fresh.flags != entry.flags:
            out.append(b"* %d FETCH (UID %d FLAGS %s)\r\n" % (pos, entry.uid, flags(fresh.flags)))
    if len(new) > len(kept):
        out.append(b"* %d EXISTS\r\n" % len(new))
    return out
