"""An IMAP session's state and the few verbs every group of its commands uses.

:class:`SessionState` is what one connection is at a moment: its wire, whether TLS is on, the
user logged in, the folder selected (:class:`Selected`), the copies whose EXPUNGE is awaited,
the errors counted; and what every command does with them: answer (``send``, ``tagged``),
count an error (then BYE), check the state a command needs (``need_auth``, ...), tell the
client what changed in its folder (``refresh``). The command groups are functions over it,
each in a module of its own: login (:mod:`pochta.server.imaplogin`), folders
(:mod:`pochta.server.imapfolders`), changes (:mod:`pochta.server.imapchanges`); the command
loop, FETCH, SEARCH and IDLE are :class:`pochta.server.imapsession.Session`'s, which is a
``SessionState``. What a session asks of its server is :class:`Host`
(:class:`pochta.server.imap.ImapServer` is one). Split out of ``pochta.server.imap`` by issue
31 (its session class was the largest).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, TypeVar, TypeVarTuple

from pochta.budget import Budget, Share
from pochta.errors import FolderNotFound
from pochta.mailbox.intake import RawLetter, Spilled
from pochta.mailbox.prepare import Prepared
from pochta.netaddr import Network, within
from pochta.server import imapproto
from pochta.server.imapahead import ReadAhead
from pochta.server.imapproto import bad, no
from pochta.server.imapread import Bye, CommandReader, ImapLimits
from pochta.server.imapstore import ImapStore
from pochta.server.imapwire import Wire
from pochta.server.passwords import PasswordSlots
from pochta.types import Folder, FolderEntry, User

TlsContext = Callable[[], ssl.SSLContext]
"""Gives the current server-side TLS context (the ``[tls]`` settings' provider reloads it)."""

COPIES_KEPT = 10_000
"""Letters copied in a session whose EXPUNGE is awaited (a client without MOVE copies, then
expunges: the feedback rule then sees a move); past it the oldest are forgotten."""

T = TypeVar("T")
Ts = TypeVarTuple("Ts")


@dataclass
class Selected:
    name: str
    readonly: bool
    uidvalidity: int
    entries: list[FolderEntry]
    uids: list[int] = field(default_factory=list)
    state: tuple[int, int, int] = (0, 0, 0)  # the folder's (total, unseen, UIDNEXT) last seen

    def __post_init__(self) -> None:
        self.uids = [e.uid for e in self.entries]

    def replace(self, entries: list[FolderEntry]) -> None:
        self.entries = entries
        self.uids = [e.uid for e in entries]

    def drop(self, gone: set[int]) -> bytes:
        """Take the letters of ids ``gone`` out of the list; the untagged EXPUNGE responses
        that say so, highest position first (each shifts the positions after it)."""
        out = [
            b"* %d EXPUNGE\r\n" % pos
            for pos in range(len(self.entries), 0, -1)
            if self.entries[pos - 1].letter_id in gone
        ]
        self.replace([e for e in self.entries if e.letter_id not in gone])
        return b"".join(out)


def folder_state(folder: Folder) -> tuple[int, int, int]:
    return folder.total, folder.unseen, folder.uidnext


class Host(Protocol):
    """What a session asks of its server (:class:`pochta.server.imap.ImapServer`)."""

    store: ImapStore
    limits: ImapLimits
    budget: Budget
    spool_dir: Path
    cleartext: tuple[Network, ...]
    tls: TlsContext | None
    require_tls: bool
    passwords: PasswordSlots
    big_letters: asyncio.Semaphore
    idling: int

    async def run(self, fn: Callable[[*Ts], T], *args: *Ts) -> T: ...

    async def prepare(
        self, letter: RawLetter, parts: Path, held: Share | None
    ) -> tuple[Prepared, Spilled]: ...

    def capabilities(self, session: SessionState) -> bytes: ...


class SessionState:
    def __init__(self, server: Host, wire: Wire, *, tls: bool) -> None:
        self.server = server
        self.store = server.store
        self.limits = server.limits
        self.wire = wire
        self.tls = tls
        self.user: User | None = None
        self.selected: Selected | None = None
        self.copies: dict[int, int] = {}  # letter id -> its copy's, by COPY (COPIES_KEPT)
        self.errors = 0
        self.reader = CommandReader(wire, server.limits, server.budget, server.spool_dir)
        self.held = self.reader.held  # the literals of the command in hand, in memory
        self.cleartext = within(wire.peer, server.cleartext)  # may log in without TLS
        # letters read ahead for a client that fetches one after another (imapahead)
        self.ahead = ReadAhead(server.budget, asyncio.get_running_loop().call_later)

    def may_login(self) -> bool:
        """Whether LOGIN / AUTHENTICATE may be used now: over TLS, or from a network allowed
        clear text when TLS is not required of everyone."""
        return self.tls or (self.cleartext and not self.server.require_tls)

    # -- answers ---------------------------------------------------------------------------------
    def send(self, data: bytes | memoryview) -> None:
        self.wire.write(data)

    def tagged(self, tag: bytes, kind: bytes, text: str | bytes) -> None:
        body = text.encode("utf-8", "replace") if isinstance(text, str) else text
        self.send(b"%s %s %s\r\n" % (tag, kind, body.replace(b"\r", b" ").replace(b"\n", b" ")))
        if kind == b"BAD":
            self.error()

    def error(self) -> None:
        self.errors += 1
        if self.errors >= self.limits.error_limit:
            raise Bye("too many errors")

    # -- states ----------------------------------------------------------------------------------
    def need_auth(self) -> User:
        if self.user is None:
            raise bad("log in first")
        return self.user

    def need_selected(self) -> Selected:
        self.need_auth()
        if self.selected is None:
            raise bad("select a folder first")
        return self.selected

    def need_writable(self) -> Selected:
        selected = self.need_selected()
        if selected.readonly:
            raise no("[READ-ONLY] the folder was opened with EXAMINE")
        return selected

    def copied(self, letter_id: int, copy_id: int) -> None:
        """Remember a letter's copy made by COPY (its EXPUNGE then teaches a move), the
        newest :data:`COPIES_KEPT` at most."""
        self.copies.pop(letter_id, None)
        self.copies[letter_id] = copy_id
        if len(self.copies) > COPIES_KEPT:
            del self.copies[next(iter(self.copies))]

    # -- updates ---------------------------------------------------------------------------------
    async def refresh(self, *, cheap: bool = False) -> None:
        """Tell the client what changed in the selected folder since it last heard. ``cheap``
        (IDLE's polls): list the folder again only when its counts or UIDNEXT moved (a flag
        changed elsewhere other than \\Seen is then heard at the next NOOP)."""
        selected = self.selected
        if selected is None or self.user is None:
            return
        user_id = self.user.id
        if cheap:
            folder = await self.server.run(self.store.folder, user_id, selected.name)
            if folder is None:
                raise Bye("the selected folder is gone")
            if folder_state(folder) == selected.state:
                return
        try:
            entries = await self.server.run(self.store.entries, user_id, selected.name)
            folder = await self.server.run(self.store.folder, user_id, selected.name)
        except FolderNotFound:
            raise Bye("the selected folder is gone") from None
        if folder is None:
            raise Bye("the selected folder is gone")
        if self.selected is not selected:  # unselected meanwhile
            return
        selected.state = folder_state(folder)
        updates = imapproto.changes(selected.entries, entries)
        selected.replace(entries)
        if updates:
            self.send(b"".join(updates))
