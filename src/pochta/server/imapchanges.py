"""IMAP's changes to letters: STORE, EXPUNGE (and CLOSE's), COPY, MOVE and APPEND, commands of
a session (:class:`pochta.server.imapstate.SessionState`). Each is made through the mailbox's
door in a store thread (:class:`pochta.server.imapstore.ImapStore`), with the feedback the
HTTP API's changes give; the session keeps what a later command needs: the selected folder's
list, and the copies whose EXPUNGE is a move (``SessionState.copied``).

APPEND's letter is prepared where it lies (the server's intake, see
:mod:`pochta.server.imap`); one in a file waits for one of the server's ``big_appends``
turns (:func:`_turn`). Split out of ``pochta.server.imap`` by issue 31.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

from pymap.flags import FlagOp
from pymap.parsing.command import auth as auth_cmd
from pymap.parsing.command import select as select_cmd

from pochta.mailbox.intake import RawLetter
from pochta.server import imapproto
from pochta.server.imapproto import bad, no, pochta_folder
from pochta.server.imapstate import SessionState
from pochta.server.imapwire import Closed
from pochta.server.smtpdata import Spool
from pochta.types import LetterFlag

_FLAG_OPS = {FlagOp.REPLACE: "replace", FlagOp.ADD: "add", FlagOp.DELETE: "delete"}
_EVERY = LetterFlag.SEEN | LetterFlag.FLAGGED | LetterFlag.ANSWERED | LetterFlag.DELETED
_EVERY |= LetterFlag.DRAFT | LetterFlag.JUNK | LetterFlag.NOT_JUNK  # what a client may set


async def store_flags(s: SessionState, tag: bytes, cmd: select_cmd.StoreCommand) -> None:
    selected = s.need_writable()
    assert s.user is not None
    by_uid = isinstance(cmd, select_cmd.UidStoreCommand)
    positions = imapproto.resolve(cmd.sequence_set, selected.uids, s.limits.ranges)
    given, _ = imapproto.letter_flags([f.value for f in cmd.flag_set])
    mode = _FLAG_OPS.get(cmd.mode, "replace")
    add = given if mode in ("add", "replace") else LetterFlag.NONE
    remove = given if mode == "delete" else LetterFlag.NONE
    if mode == "replace":
        remove = ~given & _EVERY
    ids = [selected.entries[p].letter_id for p in positions]
    changed = await s.server.run(s.store.set_flags, s.user.id, ids, add, remove)
    after = {e.letter_id: e for _, e in changed}
    out = []
    for pos in positions:
        entry = after.get(selected.entries[pos].letter_id)
        if entry is None:
            continue
        selected.entries[pos] = entry
        if not cmd.silent:
            uid = b" UID %d" % entry.uid if by_uid else b""
            out.append(
                b"* %d FETCH (FLAGS %s%s)\r\n" % (pos + 1, imapproto.flags(entry.flags), uid)
            )
    s.send(b"".join(out))
    s.tagged(tag, b"OK", b"UID STORE completed" if by_uid else b"STORE completed")


async def expunge(s: SessionState, uid_set: object, *, silent: bool) -> None:
    """Delete the selected folder's letters marked \\Deleted (of ``uid_set`` only, when
    given: UID EXPUNGE); ``silent`` (CLOSE): nothing said."""
    selected = s.need_writable()
    assert s.user is not None
    fresh = await s.server.run(s.store.entries, s.user.id, selected.name)
    updates = imapproto.changes(selected.entries, fresh)
    selected.replace(fresh)
    if updates and not silent:
        s.send(b"".join(updates))
    allowed: set[int] | None = None
    if uid_set is not None:
        allowed = {
            selected.uids[p]
            for p in imapproto.resolve(uid_set, selected.uids, s.limits.ranges)  # type: ignore[arg-type]
        }
    doomed = [
        e.letter_id
        for e in selected.entries
        if LetterFlag.DELETED in e.flags and (allowed is None or e.uid in allowed)
    ]
    if not doomed:
        return
    copies = {i: s.copies.pop(i) for i in doomed if i in s.copies}
    gone = set(await s.server.run(s.store.expunge, s.user.id, doomed, copies))
    out = selected.drop(gone)
    if not silent:
        s.send(out)


async def copy(s: SessionState, tag: bytes, seqset: object, target: str, *, move: bool) -> None:
    selected = s.need_writable() if move else s.need_selected()
    user = s.need_auth()
    what = b"MOVE" if move else b"COPY"
    name = pochta_folder(target)
    folder = await s.server.run(s.store.folder, user.id, name)
    if folder is None:
        raise no("[TRYCREATE] no such folder")
    if move and name == selected.name:
        raise no("[CANNOT] the letters are in that folder already")
    positions = imapproto.resolve(seqset, selected.uids, s.limits.ranges)  # type: ignore[arg-type]
    ids = [selected.entries[p].letter_id for p in positions]
    if move:
        done = await s.server.run(s.store.move, user.id, ids, name)
    else:
        copied = await s.server.run(s.store.copy, user.id, ids, name)
        for letter_id, _, copy_id in copied:  # expunged later: a move (without MOVE)
            s.copied(letter_id, copy_id)
        done = [(letter_id, uid) for letter_id, uid, _ in copied]
    uid_of = {e.letter_id: e.uid for e in selected.entries}
    pairs = sorted((uid_of[i], new) for i, new in done if i in uid_of)
    code = b""
    if pairs:
        code = b"[COPYUID %d %s %s] " % (
            folder.uidvalidity,
            imapproto.uid_set([a for a, _ in pairs]),
            b",".join(b"%d" % b for _, b in pairs),
        )
    if move:
        if code:
            s.send(b"* OK " + code + b"moved\r\n")
        s.send(selected.drop({i for i, _ in done}))
        s.tagged(tag, b"OK", what + b" completed")
    else:
        s.tagged(tag, b"OK", code + what + b" completed")


async def append(
    s: SessionState, tag: bytes, cmd: auth_cmd.AppendCommand, spooled: Spool | None
) -> None:
    """Store the letter: ``spooled`` (read apart from the command, in memory or in a
    file: prepared from where it lies), else the command's own literal. A letter in
    memory is its spool's bytes (handed over, not copied), counted in the budget by the
    spool's share until the command ends; one in a file waits for its turn first."""
    user = s.need_auth()
    if cmd.error is not None or len(cmd.messages) != 1:
        raise bad("APPEND takes one letter")
    name = pochta_folder(cmd.mailbox_obj.value)
    folder = await s.server.run(s.store.folder, user.id, name)
    if folder is None:
        raise no("[TRYCREATE] no such folder")
    message = cmd.messages[0]
    given, _ = imapproto.letter_flags([f.value for f in message.flag_set])
    when = message.when.timestamp() if message.when is not None else None
    letter: RawLetter = spooled.finish() if spooled is not None else bytes(message.literal)
    size = spooled.size if spooled is not None else len(message.literal)
    if size == 0:
        raise bad("an empty letter")
    held = spooled.held if spooled is not None else None
    # the worker writes the letter's big parts into a directory of their own
    parts = s.server.spool_dir / f"{secrets.token_hex(8)}.parts"
    try:
        async with _turn(s, isinstance(letter, Path)):
            prepared, files = await s.server.prepare(letter, parts, held)
            uid = await s.server.run(s.store.append, user, name, prepared, given, when, files)
            del prepared
    finally:
        shutil.rmtree(parts, ignore_errors=True)
    if s.selected is not None and s.selected.name == name:
        await s.refresh()
    s.tagged(tag, b"OK", b"[APPENDUID %d %d] APPEND completed" % (folder.uidvalidity, uid))


