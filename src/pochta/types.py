"""The contract at a glance: aliases, records and the Protocols every backend implements.

Backends (SQLite, in-memory, later PostgreSQL / Tarantool / WebDAV) implement these Protocols and
pass the same contract suite in ``tests/contract``. Nothing here does I/O. A port's engines live
in one folder, one file per engine (``memory.py``, ``sqlite.py``, ``postgres.py``, ``redis.py``):
``docs/glossary.md``, *Backend layouts*.
The words used here and across pochta are defined in ``docs/glossary.md``.

The contract files. This one holds the ports of the blob store (FileDB, PairDB, Disk), the
mail index (``MailIndex`` and the narrow interfaces its callers are annotated with), guard,
sender lists and history: their records are here too. A port that speaks in records of its
own part lives beside them, in that part's contract file, because this module is the bottom
layer and may import nothing above it (``tests/unit/test_imports.py``); moving those records
down would put one part's words into every part's contract. They are:

    antispam/words/__init__.py              WordStore: learned words, per owner
    antispam/shingles/counters/__init__.py  CounterStore: the shingle counters (Batch, Ref, Span)
    antispam/model/store/__init__.py        ModelStore: model versions and promotions
    antispam/auth/resolver.py               Resolver, AsyncResolver: DNS (RType)
    antispam/auth/asyncdns.py               Upstream: where the shared DNS client asks
    blobs/valkyrie/state/__init__.py        StateStore: Valkyrie's positions and totals (Counts)

and four Protocols that only type a value inside one part, no port:

    antispam/auth/replay.py                 Runner: where a run of a check executes
    antispam/shingles/extract.py            _Add: extract's helper that adds one shingle
    postgres/deadline.py                    HasFileno: a connection whose socket a deadline shuts
    server/imapstate.py                     Host: what an IMAP session asks of its server

``tests/unit/test_contract_files.py`` keeps these lists true.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

Key = str
"""A blob's content address: SHA-256 of the decoded content, 64 lowercase hex characters."""

Magic = int
"""A letter's random non-zero 32-bit number for one file; added on inc/upload, subtracted on dec."""

Op = bytes
"""An operation id for an exactly-once count (see ``FileDB``): 1 to 32 bytes."""

Clock = Callable[[], float]
"""Seconds since the epoch; injected so that pure logic and tests control time."""


class Space(enum.IntEnum):
    LIVE = 0  # space0: files in use
    DELETED = 1  # space1: the deletion queue Valkyrie works from


class FileFlag(enum.IntFlag):
    NONE = 0
    DO_NOT_DELETE = 1  # counters disagreed once; never deleted automatically again


class PairFlag(enum.IntFlag):
    NONE = 0
    READONLY = 1  # reads only; no new files
    SERVICE = 2  # a disk failed: read-only, waiting for evacuation
    LOCKED = 4  # an operator holds it: no new files

    @property
    def writable(self) -> bool:
        return not (self & (PairFlag.READONLY | PairFlag.SERVICE | PairFlag.LOCKED))


@dataclass(frozen=True, slots=True)
class FileRecord:
    """One FileDB record. In space1, ``moved_at`` is when it moved; counter and magic are 0."""

    key: Key
    counter: int
    magic: Magic
    flags: FileFlag
    pair_id: int
    space: Space = Space.LIVE
    moved_at: float | None = None

    def as_fields(self) -> dict[str, Any]:
        """The record as the API and the CLI show it (plain JSON values)."""
        return {
            "key": self.key,
            "counter": self.counter,
            "magic": self.magic,
            "flags": ["do_not_delete"] if self.flags & FileFlag.DO_NOT_DELETE else [],
            "pair": self.pair_id,
            "space": "live" if self.space is Space.LIVE else "deleted",
            "moved_at": self.moved_at,
        }


@dataclass(frozen=True, slots=True)
class DiskSpec:
    """Where a disk lives: ``node`` is ``local`` or a WebDAV base URL; ``root`` a path on it."""

    node: str
    root: str

    def __str__(self) -> str:
        return self.root if self.node == "local" else f"{self.node.rstrip('/')}/{self.root}"


@dataclass(frozen=True, slots=True)
class Pair:
    id: int
    disks: tuple[DiskSpec, DiskSpec]
    flags: PairFlag
    free: tuple[int, int]  # free bytes of each disk, as last measured


