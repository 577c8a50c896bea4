"""Reading one IMAP command whole, with the limits on what a client sends (:class:`ImapLimits`).

A command is read line by line; each literal is refused or read as its line announces it:

- before the login, a whole command (its lines and literals together) is at most
  ``login_command`` bytes, and the CRLF that ends it: a literal that would pass it is
  refused before a byte of it is read, and the connection closed (``* BYE [TOOBIG]``; no
  ``+`` for a synchronizing literal, and a LITERAL+ one is on its way anyway);
- after it, a command other than APPEND is at most ``line_length`` bytes, literals included
  (NO before the ``+``, BYE for LITERAL+); APPEND's letter at most ``literal_size``
  (APPENDLIMIT), and it is not kept in the command: it goes to a
  :class:`~pochta.server.smtpdata.Spool` (memory up to ``spool_threshold``, then a file) as it
  comes, and the command holds a one-byte stand-in;
- at most ``literals`` literals per command;
- the literals kept in memory are taken from the server's budget of bytes in flight
  (:mod:`pochta.budget`) into the reader's ``held`` share, given back once the command
  is done; when the budget is spent, such a literal is refused (``NO [UNAVAILABLE]``; BYE for
  LITERAL+ and before the login), while APPEND's letter goes to its file from the first byte.

The command comes out with its literals inline as LITERAL+ (``{n+}``), ready for
:func:`pochta.server.imapproto.parse`.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path

from pymap.parsing.command import Command
from pymap.parsing.command import auth as auth_cmd

from pochta.budget import Budget
from pochta.server import imapproto
from pochta.server.imapproto import Simple, Unparsed
from pochta.server.imapwire import LineTooLong, Wire
from pochta.server.smtpdata import Spool

log = logging.getLogger("pochta.imap")

SPOOL_READ = 1 << 20  # bytes of an APPEND's letter taken from the connection at once
_APPEND = re.compile(rb"[^ \r\n]{1,64} APPEND ", re.I)
_APPEND_TO_LITERAL = re.compile(rb"[^ \r\n]{1,64} APPEND \{\d{1,19}\+?\}\r?\n\Z", re.I)
"""An APPEND whose first literal is its folder's name, not its letter."""
CRLF = 2  # the line that ends a command may always hold this much more


@dataclass(frozen=True, slots=True)
class ImapLimits:
    line_length: int = 65536  # a command line; after the login, a whole command but APPEND's letter
    literal_size: int = 50 << 20  # APPEND's letter (APPENDLIMIT)
    login_command: int = 4096  # a whole command before the login, and AUTHENTICATE's response
    spool_threshold: int = 1 << 20  # APPEND's letter in memory up to this, then in a file
    big_appends: int = 1  # APPEND letters in files prepared and stored at once
    append_wait: float = 60.0  # seconds such a letter waits for its turn; then NO
    store_threads: int = 8  # threads that run the store's calls
    literals: int = 16  # per command
    ranges: int = 10_000  # elements of one sequence set
    connections: int = 1000
    connections_per_ip: int = 50
    idle_sessions: int = 500
    error_limit: int = 10
    login_timeout: float = 60.0  # silence before a login
    idle_timeout: float = 1800.0  # silence after it (and the longest IDLE)
    idle_poll: float = 2.0


class Bye(Exception):
    """Ends the connection with an untagged BYE."""


@dataclass(frozen=True, slots=True)
class Appending:
    """An APPEND command read whole, its letter apart in ``letter`` (spooled: the command
    holds a one-byte stand-in instead)."""

    tag: bytes
    command: auth_cmd.AppendCommand
    letter: Spool


@dataclass(frozen=True, slots=True)
class Refused:
    """A command refused as it was read: answered with a tagged ``kind`` (NO or BAD)."""

    tag: bytes
    kind: bytes
    text: str


