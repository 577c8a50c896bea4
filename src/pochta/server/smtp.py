"""SMTP and LMTP listeners (aiosmtpd): the edge only translates.

RCPT: an unknown local recipient gets 550 at once; past ``smtp.recipient_limit`` recipients of
one letter, 452 4.5.3 (the client sends the rest in another transaction, as with Postfix's
smtpd_recipient_limit). DATA: the letter is read by pochta, not gathered by aiosmtpd
(:mod:`pochta.server.smtpdata`: only CRLF.CRLF ends it, so no smuggling variant splits it in
two): up to ``smtp.spool_threshold`` bytes in memory, beyond in a file under
``<data_dir>/spool``, never whole in the server; the bytes in memory are taken from the
server's ``memory_budget`` (:mod:`pochta.budget`), and once it is spent letters go to
their file from the first byte. Past ``max_message_size`` the letter is
dropped as it comes and answered 552 once it ends; a line longer than ``line_length_limit``,
500. The letter (with a Received header put in front) is then parsed, analyzed and split in
a worker process (``mailbox.intake``, which reads the spooled file itself), and stored by
``Mailbox.deliver_prepared`` in a delivery thread, to which the worker's answer goes straight
from the pool's thread (``Intake.prepare_then``), the recipients looked up again there (one
deleted since its RCPT is left out); 250 comes only after the delivery is durable. A
letter no worker could prepare in time is read whole into the server to be stored unscored
(``antispam.on_timeout``): its bytes are taken from the budget first, into the share of the
letter's spool, until it is stored. A storage failure, workers too busy to take the letter,
or a budget that cannot hold such a letter, is temporary (451: the client keeps the letter
and retries); so is a recipient whose mailbox cannot be looked up because the
index (its database) is unreachable, at RCPT or at the end of DATA: never aiosmtpd's 500 for
an exception, which a sender would take as final. A letter pochta cannot accept is refused for
good (554). LMTP answers once per accepted recipient.

With ``smtp.answer = "queued"`` (SMTP only) the end of DATA writes the letter, its trace header
and its envelope to the incoming queue (:mod:`pochta.mailbox.queuedb`) and answers ``250 ...
queued as <id>`` once they are durable; the queue's runner (:mod:`pochta.mailbox.queuerunner`)
then calls :meth:`DeliveryHandler.attempt`, which takes the path above (the same
``_prepared``) and tells its end as the queue's outcome instead of a reply. MAIL FROM gets 452
4.3.1 and the end of DATA 451 4.3.0 while the queue is at its limits.

Before the greeting, the connection limits (:mod:`pochta.server.connections`): a client over
one gets ``421 4.7.0 <hostname> Error: too many connections from <address>`` and is
disconnected. MAIL FROM gets ``452 4.3.1 Insufficient system storage`` while the spool's file
system is below its reserve (:mod:`pochta.guard.reserve`, Postfix's rule).

Per session: after ``smtp.error_limit`` error replies without a letter delivered, 421 and the
connection is closed (Postfix's smtpd_hard_error_limit); ``smtp.command_timeout`` seconds of
silence between commands, or for a whole DATA transfer and its delivery, close it too
(aiosmtpd's ``timeout``). A client that sends anything after DATA before the 354 reply
(RFC 2920 forbids it; it is how a letter's text gets read as commands) gets 554 and is
disconnected.

MAIL FROM and RCPT TO with a plain path (``<local@domain>`` of dot-atoms, or ``<>``, and
parameters) are answered by pochta's own ``smtp_MAIL`` / ``smtp_RCPT``, with aiosmtpd's replies
and checks in aiosmtpd's order; any other argument goes to aiosmtpd's own command, which parses
it (its parse defines a class on every call: ~0.14 ms, twice a letter).

Only public parts of aiosmtpd are used: the documented ``smtp_DATA``, ``smtp_MAIL`` and
``smtp_RCPT`` override points, ``push``, ``envelope``, ``session``, ``transport``,
``event_handler``, ``data_size_limit``, ``local_part_limit``, ``enable_SMTPUTF8``,
``check_helo_needed``, ``check_auth_needed``, and the asyncio protocol's ``data_received``,
through which the DATA bytes are routed to the reader.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import secrets
import shutil
import socket
import ssl
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, AnyStr, cast

import aiosmtpd.smtp
from aiosmtpd.lmtp import LMTP
from aiosmtpd.smtp import SMTP, Session, syntax

from pochta import logs, metrics
from pochta.budget import Budget, Share
from pochta.config import ImapSettings, SmtpSettings
from pochta.errors import (
    ConfigError,
    CpuPoolProcessDied,
    CpuPoolTimeout,
    InvalidInput,
    Overloaded,
    PochtaError,
    StorageError,
    TooLarge,
)
from pochta.executors import Executors, run_in
from pochta.guard.anvil import Admission
from pochta.guard.reserve import DiskReserve, free_bytes, reserve_for
from pochta.mailbox.intake import Intake, RawLetter, size_of
from pochta.mailbox.prepare import Prepared
from pochta.mailbox.queue import Entry, Outcome, new_id
from pochta.mailbox.queuedb import Due
from pochta.mailbox.queuerunner import QueueRunner
from pochta.mailbox.service import Delivered, Mailbox
from pochta.mailbox.trace import received
from pochta.server.connections import Doorman, smtp_refusal
from pochta.server.smtpdata import CommandWatch, DataReader, Spool
from pochta.types import Envelope

log = logs.logger("pochta.smtp")  # a line per letter: no caller looked up
chatter = logging.getLogger("mail.log")  # aiosmtpd's logger: its per-command lines

_ATEXT = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]"
PLAIN_PATH = re.compile(rf"<(?:({_ATEXT}+(?:\.{_ATEXT}+)*@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*))?>")
"""A path as nearly every client sends it: ``<local@domain>`` with a dot-atom of ASCII on
each side (the domain of letters, digits and hyphens), or the null path ``<>``."""


def plain_path(arg: str | None, keyword: str) -> tuple[str, str] | None:
    """The address and the rest (the parameters) of a MAIL FROM: / RCPT TO: argument in the
    plain form (:data:`PLAIN_PATH`), exactly as aiosmtpd's own parse of it gives them (the
    null path is ``"<>"``; after any other path, the blanks that follow it are left out);
    None for any other argument (aiosmtpd parses it). ``keyword``: ``FROM:`` or ``TO:``."""
    if arg is None or arg[: len(keyword)].upper() != keyword:
        return None
    text = arg[len(keyword) :].strip()
    found = PLAIN_PATH.match(text)
    if found is None:
        return None
    rest = text[found.end() :]
    address = found.group(1)
    if address is None:
        return "<>", rest  # aiosmtpd's parse leaves what follows "<>" as it is
    if address.startswith("=?"):
        return None  # its parse would decode it as an RFC 2047 encoded word
    if rest[:1] in (" ", "\t"):
        rest = rest.lstrip()  # as its parse does (any white space once a blank leads)
    if rest[:1] == "(":
        return None  # a comment, which its parse takes out
    return address, rest


def mail_params(options: list[str]) -> dict[str, str | bool] | None:
    """The parameters of MAIL / RCPT (upper-cased, split) as aiosmtpd reads them: NAME=value
    or NAME alone (True); None when one is malformed (RFC 1869: a name is alphanumeric, and
    ``=`` needs a value)."""
    result: dict[str, str | bool] = {}
    for option in options:
        name, eq, value = option.partition("=")
        if not name.isalnum() or (eq and not value):
            return None
        result[name] = value if eq else True
    return result


def utf8(address: str) -> bool:
    """Whether an address aiosmtpd decoded came as valid UTF-8 (bytes that are not reach us
    as lone surrogates, which no account name can hold)."""
    try:
        address.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class DeliveryHandler:
    def __init__(
        self,
        mailbox: Mailbox,
        intake: Intake,
        hostname: str,
        lmtp: bool,
        *,
        recipient_limit: int = 1000,
        reserve: DiskReserve | None = None,
        lookups: Executor | None = None,
        deliveries: Executor | None = None,
        queue: QueueRunner | None = None,
        budget: Budget | None = None,
    ) -> None:
        self.queue = queue if not lmtp else None  # smtp.answer = "queued"; LMTP never
        self.budget = budget  # the server's memory budget, for a queued letter read whole
        self.mailbox = mailbox
        self.intake = intake
        self.hostname = hostname
        self.lmtp = lmtp
        self.recipient_limit = recipient_limit
        self.lookups = lookups  # recipient lookups: the index alone (pochta.executors)
        self.deliveries = deliveries  # storing: the index, the FileDB, the storage nodes
        self.reserve = reserve
        self._short = False  # the spool was below its reserve at the last MAIL

    async def handle_MAIL(
        self,
        server: SMTP,
        session: Session,
        envelope: aiosmtpd.smtp.Envelope,
        address: str,
        mail_options: list[str],
    ) -> str:
        reserve = self.reserve
        if reserve is not None and reserve.low():
            if not self._short:
                self._short = True
                log.warning(
                    "the spool's file system has %d MB free, below its reserve of %d MB: MAIL"
                    " FROM gets 452 4.3.1 until it has room",
                    (reserve.free or 0) >> 20,
                    reserve.reserve >> 20,
                )
            metrics.mail_refused("disk_reserve")
            return INSUFFICIENT_STORAGE
        if self.queue is not None and self.queue.full():
            metrics.mail_refused("queue_full")
            return INSUFFICIENT_STORAGE
        if self._short:
            self._short = False
            log.info("the spool's file system has room again: MAIL FROM is accepted")
        envelope.mail_from = address
        envelope.mail_options.extend(mail_options)
        return "250 OK"

    async def handle_RCPT(
        self,
        server: SMTP,
        session: Session,
        envelope: aiosmtpd.smtp.Envelope,
        address: str,
        rcpt_options: list[str],
    ) -> str:
        if len(envelope.rcpt_tos) >= self.recipient_limit:
            return TOO_MANY_RECIPIENTS
        if not utf8(address):
            return "553 5.1.3 the recipient address is not valid UTF-8"
        try:
            user = await run_in(self.lookups, self.mailbox.user, address)
        except StorageError as exc:  # the index is unreachable: not the recipient's fault
            log.warning("recipient <%s> deferred: %s", address, exc.message)
            return STORAGE_UNAVAILABLE
        if user is None:
            return f"550 5.1.1 <{address}>: no such user here"
        envelope.rcpt_tos.append(address)
        envelope.rcpt_options.extend(rcpt_options)
        return "250 2.1.5 OK"

    async def handle_letter(
        self,
        session: Session,
        envelope: aiosmtpd.smtp.Envelope,
        letter: RawLetter,
        eol: bytes,
        held: Share | None = None,
    ) -> str:
        """The reply to a letter received whole (``letter``: its bytes or its spooled file;
        ``eol``: its line ending, for the trace header; ``held``: its spool's share of the
        memory budget, which the caller gives back after the reply)."""
        queue_id = new_id() if self.queue is not None else secrets.token_hex(6)
        with logs.bound(queue_id=queue_id):  # ties this letter's lines together
            return await self._letter(session, envelope, letter, eol, queue_id, held)

    async def _letter(
        self,
        session: Session,
        envelope: aiosmtpd.smtp.Envelope,
        letter: RawLetter,
        eol: bytes,
        queue_id: str,
        held: Share | None,
    ) -> str:
        if self.lmtp:
            protocol = "LMTP"
        elif "SMTPUTF8" in envelope.mail_options:
            protocol = "UTF8SMTP"
        else:
            protocol = "ESMTP" if session.extended_smtp else "SMTP"
        if session.ssl is not None:
            protocol += "S"  # ESMTPS, LMTPS: received over TLS (RFC 3848)
        peer: Any = session.peer
        trace = received(
            helo=session.host_name or "",
            ip=str(peer[0]) if isinstance(peer, tuple) else "unix",
            hostname=self.hostname,
            protocol=protocol,
            queue_id=queue_id,
            recipient=envelope.rcpt_tos[0] if len(envelope.rcpt_tos) == 1 else None,
            when=datetime.now(UTC),
            eol=eol,
        )
        envelope_ = Envelope(
            ip=str(peer[0]) if isinstance(peer, tuple) else None,
            sender=envelope.mail_from or "",
            recipients=tuple(envelope.rcpt_tos),
        )
        if self.queue is not None:
            return await self._enqueue(trace, letter, queue_id, envelope_, session.host_name)
        status = await self._deliver(trace, letter, queue_id, envelope_, session.host_name, held)
        return self._each(envelope, status)

    async def _enqueue(
        self, trace: bytes, letter: RawLetter, queue_id: str, envelope: Envelope, helo: str | None
    ) -> str:
        """``smtp.answer = "queued"``: 250 once the letter is durable in the incoming queue,
        delivered from there (:mod:`pochta.mailbox.queuerunner`)."""
        assert self.queue is not None
        size = size_of(letter)
        try:  # refused now as the delivery would refuse it (its trace header counts too)
            self.mailbox.check_size(len(trace) + size)
        except TooLarge as exc:
            return f"552 5.3.4 {exc.message}"
        if self.queue.full(size):
            log.warning("letter %s deferred: the incoming queue is full", queue_id)
            return QUEUE_FULL
        entry = Entry(
            queue_id,
            envelope.sender or "",
            tuple(envelope.recipients),
            envelope.ip,
            helo,
            trace,
            size,
            time.time(),
        )
        try:
            await self.queue.put(entry, letter)
        except (PochtaError, OSError) as exc:
            log.warning("letter %s deferred: it could not be queued: %s", queue_id, exc)
            return STORAGE_UNAVAILABLE
        except Exception:  # never aiosmtpd's "500 Error": a sender takes a 5xx as final
            log.exception("letter %s deferred: it could not be queued", queue_id)
            return STORAGE_UNAVAILABLE
        # at debug: its "delivered" line (same queue id) follows at info
        log.debug("queued %s: %d bytes to %d recipient(s)", queue_id, size, len(entry.recipients))
        return f"250 2.0.0 OK queued as {queue_id}"

    async def attempt(self, due: Due) -> Outcome:
        """One try of a queued letter (the runner's): the path of ``answer = "delivered"``
        (:meth:`_prepared`), its end told as the queue's outcome."""
        e = due.entry
        envelope = Envelope(ip=e.ip, sender=e.sender, recipients=e.recipients)
        held = self.budget.share() if self.budget is not None else None
        with logs.bound(queue_id=e.id):
            try:
                done, recipients = await self._prepared(
                    e.trace, due.letter, envelope, e.helo, held, queued=e.id
                )
            except NoRecipients:
                log.warning("queued %s dropped: none of its recipients has a mailbox now", e.id)
                return "drop"
            except (TooLarge, InvalidInput) as exc:
                log.error("queued %s held (not tried again): %s", e.id, exc.message)
                return "hold"
            except PochtaError as exc:
                log.warning("queued %s deferred: %s", e.id, exc.message)
                return "retry"
            finally:
                if held is not None:
                    held.release()
            self._delivered(e.id, done, recipients)
            return "done"

    def _each(self, envelope: aiosmtpd.smtp.Envelope, status: str) -> str:
        """The reply to the end of DATA: LMTP answers once per accepted recipient."""
        if self.lmtp:
            return "\r\n".join(status for _ in envelope.rcpt_tos)
        return status

    async def _deliver(
        self,
        trace: bytes,
        letter: RawLetter,
        queue_id: str,
        envelope: Envelope,
        helo: str | None,
        held: Share | None,
    ) -> str:
        try:
            stored = await self._prepared(trace, letter, envelope, helo, held)
        except NoRecipients:
            return "554 5.1.1 no valid recipients"
        except TooLarge as exc:
            return f"552 5.3.4 {exc.message}"
        except InvalidInput as exc:
            return f"554 5.6.0 {exc.message}"
        except StorageError as exc:
            log.warning("delivery %s deferred: %s", queue_id, exc.message)
            return STORAGE_UNAVAILABLE
        except (CpuPoolTimeout, CpuPoolProcessDied):  # antispam.on_timeout = "defer"
            return UNSCORED
        except Overloaded as exc:  # unscored, and the budget cannot hold it whole
            log.warning("delivery %s deferred: %s", queue_id, exc.message)
            return OVERLOADED
        except PochtaError as exc:
            log.warning("delivery %s failed: %s", queue_id, exc.message)
            return "451 4.3.0 temporary failure; try again later"
        except Exception:
            log.exception("delivery %s failed", queue_id)
            return "451 4.3.0 temporary failure; try again later"
        done, recipients = stored
        self._delivered(queue_id, done, recipients)
        return f"250 2.0.0 OK queued as {queue_id}"

    async def _prepared(
        self,
        trace: bytes,
        letter: RawLetter,
        envelope: Envelope,
        helo: str | None,
        held: Share | None,
        queued: str | None = None,
    ) -> tuple[Delivered, int]:
        """A letter's one path, either answer: prepared by a worker, then stored by a
        delivery thread (``queued``: the queue entry it comes from, recorded with it)."""
        return await self.intake.prepare_then(
            lambda prepared: self._store(prepared, envelope.recipients, queued),
            self.deliveries,
            letter,
            envelope,
            helo,
            prefix=trace,
            analyze=self.mailbox.scores,
            shingles=self.mailbox.counts_shingles,
            held=held,
        )

    @staticmethod
    def _delivered(queue_id: str, done: Delivered, recipients: int) -> None:
        log.info(
            "delivered %s: %d bytes to %d recipient(s), letters %s, verdict %s",
            queue_id,
            done.size,
            recipients,
            ",".join(map(str, done.ids)),
            _verdict(done),
        )

    def _store(
        self, prepared: Prepared, addresses: Sequence[str], queued: str | None = None
    ) -> tuple[Delivered, int]:
        """In a delivery thread: the recipients looked up again (one may have been deleted
        since its RCPT) and the letter stored for them; the delivery and how many they were.
        One hop off the loop for both (each costs a thread's wake-up and the loop's)."""
        users = [u for u in map(self.mailbox.user, addresses) if u is not None]
        if not users:
            raise NoRecipients
        return self.mailbox.deliver_prepared(prepared, users, queued=queued), len(users)


class NoRecipients(Exception):
    """None of a letter's recipients has a mailbox any more (all deleted since RCPT)."""


def _verdict(done: Delivered) -> str:
    """The verdict for the log: its label, and the analysis stages the budget cut if any."""
    v = done.verdict
    if v is None:
        return "-"
    return f"{v.label} (partial: {','.join(v.partial)})" if v.partial else v.label


TOO_MANY_RECIPIENTS = "452 4.5.3 Error: too many recipients"
STORAGE_UNAVAILABLE = "451 4.3.0 storage is unavailable; try again later"
UNSCORED = "451 4.7.1 the letter could not be scored in time; try again later"
OVERLOADED = "451 4.3.0 the server is too busy to take the letter now; try again later"
INSUFFICIENT_STORAGE = "452 4.3.1 Insufficient system storage"
QUEUE_FULL = "451 4.3.0 the incoming queue is full; try again later"
NOT_ERRORS = ("421", TOO_MANY_RECIPIENTS[:9], "451", INSUFFICIENT_STORAGE[:9])
"""Replies that do not count toward the error limit: the closing 421 itself, the recipient
limit (a flow limit the client is right to run into) and pochta's own temporary failures
(the spool's disk reserve among them)."""


@dataclass
class _Connection:
    """What pochta keeps per connection beside aiosmtpd's session."""

    watch: CommandWatch
    errors: int = 0
    awaiting_354: bool = False  # a DATA command line has come and is not answered yet
    early: bool = False  # bytes came after it before the answer
    reader: DataReader | None = None  # set while a letter is being received
    ended: asyncio.Future[None] | None = field(default=None, repr=False)
    admission: Admission | None = None  # counted by the connection limits until released
    switching: bool = False  # STARTTLS: its reply must be followed by the switch at once
    fresh: bool = False  # bytes came since the last reply (the next command was not buffered)


class PochtaSMTP(SMTP):
    """aiosmtpd's SMTP with pochta's connection limits, DATA phase, error limit and
    early-talker check."""

    spool_dir: Path
    spool_threshold: int
    budget: Budget | None = None  # the server's bytes in flight (memory_budget)
    line_limit: int
    error_limit: int
    doorman: Doorman | None = None
    listener = "smtp"  # the protocol the connection limits count it under

    def __init__(self, handler: DeliveryHandler, **kwargs: Any) -> None:
        super().__init__(handler, **kwargs)
        self.pochta = _Connection(CommandWatch(self.line_length_limit))
        self.decodes_data = bool(kwargs.get("decode_data", False))  # as aiosmtpd was given

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        logs.bind(session=logs.new_id())  # the session's task (made now) inherits it
        if self.transport is None and self.doorman is not None:  # not again after STARTTLS
            peer = transport.get_extra_info("peername")
            admission = self.doorman.enter(self.listener, _address(peer))
            self.pochta.admission = admission
            if not admission.allowed:  # before the greeting; aiosmtpd never sees it
                refused = cast(asyncio.WriteTransport, transport)  # uvloop's: not a subclass
                refused.write(f"{smtp_refusal(self.hostname, admission)}\r\n".encode())
                refused.close()
                return
        super().connection_made(transport)

    def connection_lost(self, error: Exception | None) -> None:
        admission = self.pochta.admission
        if admission is not None:
            admission.release()
            if not admission.allowed:
                return
        super().connection_lost(error)

    def data_received(self, data: bytes) -> None:
        conn = self.pochta
        conn.fresh = True
        if conn.reader is not None:
            rest = conn.reader.feed(data)
            if rest is None:
                return
            conn.reader = None
            if conn.ended is not None and not conn.ended.done():
                conn.ended.set_result(None)
            data = rest
        if not data:
            return
        if conn.awaiting_354:
            conn.early = True  # dropped: never read as commands
            return
        end = conn.watch.find_data(data)
        if end is not None:
            conn.awaiting_354 = True
            conn.early = end < len(data)
            data = data[:end]
        super().data_received(data)

    async def push(self, status: AnyStr) -> None:
        """Send a reply; then, when the command it answers came with bytes already read
        (pipelined, or a flood), let the event loop run everything else that is ready before
        this connection's next command. aiosmtpd reads a command that is already buffered
        without waiting, so a client that pipelines thousands of commands in one write would
        otherwise keep the loop (every other client's greeting, /healthz) until it ends. A
        command that came in bytes of its own (a client that waits for each reply: no bytes
        came since the last reply but its own) needs no such turn: the next one cannot be
        buffered yet, and aiosmtpd's read of it waits, letting the loop go anyway (a loop
        iteration less per reply: four per letter). Not after STARTTLS's 220: the client's
        TLS handshake, which may come at once, must find the connection switched to TLS,
        not be read as commands."""
        conn = self.pochta
        await super().push(status)
        if not conn.fresh and not conn.switching:
            await asyncio.sleep(0)
        conn.fresh = False
        text = status.decode("utf-8", "replace") if isinstance(status, bytes) else str(status)
        if text[:1] in ("4", "5") and not text.startswith(NOT_ERRORS):
            self.pochta.errors += 1
            if self.pochta.errors >= self.error_limit and self.transport is not None:
                log.info(
                    "%r: %d errors, disconnected",
                    self.session and self.session.peer,
                    self.pochta.errors,
                )
                await super().push(f"421 4.7.0 {self.hostname} Error: too many errors")
                self.transport.close()

    @syntax("STARTTLS", when="tls_context")
    async def smtp_STARTTLS(self, arg: str) -> None:
        self.pochta.switching = True  # see push
        try:
            await super().smtp_STARTTLS(arg)
        finally:
            self.pochta.switching = False

    @syntax("MAIL FROM: <address>", extended=" [SP <mail-parameters>]")
    async def smtp_MAIL(self, arg: str | None) -> None:
        """aiosmtpd's MAIL, its replies and checks in its order, for a plain path
        (:func:`plain_path`); any other argument goes to aiosmtpd's own."""
        path = plain_path(arg, "FROM:")
        session, envelope = self.session, self.envelope
        assert session is not None
        assert envelope is not None
        if path is None or self.too_long(path[0]):
            await super().smtp_MAIL(arg)
            return
        address, rest = path
        if await self.check_helo_needed() or await self.check_auth_needed("MAIL"):
            return
        syntaxerr = "501 Syntax: MAIL FROM: <address>"
        if session.extended_smtp:
            syntaxerr += " [SP <mail-parameters>]"
        if not session.extended_smtp and rest:
            await self.push(syntaxerr)
            return
        if envelope.mail_from:
            await self.push("503 Error: nested MAIL command")
            return
        mail_options = rest.upper().split()
        params = mail_params(mail_options)
        if params is None:
            await self.push(syntaxerr)
            return
        if not self.decodes_data:
            body = params.pop("BODY", "7BIT")
            if body not in ["7BIT", "8BITMIME"]:
                await self.push("501 Error: BODY can only be one of 7BIT, 8BITMIME")
                return
        smtputf8 = params.pop("SMTPUTF8", False)
        if not isinstance(smtputf8, bool):
            await self.push("501 Error: SMTPUTF8 takes no arguments")
            return
        if smtputf8 and not self.enable_SMTPUTF8:
            await self.push("501 Error: SMTPUTF8 disabled")
            return
        envelope.smtp_utf8 = smtputf8
        size = params.pop("SIZE", None)
        if size:
            if isinstance(size, bool) or not size.isdigit():
                await self.push(syntaxerr)
                return
            if self.data_size_limit and int(size) > self.data_size_limit:
                await self.push("552 Error: message size exceeds fixed maximum message size")
                return
        if params:
            await self.push("555 MAIL FROM parameters not recognized or not implemented")
            return
        hook = getattr(self.event_handler, "handle_MAIL", None)
        if hook is not None:
            status = await hook(self, session, envelope, address, mail_options)
        else:
            envelope.mail_from = address
            envelope.mail_options.extend(mail_options)
            status = "250 OK"
        chatter.info("%r sender: %s", session.peer, address)
        await self.push(status)

    @syntax("RCPT TO: <address>", extended=" [SP <mail-parameters>]")
    async def smtp_RCPT(self, arg: str | None) -> None:
        """aiosmtpd's RCPT, its replies and checks in its order, for a plain path
        (:func:`plain_path`); any other argument goes to aiosmtpd's own."""
        path = plain_path(arg, "TO:")
        session, envelope = self.session, self.envelope
        assert session is not None
        assert envelope is not None
        if path is None or self.too_long(path[0]):
            await super().smtp_RCPT(arg)
            return
        address, rest = path
        if await self.check_helo_needed() or await self.check_auth_needed("RCPT"):
            return
        if not envelope.mail_from:
            await self.push("503 Error: need MAIL command")
            return
        syntaxerr = "501 Syntax: RCPT TO: <address>"
        if session.extended_smtp:
            syntaxerr += " [SP <mail-parameters>]"
        if not session.extended_smtp and rest:
            await self.push(syntaxerr)
            return
        rcpt_options = rest.upper().split()
        params = mail_params(rcpt_options)
        if params is None:
            await self.push(syntaxerr)
            return
        if params:  # aiosmtpd knows none
            await self.push("555 RCPT TO parameters not recognized or not implemented")
            return
        hook = getattr(self.event_handler, "handle_RCPT", None)
        if hook is not None:
            status = await hook(self, session, envelope, address, rcpt_options)
        else:
            envelope.rcpt_tos.append(address)
            envelope.rcpt_options.extend(rcpt_options)
            status = "250 OK"
        chatter.info("%r recip: %s", session.peer, address)
        await self.push(status)

    def too_long(self, address: str) -> bool:
        """Whether the address's local part is over ``local_part_limit`` (aiosmtpd answers it
        553)."""
        limit = self.local_part_limit
        return bool(limit) and len(address.rpartition("@")[0]) > limit

    @syntax("DATA")
    async def smtp_DATA(self, arg: str | None) -> None:
        conn = self.pochta
        early, conn.awaiting_354, conn.early = conn.early, False, False
        if early:
            await super().push(
                "554 5.5.0 Error: SMTP protocol synchronization (data sent before the 354 reply)"
            )
            if self.transport is not None:
                self.transport.close()
            return
        if await self.check_helo_needed():
            return
        if await self.check_auth_needed("DATA"):
            return
        envelope = self.envelope
        assert envelope is not None
        assert self.session is not None
        if not envelope.rcpt_tos:
            await self.push("503 5.5.1 Error: need RCPT command")
            return
        if arg:
            await self.push("501 5.5.4 Syntax: DATA")
            return
        spool = Spool(self.spool_dir, self.spool_threshold, self.budget)
        reader = DataReader(
            spool, size_limit=self.data_size_limit or 1 << 62, line_limit=self.line_limit
        )
        conn.reader, conn.ended = reader, self.loop.create_future()
        try:
            await self.push("354 End data with <CR><LF>.<CR><LF>")
            await conn.ended
            if reader.state == "too_long":
                status = f"500 5.5.2 Error: line too long (the limit is {self.line_limit} bytes)"
            elif reader.state == "too_big":
                status = (
                    f"552 5.3.4 Error: message too big (the limit is {self.data_size_limit} bytes)"
                )
            else:
                handler: DeliveryHandler = self.event_handler
                status = await handler.handle_letter(
                    self.session, envelope, spool.finish(), reader.eol or b"\n", spool.held
                )
                if status.startswith("250"):
                    conn.errors = 0  # the error limit counts errors between deliveries
        finally:
            conn.reader = conn.ended = None
            spool.discard()
            self.envelope = aiosmtpd.smtp.Envelope()
        metrics.delivery("lmtp" if isinstance(self, LMTP) else "smtp", status)
        await self.push(status)


class PochtaLMTP(PochtaSMTP, LMTP):
    """The same for LMTP (LHLO; one DATA reply per recipient)."""

    listener = "lmtp"


def _address(peer: Any) -> str:
    """The address text of a peername (empty for a unix socket: not limited)."""
    return str(peer[0]) if isinstance(peer, tuple) else ""


def protocol_class(
    settings: SmtpSettings,
    spool_dir: Path,
    *,
    lmtp: bool,
    doorman: Doorman | None = None,
    budget: Budget | None = None,
) -> type[PochtaSMTP]:
    """The protocol class with pochta's limits (aiosmtpd reads some as class attributes);
    ``doorman``: the connection limits (None: none); ``budget``: the server's bytes in memory."""
    base: type[PochtaSMTP] = PochtaLMTP if lmtp else PochtaSMTP
    return type(
        base.__name__,
        (base,),
        {
            "spool_dir": spool_dir,
            "spool_threshold": settings.spool_threshold,
            "budget": budget,
            "line_limit": settings.line_length_limit,
            "error_limit": settings.error_limit,
            "doorman": doorman,
        },
    )


BACKLOG = 2048
"""Connections the kernel queues for the listener before it accepts them (as the sockets of
``serve --processes`` and uvicorn's are bound). asyncio listens again with the backlog given to
``create_server`` (100 by default), even on a socket bound beforehand: with 100, a burst of
3,000 connections overflowed the queue, and ~500 of them, their handshake's last packet
dropped by the kernel, waited a minute for a greeting or a refusal that never came."""


def clear_spool(spool_dir: Path, older_than: float) -> None:
    """Remove letters a previous process left half-received (it stopped while reading them:
    none of them was answered 250), and the parts of IMAP APPEND letters it left (``*.parts``
    directories). Only those untouched for ``older_than`` seconds (:func:`spool_age`): another
    process on the same data directory may be receiving (or delivering) the newer ones."""
    if spool_dir.is_dir():
        cutoff = time.time() - older_than
        for path in spool_dir.glob("*.letter"):
            with contextlib.suppress(OSError):
                if path.stat().st_mtime < cutoff:
                    path.unlink()
        for path in spool_dir.glob("*.parts"):
            with contextlib.suppress(OSError):
                if path.stat().st_mtime < cutoff:
                    shutil.rmtree(path)


def spool_age(smtp: SmtpSettings, imap: ImapSettings | None = None) -> float:
    """How long a file of the spool may stay untouched while another process still needs it,
    with 600 s to spare: an SMTP letter is received and delivered within 2 x
    ``command_timeout``; an IMAP APPEND's letter is received within ``idle_timeout`` (the
    whole command is read within it), then waits at most ``append_wait_seconds`` for its
    turn before it is parsed and stored (``imap``: None when IMAP does not run)."""
    age = 2 * smtp.command_timeout
    if imap is not None:
        age = max(age, imap.idle_timeout + imap.append_wait_seconds)
    return age + 600


async def start(
    mailbox: Mailbox,
    intake: Intake,
    settings: SmtpSettings,
    spool_dir: Path,
    *,
    sockets: Mapping[str, socket.socket] | None = None,
    tls_context: ssl.SSLContext | None = None,
    lmtp_tls_context: ssl.SSLContext | None = None,
    doorman: Doorman | None = None,
    budget: Budget | None = None,
    executors: Executors | None = None,
    imap: ImapSettings | None = None,
    queue: QueueRunner | None = None,
) -> list[asyncio.Server]:
    """Start the SMTP (and LMTP) listeners on the running loop; the caller closes them.
    Letters being received go to ``spool_dir`` above ``settings.spool_threshold`` bytes, or
    at once when the server's ``budget`` of bytes in memory is spent; MAIL FROM gets 452 4.3.1
    while its file system is below the reserve (``reserve_for``).
    ``sockets``: listening sockets bound beforehand (``smtp``, ``lmtp``), used as they are.
    ``tls_context`` / ``lmtp_tls_context``: STARTTLS is offered with it (aiosmtpd's own
    support; never required: a public MX takes mail in clear too, RFC 3207). ``doorman``:
    the connection limits, asked before the greeting (None: none). ``executors``: the pools
    recipient lookups and deliveries run on (None: the loop's default pool). ``imap``: the
    IMAP listener's settings when it spools to the same directory (its letters are kept
    longer: :func:`spool_age`). ``queue``: the incoming queue (``smtp.answer = "queued"``),
    started here with the SMTP handler's path; the caller stops it."""
    loop = asyncio.get_running_loop()
    hostname = settings.fqdn()
    clear_spool(spool_dir, older_than=spool_age(settings, imap))
    reserve = DiskReserve(
        reserve_for(settings.max_message_size, settings.spool_min_free),
        lambda: free_bytes(spool_dir),
        clock=time.monotonic,
    )
    servers = []
    listeners = [(settings.port, False)]
    if settings.lmtp_port:
        listeners.append((settings.lmtp_port, True))
    for port, lmtp in listeners:
        cls = protocol_class(settings, spool_dir, lmtp=lmtp, doorman=doorman, budget=budget)
        handler = DeliveryHandler(
            mailbox,
            intake,
            hostname,
            lmtp,
            recipient_limit=settings.recipient_limit,
            reserve=reserve,
            lookups=executors.lookups if executors is not None else None,
            deliveries=executors.deliveries if executors is not None else None,
            queue=queue,
            budget=budget,
        )
        if queue is not None and not lmtp:
            queue.start(handler.attempt)

        def factory(
            cls: type[PochtaSMTP] = cls,
            handler: DeliveryHandler = handler,
            tls: ssl.SSLContext | None = lmtp_tls_context if lmtp else tls_context,
        ) -> SMTP:
            return cls(
                handler,
                data_size_limit=settings.max_message_size,
                enable_SMTPUTF8=True,
                decode_data=False,
                hostname=hostname,
                ident="pochta",
                timeout=settings.command_timeout,
                loop=loop,
                tls_context=tls,
            )

        try:
            sock = (sockets or {}).get("lmtp" if lmtp else "smtp")
            if sock is not None:
                servers.append(await loop.create_server(factory, sock=sock, backlog=BACKLOG))
            else:
                servers.append(
                    await loop.create_server(factory, settings.host, port, backlog=BACKLOG)
                )
        except OSError as exc:
            for server in servers:
                server.close()
            what = "LMTP" if lmtp else "SMTP"
            raise ConfigError(f"cannot listen for {what} on {settings.host}:{port}: {exc}") from exc
    return servers
