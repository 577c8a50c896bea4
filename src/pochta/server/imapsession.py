"""An IMAP connection's command loop (:class:`Session`): each command read
(:mod:`pochta.server.imapread`), dispatched and answered; IDLE, FETCH and SEARCH are here,
the other command groups are functions over the session's state
(:mod:`pochta.server.imapstate`): :mod:`pochta.server.imaplogin`,
:mod:`pochta.server.imapfolders`, :mod:`pochta.server.imapchanges`. The server that starts a
session for each connection is :class:`pochta.server.imap.ImapServer` (its ``Host``); what
the commands may do, and what they bound, is said in :mod:`pochta.server.imap`. Split out of
it by issue 31.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterator
from typing import cast

from pymap.parsing.command import Command
from pymap.parsing.command import any as any_cmd
from pymap.parsing.command import auth as auth_cmd
from pymap.parsing.command import nonauth as nonauth_cmd
from pymap.parsing.command import select as select_cmd

from pochta.errors import FolderNotFound, Overloaded, PochtaError, TooLarge
from pochta.server import imapchanges, imapfolders, imaplogin, imapproto
from pochta.server.imapahead import AHEAD_SMALL
from pochta.server.imapfetching import FETCH_BATCH, Reads, fetch_plan, joined
from pochta.server.imapproto import Reply, Simple, bad, no
from pochta.server.imapread import Appending, Bye, Refused
from pochta.server.imapstate import Host, SessionState
from pochta.server.imapwire import Closed, LineTooLong, Wire
from pochta.types import FolderEntry

__all__ = ["Session"]

_FETCHES = frozenset({select_cmd.FetchCommand, select_cmd.UidFetchCommand})

log = logging.getLogger("pochta.imap")


class Session(SessionState):
    """One client's connection: its commands read and answered one after another. The
    command groups are functions over its state (:mod:`pochta.server.imapstate`): login
    (:mod:`pochta.server.imaplogin`), folders (:mod:`pochta.server.imapfolders`), changes
    (:mod:`pochta.server.imapchanges`); the loop, FETCH, SEARCH and IDLE are here."""

    def __init__(self, server: Host, wire: Wire, *, tls: bool) -> None:
        super().__init__(server, wire, tls=tls)
        self.reads = Reads(self.store, self.limits.ranges)  # FETCH's and SEARCH's, in a thread

    # -- the command loop -----------------------------------------------------------------------
    async def run(self) -> None:
        self.send(b"* OK [CAPABILITY %s] pochta IMAP ready\r\n" % self.server.capabilities(self))
        try:
            await self._commands()
        finally:
            self.held.release()
            self.ahead.forget()

    async def _commands(self) -> None:
        wire = self.wire
        while not wire.closing:
            # every other connection's turn before this one's next command: a command already
            # buffered is read without waiting, so a client pipelining thousands of them in
            # one write would otherwise keep the event loop until the last (with nothing
            # buffered, the read waits, and that is their turn)
            if wire.pending():
                await asyncio.sleep(0)
            timeout = self.limits.idle_timeout if self.user else self.limits.login_timeout
            try:
                wire.deadline(timeout)  # the whole command within it
                try:
                    command = await self.reader.read(self.user is not None)
                finally:
                    wire.deadline(None)
                if isinstance(command, Refused):
                    self.held.release()
                    self.tagged(command.tag, command.kind, command.text)
                    if command.kind == b"NO":
                        self.error()
                    continue
            except TimeoutError:
                self.send(b"* BYE autologout: idle for too long\r\n")
                return
            except LineTooLong as exc:
                self.send(b"* BYE [TOOBIG] %s\r\n" % str(exc).encode())
                return
            except Bye as exc:
                self.send(b"* BYE %s\r\n" % str(exc).encode())
                return
            try:
                done = await self.execute(command)
            except Bye as exc:
                self.send(b"* BYE %s\r\n" % str(exc).encode())
                return
            finally:
                self.held.release()
                if isinstance(command, Appending):
                    command.letter.discard()
            if wire.blocked:  # else sent at once, or when the next read would wait
                await wire.writable()
            if done:
                return

    async def execute(self, command: Command | Simple | Appending) -> bool:
        """Run one command; True when the connection is to end (LOGOUT)."""
        tag = command.tag
        try:
            return await self._dispatch(command)
        except Reply as reply:
            self.tagged(tag, reply.kind, reply.text)
        except imapproto.TooManyRanges as exc:
            self.tagged(tag, b"BAD", str(exc))
        except TooLarge as exc:
            self.tagged(tag, b"NO", b"[TOOBIG] " + exc.message.encode())
        except Overloaded as exc:
            self.tagged(tag, b"NO", b"[UNAVAILABLE] " + exc.message.encode())
        except FolderNotFound as exc:
            self.tagged(tag, b"NO", b"[NONEXISTENT] " + exc.message.encode())
        except PochtaError as exc:
            log.warning("IMAP %s: %s", type(command).__name__, exc.message)
            self.tagged(tag, b"NO", exc.message)
        except (Bye, Closed, ConnectionError):
            raise
        except Exception:
            log.exception("IMAP command %s failed", type(command).__name__)
            self.tagged(tag, b"NO", b"[SERVERBUG] the command failed; see the server's log")
        return False

    async def _dispatch(self, cmd: Command | Simple | Appending) -> bool:
        tag = cmd.tag
        if type(cmd) in _FETCHES:  # the most frequent first, at the cost of one lookup
            await self.fetch(tag, cast(select_cmd.FetchCommand, cmd))
            return False
        if isinstance(cmd, Appending):
            await imapchanges.append(self, tag, cmd.command, cmd.letter)
            return False
        if isinstance(cmd, Simple):
            if cmd.name == b"NAMESPACE":
                self.need_auth()
                self.send(b'* NAMESPACE (("" "/")) NIL NIL\r\n')
                self.tagged(tag, b"OK", "NAMESPACE completed")
            else:
                self.need_selected()
                self.selected = None
                self.tagged(tag, b"OK", "UNSELECT completed")
            return False
        if isinstance(cmd, select_cmd.FetchCommand):  # the most frequent first
            await self.fetch(tag, cmd)
            return False
        if isinstance(cmd, any_cmd.CapabilityCommand):
            self.send(b"* CAPABILITY %s\r\n" % self.server.capabilities(self))
            self.tagged(tag, b"OK", "CAPABILITY completed")
        elif isinstance(cmd, any_cmd.NoOpCommand):
            await self.refresh()
            self.tagged(tag, b"OK", "NOOP completed")
        elif isinstance(cmd, any_cmd.LogoutCommand):
            self.send(b"* BYE logging out\r\n")
            self.tagged(tag, b"OK", "LOGOUT completed")
            return True
        elif isinstance(cmd, any_cmd.IdCommand):
            self.send(b'* ID ("name" "pochta")\r\n')
            self.tagged(tag, b"OK", "ID completed")
        elif isinstance(cmd, nonauth_cmd.StartTLSCommand):
            await imaplogin.starttls(self, tag)
        elif isinstance(cmd, nonauth_cmd.LoginCommand):
            await imaplogin.login(self, tag, cmd.userid, cmd.password)
        elif isinstance(cmd, nonauth_cmd.AuthenticateCommand):
            await imaplogin.authenticate(self, tag, cmd.mech_name)
        elif isinstance(cmd, select_cmd.IdleCommand):
            await self.idle(tag)
        elif isinstance(cmd, select_cmd.CheckCommand):
            self.need_selected()
            await self.refresh()
            self.tagged(tag, b"OK", "CHECK completed")
        elif isinstance(cmd, select_cmd.CloseCommand):
            selected = self.need_selected()
            if not selected.readonly:
                await imapchanges.expunge(self, None, silent=True)
            self.selected = None
            self.tagged(tag, b"OK", "CLOSE completed")
        elif isinstance(cmd, select_cmd.ExpungeCommand):  # and UID EXPUNGE
            self.need_writable()
            uid_set = getattr(cmd, "uid_set", None)
            await imapchanges.expunge(self, uid_set, silent=False)
            self.tagged(tag, b"OK", "EXPUNGE completed")
        elif isinstance(cmd, select_cmd.StoreCommand):
            await imapchanges.store_flags(self, tag, cmd)
        elif isinstance(cmd, select_cmd.SearchCommand):
            await self.search(tag, cmd)
        elif isinstance(cmd, select_cmd.MoveCommand):
            await imapchanges.copy(self, tag, cmd.sequence_set, cmd.mailbox_obj.value, move=True)
        elif isinstance(cmd, select_cmd.CopyCommand):
            await imapchanges.copy(self, tag, cmd.sequence_set, cmd.mailbox_obj.value, move=False)
        elif isinstance(cmd, auth_cmd.ExamineCommand):
            await imapfolders.select(self, tag, cmd.mailbox_obj.value, readonly=True)
        elif isinstance(cmd, auth_cmd.SelectCommand):
            await imapfolders.select(self, tag, cmd.mailbox_obj.value, readonly=False)
        elif isinstance(cmd, auth_cmd.StatusCommand):
            items = [a.value for a in cmd.status_list]
            await imapfolders.status(self, tag, cmd.mailbox_obj.value, items)
        elif isinstance(cmd, auth_cmd.ListCommand):  # and LSUB: every folder is subscribed
            lsub = isinstance(cmd, auth_cmd.LSubCommand)
            await imapfolders.list_folders(self, tag, cmd.ref_name, cmd.filter, lsub=lsub)
        elif isinstance(cmd, auth_cmd.CreateCommand):
            await imapfolders.create(self, tag, cmd.mailbox_obj.value)
        elif isinstance(cmd, auth_cmd.DeleteCommand | auth_cmd.RenameCommand):
            imapfolders.delete_or_rename(self)
        elif isinstance(cmd, auth_cmd.SubscribeCommand | auth_cmd.UnsubscribeCommand):
            imapfolders.subscribe(self, tag)
        elif isinstance(cmd, auth_cmd.AppendCommand):  # before the login: refused
            await imapchanges.append(self, tag, cmd, None)
        else:
            raise bad(f"{type(cmd).__name__.removesuffix('Command').upper()} is not supported")
        return False

    # -- IDLE ------------------------------------------------------------------------------------
    async def idle(self, tag: bytes) -> None:
        self.need_auth()
        server = self.server
        if server.idling >= self.limits.idle_sessions:
            raise no("[LIMIT] too many idling sessions; poll with NOOP")
        server.idling += 1
        try:
            self.send(b"+ idling\r\n")
            await self.wire.drain()
            deadline = time.monotonic() + self.limits.idle_timeout
            line_task = asyncio.ensure_future(self.wire.readline(self.limits.line_length))
            try:
                while True:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise Bye("IDLE for too long")
                    done, _ = await asyncio.wait(
                        [line_task], timeout=min(self.limits.idle_poll, left)
                    )
                    if done:
                        break
                    await self.refresh(cheap=True)
                    await self.wire.drain()
            finally:
                if not line_task.done():
                    line_task.cancel()
                    with contextlib.suppress(asyncio.CancelledError, Closed):
                        await line_task
            line = line_task.result()
        finally:
            server.idling -= 1
        if line.strip().upper() != b"DONE":
            raise bad("IDLE ends with DONE")
        self.tagged(tag, b"OK", "IDLE terminated")

    # -- FETCH -----------------------------------------------------------------------------------
    async def fetch(self, tag: bytes, cmd: select_cmd.FetchCommand) -> None:
        selected = self.need_selected()
        by_uid = cmd.uid
        positions = imapproto.resolve(cmd.sequence_set, selected.uids, self.limits.ranges)
        plan = fetch_plan(cmd.attributes, by_uid)
        names, reads = plan.names, plan.reads
        sets_seen = plan.marks_seen and not selected.readonly
        assert self.user is not None
        # a few letters, nothing set, no ENVELOPE / BODYSTRUCTURE: from what was read ahead
        light = plan.light and not sets_seen and len(positions) <= AHEAD_SMALL
        ahead, reader = self.ahead, self.reads
        done = 0
        while done < len(positions):
            chunk = positions[done : done + FETCH_BATCH]
            entries: list[FolderEntry]
            pieces: list[bytes | Iterator[bytes]]
            kept = None
            if light:
                entries = [selected.entries[p] for p in chunk]
                kept = ahead.get(selected, entries)
            if kept is not None:  # on the loop: whole letters, no I/O
                pieces = reader.answers(chunk, entries, kept, plan)
            elif reads:  # the letters read and their answers made in a store thread
                more = ahead.plan(selected, chunk, len(selected.entries)) if light else range(0)
                extra = [selected.entries[p].letter_id for p in more]
                entries, pieces, read_ahead = await self.server.run(
                    reader.batch, self.user.id, selected.entries, chunk, plan, sets_seen, extra
                )
                if read_ahead:
                    ahead.keep(selected, read_ahead)
            else:
                entries = [selected.entries[p] for p in chunk]
                pieces = joined(
                    reader.response(p, names, None, e) for p, e in zip(chunk, entries, strict=True)
                )
            for pos, entry in zip(chunk, entries, strict=False):
                selected.entries[pos] = entry
            for piece in pieces:
                if isinstance(piece, bytes):
                    self.send(piece)
                else:
                    await self._stream(piece)
            if self.wire.blocked:
                await self.wire.writable()
            done += len(entries)
        if light:
            ahead.fetched(selected, positions)
        self.tagged(tag, b"OK", b"UID FETCH completed" if by_uid else b"FETCH completed")

    async def _stream(self, chunks: Iterator[bytes]) -> None:
        while True:
            chunk = await self.server.run(next, chunks, None)
            if chunk is None:
                return
            self.send(chunk)
            await self.wire.drain()

    # -- SEARCH ----------------------------------------------------------------------------------
    async def search(self, tag: bytes, cmd: select_cmd.SearchCommand) -> None:
        selected = self.need_selected()
        assert self.user is not None
        user_id = self.user.id
        by_uid = isinstance(cmd, select_cmd.UidSearchCommand)
        keys = cmd.keys
        found = await self.server.run(
            self.reads.search, user_id, selected.entries, selected.uids, keys, by_uid
        )
        self.send(b"* SEARCH%s\r\n" % b"".join(b" %d" % n for n in found))
        self.tagged(tag, b"OK", b"UID SEARCH completed" if by_uid else b"SEARCH completed")