class FileDB(Protocol):
    """Key -> (counter, magic, flags, pair). Every method is one atomic step.

    ``op``: an operation id (1 to 32 bytes) that makes a count exactly-once. The step and a
    journal entry for ``op`` are written together; a step whose ``op`` is already journaled
    changes nothing (a replay after a crash). The journal answers "did this count happen?"
    (``applied``) until its entries are forgotten (``forget_ops``), which the caller does once
    its own database has recorded the outcome.
    """

    def inc(self, key: Key, magic: Magic, op: Op | None = None) -> FileRecord:
        """counter += 1, magic += m on the live record; BlobNotFound when there is none."""

    def upsert(self, key: Key, magic: Magic, pair_id: int, op: Op | None = None) -> FileRecord:
        """After an upload: insert with counter 1, or inc a live record that appeared meanwhile."""

    def dec(self, key: Key, magic: Magic, op: Op | None = None) -> FileRecord:
        """counter -= 1, magic -= m; see ``pochta.blobs.counting.after_dec`` for the outcomes.
        A replayed ``op`` returns the record as it is (BlobNotFound when there is none)."""

    def applied(self, ops: Collection[Op]) -> set[Op]:
        """Which of ``ops`` are journaled."""

    def forget_ops(self, ops: Collection[Op]) -> None:
        """Drop journal entries (unknown ones are ignored)."""

    def journal(self, after: Op = b"", limit: int = 1000) -> list[Op]:
        """Journaled ops greater than ``after``, in ascending byte order, at most ``limit``."""

    def get(self, key: Key) -> FileRecord | None:
        """The live record, else the space1 record, else None."""

    # -- for Valkyrie, evacuation and restore (each one atomic step) --------------------
    def get_deleted(self, key: Key) -> FileRecord | None:
        """The space1 record, even while a live record exists again (a re-upload)."""

    def forget_deleted(self, key: Key, moved_at: float) -> bool:
        """Drop the space1 record if it is still the one moved at ``moved_at``."""

    def repoint(self, key: Key, old_pair: int, new_pair: int) -> bool:
        """Compare-and-set: move the live record to ``new_pair`` if it is on ``old_pair``."""

    def live_keys(self, pair_id: int, after: Key | None = None, limit: int = 1000) -> list[Key]:
        """Keys of the live records on a pair, ascending, greater than ``after``."""

    def count_live(self, pair_id: int) -> int:
        """How many live records are on a pair."""

    def revive(self, key: Key, pair_id: int) -> FileRecord:
        """Bring a key back to space0 (a restored file): the live record when there is one,
        else a new one on ``pair_id`` with counter 0, magic 0 and DO_NOT_DELETE; the space1
        record is dropped either way."""

    def close(self) -> None: ...


class PairDB(Protocol):
    """pair_id -> two disks, flags and free bytes."""

    def add(self, disks: tuple[DiskSpec, DiskSpec], free: tuple[int, int]) -> Pair: ...

    def get(self, pair_id: int) -> Pair:
        """The pair; PairNotFound when there is none."""

    def list(self) -> list[Pair]: ...

    def set_flags(self, pair_id: int, flags: PairFlag) -> Pair: ...

    def set_free(self, pair_id: int, free: tuple[int, int]) -> None: ...

    def remove(self, pair_id: int) -> None:
        """Forget a retired pair; PairNotFound when there is none."""

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class DiskEntry:
    """One file found by ``Disk.walk``: its relative name, size and modification time."""

    name: str
    size: int
    mtime: float


class BlobReader(Protocol):
    """An opened stored file: its size is known before the first byte is read."""

    size: int

    def __iter__(self) -> Iterator[bytes]: ...

    def close(self) -> None: ...


class BlobWriter(Protocol):
    """A temporary file being written on one disk."""

    def probe(self) -> None:
        """Before any content: write a few bytes to the node under the temporary name and
        return once the disk has taken them (DiskError when it did not). The content written
        afterwards replaces them: the probe that seed 004 asks for before every upload is the
        upload's own temporary file, not a file of its own."""

    def write(self, chunk: bytes) -> None: ...

    def commit(self) -> None:
        """Flush and fsync; after this the bytes survive a crash."""

    def commit_as(self, name: str) -> None:
        """``commit`` then the disk's ``publish`` to ``name``, in as few rounds as the disk
        allows: on return the bytes are under ``name`` and survive a crash."""

    def abort(self) -> None:
        """Close and remove the temporary file; never raises."""


