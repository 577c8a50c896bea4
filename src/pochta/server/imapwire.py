"""One IMAP connection's bytes: an asyncio protocol with its own input buffer.

Owning the buffer (rather than an ``asyncio.StreamReader``) lets the server bound every
read (a line longer than the limit is refused before it is kept whole), stop reading from
the socket while the buffer is full (a client that sends faster than it is read waits), and
throw away what a client sent after STARTTLS before the handshake (plaintext injected
there must never be read as commands sent under TLS).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable
from typing import cast

HIGH_WATER = 1 << 20  # buffered input past which the socket is not read
FLUSH_AT = 1 << 16  # queued output past which it is sent at once


class LineTooLong(Exception):
    pass


class Closed(Exception):
    pass


class Wire(asyncio.Protocol):
    """``on_connect(wire)`` is called once the connection is made (it starts the session)."""

    def __init__(self, on_connect: Callable[[Wire], None]) -> None:
        self._on_connect: Callable[[Wire], None] | None = on_connect
        self.transport: asyncio.Transport | None = None
        self.peer: str = "?"
        self._buf = bytearray()
        self._scanned = 0  # bytes of _buf known to hold no LF
        self._eof = False
        self._data = asyncio.Event()
        self._writable = asyncio.Event()
        self._writable.set()
        self._paused = False
        self._out: list[bytes] = []
        self._queued = 0
        self.write_timeout = 300.0

    # -- asyncio.Protocol ---------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        peer = transport.get_extra_info("peername")
        self.peer = str(peer[0]) if isinstance(peer, tuple) else "local"
        if self._on_connect is not None:  # once: not again after STARTTLS
            on_connect, self._on_connect = self._on_connect, None
            on_connect(self)

    def data_received(self, data: bytes) -> None:
        self._buf += data
        self._data.set()
        if len(self._buf) > HIGH_WATER and not self._paused and self.transport is not None:
            self._paused = True
            self.transport.pause_reading()

    def eof_received(self) -> bool | None:
        self._eof = True
        self._data.set()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._eof = True
        self._data.set()
        self._writable.set()

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()

    # -- reading ----------------------------------------------------------------------------
    def _consumed(self) -> None:
        if self._paused and len(self._buf) <= HIGH_WATER // 2 and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()

    async def _more(self) -> None:
        if self._eof:
            raise Closed("the client closed the connection")
        self.flush()  # about to wait for the client: it must have every answer first
        self._data.clear()
        await self._data.wait()

    async def readline(self, limit: int) -> bytes:
        """One line with its LF; LineTooLong when none ends within ``limit`` bytes (the
        connection is then to be closed: the rest of the line is not read)."""
        while True:
            end = self._buf.find(b"\n", self._scanned)
            if end >= 0:
                if end + 1 > limit:
                    raise LineTooLong(f"a line longer than {limit} bytes")
                line = bytes(self._buf[: end + 1])
                del self._buf[: end + 1]
                self._scanned = 0
                self._consumed()
                return line
            self._scanned = len(self._buf)
            if len(self._buf) > limit:
                raise LineTooLong(f"a line longer than {limit} bytes")
            await self._more()

    async def readexactly(self, n: int) -> bytes:
        while len(self._buf) < n:
            if self._paused and self.transport is not None:  # the caller asked for this much
                self._paused = False
                self.transport.resume_reading()
            await self._more()
        data = bytes(self._buf[:n])
        del self._buf[:n]
        self._scanned = 0
        self._consumed()
        return data

    def pending(self) -> int:
        """Bytes received and not read yet."""
        return len(self._buf)

    def discard(self) -> None:
        self._buf.clear()
        self._scanned = 0
        self._consumed()

    # -- writing ----------------------------------------------------------------------------
    def write(self, data: bytes) -> None:
        """Queue bytes; they go out together (one send) at ``flush``, at ``drain``, when
        ``FLUSH_AT`` bytes are queued, or before the next wait for the client."""
        self._out.append(data)
        self._queued += len(data)
        if self._queued >= FLUSH_AT:
            self.flush()

    def flush(self) -> None:
        if not self._out:
            return
        data = self._out[0] if len(self._out) == 1 else b"".join(self._out)
        self._out.clear()
        self._queued = 0
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    async def writable(self) -> None:
        """Wait while the socket's send buffer is full (flow control; queued bytes stay);
        TimeoutError when the client reads nothing for ``write_timeout`` seconds."""
        if self.transport is None or self.transport.is_closing():
            raise Closed("the connection is closed")
        if not self._writable.is_set():
            async with asyncio.timeout(self.write_timeout):
                await self._writable.wait()

    async def drain(self) -> None:
        self.flush()
        await self.writable()

    @property
    def closing(self) -> bool:
        return self.transport is None or self.transport.is_closing()

    def close(self) -> None:
        if self.transport is not None:
            self.flush()
            self.transport.close()

    async def start_tls(self, context: ssl.SSLContext, timeout: float) -> None:
        """TLS from here on, server side; what the client sent before is thrown away."""
        assert self.transport is not None
        self.flush()
        self.discard()
        loop = asyncio.get_running_loop()
        transport = await loop.start_tls(
            self.transport, self, context, server_side=True, ssl_handshake_timeout=timeout
        )
        if transport is None:
            raise Closed("the TLS handshake did not finish")
        self.transport = transport
