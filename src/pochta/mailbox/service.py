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

``Mailbox`` keeps the methods the HTTP routers, the SMTP handler and the CLI call; a caller
that needs one room only may use it directly (``mailbox.deletions``, ...).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pochta.antispam.shingles.shingler import Shingler
from pochta.antispam.verdict import Scanner
from pochta.blobs.store import BlobStore
from pochta.errors import UserNotFound
from pochta.guard.lock import Locks
from pochta.guard.logins import Admission, LoginGuard
from pochta.mailbox.accounts import Entry, Users
from pochta.mailbox.checks import Checks, FsckReport
from pochta.mailbox.deletion import Deletions
from pochta.mailbox.delivery import Delivered, Delivery
from pochta.mailbox.journal import Journal
from pochta.mailbox.lists import SenderListService
from pochta.mailbox.personal import Personal
from pochta.mailbox.prepare import Prepared
from pochta.mailbox.reading import Reading
from pochta.mime.letter import Letter
from pochta.types import (
    Activity,
    Clock,
    Envelope,
    Folder,
    LetterFlag,
    MailIndex,
    StoredLetter,
    User,
)

__all__ = ["Delivered", "FsckReport", "Mailbox", "shown"]


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
            index, session_ttl=session_ttl, logins=logins, activity=activity, clock=clock
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
        as any deletion does (their attachments' counts are decremented by the worker), the
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

    def user(self, email: str) -> User | None:
        return self.users.user(email)

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
    ) -> Delivered:
        """A letter prepared in a worker (see ``mailbox.intake``): received over SMTP/LMTP,
        or given by IMAP APPEND (with its ``folder``, ``flags`` and ``received``, and the
        ``files`` its big parts were written to)."""
        return self.delivery.deliver_prepared(
            prepared, recipients, folder=folder, flags=flags, received=received, files=files
        )

    @property
    def scores(self) -> bool:
        """Letters received over SMTP/LMTP get a verdict (antispam is enabled)."""
        return self.delivery.scanner is not None

    @property
    def counts_shingles(self) -> bool:
        return self.delivery.shingler is not None

    # -- reading -----------------------------------------------------------------------------
    def folders(self, user_id: int) -> list[Folder]:
        return self.reading.folders(user_id)

    def add_folder(self, user_id: int, name: str) -> Folder:
        return self.reading.add_folder(user_id, name)

    def letters(
        self, user_id: int, folder: str = "Inbox", limit: int = 50, cursor: int | None = None
    ) -> list[StoredLetter]:
        return self.reading.letters(user_id, folder, limit, cursor)

    def letter(self, user_id: int, letter_id: int) -> StoredLetter:
        return self.reading.letter(user_id, letter_id)

    def raw(self, user_id: int, letter_id: int) -> bytes:
        return self.reading.raw(user_id, letter_id)

    def message(self, user_id: int, letter_id: int) -> tuple[StoredLetter, Letter]:
        return self.reading.message(user_id, letter_id)

    def attachment(self, user_id: int, letter_id: int, n: int) -> tuple[bytes, str, str | None]:
        return self.reading.attachment(user_id, letter_id, n)

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

    # -- deletion ----------------------------------------------------------------------------
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