class Disk(Protocol):
    """One disk of a storage node (a local directory, or a WebDAV root). Names are relative."""

    spec: DiskSpec

    def create(self, name: str) -> BlobWriter: ...

    def publish(self, tmp_name: str, name: str) -> None:
        """Atomically rename (MOVE) a committed temporary file to its final name, durably."""

    def open(self, name: str, start: int = 0, end: int | None = None) -> BlobReader:
        """Open bytes [start, end) of a file; MissingFile when it is not there."""

    def size(self, name: str) -> int | None:
        """The file's size (HEAD), or None when it is not there."""

    def delete(self, name: str) -> None: ...

    def free_bytes(self) -> int: ...

    def probe(self) -> None:
        """Write and remove a small file; DiskError when the disk cannot take writes."""

    def walk(self, after: str = "") -> Iterator[DiskEntry]:
        """Every file on the disk in ascending name order, names greater than ``after`` only;
        DiskError when the disk's root is not there."""


# -- mail ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Envelope:
    """What the SMTP session knew of a letter: the client's IP, MAIL FROM ('' for a bounce),
    the RCPT TOs. None where it is not known (a letter imported, or scanned on its own)."""

    ip: str | None = None
    sender: str | None = None
    recipients: Sequence[str] = ()


# -- the mailbox index ------------------------------------------------------------------------


class LetterState(enum.IntEnum):
    PENDING = 0  # being delivered: attachments are being counted; invisible
    DELIVERED = 1
    DELETING = 2  # deletion recorded; its attachments' decs are being finished


class LetterFlag(enum.IntFlag):
    """A letter's flags, as IMAP names them (\\Seen, \\Flagged, \\Answered, \\Deleted, \\Draft)."""

    NONE = 0
    SEEN = 1
    FLAGGED = 2
    ANSWERED = 4
    DELETED = 8  # marked for EXPUNGE; the letter stays until then
    DRAFT = 16
    JUNK = 32  # IMAP keyword $Junk (RFC 9051 2.3.2): its owner says spam
    NOT_JUNK = 64  # IMAP keyword $NotJunk: its owner says not spam
    # kept by pochta, never shown (:mod:`pochta.mailbox.feedback`):
    COMPLAINED = 128  # its owner's "spam" was counted (shingles, history): once a letter
    UNSPAMMED = 256  # its owner's "not spam" was counted: once a letter
    SAID_SPAM = 512  # a copy of a letter pochta called spam (a copy has no verdict of its own)


KEPT_FLAGS = (
    LetterFlag.ANSWERED
    | LetterFlag.DELETED
    | LetterFlag.DRAFT
    | LetterFlag.JUNK
    | LetterFlag.NOT_JUNK
    | LetterFlag.COMPLAINED
    | LetterFlag.UNSPAMMED
    | LetterFlag.SAID_SPAM
)
"""The flags an index keeps in its ``flags`` column (seen and flagged have their own)."""


@dataclass(frozen=True, slots=True)
class User:
    id: int
    email: str
    password_hash: str
    reset_required: bool = False
    admin: bool = False  # may open the admin pages (``pochta user admin``)


@dataclass(frozen=True, slots=True)
class Folder:
    """A folder with its counts. ``uidvalidity`` and ``uidnext`` (IMAP): every letter that
    enters the folder (delivered, moved, copied, appended) gets the UID ``uidnext`` and
    ``uidnext`` grows; a UID is never given twice in a folder, and ``uidvalidity`` (non-zero)
    never changes for the folder's life."""

    id: int
    name: str
    total: int = 0
    unseen: int = 0
    uidvalidity: int = 0
    uidnext: int = 0


@dataclass(frozen=True, slots=True)
class AttachmentRef:
    """One stored attachment of one letter: ``n`` is its index among the letter's extracted
    parts; ``magic`` is this letter's own magic for it."""

    n: int
    key: Key
    size: int
    crc32: int
    magic: Magic


@dataclass(frozen=True, slots=True)
class LetterMeta:
    """What the listing shows, the same for every recipient of one delivery."""

    size: int
    received: float
    date: float | None
    sender: str
    subject: str


@dataclass(frozen=True, slots=True)
class NewStoredLetter:
    user_id: int
    folder: str
    refs: tuple[AttachmentRef, ...]
    verdict: str | None = None
    flags: LetterFlag = LetterFlag.NONE  # an IMAP APPEND gives some; a delivery none


@dataclass(frozen=True, slots=True)
class StoredLetter:
    id: int
    user_id: int
    folder: str
    size: int
    received: float
    date: float | None
    sender: str
    subject: str
    seen: bool
    flagged: bool
    verdict: str | None = None
    uid: int = 0  # its UID in its folder (see ``Folder``)
    flags: LetterFlag = LetterFlag.NONE  # all its flags (``seen`` and ``flagged`` among them)


@dataclass(frozen=True, slots=True)
class FolderEntry:
    """A letter as IMAP lists a folder: its UID there, its id and its flags."""

    uid: int
    letter_id: int
    flags: LetterFlag


