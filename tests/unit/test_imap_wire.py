"""One IMAP connection's input (pochta.server.imapwire) against a stand-in transport: what it
holds of a client's bytes is bounded by the wire, before the login a few KB."""

from __future__ import annotations

import asyncio

from pochta.server.imapwire import CHUNK, READ_AHEAD, Wire


class Transport:
    """What the wire asks of an asyncio transport; reading stops while it is paused."""

    def __init__(self) -> None:
        self.paused = False
        self.out = bytearray()

    def get_extra_info(self, name: str) -> object:
        return ("127.0.0.2", 40000) if name == "peername" else None

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False

    def write(self, data: bytes) -> None:
        self.out += data

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        pass


def deliver(wire: Wire, transport: Transport, stream: bytearray) -> int:
    """Hand the wire what the client sent, as an event loop does (into the wire's own
    buffer, one read at a time, none while paused); the bytes read."""
    read = 0
    while stream and not transport.paused:
        buf = wire.get_buffer(-1)
        n = min(len(buf), len(stream))
        buf[:n] = stream[:n]
        del stream[:n]
        wire.buffer_updated(n)
        read += n
    return read


def connected(read_ahead: int, chunk: int) -> tuple[Wire, Transport]:
    wire = Wire(lambda _: None, read_ahead=read_ahead, chunk=chunk)
    transport = Transport()
    wire.connection_made(transport)  # type: ignore[arg-type]
    return wire, transport


def test_before_the_login_a_connection_holds_a_few_kb_of_what_it_is_sent() -> None:
    """A client that sends 1 MB before its first command is read: the wire takes 4 KB at a
    time and stops reading past 4 KB, whatever the transport could read at once."""
    wire, transport = connected(4096, 4096)
    stream = bytearray(b"a" * (1 << 20))
    assert len(wire.get_buffer(-1)) == 4096
    read = deliver(wire, transport, stream)
    assert transport.paused
    assert read <= 8192 and wire.pending() <= 8192


def test_a_read_that_asks_for_more_reads_on_and_the_bound_grows_after_the_login() -> None:
    async def scenario() -> None:
        wire, transport = connected(4096, 4096)
        stream = bytearray(b"x" * 10_000 + b"\r\n" + b"y" * 300_000)
        deliver(wire, transport, stream)
        line = asyncio.ensure_future(wire.readline(20_000))  # asks for more than is here
        await asyncio.sleep(0)
        assert not transport.paused  # the reader resumed reading
        deliver(wire, transport, stream)
        assert len(await line) == 10_002
        wire.bound(READ_AHEAD, CHUNK)  # logged in
        assert len(wire.get_buffer(-1)) == CHUNK
        transport.resume_reading()
        deliver(wire, transport, stream)
        assert READ_AHEAD < wire.pending() <= READ_AHEAD + CHUNK
        got = bytearray()
        while len(got) < 300_000:
            piece = await wire.read_some(1 << 20)
            assert piece
            got += piece
            deliver(wire, transport, stream)
        assert got == b"y" * 300_000

    asyncio.run(scenario())
