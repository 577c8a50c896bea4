"""What the IMAP server asks of pochta's mailbox, in blocking calls (the server runs every one
that reaches the index or a blob in its own threads, never on the event loop): logins under
the HTTP API's limits, folders and their UIDs, letters read in pieces from the skeleton
(through ``Mailbox.reads``, the index's reads only) and the blob store, and changes made
through the ``Mailbox`` door, the way the HTTP API makes them, so that IMAP and HTTP give the
same feedback:

- \\Seen set on a letter for the first time feeds the read counters of its shingles; a
  move into Spam is a "spam" complaint, out of Spam "not spam" (``Mailbox.move``), and so
  are ``$Junk`` / ``$NotJunk`` set (``Mailbox.set_flags``), and a COPY whose original is
  then expunged (``Mailbox.expunge``): the one feedback rule (:mod:`pochta.mailbox.feedback`);
- EXPUNGE is the journaled deletion (the deletion job decs the attachments);
- APPEND and COPY store a letter as an import does (parsed once, split, attachments counted,
  no verdict): the user put it there. APPEND's letter comes prepared (parsed and split by the
  intake's workers from the file it was spooled to, as SMTP's letters are; or here, by
  :meth:`ImapStore.prepare`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path

from pochta.guard.logins import Admission
from pochta.mailbox.intake import RawLetter, load
from pochta.mailbox.prepare import Prepared
from pochta.mailbox.service import Mailbox
from pochta.mime import ranges
from pochta.mime.letter import parse
from pochta.mime.skeleton import MAGIC, VERSION, Ref
from pochta.mime.tree import Entity
from pochta.types import Folder, FolderEntry, ImapIndex, LetterFlag, StoredLetter, User

BATCH_SKELETON = 1 << 16  # skeletons up to this size are read with the others of a batch
WHOLE = MAGIC + bytes([VERSION, 0])
"""How a skeleton with no reference begins (magic, version, count 0): the letter follows."""


class Opened:
    """A letter opened for FETCH: its index row and skeleton; its layout (skeleton segments)
    and MIME tree are made on first use. A letter nothing was cut from (``whole``) is its
    skeleton's 6-byte header and then the letter itself: its bytes are sliced from there,
    no layout made."""

    __slots__ = ("_layout", "_tree", "letter", "size", "skeleton", "whole")

    def __init__(self, letter: StoredLetter, skeleton: bytes) -> None:
        self.letter = letter
        self.skeleton = skeleton
        self.whole = skeleton.startswith(WHOLE)
        self._layout: ranges.Layout | None = None
        self._tree: Entity | None = None
        if self.whole:
            self.size = len(skeleton) - len(WHOLE)
        else:  # read (and checked) at once, as the whole one's header was
            self._layout = ranges.layout(skeleton)
            self.size = self._layout.size

    @property
    def layout(self) -> ranges.Layout:
        if self._layout is None:
            self._layout = ranges.layout(self.skeleton)
        return self._layout

    def tree(self) -> Entity:
        if self._tree is None:
            self._tree = ranges.tree(self.layout)
        return self._tree


class Opening:
    """Letters opened together (:meth:`ImapStore.open_many`): one index read gave their rows
    and every skeleton of at most :data:`BATCH_SKELETON` bytes; a bigger one is read when
    :meth:`get` asks for its letter, and not kept (so that a batch holds at most one big
    skeleton at a time, whatever the letters)."""

    __slots__ = ("_big", "_opened", "_store", "_user_id")

    def __init__(
        self, store: ImapStore, user_id: int, opened: dict[int, Opened], big: set[int]
    ) -> None:
        self._store = store
        self._user_id = user_id
        self._opened = opened
        self._big = big

    def get(self, letter_id: int) -> Opened | None:
        """The letter, None when it is not this user's or is gone."""
        if letter_id in self._big:
            return self._store.open(self._user_id, letter_id)
        return self._opened.get(letter_id)

    def small(self, letter_ids: Iterable[int]) -> dict[int, Opened]:
        """Those of ``letter_ids`` read in the batch (neither gone nor big), by id."""
        opened = self._opened
        return {i: opened[i] for i in letter_ids if i in opened}


