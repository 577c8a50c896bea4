"""What FETCH and SEARCH read, apart from the session that sends the answers.

The plan of an attribute list is worked out once per list (:func:`fetch_plan`). :class:`Reads`
reads the letters' values in a store thread (or on the event loop, for
letters read ahead: :mod:`pochta.server.imapahead`) and makes their responses
(:func:`pochta.server.imapfetch.response`), each run of bytes joined into one
(:func:`joined`); a big body's blocks are read as they are sent. The session
(:class:`pochta.server.imapsession.Session`) resolves the sequence set, batches, marks, sends and
streams. SEARCH's keys are evaluated (:mod:`pochta.server.imapsearch`) over the letters
:meth:`Reads.search` reads, only those a key needs. Split out of ``pochta.server.imap`` by
issue 31 (its session class was the largest).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from pymap.parsing.specials.fetchattr import FetchAttribute
from pymap.parsing.specials.searchkey import SearchKey

from pochta.errors import PochtaError
from pochta.server import imapfetch, imapproto
from pochta.server.imapahead import AHEAD_BYTES
from pochta.server.imapfetch import Piece, Value
from pochta.server.imapproto import bad
from pochta.server.imapsearch import Facts, matches, needs_letter, needs_text
from pochta.server.imapstore import WHOLE, ImapStore, Opened, Opening
from pochta.types import FolderEntry, LetterFlag

STREAM_OVER = 1 << 18  # letters bigger than this are sent block by block from a thread
FETCH_BATCH = 64  # letters a FETCH or SEARCH reads in one store thread call (one index read)
AHEAD_ENTIRE = 1 << 16  # a letter read ahead with extracted parts is read back in up to this
FETCH_BATCH_BYTES = 1 << 20  # a FETCH's batch ends when its values hold this many bytes

_UID = FetchAttribute(b"UID")
_SETS_SEEN = frozenset({b"BODY", b"RFC822", b"RFC822.TEXT", b"BINARY"})


class Reads:
    """What FETCH and SEARCH read from the store (:class:`ImapStore`), in a store thread:
    the values of FETCH attributes, and the letters SEARCH's keys look at."""

    def __init__(self, store: ImapStore, max_ranges: int) -> None:
        self.store = store
        self.max_ranges = max_ranges  # of a sequence set in a SEARCH key (ImapLimits.ranges)

    def batch(
        self,
        user_id: int,
        folder: Sequence[FolderEntry],
        positions: Sequence[int],
        plan: FetchPlan,
        sets_seen: bool,
        ahead: Sequence[int] = (),
    ) -> tuple[list[FolderEntry], list[bytes | Iterator[bytes]], dict[int, Opened]]:
        """In a store thread: the letters at ``positions`` of the selected folder's entries
        ``folder``, read :data:`FETCH_BATCH` at a time (each batch in one index read), fewer
        once their values pass :data:`FETCH_BATCH_BYTES` bytes: their entries (after those
        not yet seen are marked seen in one step, when ``sets_seen``) and their FETCH
        responses (none for a letter gone meanwhile), every run of bytes joined into one
        (the one copy of a letter's bytes, made here rather than on the event loop). The
        letters of ids ``ahead`` are read with the first batch and given back opened
        (those read with it: :meth:`Opening.small`)."""
        got: list[Opened | list[Value | None] | None] = []
        size = 0
        small: dict[int, Opened] = {}
        simple = plan.whole is not None
        for at in range(0, len(positions), FETCH_BATCH):
            ids = [folder[pos].letter_id for pos in positions[at : at + FETCH_BATCH]]
            opened = self.store.open_many(user_id, ids + list(ahead) if not at else ids)
            if not at and ahead:
                small = self._whole(opened.small(ahead))
            for letter_id in ids:
                letter = opened.get(letter_id)
                if simple and letter is not None and letter.whole and letter.size <= STREAM_OVER:
                    got.append(letter)  # answered from its skeleton: no values
                    size += letter.size
                else:
                    values = self.values(letter, plan)
                    got.append(values)
                    if values is not None:
                        size += sum(map(held, values))
                if size >= FETCH_BATCH_BYTES:
                    break
            if size >= FETCH_BATCH_BYTES:
                break
        positions = positions[: len(got)]
        entries = [folder[pos] for pos in positions]
        unseen = sets_seen and [
            e.letter_id
            for e, v in zip(entries, got, strict=True)
            if v is not None and LetterFlag.SEEN not in e.flags
        ]
        if unseen:
            changed = self.store.set_flags(user_id, unseen, LetterFlag.SEEN, LetterFlag.NONE)
            after = {entry.letter_id: entry for _, entry in changed}
            entries = [after.get(e.letter_id, e) for e in entries]
        return entries, self.answers(positions, entries, got, plan), small

    def _whole(self, opened: dict[int, Opened]) -> dict[int, Opened]:
        """Letters read ahead, each whole: one with extracted parts of at most
        :data:`AHEAD_ENTIRE` bytes has them read back in here (the next command is then
        answered on the event loop); left out when that read fails (its own FETCH says why).
        No more than ``imapahead.AHEAD_BYTES`` of them, in order: the session keeps no more
        (``ReadAhead.keep``), so nothing past them is read back in."""
        out = {}
        size = 0
        for letter_id, letter in opened.items():
            if not letter.whole:
                if letter.size > AHEAD_ENTIRE or size + letter.size > AHEAD_BYTES:
                    continue
                try:
                    letter = self.store.entire(letter)
                except (PochtaError, OSError):
                    continue
            size += len(letter.skeleton)
            if size > AHEAD_BYTES:
                break
            out[letter_id] = letter
        return out

    def answers(
        self,
        positions: Sequence[int],
        entries: Sequence[FolderEntry],
        letters: Sequence[Opened | list[Value | None] | None],
        plan: FetchPlan,
    ) -> list[bytes | Iterator[bytes]]:
        """The FETCH responses of the letters at ``positions`` (their entries), each given
        opened (its values made here) or as its values (None: gone, no response), every run
        of bytes joined into one (:func:`joined`). A letter whole in its skeleton, for a plan
        that asks only it besides UID and FLAGS, is answered straight from its skeleton."""
        return joined(self._pieces(positions, entries, letters, plan))

    def _pieces(
        self,
        positions: Sequence[int],
        entries: Sequence[FolderEntry],
        letters: Sequence[Opened | list[Value | None] | None],
        plan: FetchPlan,
    ) -> Iterator[Sequence[Piece] | None]:
        """Each letter's response in pieces (None: gone, no response), for :func:`joined`."""
        whole = plan.whole
        names = plan.names
        for pos, entry, letter in zip(positions, entries, letters, strict=True):
            if isinstance(letter, Opened):
                if whole is not None and letter.whole and letter.size <= STREAM_OVER:
                    yield whole.response(pos + 1, entry, letter)
                    continue
                letter = self.values(letter, plan)
            yield None if letter is None else self.response(pos, names, letter, entry)

    @staticmethod
    def response(
        pos: int,
        names: Sequence[bytes],
        values: Sequence[Value | None] | None,
        entry: FolderEntry,
    ) -> list[Piece]:
        return imapfetch.response(
            pos + 1, entry.uid, imapproto.flags(entry.flags), names, values or [None] * len(names)
        )

    def values(self, opened: Opened | None, plan: FetchPlan) -> list[Value | None] | None:
        """In a store thread (or on the loop, for a letter read ahead): the value of each
        attribute of an opened letter but UID and FLAGS (None for those); None when the
        letter is gone. The whole letter of a letter kept whole in its skeleton is a view of
        it at once."""
        if opened is None:
            return None
        out: list[Value | None] = []
        for attr, label in zip(plan.attrs, plan.wholes, strict=True):
            if label is not None and opened.whole and opened.size <= STREAM_OVER:
                letter = memoryview(opened.skeleton)[len(WHOLE) :]  # the letter, no copy
                out.append((label + b" {%d}\r\n" % opened.size, letter))
            elif attr.value in (b"UID", b"FLAGS"):
                out.append(None)
            else:
                out.append(self.attribute(opened, attr))
        return out

    def attribute(self, opened: Opened, attr: FetchAttribute) -> Value:
        """One attribute's value (in a store thread): its bytes, or for a big body its head,
        size and blocks (read in a store thread as they are sent)."""
        name = attr.value
        store = self.store
        if name == b"RFC822.SIZE":
            return b"RFC822.SIZE %d" % opened.size
        if name == b"INTERNALDATE":
            return b"INTERNALDATE " + imapproto.internal_date(opened.letter.received)
        if name == b"ENVELOPE":
            root = opened.tree()
            header = store.read_bytes(opened, root.block.start, root.body_start)
            return b"ENVELOPE " + imapfetch.envelope(header)
        if name in (b"BODYSTRUCTURE", b"BODY") and attr.section is None:
            structure = imapfetch.bodystructure(
                opened.tree(),
                lambda a, b: store.read_bytes(opened, a, b),
                lambda a, b: store.lines(opened, a, b),
                name == b"BODYSTRUCTURE",
            )
            return name + b" " + structure
        if name in (b"EMAILID", b"THREADID", b"BINARY", b"BINARY.PEEK", b"BINARY.SIZE"):
            raise bad(f"{name.decode()} is not supported")
        section = attr.section
        assert section is not None
        parts = list(section.parts)
        label = bytes(attr.for_response)
        if not parts and not section.specifier:  # the whole letter
            start, end = 0, opened.size
        else:
            span = imapfetch.section(
                opened.tree(), opened.size, parts, section.specifier, section.headers
            )
            if span.fields is not None:
                header = store.read_bytes(opened, span.start, span.end)
                data = imapfetch.filter_fields(header, span.fields, span.exclude)
                return label + b" " + _literal(_partial(data, attr))
            start, end = span.start, span.end
        if attr.partial is not None:
            start = min(end, start + attr.partial.start)
            if attr.partial.length is not None:
                end = min(end, start + attr.partial.length)
        size = end - start
        if size <= STREAM_OVER:  # its bytes apart from its head: copied once, when sent
            return label + b" {%d}\r\n" % size, store.view(opened, start, end)
        return label + b" ", size, store.read(opened, start, end)

    def search(
        self,
        user_id: int,
        folder: Sequence[FolderEntry],
        uids: list[int],
        keys: frozenset[SearchKey],
        by_uid: bool,
    ) -> list[int]:
        """In a store thread: SEARCH's answer over the selected folder's entries ``folder``
        (``uids``: their UIDs), sequence numbers or, ``by_uid``, UIDs. Letters are read only
        when a key needs them (a batch of :data:`FETCH_BATCH` in one index read), their text
        only when a key asks for it."""
        store = self.store
        text = needs_text(keys)
        sets: dict[int, frozenset[int]] = {}

        light = not needs_letter(keys)  # flags and sequence sets only: no letter is read

        found = []
        opened_at: Opening | None = None
        for pos, entry in enumerate(folder):
            if not light and pos % FETCH_BATCH == 0:  # the next letters, in one read
                chunk = folder[pos : pos + FETCH_BATCH]
                opened_at = store.open_many(user_id, [e.letter_id for e in chunk])
            if light:
                facts = Facts(
                    pos + 1,
                    entry.uid,
                    entry.flags,
                    0,
                    0.0,
                    None,
                    uids,
                    bytes,
                    str,
                    self.max_ranges,
                    sets,
                )
                if matches(keys, facts):
                    found.append(entry.uid if by_uid else pos + 1)
                continue
            assert opened_at is not None
            opened = opened_at.get(entry.letter_id)
            if opened is None:
                continue
            letter = opened.letter

            def header(o: Opened = opened) -> bytes:
                root = o.tree()
                return store.read_bytes(o, root.block.start, root.body_start)

            def body(o: Opened = opened) -> str:
                return store.text(o) if text else ""

            facts = Facts(
                seq=pos + 1,
                uid=entry.uid,
                flags=entry.flags,
                size=opened.size,
                received=letter.received,
                sent=letter.date,
                uids=uids,
                read_header=header,
                read_text=body,
                max_ranges=self.max_ranges,
                sets=sets,
            )
            if matches(keys, facts):
                found.append(entry.uid if by_uid else pos + 1)
        return found


