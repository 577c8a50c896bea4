"""The connection limits at the protocol edges (the decision: :mod:`pochta.guard.anvil`).

Each listener asks the ``Doorman`` when a connection comes in, before a greeting, and turns a
refusal into its protocol's answer, then closes:

- SMTP / LMTP: ``421 4.7.0 <hostname> Error: too many connections from <address>`` (Postfix's
  wording; ``from <network>`` when the network's limit refused, ``421 4.3.2 ... too many
  connections`` for the total: "system not accepting network messages", RFC 3463);
- IMAP: ``* BYE [UNAVAILABLE] too many connections from <address>; try again later``;
- HTTP: ``503 Service Unavailable`` with ``Connection: close``, written as soon as the
  connection is made (uvicorn's ``http=`` option takes the protocol class: a subclass of its
  httptools protocol, or of its h11 one with ``http.parser = "h11"``, that asks in
  ``connection_made``). The refused connection is then half-closed
  and what the client sends is read and dropped for up to ``LINGER`` seconds: a client that
  has sent its request before reading would otherwise lose the 503 to the reset that closing
  a socket with unread input sends (the reason for Apache's and nginx's lingering close).

Every refusal is counted in /metrics (``pochta_connections_refused_total{protocol,limit}``)
and logged at most once per address per ``LOG_INTERVAL`` (with how many refusals of that
address were not logged since), and at most ``LOG_LINES`` lines per interval in all: a flood
from many addresses does not flood the log.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, cast

from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from pochta import metrics
from pochta.guard.anvil import Admission, Gate, Limits
from pochta.guard.anvil.mapped import CAPACITY
from pochta.guard.anvil.memory import MemoryConnectionTable
from pochta.netaddr import Network, within

log = logging.getLogger("pochta.connections")

LOG_INTERVAL = 60.0  # seconds between two lines about one address
LOG_LINES = 100  # lines about refusals per interval, in all
LOG_KEYS = 10_000  # addresses remembered for that
LINGER = 2.0  # seconds a refused HTTP connection reads and drops its client's bytes


class Note(NamedTuple):
    log: bool  # log this refusal
    unlogged: int  # refusals of this key not logged since its last line
    budget_spent: bool  # the first refusal not logged because of the budget in this interval


@dataclass
class _Seen:
    at: float
    unlogged: int = 0


class LogThrottle:
    """Which refusals to log: one line per key per ``interval``, ``lines`` lines per interval
    in all; the keys remembered are bounded (``keys``; the longest unseen go first). Pure:
    the time is passed in."""

    def __init__(
        self, interval: float = LOG_INTERVAL, lines: int = LOG_LINES, keys: int = LOG_KEYS
    ) -> None:
        self.interval = interval
        self.lines = lines
        self.keys = keys
        self._seen: dict[str, _Seen] = {}  # in the order they were last logged
        self._started = -float("inf")
        self._logged = 0
        self._told = False

    @property
    def remembered(self) -> int:
        """Keys remembered now (at most ``keys``)."""
        return len(self._seen)

    def note(self, key: str, now: float) -> Note:
        if now - self._started >= self.interval:
            self._started, self._logged, self._told = now, 0, False
        seen = self._seen.get(key)
        if seen is not None and now - seen.at < self.interval:
            seen.unlogged += 1
            return Note(False, 0, False)
        if self._logged >= self.lines:
            if seen is not None:
                seen.unlogged += 1
            first, self._told = not self._told, True
            return Note(False, 0, first)
        self._logged += 1
        unlogged = seen.unlogged if seen is not None else 0
        self._seen.pop(key, None)
        self._seen[key] = _Seen(now)
        if len(self._seen) > self.keys:
            del self._seen[next(iter(self._seen))]
        return Note(True, unlogged, False)


def subject(admission: Admission) -> str | None:
    """What a refusal names: the address, its network, or nothing (a total limit)."""
    client = admission.client
    if client is None or admission.refused is None:
        return None
    if admission.refused.endswith("per_ip"):
        return client.address
    if admission.refused.endswith("per_network"):
        return client.network
    return None


class Doorman:
    """Asks the gate for each new connection; counts and logs the refusals."""

    def __init__(self, gate: Gate, *, clock: Any = time.monotonic) -> None:
        self.gate = gate
        self.throttle = LogThrottle()
        self._clock = clock

    def enter(self, protocol: str, peer: str) -> Admission:
        """The admission of a new connection (``peer``: its address as text); an allowed
        one is counted until its ``release()``."""
        admission = self.gate.admit(protocol, peer)
        if admission.untracked:
            metrics.connection_untracked(protocol)
        if admission.refused is not None:
            metrics.connection_refused(protocol, admission.refused)
            self._log(admission)
        return admission

    def _log(self, admission: Admission) -> None:
        assert admission.client is not None
        assert admission.refused is not None
        note = self.throttle.note(admission.client.address, self._clock())
        if note.budget_spent:
            log.warning(
                "connection refusals from more than %d addresses in %.0f s: the others are"
                " counted in /metrics (pochta_connections_refused_total), not logged",
                self.throttle.lines,
                self.throttle.interval,
            )
        if not note.log:
            return
        limit = getattr(self.gate.limits[admission.protocol], admission.refused)
        network = admission.client.network if admission.refused.endswith("network") else None
        log.warning(
            "%s connection from %s refused: over the %s limit (%d)%s%s",
            admission.protocol.upper(),
            admission.client.address,
            admission.refused,
            limit,
            f" of {network}" if network else "",
            f"; {note.unlogged} more refused since the last such line" if note.unlogged else "",
        )

    def close(self) -> None:
        self.gate.close()


def local_doorman(protocol: str, limits: Limits) -> Doorman:
    """A doorman that counts in this process only and trusts no address (a server built
    without the shared one: tests, embedding); it remembers as many addresses and networks
    as one slot of the shared table."""
    gate = Gate(
        MemoryConnectionTable(capacity=CAPACITY),
        {protocol: limits},
        secret=secrets.token_bytes(16),
        trusted=(),
        clock=time.monotonic,
    )
    return Doorman(gate)


def smtp_refusal(hostname: str, admission: Admission) -> str:
    """The reply to an SMTP (LMTP) connection refused, before any greeting (Postfix's)."""
    who = subject(admission)
    if who is None:
        return f"421 4.3.2 {hostname} Error: too many connections; try again later"
    return f"421 4.7.0 {hostname} Error: too many connections from {who}"


def imap_refusal(admission: Admission) -> bytes:
    """The untagged BYE that an IMAP connection refused gets instead of its greeting."""
    who = subject(admission)
    source = f" from {who}" if who is not None else ""
    return f"* BYE [UNAVAILABLE] too many connections{source}; try again later\r\n".encode()


def http_refusal(admission: Admission) -> bytes:
    who = subject(admission)
    body = f"too many connections{f' from {who}' if who else ''}; try again later\n".encode()
    head = (
        "HTTP/1.1 503 Service Unavailable\r\n"
        "content-type: text/plain; charset=utf-8\r\n"
        f"content-length: {len(body)}\r\n"
        "connection: close\r\n\r\n"
    )
    return head.encode() + body


def head_too_large(max_header_size: int) -> bytes:
    """The answer to a request whose line and headers are larger than ``max_header_size``
    (the API's 431, as its middleware words it); the connection is then closed."""
    message = f"the request line and headers are larger than {max_header_size} bytes"
    body = json.dumps(
        {"error": "headers_too_large", "message": message}, separators=(",", ":")
    ).encode()
    head = (
        "HTTP/1.1 431 Request Header Fields Too Large\r\n"
        "content-type: application/json\r\n"
        f"content-length: {len(body)}\r\n"
        "connection: close\r\n\r\n"
    )
    return head.encode() + body


class HeadTooLarge(Exception):
    """Raised from a parser callback to stop parsing a head over the limit (httptools turns it
    into its ``HttpParserCallbackError``, which uvicorn answers by ``send_400_response``)."""


@dataclass
class Door:
    """A governed HTTP connection's place at the door: its admission (None for a trusted
    proxy's connection), whether it was refused (what else comes is dropped), the timer that
    closes it after its refusal's linger, and the one that closes it when the first request's
    head has not come within ``header_timeout``."""

    admission: Admission | None = None
    refused: bool = False
    linger: asyncio.TimerHandle | None = None
    slow: asyncio.TimerHandle | None = None  # until the first request's head has come

    @classmethod
    def enter(
        cls,
        loop: asyncio.AbstractEventLoop,
        transport: asyncio.Transport,
        peer: str,
        doorman: Doorman,
        proxies: Sequence[Network],
        header_timeout: float,
    ) -> Door:
        """The door of a connection just made from ``peer``: the doorman asked (unless
        ``peer`` is a trusted proxy), a refusal written at once."""
        door = cls(slow=loop.call_later(header_timeout, transport.close))
        if within(peer, proxies):
            return door
        door.admission = doorman.enter("http", peer)
        if not door.admission.allowed:
            door.refuse(loop, transport, http_refusal(door.admission))
        return door

    def refuse(
        self, loop: asyncio.AbstractEventLoop, transport: asyncio.Transport, answer: bytes
    ) -> None:
        self.refused = True
        self.linger = refuse(loop, transport, answer)

    def head_came(self) -> None:
        """The first request's head has come whole: no more ``header_timeout``."""
        if self.slow is not None:
            self.slow.cancel()
            self.slow = None

    def leave(self) -> None:
        """The connection is lost: its timers cancelled, its place given back."""
        for timer in (self.linger, self.slow):
            if timer is not None:
                timer.cancel()
        if self.admission is not None:
            self.admission.release()


HELD_AT_MOST = 64 << 10  # bytes of one turn's writes held back before they are sent


class CoalescedWrites:
    """A transport whose writes made in one turn of the event loop go out as one send: uvicorn
    writes a response's status line and headers, then its body, each with a ``write`` of its
    own, so every answer cost two system calls and woke its client twice. The writes are
    joined and handed to the real transport at the end of the turn (``call_soon``), at once
    before a ``close`` or ``write_eof``, and as soon as they hold ``HELD_AT_MOST`` bytes (a
    body streamed without yielding to the loop: the transport's buffer and its flow control,
    pause_writing, see it as before); what is not a write goes to the real transport as it
    is."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self.transport = transport
        self.loop = loop
        self.pending: list[bytes | bytearray | memoryview] | None = None
        self.held = 0  # bytes in pending

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            return
        if len(data) >= HELD_AT_MOST:  # a big piece goes as it is, after what was held
            self.flush()
            if not self.transport.is_closing():
                self.transport.write(data)
            return
        if self.pending is None:
            self.pending = [data]
            self.held = len(data)
            self.loop.call_soon(self.flush)
        else:
            self.pending.append(data)
            self.held += len(data)
        if self.held >= HELD_AT_MOST:  # a body streamed without a pause: the transport's now
            self.flush()

    def writelines(self, lines: Iterable[bytes | bytearray | memoryview]) -> None:
        for data in lines:
            self.write(data)

    def flush(self) -> None:
        pending, self.pending, self.held = self.pending, None, 0
        if pending and not self.transport.is_closing():
            self.transport.write(pending[0] if len(pending) == 1 else b"".join(pending))

    def get_write_buffer_size(self) -> int:
        return self.transport.get_write_buffer_size() + self.held

    def write_eof(self) -> None:
        self.flush()
        self.transport.write_eof()

    def close(self) -> None:
        self.flush()
        self.transport.close()

    def abort(self) -> None:
        self.pending, self.held = None, 0
        self.transport.abort()

    def __getattr__(self, name: str) -> Any:  # is_closing, get_extra_info, pause_reading...
        return getattr(self.transport, name)


def governed_httptools(
    doorman: Doorman,
    proxies: Sequence[Network] = (),
    header_timeout: float = 60.0,
    max_header_size: int = 16384,
) -> type[HttpToolsProtocol]:
    """uvicorn's httptools protocol class (llhttp, in C: the parser costs a fraction of h11's),
    governed as :func:`governed_h11` is: the doorman for every connection but the trusted
    proxies', ``header_timeout`` for the first request's head, and a bound that httptools does
    not have: a request line and headers larger than ``max_header_size`` bytes (the request
    target, and every header's name and value with 4 bytes for ``": "`` and the line end, as
    :class:`pochta.server.api.limits.RequestBounds` counts them) get 431 and the connection is
    closed. The parser hands over a header only when it is whole, so a header that never
    ends is bounded by the bytes fed while no part of the head came out of the parser: the
    head held is at most ``max_header_size`` and one read of the socket."""

    class GovernedHttpTools(HttpToolsProtocol):
        door: Door
        in_head = True  # the parser is in a request's line and headers
        head = 0  # bytes of this head the parser has handed over
        unseen = 0  # bytes fed since the parser last handed over a part of the head
        progressed = False  # a part of the head came out during this feed
        too_large = False

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            peer = self.client[0] if self.client else ""
            self.door = Door.enter(self.loop, transport, peer, doorman, proxies, header_timeout)
            self.transport = cast(asyncio.Transport, CoalescedWrites(transport, self.loop))

        def data_received(self, data: bytes) -> None:
            if self.door.refused:
                return
            self.progressed = False
            super().data_received(data)
            if not self.in_head or self.transport.is_closing():
                return
            self.unseen = 0 if self.progressed else self.unseen + len(data)
            if self.head + self.unseen > max_header_size:
                self.too_large = True
                self.send_400_response("")

        def count_head(self, size: int) -> None:
            self.progressed = True
            self.unseen = 0
            self.head += size
            if self.head > max_header_size:
                self.too_large = True
                raise HeadTooLarge

        def on_message_begin(self) -> None:
            self.in_head, self.head, self.unseen, self.progressed = True, 0, 0, True
            super().on_message_begin()

        def on_url(self, url: bytes) -> None:
            self.count_head(len(url))
            super().on_url(url)

        def on_header(self, name: bytes, value: bytes) -> None:
            self.count_head(len(name) + len(value) + 4)
            super().on_header(name, value)

        def on_headers_complete(self) -> None:
            self.in_head = False
            self.door.head_came()
            super().on_headers_complete()

        def send_400_response(self, msg: str) -> None:
            if not self.too_large:
                super().send_400_response(msg)
                return
            # what else comes is dropped
            self.door.refuse(self.loop, self.transport, head_too_large(max_header_size))

        def eof_received(self) -> None:
            if self.door.refused:
                self.transport.close()

        def connection_lost(self, exc: Exception | None) -> None:
            self.door.leave()
            super().connection_lost(exc)

    return GovernedHttpTools


def refuse(
    loop: asyncio.AbstractEventLoop, transport: asyncio.Transport, answer: bytes
) -> asyncio.TimerHandle | None:
    """Write the ``answer`` of a refused HTTP connection (503, 431) and half-close it; the
    timer that closes it after ``LINGER`` seconds, while what the client still sends is
    read and dropped (None: closed now, TLS has no half-close)."""
    transport.write(answer)
    if transport.can_write_eof():
        transport.write_eof()  # the client reads the answer, then its end of file
        return loop.call_later(LINGER, transport.close)
    transport.close()
    return None


def governed_h11(
    doorman: Doorman, proxies: Sequence[Network] = (), header_timeout: float = 60.0
) -> type[H11Protocol]:
    """uvicorn's h11 protocol class, asking ``doorman`` for every connection (give it as
    ``uvicorn.Config(http=...)``) but those of the reverse proxies pochta believes
    (``proxies``: ``http.trusted_proxies``; every client behind one shares its address, so the
    proxy's own limits apply), and closing a connection that has not sent a whole request
    head within ``header_timeout`` seconds (nginx's ``client_header_timeout``; uvicorn keeps a
    connection that never sends a byte open for ever, and enough of them hold every
    connection the limits allow)."""

    class GovernedH11(H11Protocol):
        door: Door
        tail = b""  # the last bytes received, to find the head's end across reads

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            peer = self.client[0] if self.client else ""
            self.door = Door.enter(self.loop, transport, peer, doorman, proxies, header_timeout)

        def data_received(self, data: bytes) -> None:
            if self.door.refused:
                return
            if self.door.slow is not None:
                seen = self.tail + data
                if b"\r\n\r\n" in seen or b"\n\n" in seen:  # the head has come whole
                    self.door.head_came()
                self.tail = seen[-3:]
            super().data_received(data)

        def eof_received(self) -> None:
            if self.door.refused:
                self.transport.close()

        def connection_lost(self, exc: Exception | None) -> None:
            self.door.leave()
            super().connection_lost(exc)

    return GovernedH11
