"""One IMAP connection's input (pochta.server.imapwire) against a stand-in transport: what it
holds of a client's bytes is bounded by the wire, before the login a few KB."""

from __future__ import annotations

import asyncio
import tracemalloc

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
        return self.closed

    closed = False
    eof = False

    def can_write_eof(self) -> bool:
        return True

    def write_eof(self) -> None:
        self.eof = True

    def close(self) -> None:
        self.closed = True


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
        assert not transport.paused  # the bound grew: reading goes on
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


def test_refused_connections_linger_without_a_buffer_each() -> None:
    """A connection closed while its client still sends lingers, reading what comes into one
    buffer that every lingering connection shares (its bytes are thrown away): a flood of
    refused connections costs no 64 KB each."""

    async def scenario() -> None:
        wires = [connected(4096, 4096) for _ in range(200)]
        for wire, transport in wires:
            deliver(wire, transport, bytearray(b"x" * 10_000))  # more than is read
        tracemalloc.start()
        try:
            for wire, _ in wires:
                wire.close()
            grown, _ = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert grown < 2 * CHUNK, grown  # 200 x 64 KB before
        for wire, transport in wires:
            assert transport.eof and not transport.closed  # lingering: FIN sent, reading on
            assert wire.closing
            deliver(wire, transport, bytearray(b"y" * 100_000))  # read and dropped
            assert wire.pending() == 0

    asyncio.run(scenario())


def test_the_wires_of_one_server_share_the_block_they_read_into() -> None:
    """The transport reads into one block for every connection (copied into the
    connection's own buffer at once): 1,000 logged-in sessions hold no 64 KB each, and each
    still gets exactly its own bytes."""
    scratch = bytearray(CHUNK)
    tracemalloc.start()
    try:
        wires = [
            Wire(lambda _: None, read_ahead=4096, chunk=4096, scratch=scratch) for _ in range(1000)
        ]
        for wire in wires:
            wire.connection_made(Transport())  # type: ignore[arg-type]
            wire.bound(READ_AHEAD, CHUNK)  # logged in
        grown, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert grown < 8 << 20, grown  # 1,000 x 64 KB: 64 MB
    a, b = wires[0], wires[1]
    for n in range(1, 51):  # reads of the two connections, interleaved
        for wire, byte in ((a, b"a"), (b, b"b")):
            wire.get_buffer(-1)[:n] = byte * n
            wire.buffer_updated(n)
    each = sum(range(1, 51))

    async def drain(wire: Wire) -> bytes:
        return await wire.readexactly(each)

    assert asyncio.run(drain(a)) == b"a" * each
    assert asyncio.run(drain(b)) == b"b" * each