@dataclass(frozen=True, slots=True)
class FetchPlan:
    """What a FETCH's attribute list asks, worked out once per list (pymap's parse of a
    list is reused for the same list: :func:`pochta.server.imapproto.parse`)."""

    attrs: list[FetchAttribute]  # UID first when the command is UID FETCH or names it
    names: list[bytes]
    marks_seen: bool  # in a folder opened with SELECT, it sets \Seen
    reads: bool  # it reads the letters (an attribute but UID and FLAGS)
    light: bool  # each attribute :func:`_light`
    wholes: list[bytes | None]  # of each attribute that is the whole letter, its label
    whole: Whole | None  # the list asks the whole letter and at most UID and FLAGS besides


@dataclass(frozen=True, slots=True)
class Whole:
    """An attribute list that asks the whole letter (``label``) once and at most UID and
    FLAGS besides (``before`` and ``after`` it): a response straight from a skeleton that
    holds the whole letter, its bytes a view of it (copied once, when sent)."""

    before: tuple[bytes, ...]
    label: bytes
    after: tuple[bytes, ...]

    def response(
        self, seq: int, entry: FolderEntry, opened: Opened
    ) -> tuple[bytes, memoryview, bytes]:
        """Its head, the letter's bytes (a view) and its end, for an ``opened.whole``."""
        head = b"* %d FETCH (" % seq
        for name in self.before:
            head += _simple(name, entry) + b" "
        tail = b""
        for name in self.after:
            tail += b" " + _simple(name, entry)
        size = opened.size
        letter = memoryview(opened.skeleton)[len(WHOLE) :]
        return head + self.label + b" {%d}\r\n" % size, letter, tail + b")\r\n"