@dataclass(frozen=True, slots=True)
class Updated:
    """A letter before and after one change (``MailIndex.update``)."""

    before: StoredLetter
    after: StoredLetter


@dataclass(frozen=True, slots=True)
class IndexStats:
    users: int
    letters: int
    logical_bytes: int  # sum of the letters' sizes as delivered
    skeleton_bytes: int  # what the index keeps of them (skeletons, stored once per delivery)
    refs: int  # attachment references
    blobs: int  # distinct attachments referenced
    blob_bytes: int  # their sizes, each counted once
    pending_deletions: int


# The index seen by each of its callers: a caller is annotated with the narrowest of these
# that has what it calls, and MailIndex, which every backend implements, is all of them.
class UserIndex(Protocol):
    """The accounts (``Users``, ``Mailbox.delete_user``, the leak audit, IMAP's login)."""

    def add_user(self, email: str, password_hash: str, *, admin: bool = False) -> User:
        """A new user with folders Inbox and Spam; InvalidInput if the e-mail is taken."""

    def user(self, email: str) -> User | None: ...

    def user_by_id(self, user_id: int) -> User | None: ...

    def users(self) -> list[User]: ...

    def set_password(self, user_id: int, password_hash: str) -> None:
        """Also clears a required reset."""

    def require_reset(self, emails: Collection[str]) -> int:
        """Mark accounts for a forced password reset; returns how many exist."""

    def set_admin(self, user_id: int, admin: bool) -> bool:
        """Grant or revoke the admin role; False when there is no such user."""

    def delete_user(self, user_id: int) -> int | None:
        """In one atomic step: the user's delivered letters become DELETING (the deletion job
        finishes them), and its sessions, folders and account row are removed; how many
        letters were marked. None (nothing changed) when no such user; InvalidInput (nothing
        changed) while a delivery to the user is still PENDING."""


class SessionIndex(Protocol):
    """Login sessions, by the SHA-256 of their bearer token (``Users``)."""

    def add_session(self, token_hash: bytes, user_id: int, expires: float) -> None: ...

    def session_user(self, token_hash: bytes, now: float) -> int | None: ...

    def drop_session(self, token_hash: bytes) -> None: ...


class AccountIndex(UserIndex, SessionIndex, Protocol):
    """What ``Users`` (``mailbox/accounts.py``) asks: accounts and their sessions."""


class FolderIndex(Protocol):
    """An account's folders (``Reading``, IMAP)."""

    def folders(self, user_id: int) -> list[Folder]: ...

    def add_folder(self, user_id: int, name: str) -> Folder:
        """InvalidInput if the user already has a folder of that name."""


class DeliveryIndex(Protocol):
    """Writing a delivery's letters (``Delivery``): PENDING, then DELIVERED once counted."""

    def begin_delivery(
        self,
        skeleton: bytes,
        meta: LetterMeta,
        letters: Sequence[NewStoredLetter],
        *,
        delivered: bool = False,
        queued: str | None = None,
    ) -> list[int]:
        """Write the letters PENDING (one skeleton shared), each with the next UID of its
        folder and its ``flags``; their ids, in order.
        ``delivered``: write them DELIVERED at once (letters with no attachment to count: the
        delivery is then one write). InvalidInput for a folder the user does not have.
        ``queued`` (with ``delivered``): the id of the incoming queue's entry this delivery
        comes from, recorded in the same transaction (:meth:`was_queued`)."""

    def finish_delivery(self, ids: Sequence[int], *, queued: str | None = None) -> int:
        """PENDING letters become DELIVERED; returns how many (fewer: some were abandoned).
        ``queued``: as for :meth:`begin_delivery`, recorded in the same transaction when
        every letter of ``ids`` became DELIVERED."""

    def was_queued(self, queued: str) -> bool:
        """Whether a delivery of the incoming queue's entry ``queued`` was made (its queue
        file may outlive it: a crash between the two; the entry is then done)."""

    def forget_queued(self, before: float) -> int:
        """Forget the entries recorded before ``before`` (seconds since the epoch); how
        many."""


