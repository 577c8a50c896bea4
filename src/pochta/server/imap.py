"""The IMAP4rev1 server (RFC 3501) over pochta's mailbox, with LITERAL+, IDLE, MOVE, UIDPLUS,
UNSELECT, NAMESPACE and SPECIAL-USE (Spam is \\Junk), STARTTLS and implicit TLS.

The edge only translates: commands are parsed by :mod:`pochta.server.imapproto` (pymap's
parser), answered from :class:`pochta.server.imapstore.ImapStore`, and errors become NO/BAD
with their reason. Everything a client controls is bounded (:class:`ImapLimits`):

- a command as it is read (:mod:`pochta.server.imapread`): before the login a few KB in all,
  lines and literals (as Dovecot's login processes read a client through a buffer of 1-4
  KB), a bigger literal refused before it is read and the connection closed; so is
  AUTHENTICATE's response line. The connection's buffer reads no further ahead than that
  (:mod:`pochta.server.imapwire`, which says what TLS holds besides). After it a command
  other than APPEND is at most ``line_length`` bytes, literals included; APPEND's letter at
  most ``literal_size`` (``smtp.max_message_size``, advertised as APPENDLIMIT), spooled as
  SMTP's DATA is (:class:`pochta.server.smtpdata.Spool`: memory up to ``spool_threshold``,
  then a file). The literals held in memory, an APPEND's letter among them, are taken from
  the server-wide budget of bytes in flight (:mod:`pochta.budget`, shared with SMTP)
  until the command is done;
- an APPEND's letter is prepared from where it lies by the intake (worker processes read the
  file, and write its big parts to files of their own) and delivered. A letter in memory is
  counted once, by its spool's share of the budget. A letter in a file (past
  ``spool_threshold``, or any while the budget is spent) is not in memory, but parsing it
  costs a worker several times its size and its skeleton comes back whole: such letters are
  prepared and stored ``big_appends`` at a time, each waiting for its turn at most
  ``append_wait`` seconds (then ``NO [UNAVAILABLE]``), and not at all once its client is
  gone. The files are removed however the command ends;
- the literals of one command, the ranges of a sequence set, idling sessions, errors per
  session (then BYE), silence (then BYE). Connections per address, per network and in all are
  the ``Doorman``'s (:mod:`pochta.server.connections`): over a limit, ``* BYE [UNAVAILABLE]``
  instead of the greeting (on IMAPS, a close before the TLS handshake).

No password is taken in clear text off the networks allowed for it (``cleartext``, loopback
by default, as Dovecot refuses plaintext authentication on non-loopback connections without
TLS): elsewhere LOGIN and AUTHENTICATE need TLS (``LOGINDISABLED`` before it,
``NO [PRIVACYREQUIRED]``), whether TLS is offered or not. With TLS and ``require_tls``, every
address must use it first.

Nothing that reaches the index, the database or a blob runs on the event loop that SMTP and
HTTP share: every such call of the store runs in IMAP's own bounded pool of threads
(``store_threads``), so a stalled database or storage node stalls only the IMAP commands that
wait on it, never a greeting, a login prompt or a health check.

FETCH streams: a letter's bytes come from its skeleton and its parts in blocks
(:mod:`pochta.mime.ranges`), the socket's flow control paces them, and a big letter is never
whole in memory. A client that fetches letter after letter is read ahead
(:mod:`pochta.server.imapahead`): letters kept whole in their skeleton, read with the
session's owner check, answered on the event loop with no read at all.

A selected folder is a list of (UID, letter, flags) read from the index at SELECT; NOOP, CHECK
and IDLE (which polls the index every ``idle_poll`` seconds) send what changed since.

Here is the server (:class:`ImapServer`, with :func:`start`); a connection's command loop is
:mod:`pochta.server.imapsession`'s (``Session``: dispatch, IDLE, FETCH, SEARCH). A session's
state and what every command does with it are :mod:`pochta.server.imapstate`'s; the command
groups are functions over that state, a module each: :mod:`pochta.server.imaplogin`
(STARTTLS, LOGIN, AUTHENTICATE), :mod:`pochta.server.imapfolders` (SELECT, EXAMINE, STATUS,
LIST, LSUB, CREATE, ...), :mod:`pochta.server.imapchanges` (STORE, EXPUNGE, COPY, MOVE,
APPEND); what FETCH and SEARCH read in a store thread is :mod:`pochta.server.imapfetching`'s.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import tempfile
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar, TypeVarTuple

from pochta.budget import Budget, Share
from pochta.config import ImapSettings, Settings, SmtpSettings
from pochta.errors import ConfigError
from pochta.executors import run_in
from pochta.guard.anvil import Limits
from pochta.mailbox.intake import Intake, RawLetter, Spilled
from pochta.mailbox.prepare import Prepared
from pochta.netaddr import LOOPBACK, Network, parse_networks
from pochta.server.connections import Doorman, imap_refusal, local_doorman
from pochta.server.imapread import ImapLimits
from pochta.server.imapsession import Session
from pochta.server.imapstate import SessionState, TlsContext
from pochta.server.imapstore import ImapStore
from pochta.server.imapwire import CHUNK, LINGER_SECONDS, Closed, Wire
from pochta.server.passwords import PasswordSlots

__all__ = ["ImapLimits", "ImapServer", "Session", "TlsContext", "limits_of", "start"]

log = logging.getLogger("pochta.imap")

T = TypeVar("T")
Ts = TypeVarTuple("Ts")


class ImapServer:
    """``budget``: the server's bytes in flight, shared with SMTP (default: its own, of
    ``memory_budget``'s default); ``intake``: prepares APPEND's letters in worker processes
    (None: in the store's threads); ``spool_dir``: where big APPEND letters are spooled
    (default: the system's temporary directory); ``cleartext``: the networks whose clients
    may log in without TLS (default: loopback); ``passwords``: the bound on password checks
    that every door of the process shares (default: IMAP's own, 2 at once)."""

    def __init__(
        self,
        store: ImapStore,
        limits: ImapLimits | None = None,
        *,
        tls: TlsContext | None = None,
        require_tls: bool = True,
        doorman: Doorman | None = None,
        budget: Budget | None = None,
        intake: Intake | None = None,
        spool_dir: Path | None = None,
        cleartext: Iterable[str | Network] = LOOPBACK,
        passwords: PasswordSlots | None = None,
    ) -> None:
        self.store = store
        self.limits = limits or ImapLimits()
        self.tls = tls
        self.require_tls = require_tls and tls is not None
        if budget is None:
            budget = Budget(Settings.model_fields["memory_budget"].default)
        self.budget = budget
        self.intake = intake
        self.spool_dir = spool_dir or Path(tempfile.gettempdir())
        self.cleartext = parse_networks(cleartext)
        self.sessions: set[Session] = set()
        # without one: limits.connections in all and connections_per_ip per address, every
        # address counted (none trusted), in this process only
        self.doorman = doorman or local_doorman(
            "imap", Limits(per_ip=self.limits.connections_per_ip, total=self.limits.connections)
        )
        self.idling = 0
        # the password checks of every door share one bound (None: IMAP's own)
        self.passwords = passwords if passwords is not None else PasswordSlots(2)
        # the store's calls (the index, the database, blobs): never on the event loop, nor in
        # its default executor that everything else shares
        self.executor = ThreadPoolExecutor(self.limits.store_threads, "imap-store")
        # APPEND letters in files prepared and stored at once (see the module's docstring)
        self.big_letters = asyncio.Semaphore(self.limits.big_appends)
        # the block every connection's transport reads into (pochta.server.imapwire)
        self.scratch = bytearray(CHUNK)
        self._tasks: set[asyncio.Task[None]] = set()

    async def run(self, fn: Callable[[*Ts], T], *args: *Ts) -> T:
        """``fn(*args)`` in IMAP's threads, awaited (with this task's context: its log ids)."""
        return await run_in(self.executor, fn, *args)

    async def prepare(
        self, letter: RawLetter, parts: Path, held: Share | None
    ) -> tuple[Prepared, Spilled]:
        """An APPEND's letter (its bytes or its spool file) parsed and split, off the loop:
        by the intake's workers, which write its extracted parts (but ``spool_threshold``
        bytes of them) to files in the directory ``parts`` (the caller removes it), else in a
        store thread. ``held``: the command's share of the budget, which a letter read whole
        into the server (its worker died) is taken into."""
        if self.intake is not None:
            over = self.limits.spool_threshold
            return await self.intake.prepare_apart(letter, parts, over, held)
        return await self.run(self.store.prepare, letter), {}

    async def start(
        self,
        host: str,
        port: int,
        *,
        implicit_tls: bool = False,
        sock: socket.socket | None = None,
    ) -> asyncio.Server:
        """Listen on host:port, or on ``sock`` when given (IMAPS when ``implicit_tls``: TLS
        from the first byte). IMAPS hands the handshake to the transport, which completes it
        before the session sees the connection: a session that started TLS itself could read
        the client's ClientHello as plain bytes first (uvloop reads a new connection before
        the session's task runs) and throw it away with the rest (129 of 200 handshakes hung
        that way). Its context is asked for once, here: pochta's (``ServerTLS.context``)
        switches every handshake to the newest certificate by itself."""
        if implicit_tls and self.tls is None:
            raise ValueError("implicit TLS needs a TLS context")
        loop = asyncio.get_running_loop()
        tls: dict[str, Any] = {}
        if implicit_tls:
            assert self.tls is not None
            tls = {
                "ssl": self.tls(),
                "ssl_handshake_timeout": self.limits.login_timeout,
                # a closed connection waits this long at most for the client's close_notify,
                # reading (and decrypting) what it still sends meanwhile (imapwire)
                "ssl_shutdown_timeout": LINGER_SECONDS,
            }

        ahead = self.limits.login_command  # before the login: a few KB, no more

        def factory() -> Wire:
            return Wire(
                lambda wire: self._accept(wire, implicit_tls),
                read_ahead=ahead,
                chunk=ahead,
                scratch=self.scratch,
            )

        if sock is not None:
            return await loop.create_server(factory, sock=sock, backlog=1024, **tls)
        return await loop.create_server(factory, host, port, backlog=1024, **tls)

    def _accept(self, wire: Wire, implicit_tls: bool) -> None:
        task = asyncio.get_running_loop().create_task(self._serve(wire, implicit_tls))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _serve(self, wire: Wire, implicit_tls: bool) -> None:
        ip = wire.peer
        limits = self.limits
        admission = self.doorman.enter("imap", ip)
        if not admission.allowed:
            if not implicit_tls:  # IMAPS: closed before a handshake it would cost to refuse
                wire.write(imap_refusal(admission))
            wire.close()
            return
        wire.write_timeout = limits.idle_timeout
        session = Session(self, wire, tls=False)
        self.sessions.add(session)
        try:
            session.tls = implicit_tls  # IMAPS: the transport's handshake is done
            await session.run()
        except (Closed, ConnectionError, ssl.SSLError, TimeoutError):
            pass
        except Exception:
            log.exception("IMAP session from %s failed", ip)
        finally:
            self.sessions.discard(session)
            admission.release()
            wire.close()

    async def close(self) -> None:
        """Say BYE to every session and wait for them to end."""
        for session in list(self.sessions):
            session.wire.write(b"* BYE [UNAVAILABLE] the server is shutting down\r\n")
            session.wire.close()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=5)
        self.executor.shutdown(wait=False, cancel_futures=True)

    def capabilities(self, session: SessionState) -> bytes:
        caps = [b"IMAP4rev1", b"LITERAL+", b"IDLE", b"MOVE", b"UIDPLUS", b"UNSELECT"]
        caps += [b"NAMESPACE", b"SPECIAL-USE", b"ID", b"APPENDLIMIT=%d" % self.limits.literal_size]
        if session.user is None:
            if self.tls is not None and not session.tls:
                caps.append(b"STARTTLS")
            caps.append(b"AUTH=PLAIN" if session.may_login() else b"LOGINDISABLED")
        return b" ".join(caps)


def limits_of(
    settings: ImapSettings, max_message_size: int, spool_threshold: int = 1 << 20
) -> ImapLimits:
    return ImapLimits(
        line_length=settings.line_length_limit,
        literal_size=max_message_size,
        login_command=settings.login_command_limit,
        spool_threshold=spool_threshold,
        big_appends=settings.big_appends_at_once,
        append_wait=settings.append_wait_seconds,
        store_threads=settings.store_threads,
        literals=settings.literal_limit,
        ranges=settings.sequence_ranges_limit,
        connections=settings.max_connections,
        connections_per_ip=settings.max_connections_per_ip,
        idle_sessions=settings.max_idle_sessions,
        error_limit=settings.error_limit,
        login_timeout=settings.login_timeout,
        idle_timeout=settings.idle_timeout,
        idle_poll=settings.idle_poll_seconds,
    )


async def start(
    store: ImapStore,
    settings: ImapSettings,
    smtp: SmtpSettings,
    *,
    tls: TlsContext | None = None,
    require_tls: bool = True,
    sockets: Mapping[str, socket.socket] | None = None,
    budget: Budget | None = None,
    intake: Intake | None = None,
    spool_dir: Path | None = None,
    doorman: Doorman | None = None,
    cleartext: Iterable[str] = LOOPBACK,
    passwords: PasswordSlots | None = None,
) -> tuple[ImapServer, list[asyncio.Server]]:
    """Start the IMAP listener (and IMAPS, when ``tls_port`` and a TLS context are given)
    on the running loop; the caller closes them. ``smtp``: the letters' size limit
    (APPENDLIMIT) and spool threshold; ``require_tls``: LOGIN / AUTHENTICATE only over TLS,
    from every address (``tls.require_starttls``); ``sockets``: listening sockets bound
    beforehand (``imap``, ``imaps``: ``serve --processes``), used instead of binding the ports;
    ``budget``, ``intake``, ``spool_dir``, ``cleartext``, ``passwords``: see
    :class:`ImapServer`;
    ``doorman``: the connection limits of every protocol (None: the server's own, from
    ``settings``)."""
    server = ImapServer(
        store,
        limits_of(settings, smtp.max_message_size, smtp.spool_threshold),
        tls=tls,
        require_tls=require_tls,
        budget=budget,
        intake=intake,
        spool_dir=spool_dir,
        cleartext=cleartext,
        doorman=doorman,
        passwords=passwords,
    )
    listeners = []
    ports = [(settings.port, False)]
    if settings.tls_port and tls is not None:
        ports.append((settings.tls_port, True))
    for port, implicit in ports:
        sock = (sockets or {}).get("imaps" if implicit else "imap")
        try:
            listeners.append(
                await server.start(settings.host, port, implicit_tls=implicit, sock=sock)
            )
        except OSError as exc:
            for listener in listeners:
                listener.close()
            what = "IMAPS" if implicit else "IMAP"
            raise ConfigError(f"cannot listen for {what} on {settings.host}:{port}: {exc}") from exc
    return server, listeners