@contextlib.asynccontextmanager
async def _turn(s: SessionState, big: bool) -> AsyncIterator[None]:
    """For a letter in a file (``big``): one of the server's ``big_appends`` turns, held
    while the block runs. It is waited for at most ``append_wait`` seconds (then
    NO [UNAVAILABLE]), and only while the client is there (else Closed)."""
    if not big:
        yield
        return
    turns = s.server.big_letters
    waiting = asyncio.ensure_future(turns.acquire())
    gone = asyncio.ensure_future(s.wire.gone())
    try:
        await asyncio.wait(
            (waiting, gone),
            timeout=s.limits.append_wait,
            return_when=asyncio.FIRST_COMPLETED,
        )
    except BaseException:  # cancelled itself: a turn given meanwhile is handed on
        gone.cancel()
        if waiting.done() and not waiting.cancelled():
            turns.release()
        waiting.cancel()
        raise
    gone.cancel()
    if not waiting.done():
        waiting.cancel()  # it ends cancelled: a turn given at this moment is handed on
        if s.wire.closing:
            raise Closed("the client went away while its letter waited its turn")
        raise no("[UNAVAILABLE] too many big letters are being stored now; try again later")
    try:
        if s.wire.closing:
            raise Closed("the client went away while its letter waited its turn")
        yield
    finally:
        turns.release()