class LetterIndex(Protocol):
    """Reading delivered letters and changing one (``Reading``, IMAP)."""

    def letters(
        self, user_id: int, folder: str, limit: int, before: int | None = None
    ) -> list[StoredLetter]:
        """Delivered letters of a folder, newest first, ids below ``before``."""

    def letter(self, user_id: int, letter_id: int) -> StoredLetter | None:
        """A delivered letter of this user; None for anyone else's."""

    def content(self, letter_id: int) -> tuple[bytes, list[AttachmentRef]]:
        """The skeleton and the references of a letter."""

    def skeletons(
        self, user_id: int, letter_ids: Sequence[int], max_size: int | None = None
    ) -> dict[int, tuple[StoredLetter, bytes | None]]:
        """In one read, each delivered letter of this user among ``letter_ids`` with its
        skeleton: None for a skeleton of more than ``max_size`` bytes (not read; ``content``
        reads it). Anyone else's letters and letters not delivered are left out."""

    def update(
        self,
        user_id: int,
        letter_id: int,
        *,
        seen: bool | None = None,
        flagged: bool | None = None,
        folder: str | None = None,
    ) -> Updated | None:
        """Change a letter of this user in one atomic step; the letter before and after it
        (two concurrent moves see different befores, so only one of them is a move); None
        for anyone else's letter."""


class FlagIndex(Protocol):
    """IMAP's UIDs and the letters' flags (IMAP, ``Reading``, ``Feedback``)."""

    def entries(self, user_id: int, folder: str) -> list[FolderEntry]:
        """The delivered letters of a folder in ascending UID order; FolderNotFound."""

    def set_flags(
        self, user_id: int, letter_ids: Sequence[int], add: LetterFlag, remove: LetterFlag
    ) -> list[tuple[LetterFlag, FolderEntry]]:
        """In one step, for each delivered letter of this user among ``letter_ids``: flags =
        (flags | add) & ~remove. Returns (flags before, entry after) for each, in the order
        given; letters that are not the user's (or not delivered) are left out."""


class ReadingIndex(FolderIndex, LetterIndex, FlagIndex, Protocol):
    """What ``Reading`` (``mailbox/reading.py``) asks: folders, letters, flags."""


class DeletionIndex(Protocol):
    """Deleting letters and settling abandoned deliveries (``Deletions``; IMAP's EXPUNGE)."""

    def pending(
        self, ids: Sequence[int] | None = None, before: float | None = None
    ) -> list[tuple[int, list[AttachmentRef]]]:
        """PENDING letters with their references: those of ``ids``, or all; with ``before``,
        only those received before that time."""

    def abandon(self, ids: Sequence[int], uncounted: Collection[tuple[int, int]]) -> int:
        """In one step: drop the references (letter id, n) in ``uncounted`` (never counted),
        and turn the PENDING letters of ``ids`` into DELETING ones (the deletion job decs
        what was counted). Returns how many letters changed."""

    def delete(self, user_id: int, letter_id: int) -> bool:
        """Record the deletion (DELETING); False when the user has no such letter."""

    def deletions(self, limit: int) -> list[tuple[int, list[AttachmentRef]]]:
        """DELETING letters with the references whose decs are still to be done."""

    def ref_done(self, letter_id: int, n: int) -> None: ...

    def finish_deletion(self, letter_id: int) -> None: ...


class CheckIndex(Protocol):
    """The references as the consistency work reads them: ``Journal`` (which counts are
    settled) and ``Checks`` (fsck, stats)."""

    def ref_states(self, refs: Collection[tuple[int, int]]) -> dict[tuple[int, int], LetterState]:
        """For each existing reference (letter id, n) of ``refs``: its letter's state."""

    def all_refs(self) -> Iterator[tuple[int, LetterState, AttachmentRef]]:
        """Every reference of every letter, with its letter's id and state."""

    def stats(self) -> IndexStats: ...


class ImapIndex(Protocol):
    """The reads IMAP's store (``server/imapstore.py``) makes of the index itself, given by
    ``Mailbox.reads``: folders, UIDs, letters and their skeletons (the same methods as
    ``FolderIndex``, ``FlagIndex`` and ``LetterIndex``). No change goes this way: a change
    is a ``Mailbox`` call, which holds its feedback and its deletion."""

    def folders(self, user_id: int) -> list[Folder]: ...

    def entries(self, user_id: int, folder: str) -> list[FolderEntry]: ...

    def letter(self, user_id: int, letter_id: int) -> StoredLetter | None: ...

    def skeletons(
        self, user_id: int, letter_ids: Sequence[int], max_size: int | None = None
    ) -> dict[int, tuple[StoredLetter, bytes | None]]: ...


class MailIndex(
    UserIndex,
    SessionIndex,
    FolderIndex,
    DeliveryIndex,
    LetterIndex,
    FlagIndex,
    DeletionIndex,
    CheckIndex,
    Protocol,
):
    """Users, sessions, folders, letters and their attachment references.

    Letters of one delivery share one skeleton. A letter is written PENDING before its
    attachments are counted in the blob store and DELIVERED after; a deletion moves it to
    DELETING first, and its references are removed one by one as their decs are done.
    """

    def close(self) -> None: ...