def _simple(name: bytes, entry: FolderEntry) -> bytes:
    if name == b"UID":
        return b"UID %d" % entry.uid
    return b"FLAGS " + imapproto.flags(entry.flags)


def _whole(attrs: Sequence[FetchAttribute], wholes: Sequence[bytes | None]) -> Whole | None:
    """The :class:`Whole` shape of an attribute list, None when it asks anything else."""
    at = [i for i, label in enumerate(wholes) if label is not None]
    if len(at) != 1 or any(
        a.value not in (b"UID", b"FLAGS") for i, a in enumerate(attrs) if i != at[0]
    ):
        return None
    label = wholes[at[0]]
    assert label is not None
    names = [a.value for a in attrs]
    return Whole(tuple(names[: at[0]]), label, tuple(names[at[0] + 1 :]))


_PLANS: dict[tuple[int, bool], tuple[object, FetchPlan]] = {}
_PLANS_KEPT = 512


def fetch_plan(given: Sequence[FetchAttribute], by_uid: bool) -> FetchPlan:
    """The plan of an attribute list; kept by the list's identity (the list is kept with
    it, so that its id is not reused meanwhile)."""
    key = (id(given), by_uid)
    kept = _PLANS.get(key)
    if kept is not None and kept[0] is given:
        return kept[1]
    attrs = [a for a in given if a.value != b"UID"]  # pymap adds one for UID FETCH
    if by_uid or len(attrs) < len(given):
        attrs.insert(0, _UID)
    plan = FetchPlan(
        attrs,
        [a.value for a in attrs],
        any(a.value in _SETS_SEEN and a.section is not None for a in attrs),
        reads := any(a.value not in (b"UID", b"FLAGS") for a in attrs),
        reads and all(_light(a) for a in attrs),
        wholes := [_whole_label(a) for a in attrs],
        _whole(attrs, wholes),
    )
    if len(_PLANS) >= _PLANS_KEPT:
        _PLANS.clear()
    _PLANS[key] = (given, plan)
    return plan


