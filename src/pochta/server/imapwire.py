"""One IMAP connection's bytes: an asyncio protocol with its own input buffer.

Owning the buffer (rather than an ``asyncio.StreamReader``) lets the server bound every
read (a line longer than the limit is refused before it is kept whole), stop reading from
the socket while the buffer is full (a client that sends faster than it is read waits), and
throw away what a client sent after STARTTLS before the handshake (plaintext injected
there must never be read as commands sent under TLS).

The protocol is an :class:`asyncio.BufferedProtocol`: the transport reads into a block the
wire gives it (``chunk`` bytes), so what one connection holds is bounded by the wire, not by
the transport's read size (256 KB in asyncio and uvloop). That block is copied into the
connection's buffer at once, so the wires of one server share one (``scratch``): the
transport reads into it and hands it back before it reads for another connection. Unasked,
the wire reads ahead at most ``read_ahead`` bytes (plus the one read that passed it), then
stops reading from the socket until the session asks for more: a few KB before the login
(:meth:`Wire.bound`), :data:`READ_AHEAD` after it. A read that asks for more (a long line, a
literal) reads on, up to its own limit. So a connection holds what its client sent and its
session has not read yet, at most ``read_ahead`` + ``chunk`` beyond what the session asked
for: before the login 8 KB, after it 128 KB (1,000 sessions that all send ahead at once:
128 MB), an idle one nothing. None of it is taken from ``memory_budget``: a command's
literals are, as the session asks for them (:mod:`pochta.server.imapread`).

Over TLS (IMAPS, STARTTLS) those bounds hold for the bytes the TLS layer hands on, not for
what it holds itself: asyncio's and uvloop's SSL protocols read the socket into a buffer of
their own (256 KB per connection: uvloop's, which ``pochta serve`` runs, is touched as far
as a read fills it, asyncio's is zeroed whole), keep what they have not decrypted yet up to
their read high-water mark (256 KB), and OpenSSL holds a record (16 KB) besides; pausing the
wire pauses them at that mark. The wire lowers that mark to its own read-ahead
(``set_read_buffer_limits``, a public method of both TLS transports: 4 KB before the login),
so a client that sends a flood makes the connection hold at most that, one socket read (up
to 256 KB) and a record, not its whole flood. ``benchmarks/imap_bounds.py --tls`` measures
the pre-login literal attack over IMAPS.

Closing a connection whose client is still sending (a refused literal it sends anyway) would
make the kernel answer with a reset, which throws away the BYE that says why. So such a
connection lingers, as nginx's ``lingering_close`` does: its sending half is shut (the BYE
goes, then FIN), and what still comes is read into one block that every lingering connection
shares (:data:`DROPPED`: its bytes are thrown away) for at most :data:`LINGER_SECONDS` and
:data:`LINGER_BYTES`, then it is closed. TLS has no half-close, and closing a TLS transport
reads and decrypts whatever the client still sends until its shutdown timeout (30 s by
default: 4 refused IMAPS clients had 320 MB each read that way): so a TLS connection with
unread input stops reading instead (the BYE goes; the client's sending waits) and is aborted
after :data:`LINGER_SECONDS`, and every TLS close waits that long at most for the client's
close_notify (``ssl_shutdown_timeout``, :data:`LINGER_SECONDS`, of the IMAPS listener and of
STARTTLS).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable
from typing import cast

READ_AHEAD = 1 << 16  # input read before the session asks for it (after the login)
CHUNK = 1 << 16  # bytes read from the transport at once (after the login)
FLUSH_AT = 1 << 16  # queued output past which it is sent at once
LINGER_SECONDS = 2.0  # a closed connection whose client still sends: dropped for this long
LINGER_BYTES = 1 << 20  # or until this much more was dropped
DROPPED = bytearray(CHUNK)
"""What lingering connections read into, all of them: the bytes are never looked at (so it is
shared by the event loops of every thread too)."""


class LineTooLong(Exception):
    pass


class Closed(Exception):
    pass


class Wire(asyncio.BufferedProtocol):
    """``on_connect(wire)`` is called once the connection is made (it starts the session).
    ``read_ahead``, ``chunk``: see the module's docstring; :meth:`bound` changes them.
    ``scratch``: the block the transport reads into, shared by the wires of one event loop
    (default: the wire's own); at least ``chunk`` bytes."""

    def __init__(
        self,
        on_connect: Callable[[Wire], None],
        *,
        read_ahead: int = READ_AHEAD,
        chunk: int = CHUNK,
        scratch: bytearray | None = None,
    ) -> None:
        self._on_connect: Callable[[Wire], None] | None = on_connect
        self.transport: asyncio.Transport | None = None
        self.peer: str = "?"
        self.read_ahead = read_ahead
        self._scratch = scratch if scratch is not None else bytearray(chunk)
        self._chunk = memoryview(self._scratch)[:chunk]
        if len(self._chunk) < chunk:
            raise ValueError(f"a scratch block of {len(self._scratch)} bytes for reads of {chunk}")
        self._buf = bytearray()
        self._scanned = 0  # bytes of _buf known to hold no LF
        self._eof = False
        self._data = asyncio.Event()
        self._writable = asyncio.Event()
        self._writable.set()
        self._paused = False
        self._out: list[bytes | memoryview] = []
        self._queued = 0
        self._lingering: int | None = None  # bytes still to drop before the close
        self._unread = False  # the client is sending what will not be read
        self._linger: asyncio.TimerHandle | None = None
        self._gone = asyncio.Event()
        self.write_timeout = 300.0
        self._deadline: float | None = None  # the loop's time by which a read must end
        self._watch: asyncio.TimerHandle | None = None

    # -- asyncio.Protocol ---------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        peer = transport.get_extra_info("peername")
        self.peer = str(peer[0]) if isinstance(peer, tuple) else "local"
        self._limit_tls()
        if self._on_connect is not None:  # once: not again after STARTTLS
            on_connect, self._on_connect = self._on_connect, None
            on_connect(self)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._chunk

    def buffer_updated(self, nbytes: int) -> None:
        if self._lingering is not None:  # closed: what still comes is dropped
            self._lingering -= nbytes
            if self._lingering <= 0 and self.transport is not None:
                self.transport.close()
            return
        self._buf += self._chunk[:nbytes]
        self._data.set()
        if len(self._buf) > self.read_ahead and not self._paused and self.transport is not None:
            self._paused = True
            self.transport.pause_reading()

    def eof_received(self) -> bool | None:
        self._eof = True
        self._data.set()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        if self._linger is not None:
            self._linger.cancel()
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        self._eof = True
        self._data.set()
        self._writable.set()
        self._gone.set()

    async def gone(self) -> None:
        """Return once the connection is lost (the client went away, or it was closed)."""
        await self._gone.wait()

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()

    # -- reading ----------------------------------------------------------------------------
    def bound(self, read_ahead: int, chunk: int) -> None:
        """Read ahead at most ``read_ahead`` bytes, ``chunk`` at a time, from now on."""
        self.read_ahead = read_ahead
        if chunk > len(self._scratch):
            self._scratch = bytearray(chunk)
        self._chunk = memoryview(self._scratch)[:chunk]
        self._limit_tls()
        self._consumed()  # a bound grown: reading goes on if it stopped at the old one

    def _limit_tls(self) -> None:
        """A TLS transport keeps what it has not decrypted yet up to its own mark (256 KB):
        no more than this wire reads ahead (see the module's docstring)."""
        transport = self.transport
        if transport is None or transport.get_extra_info("sslcontext") is None:
            return
        limits = getattr(transport, "set_read_buffer_limits", None)
        if limits is not None:
            limits(high=self.read_ahead)

    def _resume(self) -> None:
        if self._paused and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()

    def _consumed(self) -> None:
        if len(self._buf) <= self.read_ahead // 2:
            self._resume()

    def deadline(self, seconds: float | None) -> None:
        """The reads from now on must end within ``seconds`` (None: no bound): a read that
        waits for the client past it raises TimeoutError. One timer per connection, moved
        on only when it fires (a command every few milliseconds costs a float, not a timer
        each, as ``asyncio.timeout`` would)."""
        if seconds is None:
            self._deadline = None
            return
        loop = asyncio.get_running_loop()
        self._deadline = loop.time() + seconds
        if self._watch is None:
            self._watch = loop.call_at(self._deadline, self._check_deadline)

    def _check_deadline(self) -> None:
        self._watch = None
        if self._deadline is None or self.transport is None:
            return
        loop = asyncio.get_running_loop()
        if loop.time() < self._deadline:  # moved on since: wait for the new one
            self._watch = loop.call_at(self._deadline, self._check_deadline)
        else:
            self._data.set()  # the waiting read wakes and sees the deadline passed

    async def _more(self) -> None:
        """Wait for more input: the caller asked for more than is here, so the socket is
        read on even past ``read_ahead`` (the caller bounds what it asks for)."""
        if self._eof:
            raise Closed("the client closed the connection")
        self.flush()  # about to wait for the client: it must have every answer first
        self._resume()
        self._data.clear()
        await self._data.wait()
        if self._deadline is not None and asyncio.get_running_loop().time() >= self._deadline:
            raise TimeoutError("the client sent nothing in time")

    async def readline(self, limit: int) -> bytes:
        """One line with its LF; LineTooLong when none ends within ``limit`` bytes (the
        connection is then to be closed: the rest of the line is not read)."""
        while True:
            end = self._buf.find(b"\n", self._scanned)
            if end >= 0:
                if end + 1 > limit:
                    self._unread = True
                    raise LineTooLong(f"a line longer than {limit} bytes")
                line = bytes(self._buf[: end + 1])
                del self._buf[: end + 1]
                self._scanned = 0
                self._consumed()
                return line
            self._scanned = len(self._buf)
            if len(self._buf) > limit:
                self._unread = True
                raise LineTooLong(f"a line longer than {limit} bytes")
            await self._more()

    async def readexactly(self, n: int) -> bytes:
        while len(self._buf) < n:
            await self._more()
        return self._take(n)

    async def read_some(self, n: int) -> bytes:
        """At least one byte and at most ``n``: what has come (waiting for the first)."""
        while not self._buf:
            await self._more()
        return self._take(min(n, len(self._buf)))

    def _take(self, n: int) -> bytes:
        if n == len(self._buf):
            data = bytes(self._buf)
            self._buf.clear()
        else:
            data = bytes(self._buf[:n])
            del self._buf[:n]
        self._scanned = 0
        self._consumed()
        return data

    def refuse_rest(self) -> None:
        """The client is sending (or may send) what will not be read: a literal refused, the
        rest of a line too long. The close lingers (see the module's docstring)."""
        self._unread = True

    def pending(self) -> int:
        """Bytes received and not read yet."""
        return len(self._buf)

    def discard(self) -> None:
        self._buf.clear()
        self._scanned = 0
        self._consumed()

    # -- writing ----------------------------------------------------------------------------
    def write(self, data: bytes | memoryview) -> None:
        """Queue bytes; they go out together (one send) at ``flush``, at ``drain``, when
        ``FLUSH_AT`` bytes are queued, or before the next wait for the client."""
        self._out.append(data)
        self._queued += len(data)
        if self._queued >= FLUSH_AT:
            self.flush()

    def flush(self) -> None:
        if not self._out:
            return
        first = self._out[0]
        data = first if len(self._out) == 1 and isinstance(first, bytes) else b"".join(self._out)
        self._out.clear()
        self._queued = 0
        if not self.closing:
            assert self.transport is not None
            self.transport.write(data)

    @property
    def blocked(self) -> bool:
        """Whether :meth:`writable` would wait (or raise): the send buffer is full, or the
        connection closed. A command's answer checks this first: most never wait."""
        return not self._writable.is_set() or self.closing

    async def writable(self) -> None:
        """Wait while the socket's send buffer is full (flow control; queued bytes stay);
        TimeoutError when the client reads nothing for ``write_timeout`` seconds."""
        if self.closing:
            raise Closed("the connection is closed")
        if not self._writable.is_set():
            async with asyncio.timeout(self.write_timeout):
                await self._writable.wait()

    async def drain(self) -> None:
        self.flush()
        await self.writable()

    @property
    def closing(self) -> bool:
        return (
            self.transport is None or self.transport.is_closing() or self._lingering is not None
        )

    def close(self) -> None:
        """Send what is queued and close; linger first (see the module's docstring) when the
        client's input is not all read, or more is known to come (:meth:`refuse_rest`)."""
        transport = self.transport
        if transport is None or self.closing:
            return
        self.flush()
        if not (self._paused or self._buf or self._unread):
            transport.close()
            return
        self._lingering = LINGER_BYTES
        self._buf.clear()
        self._chunk = memoryview(DROPPED)
        loop = asyncio.get_running_loop()
        if transport.can_write_eof():
            transport.write_eof()
            self._resume()
            self._linger = loop.call_later(LINGER_SECONDS, transport.close)
        else:  # TLS: see the module's docstring
            if not self._paused:
                self._paused = True
                transport.pause_reading()
            self._linger = loop.call_later(LINGER_SECONDS, transport.abort)

    async def start_tls(self, context: ssl.SSLContext, timeout: float) -> None:
        """TLS from here on, server side; what the client sent before is thrown away."""
        assert self.transport is not None
        self.flush()
        self.discard()
        loop = asyncio.get_running_loop()
        transport = await loop.start_tls(
            self.transport,
            self,
            context,
            server_side=True,
            ssl_handshake_timeout=timeout,
            ssl_shutdown_timeout=LINGER_SECONDS,
        )
        if transport is None:
            raise Closed("the TLS handshake did not finish")
        self.transport = transport
        self._limit_tls()
