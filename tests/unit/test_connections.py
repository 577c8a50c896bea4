"""The connection limits' edge (pochta.server.connections): each protocol's refusal, the
metric, and a log that a flood cannot flood: one line per address per interval (with how
many were not logged), a bounded number of lines and of remembered addresses; a response's
writes sent as one."""

from __future__ import annotations

import asyncio
import logging
import re
import socket
import threading
import time
from collections.abc import AsyncIterator

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, StreamingResponse
from starlette.routing import Route
from tests.servers import free_port

from pochta.guard.anvil import Gate, Limits
from pochta.guard.anvil.memory import MemoryConnectionTable
from pochta.server.connections import (
    HELD_AT_MOST,
    CoalescedWrites,
    Doorman,
    LogThrottle,
    governed_httptools,
    http_refusal,
    imap_refusal,
    smtp_refusal,
)


def test_one_line_per_key_per_interval_with_the_count_of_the_rest() -> None:
    t = LogThrottle(interval=60, lines=100)
    assert t.note("a", 0).log
    assert [t.note("a", s).log for s in range(1, 60)] == [False] * 59
    again = t.note("a", 60)
    assert again.log
    assert again.unlogged == 59
    assert t.note("b", 61).log  # another key has its own


def test_a_flood_from_many_keys_gets_a_bounded_number_of_lines() -> None:
    t = LogThrottle(interval=60, lines=100, keys=1000)
    notes = [t.note(f"10.0.{i // 256}.{i % 256}", 1.0 + i * 1e-4) for i in range(50_000)]
    assert sum(n.log for n in notes) == 100
    assert sum(n.budget_spent for n in notes) == 1  # one line says the rest are not logged
    assert t.remembered <= 1000  # what it remembers is bounded too
    assert t.note("10.9.9.9", 61.0).log  # the next interval logs again


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def doorman(limits: Limits) -> Doorman:
    gate = Gate(MemoryConnectionTable(), {"smtp": limits}, secret=b"s" * 16, clock=Clock())
    return Doorman(gate, clock=Clock())