# -- guard: leases, fencing, rate limits, leaked credentials ----------------------------------


@dataclass(frozen=True, slots=True)
class Grant:
    """One attempt to take a lock: ``token`` (its fencing token, strictly increasing per lock
    name) when taken, else None and ``holder_ttl``, how long to wait before trying again: the
    seconds left on the holder's lease, or fewer when the backend can tell sooner (the
    embedded one asks again within a second whether a holder on its host still lives)."""

    token: int | None
    holder_ttl: float = 0.0


class Listener(Protocol):
    """Hears the releases of one lock name from the moment it was opened."""

    def wait(self, timeout: float) -> None:
        """Block until a release is heard or ``timeout`` seconds pass; may return early."""

    def close(self) -> None: ...


class AsyncListener(Protocol):
    async def wait(self, timeout: float) -> None: ...

    def close(self) -> None: ...


class LockBackend(Protocol):
    """Leases on names. ``owner`` is unique per lease; every method is one atomic step. See
    ``pochta.guard.lock`` for the semantics."""

    def try_acquire(self, name: str, owner: str, ttl: float, queue: bool = False) -> Grant:
        """Take ``name`` for ``ttl`` seconds when nobody holds it, with a new fencing token.
        ``queue``: if refused, the caller will wait for a release (a backend may then hand
        the lock to such waiters before newcomers)."""

    def extend(self, leases: Sequence[tuple[str, str, float]]) -> list[bool]:
        """For each (name, owner, ttl): expiry = now + ttl if owner still holds name."""

    def release(self, name: str, owner: str) -> bool:
        """Drop the lease if owner holds it and wake a waiter; False when it did not hold it."""

    def listen(self, name: str) -> Listener:
        """Start hearing releases of ``name``: opened before a try, it misses none after."""

    def close(self) -> None: ...


class AsyncLockBackend(Protocol):
    """``LockBackend`` for asyncio: the same steps as coroutines."""

    async def try_acquire(
        self, name: str, owner: str, ttl: float, queue: bool = False
    ) -> Grant: ...

    async def extend(self, leases: Sequence[tuple[str, str, float]]) -> list[bool]: ...

    async def release(self, name: str, owner: str) -> bool: ...

    def listen(self, name: str) -> AsyncListener: ...

    async def close(self) -> None: ...


class Fence(Protocol):
    """Lets a protected resource refuse writers whose fencing token is older than one seen."""

    def admit(self, resource: str, token: int) -> None:
        """Remember ``token`` if it is >= the highest seen for ``resource``; else StaleToken."""

    def write(self, resource: str, token: int, value: bytes) -> None:
        """``admit`` and store ``value`` in one atomic step; StaleToken stores nothing."""

    def read(self, resource: str) -> tuple[int, bytes | None]:
        """The highest token seen (0 for none) and the value last written."""


@dataclass(frozen=True, slots=True)
class Limit:
    """At most ``max`` attempts per ``period`` seconds, refilled continuously (seed 003):
    after a burst, one attempt comes back every ``period / max`` seconds."""

    name: str
    max: int
    period: float


@dataclass(frozen=True, slots=True)
class RateDecision:
    allowed: bool
    remaining: float  # attempts left on the tightest limit, after this one when allowed
    retry_after: float  # seconds until the refused attempt would pass; 0.0 when allowed
    denied: tuple[str, ...] = ()  # the names of the limits that refused


RAMP = 5
"""A :class:`Schedule`'s checks over ``free`` before the interval reaches its spacing
(``pochta.guard.schedule``; the settings check that a schedule leaves room for it)."""


@dataclass(frozen=True, slots=True)
class Schedule:
    """Spaces out one subject's checks (an account's password checks by clients it does not
    know) instead of refusing them: ``free`` per ``period`` pass at once; past them each check
    reserves the subject's next slot, the interval growing with every check over ``free`` up
    to a spacing that lets at most ``checks`` through in any ``period``, however many ask. A
    slot at most ``max_wait`` seconds away is given (the caller waits for it), a later one is
    refused with the time until it; at most ``waiters`` + 1 slots are given ahead at once.
    The formula is ``pochta.guard.schedule``."""

    name: str
    free: int
    checks: int
    period: float
    max_wait: float
    waiters: int = 4


@dataclass(frozen=True, slots=True)
class Slot:
    """What a reservation on a ``Schedule`` got."""

    granted: bool
    wait: float  # granted: seconds from now until the slot (0 <= wait <= max_wait); else 0.0
    retry_after: float  # refused: seconds until the next slot is within max_wait; 0.0 when granted
    checks: float  # the subject's counted checks (after this one when granted)