class CommandReader:
    """Reads one connection's commands (see the module's docstring). ``budget``: the server's
    bytes in flight; ``spool_dir``: where APPEND letters past ``spool_threshold`` go."""

    def __init__(self, wire: Wire, limits: ImapLimits, budget: Budget, spool_dir: Path) -> None:
        self.wire = wire
        self.limits = limits
        self.budget = budget
        self.spool_dir = spool_dir
        self.held = budget.share()  # the literals of the command in hand, in memory

    async def read(self, authed: bool) -> Command | Simple | Appending | Refused:
        """One whole command, or why it was refused (it was not read on: the connection goes
        on with the next command). Raises LineTooLong and Bye when the connection is to end.
        Literals kept in memory are in ``self.held``, which the caller releases once the
        command is done."""
        limits = self.limits
        # what the command may hold, lines and literals together (an APPEND's letter apart)
        bound = limits.line_length if authed else min(limits.login_command, limits.line_length)
        first = line = await self.wire.readline(bound)
        parts = [line]
        held = len(line)
        count = 0
        appending = authed and _APPEND.match(first) is not None
        letter: Spool | None = None
        try:
            while m := imapproto.LITERAL.search(line):
                size, plus = int(m.group(1)), bool(m.group(2))
                count += 1
                is_letter = appending and not (count == 1 and _APPEND_TO_LITERAL.match(first))
                why = self._refusal(size, count, held, bound, authed, is_letter, letter)
                if why is None and not is_letter and not self.held.take(size):
                    why = "[UNAVAILABLE] the server holds all it may in memory now; try again"
                if why is not None:
                    if plus or not authed:  # a LITERAL+ one comes anyway: the connection ends
                        self.wire.refuse_rest()
                        raise Bye(why)
                    return Refused(imapproto.tag_of(first), b"NO", why)
                if not plus:
                    self.wire.write(b"+ go ahead\r\n")
                    await self.wire.drain()
                if is_letter:
                    letter = Spool(self.spool_dir, limits.spool_threshold, self.budget)
                    await self._receive(letter, size)
                    parts[-1] = line[: m.start()] + b"{1+}\r\n"
                    parts.append(b"x")  # the letter's stand-in: pymap never holds the letter
                else:
                    parts[-1] = line[: m.start()] + b"{%d+}\r\n" % size
                    parts.append(await self.wire.readexactly(size))
                    held += size
                try:  # a literal may fill the command: its closing CRLF is still read
                    line = await self.wire.readline(max(bound - held, CRLF))
                except LineTooLong:
                    raise LineTooLong(f"a command longer than {bound} bytes") from None
                parts.append(line)
                held += len(line)
            try:
                command = imapproto.parse(b"".join(parts))
            except Unparsed as exc:
                return Refused(exc.tag, b"BAD", exc.reason)
            if letter is None:
                return command
            if not isinstance(command, auth_cmd.AppendCommand):  # not reached: APPEND it was
                return Refused(command.tag, b"BAD", "cannot read the command")
            appended, letter = Appending(command.tag, command, letter), None
            return appended
        finally:
            if letter is not None:  # not handed on: the command was refused or cut off
                letter.discard()

    def _refusal(
        self,
        size: int,
        count: int,
        held: int,
        bound: int,
        authed: bool,
        is_letter: bool,
        letter: Spool | None,
    ) -> str | None:
        """Why a literal of ``size`` bytes, the ``count``-th of a command that holds ``held``
        bytes of at most ``bound``, is refused before it is read; None when it is not."""
        limits = self.limits
        if not authed and held + size > bound:
            return f"[TOOBIG] before the login a command takes at most {bound} bytes"
        if count > limits.literals:
            return f"[TOOBIG] more than {limits.literals} literals in one command"
        if is_letter:
            if letter is not None:
                return "[CANNOT] APPEND takes one letter"
            if size > limits.literal_size:
                return (
                    f"[TOOBIG] a letter of {size} bytes is over the limit of"
                    f" {limits.literal_size} (APPENDLIMIT)"
                )
            return None
        if held + size > bound:
            return f"[TOOBIG] a command takes at most {bound} bytes, its literals included"
        return None

    async def _receive(self, letter: Spool, size: int) -> None:
        """``size`` bytes of an APPEND's letter from the connection into its spool, as they
        come (the wire never holds more than it reads ahead, whatever the size)."""
        left = size
        while left:
            chunk = await self.wire.read_some(min(left, SPOOL_READ))
            try:
                letter.write(chunk)
            except OSError as exc:  # the disk is full or gone: the literal cannot be skipped
                log.warning("IMAP APPEND from %s not spooled: %s", self.wire.peer, exc)
                self.wire.refuse_rest()
                raise Bye("[UNAVAILABLE] cannot keep the letter now; try again later") from None
            left -= len(chunk)