_LIGHT = frozenset({b"UID", b"FLAGS", b"RFC822.SIZE", b"INTERNALDATE"})
_SECTIONS = frozenset({b"BODY", b"BODY.PEEK", b"RFC822", b"RFC822.HEADER", b"RFC822.TEXT"})


def _light(attr: FetchAttribute) -> bool:
    """Whether an attribute's value is a slice of a whole letter, or less (not ENVELOPE or
    BODYSTRUCTURE, which parse headers): it may be made on the event loop."""
    return attr.value in _LIGHT or (attr.value in _SECTIONS and attr.section is not None)


def joined(responses: Iterable[Sequence[Piece] | None]) -> list[bytes | Iterator[bytes]]:
    """The pieces of FETCH responses in order (None: a letter with none), each run of bytes
    joined into one: what the event loop sends in one call; a big body's blocks apart."""
    out: list[bytes | Iterator[bytes]] = []
    run: list[bytes | memoryview] = []
    for pieces in responses:
        for piece in pieces or ():
            if isinstance(piece, bytes | memoryview):
                run.append(piece)
                continue
            if run:
                out.append(b"".join(run))
                run = []
            out.append(piece)
    if run:
        out.append(b"".join(run))
    return out


def _whole_label(attr: FetchAttribute) -> bytes | None:
    """An attribute that names the whole letter (``BODY[]``, ``BODY.PEEK[]``, ``RFC822``):
    its label in the response; None for any other."""
    section = attr.section
    if attr.value not in (b"BODY", b"BODY.PEEK", b"RFC822") or section is None:
        return None
    if section.parts or section.specifier or attr.partial is not None:
        return None
    return bytes(attr.for_response)


def held(value: Value | None) -> int:
    """Bytes a FETCH attribute's value holds in memory (a big body's blocks are read as
    they are sent)."""
    if isinstance(value, bytes):
        return len(value)
    if value is None or len(value) == 3:
        return 0
    return len(value[0]) + len(value[1])


def _literal(data: bytes) -> bytes:
    return b"{%d}\r\n" % len(data) + data


def _partial(data: bytes, attr: FetchAttribute) -> bytes:
    if attr.partial is None:
        return data
    start = attr.partial.start
    end = None if attr.partial.length is None else start + attr.partial.length
    return data[start:end]