class RateLimitBackend(Protocol):
    """Rolling limits and schedules kept under opaque keys, on the backend's own clock."""

    def hit(
        self, checks: Sequence[tuple[str, Limit]], cost: float, commit: bool = True
    ) -> RateDecision:
        """Charge ``cost`` to every (key, limit) or, if any would go below zero, to none.
        ``commit=False`` only looks."""

    def reserve(self, key: str, schedule: Schedule, commit: bool = True) -> Slot:
        """Reserve the next slot of ``key`` on ``schedule``, in one atomic step on the
        backend's clock (``pochta.guard.schedule.reserve``). ``commit=False`` only looks."""

    def reset(self, keys: Sequence[str]) -> None:
        """Forget the keys' state, rolling limits and schedules alike."""

    def close(self) -> None: ...


class AsyncRateLimitBackend(Protocol):
    async def hit(
        self, checks: Sequence[tuple[str, Limit]], cost: float, commit: bool = True
    ) -> RateDecision: ...

    async def reserve(self, key: str, schedule: Schedule, commit: bool = True) -> Slot: ...

    async def reset(self, keys: Sequence[str]) -> None: ...

    async def close(self) -> None: ...


class KnownClientsBackend(Protocol):
    """Marks with an expiry under opaque keys (which clients logged into which account), on
    the backend's own clock."""

    def known(self, keys: Sequence[str]) -> list[bool]:
        """For each key, whether it is marked and its mark has not expired."""

    def remember(self, keys: Sequence[str], ttl: float) -> None:
        """Mark each key for ``ttl`` seconds from now (a mark already there is renewed)."""

    def forget(self, keys: Sequence[str]) -> None: ...

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class ConnectionTally:
    """One key's counts summed over every process of a server: connections open now, and
    connection attempts in the current window and in the one before it."""

    connections: int = 0
    current: int = 0
    previous: int = 0


class ConnectionTable(Protocol):
    """Connection counts under 64-bit keys (``pochta.guard.anvil``), shared by the processes
    of one server: each process writes only its own counts, and a read sums every live
    process's. Called from one thread (the event loop). ``total``: the key is one of the few
    protocol totals, which always find room."""

    def read(self, key: int, window: int, *, total: bool = False) -> ConnectionTally:
        """The key's counts as of ``window`` (attempts move back one window per window passed;
        older ones are gone)."""

    def add(
        self,
        key: int,
        window: int,
        *,
        connections: int = 0,
        attempts: int = 0,
        total: bool = False,
    ) -> bool:
        """Add to this process's counts of the key in ``window``; False when there was no
        room for a key not counted yet (nothing is then counted)."""

    def close(self) -> None:
        """Stop counting: this process's counts no longer add to any read."""


class Accounts(Protocol):
    """What the leaked-credential audit needs from the user store."""

    def password_hash(self, email: str) -> str | None:
        """The account's argon2 hash; None when there is no such account. ``email`` is
        lowercased."""

    def require_reset(self, emails: Collection[str]) -> int:
        """Mark accounts for a forced password reset; returns how many exist."""


# -- personal sender lists: "never spam from" / "always spam from" --------------------------

ListAction = Literal["allow", "block"]


@dataclass(frozen=True, slots=True)
class ListEntry:
    """One entry of an account's sender list: ``value`` is an address (``bob@shop.example``)
    or a domain (``shop.example``, which covers its subdomains), normalized as
    :func:`pochta.antispam.personal.entry_value` makes it; ``action`` what the list says."""

    value: str
    action: ListAction

    @property
    def is_domain(self) -> bool:
        return "@" not in self.value


@dataclass(frozen=True, slots=True)
class Listed:
    """What a recipient's list said of a letter: the entry that matched the From address
    ``sender``, and whether it was applied (``reason``: why an allow was not)."""

    entry: ListEntry
    sender: str
    applied: bool
    reason: str = ""

    def header(self) -> str:
        """The ``list=`` part of ``X-Pochta-Spam``."""
        if self.applied:
            return f"list={self.entry.action}"
        return f"list={self.entry.action}-refused:{self.reason}"

    def as_dict(self) -> dict[str, object]:
        return {
            "action": self.entry.action,
            "entry": self.entry.value,
            "from": self.sender,
            "applied": self.applied,
            "reason": self.reason or None,
        }