def test_each_protocol_refuses_in_its_own_words() -> None:
    d = doorman(Limits(per_ip=1, per_network=2, total=3))
    assert d.enter("smtp", "192.0.2.1").allowed
    by_ip = d.enter("smtp", "192.0.2.1")
    assert by_ip.refused == "per_ip"
    assert smtp_refusal("mx.example", by_ip) == (
        "421 4.7.0 mx.example Error: too many connections from 192.0.2.1"
    )
    assert imap_refusal(by_ip) == (
        b"* BYE [UNAVAILABLE] too many connections from 192.0.2.1; try again later\r\n"
    )
    head, body = http_refusal(by_ip).split(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 503 Service Unavailable\r\n")
    assert b"\r\nconnection: close" in head
    assert f"content-length: {len(body)}".encode() in head
    assert d.enter("smtp", "192.0.2.2").allowed
    by_network = d.enter("smtp", "192.0.2.3")
    assert smtp_refusal("mx.example", by_network).endswith("from 192.0.2.0/24")
    assert d.enter("smtp", "198.51.100.1").allowed
    by_total = d.enter("smtp", "203.0.113.1")
    assert by_total.refused == "total"
    assert smtp_refusal("mx.example", by_total) == (
        "421 4.3.2 mx.example Error: too many connections; try again later"
    )
    assert imap_refusal(by_total) == (
        b"* BYE [UNAVAILABLE] too many connections; try again later\r\n"
    )


def test_refusals_are_counted_and_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    from prometheus_client import REGISTRY

    from pochta import metrics

    metrics.m()
    labels = {"protocol": "smtp", "limit": "per_ip"}
    before = REGISTRY.get_sample_value("pochta_connections_refused_total", labels) or 0.0
    d = doorman(Limits(per_ip=1))
    d.enter("smtp", "192.0.2.1")
    with caplog.at_level(logging.WARNING, logger="pochta.connections"):
        for _ in range(500):
            assert not d.enter("smtp", "192.0.2.1").allowed
    after = REGISTRY.get_sample_value("pochta_connections_refused_total", labels)
    assert after == before + 500
    assert [r.getMessage() for r in caplog.records] == [
        "SMTP connection from 192.0.2.1 refused: over the per_ip limit (1)"
    ]


class _Wire(asyncio.Transport):
    """A transport that records what is sent, one entry per send."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[bytes] = []
        self.closed = self.aborted = self.eof = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        assert not self.closed, "written after close"
        self.sent.append(bytes(data))

    def write_eof(self) -> None:
        self.eof = True

    def can_write_eof(self) -> bool:
        return True

    def is_closing(self) -> bool:
        return self.closed or self.aborted

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.aborted = True

    def get_write_buffer_size(self) -> int:
        return 0

    def get_extra_info(self, name: str, default: object = None) -> object:
        return ("127.0.0.1", 1) if name == "peername" else default


def test_a_turns_writes_go_out_as_one_send_in_their_order() -> None:
    async def main() -> _Wire:
        wire = _Wire()
        out = CoalescedWrites(wire, asyncio.get_running_loop())
        out.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n")
        out.write(memoryview(b"ok"))
        out.write(b"")
        assert wire.sent == [] and out.get_write_buffer_size() == 40
        await asyncio.sleep(0)
        assert wire.sent == [b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"]
        out.writelines([b"a", b"b"])
        out.write_eof()  # flushes first
        assert wire.sent[1:] == [b"ab"] and wire.eof
        out.write(b"last")
        out.close()  # flushes, then closes
        assert wire.sent[2:] == [b"last"] and wire.closed
        await asyncio.sleep(0)  # the turn's flush finds nothing left, writes nothing
        assert len(wire.sent) == 3
        assert out.get_extra_info("peername") == ("127.0.0.1", 1)  # the rest: the real one's
        return wire

    asyncio.run(main())


def test_an_aborted_connection_sends_nothing_it_held() -> None:
    async def main() -> None:
        wire = _Wire()
        out = CoalescedWrites(wire, asyncio.get_running_loop())
        out.write(b"held")
        out.abort()
        await asyncio.sleep(0)
        assert wire.sent == [] and wire.aborted

    asyncio.run(main())


def test_writes_past_the_bound_go_to_the_transport_at_once() -> None:
    """A body streamed without yielding is not held back whole: the transport (and its flow
    control) sees it as soon as the held bytes reach the bound."""

    async def main() -> None:
        wire = _Wire()
        out = CoalescedWrites(wire, asyncio.get_running_loop())
        chunk = b"x" * (HELD_AT_MOST // 4)
        for _ in range(10):
            out.write(chunk)
        assert [len(s) for s in wire.sent] == [HELD_AT_MOST, HELD_AT_MOST]
        assert out.get_write_buffer_size() == 2 * len(chunk)
        await asyncio.sleep(0)
        assert b"".join(wire.sent) == chunk * 10

    asyncio.run(main())


def test_uvicorn_through_the_coalescing_transport_answers_every_kind_in_order() -> None:
    """A real uvicorn with pochta's protocol: pipelined requests, a streamed body, a
    100-continue upload, HEAD and Connection: close, each answer whole and in its order."""

    async def hello(request: Request) -> PlainTextResponse:
        return PlainTextResponse("hello " + request.query_params.get("n", ""))

    async def stream(request: Request) -> StreamingResponse:
        async def chunks() -> AsyncIterator[bytes]:
            for i in range(3):
                yield b"chunk%d;" % i

        return StreamingResponse(chunks())

    async def echo(request: Request) -> PlainTextResponse:
        return PlainTextResponse(await request.body())

    app = Starlette(
        routes=[Route("/", hello), Route("/s", stream), Route("/e", echo, methods=["POST"])]
    )
    limits = Limits(per_ip=100, per_network=100, total=100)
    gate = Gate(MemoryConnectionTable(), {"http": limits}, secret=b"s" * 16, clock=time.monotonic)
    port = free_port()
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        http=governed_httptools(Doorman(gate)),
        log_level="warning",
        lifespan="off",
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 20
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.02)

        def talk(request: bytes) -> bytes:
            with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
                s.sendall(request)
                out = b""
                while data := s.recv(65536):
                    out += data
                return out

        pipelined = b"".join(b"GET /?n=%d HTTP/1.1\r\nHost: x\r\n\r\n" % i for i in range(5))
        pipelined += b"GET /s HTTP/1.1\r\nHost: x\r\n\r\n"
        pipelined += b"POST /e HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
        pipelined += b"Content-Length: 3\r\n\r\nabc"
        pipelined += b"GET /?n=last HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        out = talk(pipelined)  # the server closes after the last: recv sees its end
        found = re.findall(rb"hello \d+|hello last|chunk\d;|100 Continue|\r\n\r\nabc", out)
        assert found == [
            *(b"hello %d" % i for i in range(5)),
            b"chunk0;", b"chunk1;", b"chunk2;", b"100 Continue", b"\r\n\r\nabc", b"hello last",
        ]  # fmt: skip
        assert out.endswith(b"hello last") and out.count(b"HTTP/1.1 200 OK") == 8
        head = talk(b"HEAD / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 OK\r\n") and head.endswith(b"\r\n\r\n")
    finally:
        server.should_exit = True
        thread.join(10)


def test_a_big_piece_goes_as_it_is_after_what_was_held() -> None:
    async def main() -> None:
        wire = _Wire()
        out = CoalescedWrites(wire, asyncio.get_running_loop())
        body = b"y" * HELD_AT_MOST
        out.write(b"HTTP/1.1 200 OK\r\n\r\n")
        out.write(body)
        assert wire.sent == [b"HTTP/1.1 200 OK\r\n\r\n", body]  # not copied into one join
        await asyncio.sleep(0)
        assert len(wire.sent) == 2

    asyncio.run(main())
