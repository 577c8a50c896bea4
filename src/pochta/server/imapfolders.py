"""IMAP's folder commands: SELECT and EXAMINE, STATUS, LIST and LSUB, CREATE; DELETE and
RENAME refused, SUBSCRIBE and UNSUBSCRIBE answered (every folder is subscribed). Commands of a
session (:class:`pochta.server.imapstate.SessionState`); the folders are read in a store
thread (:class:`pochta.server.imapstore.ImapStore`), a LIST pattern is matched by RE2.
Split out of ``pochta.server.imap`` by issue 31.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import re2

from pochta.errors import AlreadyExists, InvalidInput
from pochta.server import imapproto
from pochta.server.imapproto import SPAM, bad, folder_name, no, pochta_folder
from pochta.server.imapstate import Selected, SessionState, folder_state
from pochta.types import LetterFlag

MAX_PATTERN = 1000  # characters of a LIST pattern (folder names have at most 200)


async def select(s: SessionState, tag: bytes, name: str, *, readonly: bool) -> None:
    user = s.need_auth()
    s.selected = None
    s.ahead.forget()
    folder = await s.server.run(s.store.folder, user.id, pochta_folder(name))
    if folder is None:
        raise no("[NONEXISTENT] no such folder")
    entries = await s.server.run(s.store.entries, user.id, folder.name)
    s.selected = Selected(folder.name, readonly, folder.uidvalidity, entries)
    s.selected.state = folder_state(folder)
    ALL = imapproto.ALL_FLAGS
    out = [
        b"* FLAGS %s\r\n" % ALL,
        b"* OK [PERMANENTFLAGS %s] flags kept\r\n" % (b"()" if readonly else imapproto.ALL_FLAGS),
        b"* %d EXISTS\r\n" % len(entries),
        b"* 0 RECENT\r\n",
    ]
    unseen = next((i for i, e in enumerate(entries, 1) if LetterFlag.SEEN not in e.flags), 0)
    if unseen:
        out.append(b"* OK [UNSEEN %d] first unseen\r\n" % unseen)
    out.append(b"* OK [UIDVALIDITY %d] UIDs valid\r\n" % folder.uidvalidity)
    out.append(b"* OK [UIDNEXT %d] predicted next UID\r\n" % folder.uidnext)
    s.send(b"".join(out))
    mode = b"READ-ONLY" if readonly else b"READ-WRITE"
    s.tagged(tag, b"OK", b"[%s] %s completed" % (mode, b"EXAMINE" if readonly else b"SELECT"))


async def status(s: SessionState, tag: bytes, name: str, items: Sequence[bytes]) -> None:
    user = s.need_auth()
    folder = await s.server.run(s.store.folder, user.id, pochta_folder(name))
    if folder is None:
        raise no("[NONEXISTENT] no such folder")
    values = {
        b"MESSAGES": folder.total,
        b"RECENT": 0,
        b"UIDNEXT": folder.uidnext,
        b"UIDVALIDITY": folder.uidvalidity,
        b"UNSEEN": folder.unseen,
    }
    out = []
    for item in items:
        if item.upper() not in values:
            raise bad(f"unknown STATUS item {item.decode('ascii', 'replace')}")
        out.append(b"%s %d" % (item.upper(), values[item.upper()]))
    s.send(b"* STATUS %s (%s)\r\n" % (folder_name(folder.name), b" ".join(out)))
    s.tagged(tag, b"OK", "STATUS completed")


async def list_folders(
    s: SessionState, tag: bytes, reference: str, pattern: str, *, lsub: bool
) -> None:
    user = s.need_auth()
    what = b"LSUB" if lsub else b"LIST"
    if not pattern:
        if not lsub:
            s.send(b'* LIST (\\Noselect) "/" ""\r\n')
        s.tagged(tag, b"OK", what + b" completed")
        return
    matcher = _pattern(reference + pattern)
    for folder in await s.server.run(s.store.folders, user.id):
        shown = "INBOX" if folder.name == imapproto.INBOX else folder.name
        if matcher.fullmatch(shown):
            attrs = [b"\\HasNoChildren"]
            if folder.name == SPAM and not lsub:
                attrs.append(b"\\Junk")
            s.send(b'* %s (%s) "/" %s\r\n' % (what, b" ".join(attrs), folder_name(folder.name)))
    s.tagged(tag, b"OK", what + b" completed")


async def create(s: SessionState, tag: bytes, name: str) -> None:
    user = s.need_auth()
    folder = pochta_folder(name.rstrip("/"))
    try:
        await s.server.run(s.store.add_folder, user.id, folder)
    except AlreadyExists:
        raise no("[ALREADYEXISTS] the folder exists") from None
    except InvalidInput as exc:
        raise no(f"[CANNOT] {exc.message}") from None
    s.tagged(tag, b"OK", "CREATE completed")


def delete_or_rename(s: SessionState) -> None:
    s.need_auth()
    raise no("[CANNOT] pochta does not delete or rename folders")


def subscribe(s: SessionState, tag: bytes) -> None:
    """SUBSCRIBE and UNSUBSCRIBE: every folder is subscribed."""
    s.need_auth()
    s.tagged(tag, b"OK", "every folder is subscribed")


def _pattern(pattern: str) -> Any:
    """A LIST pattern as an RE2 pattern (linear time whatever the client sends: ``*a*a*a*b``
    would make a backtracking matcher run for ages): ``*`` matches anything, ``%`` anything
    but the delimiter; INBOX in any case. Patterns longer than ``MAX_PATTERN``: BAD."""
    if len(pattern) > MAX_PATTERN:
        raise bad(f"a LIST pattern longer than {MAX_PATTERN} characters")
    out = []
    for i, ch in enumerate(pattern):
        if ch == "*":
            out.append(".*")
        elif ch == "%":
            out.append("[^/]*")
        else:
            out.append(re.escape(ch))
        if i == 4 and pattern[:5].upper() == "INBOX":
            out = ["INBOX"]
    options = re2.Options()
    options.never_capture = True
    return re2.compile("".join(out), options)