class SenderLists(Protocol):
    """Every account's allow / block entries. Values are given normalized (the service in
    :mod:`pochta.mailbox.lists` validates them); one value has one action per account."""

    def entries(self, user_id: int, limit: int) -> list[ListEntry]:
        """The account's entries by value, at most ``limit``."""

    def lookup(self, user_ids: Sequence[int], values: Sequence[str]) -> dict[int, list[ListEntry]]:
        """In one read: the entries among ``values`` of each of ``user_ids`` (an account with
        none is left out)."""

    def add(self, user_id: int, entry: ListEntry, limit: int) -> bool:
        """Add the entry, or change the action of the same value (True: it is new). In one
        atomic step with the count: InvalidInput when the account already has ``limit``
        entries and this value is not one of them."""

    def remove(self, user_id: int, value: str) -> bool:
        """False when the account had no such entry."""

    def forget(self, user_id: int) -> int:
        """Drop every entry of the account (it is being deleted); how many there were."""

    def close(self) -> None: ...


# -- history: what the admin pages chart ----------------------------------------------------


@dataclass(frozen=True, slots=True)
class StorageSample:
    """The store's size at one moment (what ``pochta stats`` says), sampled periodically.
    ``stored_bytes``: skeletons + each attachment once; ``physical_bytes``: skeletons + each
    attachment twice (a pair keeps two copies)."""

    at: float
    letters: int
    logical_bytes: int
    stored_bytes: int
    physical_bytes: int


@dataclass(frozen=True, slots=True)
class Tally:
    """``n`` events of one kind in one hour: ``series`` says what is counted (``verdict``,
    ``sign``, ``complaint``, ``unspam``, ``login_ip``, ``login_account``), ``name`` which one
    (a label, a sign's symbol, a shingle, an IP, an e-mail)."""

    hour: int  # hours since the epoch
    series: str
    name: str
    n: int


@dataclass(frozen=True, slots=True)
class AuditRecord:
    """One run of ``pochta leaks audit``: the figures the seed's provider published."""

    at: float
    lines: int
    malformed: int
    unknown: int
    wrong: int
    valid: int
    reset: int
    seconds: float


class HistoryStore(Protocol):
    """Time series for the admin pages: storage samples, hourly tallies, leak audits."""

    def add_sample(self, sample: StorageSample) -> None: ...

    def samples(self, since: float, limit: int = 10_000) -> list[StorageSample]:
        """Samples taken at ``since`` or later, oldest first; the newest ``limit`` of them."""

    def add_tallies(self, tallies: Sequence[Tally]) -> None:
        """Add each tally's ``n`` to the stored one of its (hour, series, name)."""

    def tallies(self, series: str, since_hour: int, limit: int = 10_000) -> list[Tally]:
        """A series' tallies from ``since_hour`` on, by hour then name; at most ``limit``."""

    def top(self, series: str, since_hour: int, n: int = 10) -> list[tuple[str, int]]:
        """The ``n`` names of a series with the most events from ``since_hour`` on, each with
        its sum over those hours: most first, then by name (every hour counts, however many
        cells there are)."""

    def add_audit(self, audit: AuditRecord) -> None: ...

    def audits(self, limit: int = 20) -> list[AuditRecord]:
        """The latest audits, newest first."""

    def prune(self, before: float) -> int:
        """Forget samples and tallies older than ``before`` (audits are kept); how many."""

    def close(self) -> None: ...


class Activity(Protocol):
    """Hears what happens to mail, for the operator's charts. Every method returns at once
    and never raises: the mail flow never waits for, nor fails with, its history."""

    def delivered(self, label: str, signs: Sequence[str], copies: int) -> None:
        """A scored delivery to ``copies`` mailboxes: its verdict and phishing signs."""

    def feedback(self, kind: str, shingles: Sequence[tuple[int, int, str]]) -> None:
        """A user's "spam" (``complaint``) or "not spam" (``unspam``) on a letter whose
        shingles are (type, hash, normalized value)."""

    def login_failed(self, ip: str, account: str | None) -> None:
        """A wrong password (``account``: the existing user's e-mail) or an unknown account
        (``account`` None: what was typed is never passed on, people paste passwords there)."""

    def unscored(self, action: str) -> None:
        """A letter that could not be scored in time, and what ``antispam.on_timeout`` made of
        it (``inbox``, ``spam``, ``defer``)."""


class Held(Protocol):
    """One holder's share of the server's budget of bytes in memory (``memory_budget``;
    :class:`pochta.budget.Share`): what it takes is given back all at once by its
    owner, whatever way the holding ends."""

    def take(self, n: int) -> bool:
        """Take ``n`` more bytes if the budget has them (True), else nothing (False)."""
