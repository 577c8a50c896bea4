"""The mailbox: one facade over its rooms, each a small class with its collaborators injected.

    accounts.Users      users, passwords, sessions
    lists               each account's sender list (allow / block), read by delivery's
                        personal step (personal.Personal) and changed by the doors
    delivery.Delivery   a letter to N recipients: split, store, count exactly once
    reading.Reading     folders, letters, raw bytes, attachments, flags (feedback to shingles)
    deletion.Deletions  recorded deletions finished later; deliveries cut short undone
    journal.Journal     the blob store's journal of operation ids, forgotten once settled
    checks.Checks       fsck and the stats

Counts are exactly-once although the index and the FileDB are two databases: every count and
every dec carries an operation id, journaled by the FileDB in the same atomic step (see
``journal``). Magic stays the second line of defence: a count the index lost track of (an old
database, an operator's hand) makes the sums disagree, and the FileDB keeps the file
(DO_NOT_DELETE).

``Mailbox`` is the one door of the mailbox: the HTTP API and pages, IMAP, the SMTP handler
and the CLI call its methods and never reach past it into its rooms or the index
(``tests/unit/test_imports.py`` keeps them out). Most methods hand a call to the room that
does it; the door holds what spans rooms: deleting an account (its letters, what else is
kept of it), IMAP's MOVE, COPY, APPEND and EXPUNGE (a delivery or a deletion with the
feedback the owner's move teaches). An edge that reads letters in pieces (IMAP) reads the
index through the narrow ``ImapIndex`` (``reads``), never a change. ``app.py``, which builds
the mailbox, wires the rooms (the deletion job gets ``deletions``).

Why one door rather than narrow services handed to each edge (issue 31 weighed both): the
decisions that span rooms (a move's feedback, a copy expunged as a move, an APPEND's placed
flags, an account deleted with what else is kept of it) need one owner, or each edge writes
them again, as IMAP's store did before (its own append, copy and expunge beside the HTTP
API's); every edge (HTTP, pages, IMAP, SMTP, CLI) then gets one object from ``app.py``
instead of four or five rooms; and "edges never reach the index" is one rule a test can keep
(``tests/unit/test_imports.py``). The price is the one-line methods that hand a call to the
room doing it: each names that room and holds no logic of its own (the logic is in the
methods that span rooms, such as ``move``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from pochta.antispam.shingles.shingler import Shingler
from pochta.antispam.signs.registry import Sign
from pochta.antispam.verdict import Analysis, Scanner, Verdict
from pochta.blobs.store import BlobStore
from pochta.errors import MessageNotFound, UserNotFound
from pochta.guard.lock import Locks
from pochta.guard.logins import Admission, LoginGuard
from pochta.guard.passwords import DEFAULT, Passwords
from pochta.mailbox.accounts import Entry, IndexAccounts, Users
from pochta.mailbox.checks import Checks, FsckReport
from pochta.mailbox.deletion import Deletions
from pochta.mailbox.delivery import Delivered, Delivery
from pochta.mailbox.feedback import SPAM, State, placed_flags
from pochta.mailbox.journal import Journal
from pochta.mailbox.lists import SenderListService
from pochta.mailbox.personal import Personal
from pochta.mailbox.prepare import Prepared, prepare
from pochta.mailbox.reading import HIDDEN, Reading
from pochta.mime.letter import Letter
from pochta.mime.skeleton import Ref
from pochta.types import (
    Accounts,
    Activity,
    Clock,
    Envelope,
    Folder,
    FolderEntry,
    ImapIndex,
    LetterFlag,
    MailIndex,
    StoredLetter,
    User,
)

__all__ = ["SPAM", "Delivered", "FsckReport", "Mailbox", "shown"]


def shown(value: str, limit: int = 100) -> str:
    """What a message repeats of a value someone typed: at most ``limit`` characters."""
    return value if len(value) <= limit else value[:limit] + "..."


class Mailbox:
    def __init__(
        self,
        index: MailIndex,
        blobs: BlobStore,
        *,
        inline_limit: int = 4096,
        max_message_size: int = 50 << 20,
        session_ttl: float = 30 * 86400,
        pending_grace: float = 600.0,
        logins: LoginGuard | None = None,
        locks: Locks | None = None,
        shingler: Shingler | None = None,
        scanner: Scanner | None = None,
        activity: Activity | None = None,
        lists: SenderListService | None = None,
        forget: Sequence[Callable[[int], object]] = (),
        passwords: Passwords = DEFAULT,
        clock: Clock = time.time,
    ) -> None:
        self.index = index
        self.lists = lists
        self.forget_hooks: list[Callable[[int], object]] = list(forget)
        """What else keeps something of an account, each called with its id when the account
        is deleted (:meth:`delete_user`): its learned words (``Words.forget``), its sender
        lists, and whatever a store keyed by account adds (app.py builds the list). Each must
        be idempotent."""
        self.blobs = blobs
        self.session_ttl = session_ttl
        self.users = Users(
            index,
            session_ttl=session_ttl,
            logins=logins,
            activity=activity,
            passwords=passwords,
            clock=clock,
        )
        self.journal = Journal(index, blobs)
        self.deletions = Deletions(
            index, blobs, self.journal, locks=locks, pending_grace=pending_grace, clock=clock
        )
        self.delivery = Delivery(
            index,
            blobs,
            self.journal,
            self.deletions,
            inline_limit=inline_limit,
            max_message_size=max_message_size,
            shingler=shingler,
            scanner=scanner,
            activity=activity,
            personal=Personal(lists, scanner.for_owner if scanner is not None else None),
            clock=clock,
        )
        self.reading = Reading(
            index,
            blobs,
            inline_limit=inline_limit,
            shingler=shingler,
            scanner=scanner,
            activity=activity,
        )
        self.checks = Checks(index, blobs)

    def close(self) -> None:
        self.delivery.close()
        self.journal.settle()
        if self.lists is not None:
            self.lists.close()
        self.index.close()

    # -- users and sessions ------------------------------------------------------------------
    def add_user(self, email: str, password: str, *, admin: bool = False) -> User:
        return self.users.add_user(email, password, admin=admin)

    def set_admin(self, email: str, admin: bool) -> User:
        return self.users.set_admin(email, admin)

    def delete_user(self, email: str) -> tuple[User, int]:
        """Delete an account and everything of it: its letters go through the deletion job
        as any deletion does (their attachments' counts are decremented by that job), the
        forget hooks drop what else was kept of it (learned words...), then its sessions,
        folders and the account row go in one atomic step; the login limits of its address
        are lifted. The user and how many letters were marked for deletion.

        Safe to run again after a crash: the hooks are idempotent and the last step is
        atomic; until it, the account is whole and the command can be repeated; after it,
        the address is unknown (UserNotFound) and the deletion job finishes the letters.
        The hooks run once more after the row is gone, for what was learned meanwhile.
        InvalidInput (nothing deleted) while a delivery to the account is under way."""
        user = self.index.user(email)
        if user is None:
            raise UserNotFound(f"no user {shown(email)}")
        for hook in self.forget_hooks:
            hook(user.id)
        marked = self.index.delete_user(user.id)
        if marked is None:
            raise UserNotFound(f"no user {shown(email)}")
        for hook in self.forget_hooks:
            hook(user.id)
        if self.users.logins is not None:
            self.users.logins.reset(email=user.email)
        return user, marked

    def set_password(self, email: str, password: str) -> None:
        self.users.set_password(email, password)

    def check_password(self, email: str, password: str) -> User:
        return self.users.check_password(email, password)

    def login(self, email: str, password: str, ip: str = "local") -> tuple[User, str]:
        return self.users.login(email, password, ip)

    def admit(self, email: str, ip: str = "local", device: str | None = None) -> Admission:
        return self.users.admit(email, ip, device)

    def enter(self, admission: Admission, password: str) -> Entry:
        return self.users.enter(admission, password)

    def authenticate(self, token: str) -> int:
        return self.users.authenticate(token)

    def logout(self, token: str) -> None:
        self.users.logout(token)

    def verify_admitted(self, admission: Admission, password: str) -> User:
        return self.users.verify_admitted(admission, password)

    def trust(self, email: str, ip: str) -> None:
        self.users.trust(email, ip)

    def user(self, email: str) -> User | None:
        return self.users.user(email)

    def user_by_id(self, user_id: int) -> User | None:
        return self.index.user_by_id(user_id)

    def list_users(self) -> list[User]:
        return self.index.users()

    @property
    def logins(self) -> LoginGuard | None:
        """The login limits (``pochta.guard.logins``), None when they are off: the admin
        pages and ``pochta guard`` read and lift them."""
        return self.users.logins

    def credentials(self) -> Accounts:
        """The accounts as the leaked-credential audit sees them (``pochta leaks audit``)."""
        return IndexAccounts(self.index)

    # -- delivery ----------------------------------------------------------------------------
    def deliver(
        self,
        raw: bytes,
        recipients: Sequence[User],
        *,
        folder: str | None = None,
        envelope: Envelope | None = None,
        helo: str | None = None,
        scan: bool = False,
        flags: LetterFlag = LetterFlag.NONE,
        received: float | None = None,
    ) -> Delivered:
        return self.delivery.deliver(
            raw,
            recipients,
            folder=folder,
            envelope=envelope,
            helo=helo,
            scan=scan,
            flags=flags,
            received=received,
        )

    def deliver_prepared(
        self,
        prepared: Prepared,
        recipients: Sequence[User],
        *,
        folder: str | None = None,
        flags: LetterFlag = LetterFlag.NONE,
        received: float | None = None,
        files: Mapping[int, Path] | None = None,
        queued: str | None = None,
    ) -> Delivered:
        """A letter prepared in a worker (see ``mailbox.intake``): received over SMTP/LMTP,
        or given by IMAP APPEND (with its ``folder``, ``flags`` and ``received``, and the
        ``files`` its big parts were written to); ``queued``: the incoming queue's entry it
        comes from (recorded with the delivery: :meth:`was_queued`)."""
        return self.delivery.deliver_prepared(
            prepared,
            recipients,
            folder=folder,
            flags=flags,
            received=received,
            files=files,
            queued=queued,
        )

    def check_size(self, size: int) -> None:
        """TooLarge for a letter of ``size`` bytes (its trace header included) that a delivery
        would refuse (``smtp.max_message_size``)."""
        self.delivery.check_size(size)

    def was_queued(self, queued: str) -> bool:
        """Whether the incoming queue's entry ``queued`` was delivered already."""
        return self.index.was_queued(queued)

    def forget_queued(self, before: float) -> int:
        """Forget the queue entries delivered before ``before``; how many."""
        return self.index.forget_queued(before)

    def prepare(self, raw: bytes) -> Prepared:
        """A letter a client gives (IMAP APPEND), parsed and split in this thread: InvalidInput
        over ``max_message_size``."""
        self.delivery.check_size(len(raw))
        return prepare(raw, inline_limit=self.delivery.inline_limit)

    def verdict_for(
        self, owner: User, verdict: Verdict, sender: str, analysis: Analysis
    ) -> Verdict:
        """The verdict a delivery to ``owner`` gives a letter from ``sender`` that got
        ``verdict``: the owner's words and sender lists have their say (``Personal``)."""
        ((mine, _),) = self.delivery.personal.groups(verdict, sender, [owner], analysis)
        return mine

    @property
    def scores(self) -> bool:
        """Letters received over SMTP/LMTP get a verdict (antispam is enabled)."""
        return self.delivery.scanner is not None

    @property
    def counts_shingles(self) -> bool:
        return self.delivery.shingler is not None

    # -- reading -----------------------------------------------------------------------------
    @property
    def reads(self) -> ImapIndex:
        """The index's reads for an edge that reads letters in pieces (IMAP): folders, UIDs,
        skeletons. Changes are this door's methods."""
        return self.index

    def folders(self, user_id: int) -> list[Folder]:
        return self.index.folders(user_id)

    def add_folder(self, user_id: int, name: str) -> Folder:
        return self.index.add_folder(user_id, name)

    def letters(
        self, user_id: int, folder: str = "Inbox", limit: int = 50, cursor: int | None = None
    ) -> list[StoredLetter]:
        return self.index.letters(user_id, folder, limit, cursor)

    def letter(self, user_id: int, letter_id: int) -> StoredLetter:
        return self.reading.letter(user_id, letter_id)

    def raw(self, user_id: int, letter_id: int) -> bytes:
        return self.reading.raw(user_id, letter_id)

    def message(self, user_id: int, letter_id: int) -> tuple[StoredLetter, Letter]:
        return self.reading.message(user_id, letter_id)

    def warnings(self, parsed: Letter) -> list[Sign]:
        return self.reading.warnings(parsed)

    def attachment(self, user_id: int, letter_id: int, n: int) -> tuple[bytes, str, str | None]:
        return self.reading.attachment(user_id, letter_id, n)

    def part(self, ref: Ref) -> Iterator[bytes]:
        return self.reading.part(ref)

    def update(
        self,
        user_id: int,
        letter_id: int,
        *,
        seen: bool | None = None,
        flagged: bool | None = None,
        folder: str | None = None,
        parsed: Letter | None = None,
    ) -> StoredLetter:
        return self.reading.update(
            user_id, letter_id, seen=seen, flagged=flagged, folder=folder, parsed=parsed
        )

    def set_flags(
        self, user_id: int, letter_ids: Sequence[int], add: LetterFlag, remove: LetterFlag
    ) -> list[tuple[LetterFlag, FolderEntry]]:
        return self.reading.set_flags(user_id, letter_ids, add, remove)

    def move(self, user_id: int, letter_ids: Sequence[int], folder: str) -> list[tuple[int, int]]:
        """Move letters into ``folder`` (IMAP MOVE), each as :meth:`update` moves one, with
        the feedback the move teaches; (letter id, its UID in ``folder``) of each moved, in
        order. A letter gone meanwhile (MessageNotFound) is left out, not an error: the
        others are moved."""
        out = []
        for letter_id in letter_ids:
            try:
                moved = self.reading.update(user_id, letter_id, folder=folder)
            except MessageNotFound:
                continue
            out.append((letter_id, moved.uid))
        return out

    def copy(
        self, user: User, original: StoredLetter, raw: bytes, folder: str
    ) -> tuple[int, StoredLetter | None]:
        """Store a copy of a letter (its bytes ``raw``) in ``folder`` with its flags and
        internal date (IMAP COPY); the copy's id and the copy as stored (None when it is gone
        already). A copy alone teaches nothing (the user keeps the letter where it was); a
        client without MOVE copies, then expunges the original: that is a move, and
        :meth:`expunge` teaches it."""
        done = self.deliver(
            raw,
            [user],
            folder=folder,
            flags=self.reading.feedback.copied(original.flags, original.verdict),
            received=original.received,
        )
        return done.ids[0], self.index.letter(user.id, done.ids[0])

    def append(
        self,
        user: User,
        folder: str,
        prepared: Prepared,
        flags: LetterFlag,
        received: float | None,
        files: Mapping[int, Path] | None = None,
    ) -> StoredLetter | None:
        """Store a letter a client gives (IMAP APPEND; prepared; ``files``: its parts a worker
        wrote to files); the letter as stored. It has no verdict but its owner's word (a
        ``$Junk`` / ``$NotJunk`` given, else the folder): one the owner says is spam is kept
        as one pochta called spam (``SAID_SPAM``), so that taking it out of Spam, or taking
        its ``$Junk`` off, is a "not spam" (:func:`pochta.mailbox.feedback.placed_flags`)."""
        flags = placed_flags(folder, flags & ~HIDDEN)
        done = self.deliver_prepared(
            prepared, [user], folder=folder, flags=flags, received=received, files=files
        )
        return self.index.letter(user.id, done.ids[0])

    # -- deletion ----------------------------------------------------------------------------
    def expunge(
        self,
        user_id: int,
        letter_ids: Sequence[int],
        copies: Mapping[int, int] | None = None,
        *,
        wake: Callable[[], None] | None = None,
    ) -> list[int]:
        """Delete letters (IMAP EXPUNGE: journaled; the deletion job finishes them, ``wake``
        wakes it); the ids deleted. ``copies``: letter id -> the id of its copy made by the
        same session's COPY: an original expunged after its copy is a move (a client without
        MOVE), taught by the feedback rule as a move from where the original was to where
        the copy is."""
        copies = copies or {}
        originals = {}
        for i in letter_ids:
            if i in copies:
                letter = self.index.letter(user_id, i)
                if letter is not None:
                    originals[i] = letter
        gone = [i for i in letter_ids if self.index.delete(user_id, i)]
        if gone and wake is not None:
            wake()
        feedback = self.reading.feedback
        for i in gone:
            original = originals.get(i)
            copy = self.index.letter(user_id, copies[i]) if original is not None else None
            if original is None or copy is None:
                continue
            feedback.changed(
                user_id,
                copy.id,
                State(original.folder, original.flags),
                State(copy.folder, copy.flags | (original.flags & LetterFlag.SEEN)),
                copy.verdict,
            )
        return gone

    def delete(self, user_id: int, letter_id: int) -> None:
        self.deletions.delete(user_id, letter_id)

    def process_deletions(self, batch: int = 100) -> int:
        return self.deletions.process(batch)

    def recover(self, grace: float | None = None) -> int:
        return self.deletions.recover(grace)

    def undo_stale(self, grace: float | None = None) -> int:
        return self.deletions.undo_stale(grace)

    def settle(self) -> None:
        self.journal.settle()

    # -- checks ------------------------------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        return self.checks.stats()

    def fsck(
        self,
        progress: Callable[[int], None] | None = None,
        *,
        disks: bool = False,
        manifest: Mapping[str, Sequence[str]] | None = None,
    ) -> FsckReport:
        return self.checks.fsck(progress, disks=disks, manifest=manifest)