class ImapStore:
    def __init__(self, mailbox: Mailbox, *, wake_deletions: Callable[[], None] | None = None):
        self.mailbox = mailbox
        self.index: ImapIndex = mailbox.reads
        self._wake = wake_deletions

    # -- accounts and folders ------------------------------------------------------------
    def admit(self, email: str, ip: str) -> Admission:
        """Before the password: how long this login waits (the server sleeps, asynchronously),
        or RateLimited, as for the HTTP API (``Users.admit``)."""
        return self.mailbox.admit(email, ip)

    def login(self, admission: Admission, password: str) -> User:
        """The user, once admitted; InvalidCredentials or ResetRequired as for the HTTP API."""
        return self.mailbox.verify_admitted(admission, password)

    def folders(self, user_id: int) -> list[Folder]:
        return self.index.folders(user_id)

    def folder(self, user_id: int, name: str) -> Folder | None:
        for folder in self.index.folders(user_id):
            if folder.name == name:
                return folder
        return None

    def add_folder(self, user_id: int, name: str) -> Folder:
        return self.mailbox.add_folder(user_id, name)

    def entries(self, user_id: int, folder: str) -> list[FolderEntry]:
        return self.index.entries(user_id, folder)

    # -- reading --------------------------------------------------------------------------
    def open(self, user_id: int, letter_id: int) -> Opened | None:
        """A letter of this user, None when it is gone (expunged meanwhile). Its owner is
        checked every time: a letter id the session listed may, once the letter is deleted,
        be given to someone else's new letter."""
        found = self.index.skeletons(user_id, [letter_id]).get(letter_id)
        if found is None or found[1] is None:
            return None
        return Opened(found[0], found[1])

    def open_many(self, user_id: int, letter_ids: Sequence[int]) -> Opening:
        """The letters of this user among ``letter_ids``, read from the index at once (see
        :class:`Opening`)."""
        most = None if len(letter_ids) == 1 else BATCH_SKELETON  # one letter: read whole
        found = self.index.skeletons(user_id, letter_ids, most)
        opened, big = {}, set()
        for letter_id, (letter, skeleton) in found.items():
            if skeleton is None:
                big.add(letter_id)
            else:
                opened[letter_id] = Opened(letter, skeleton)
        return Opening(self, user_id, opened, big)

    def entire(self, opened: Opened) -> Opened:
        """The letter with its extracted parts read back in (its blobs read, checked): kept
        whole, as a letter nothing was cut from is (a letter read ahead,
        :mod:`pochta.server.imapahead`)."""
        if opened.whole:
            return opened
        return Opened(opened.letter, WHOLE + self.read_bytes(opened, 0, opened.size))

    def content(self, ref: Ref) -> Iterator[bytes]:
        """An extracted part's decoded content, checked against the letter's size and CRC-32
        before its first byte is given (the other copy when the first differs)."""
        return self.mailbox.part(ref)

    def read(self, opened: Opened, start: int, end: int) -> Iterator[bytes]:
        return ranges.read_range(opened.layout, start, end, self.content)

    def read_bytes(self, opened: Opened, start: int, end: int) -> bytes:
        start, end = max(0, start), min(end, opened.size)
        if start >= end:
            return b""
        if opened.whole:
            at = len(WHOLE)
            return opened.skeleton[at + start : at + end]
        lay = opened.layout
        if len(lay.segments) == 1 and lay.segments[0].ref is None:  # all in the skeleton
            at = lay.segments[0].literal
            return lay.skeleton[at + start : at + end]
        return b"".join(self.read(opened, start, end))

    def view(self, opened: Opened, start: int, end: int) -> bytes | memoryview:
        """Bytes [start, end) of the letter; of a ``whole`` one, a view of its skeleton
        (no copy: it is copied once, into what is sent)."""
        if opened.whole:
            start, end = max(0, start), min(end, opened.size)
            at = len(WHOLE)
            return memoryview(opened.skeleton)[at + start : at + max(start, end)]
        return self.read_bytes(opened, start, end)

    def lines(self, opened: Opened, start: int, end: int) -> int:
        return sum(chunk.count(b"\n") for chunk in self.read(opened, start, end))

    def text(self, opened: Opened) -> str:
        """The letter's decoded text and HTML parts (for SEARCH BODY / TEXT)."""
        letter = parse(self.read_bytes(opened, 0, opened.size), inline_limit=1 << 62)
        return "\n".join(t for t in (letter.body_text, letter.body_html) if t)

    # -- changes --------------------------------------------------------------------------
    def set_flags(
        self, user_id: int, letter_ids: Sequence[int], add: LetterFlag, remove: LetterFlag
    ) -> list[tuple[LetterFlag, FolderEntry]]:
        """Set and clear flags, with the feedback they give (``Mailbox.set_flags``)."""
        return self.mailbox.set_flags(user_id, letter_ids, add, remove)

    def move(self, user_id: int, letter_ids: Sequence[int], folder: str) -> list[tuple[int, int]]:
        """Move letters (``Mailbox.move``: the HTTP API's move, with its feedback); (letter
        id, new UID) of each moved, in order."""
        return self.mailbox.move(user_id, letter_ids, folder)

    def copy(
        self, user_id: int, letter_ids: Sequence[int], folder: str
    ) -> list[tuple[int, int, int]]:
        """Store a copy of each letter in ``folder`` (``Mailbox.copy``); (letter id, UID of
        the copy, id of the copy) of each copied."""
        user = self.mailbox.user_by_id(user_id)
        if user is None:
            return []
        out = []
        for letter_id in letter_ids:
            opened = self.open(user_id, letter_id)
            if opened is None:
                continue
            raw = self.read_bytes(opened, 0, opened.size)
            copy_id, copy = self.mailbox.copy(user, opened.letter, raw, folder)
            out.append((letter_id, copy.uid if copy is not None else 0, copy_id))
        return out

    def prepare(self, letter: RawLetter) -> Prepared:
        """A letter the client gives, parsed and split in this thread (when the server has
        no intake of worker processes to do it)."""
        return self.mailbox.prepare(load(letter))

    def append(
        self,
        user: User,
        folder: str,
        prepared: Prepared,
        flags: LetterFlag,
        received: float | None,
        files: Mapping[int, Path] | None = None,
    ) -> int:
        """Store a letter the client gives (``Mailbox.append``); its UID."""
        letter = self.mailbox.append(user, folder, prepared, flags, received, files)
        return letter.uid if letter is not None else 0

    def expunge(
        self, user_id: int, letter_ids: Sequence[int], copies: Mapping[int, int] | None = None
    ) -> list[int]:
        """Delete letters (``Mailbox.expunge``: an original expunged after its copy is a
        move); the ids deleted."""
        return self.mailbox.expunge(user_id, letter_ids, copies, wake=self._wake)
