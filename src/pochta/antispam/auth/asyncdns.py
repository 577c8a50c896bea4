"""The server's DNS: asked on the event loop, shared by every letter, never waited on by a
thread or a worker process.

:class:`DnsAsyncResolver` asks with dnspython's ``dns.asyncresolver`` (the library the
blocking :class:`~pochta.antispam.auth.resolver.DnsResolver` uses; already a dependency, and
its cache is the one kept here: ``dns.resolver.LRUCache``, bounded, each answer kept for its
TTL, a name that does not exist or has no record of the type for its SOA's negative TTL).

:class:`SharedDns` stands in front of it for the whole process:

- one question in flight per (name, type): letters from the same sender, arriving together,
  wait on one question; a question lives while a letter waits on it: once every letter
  waiting has given up (its lifetime ended), it is dropped, waiting for a slot or out
  (abandoned questions to a silent domain kept their slots for ``timeout`` seconds each, and
  40 of them left another letter's question unasked for 2 s with 4 slots);
- at most ``max_in_flight`` questions out at once (each holds a socket), and at most
  ``max_per_zone`` of them (never more than half) to names of one zone (the registrable
  domain of the name asked: ``x1.evil.example`` and ``_dmarc.evil.example`` are
  ``evil.example``'s), so that a domain whose name servers keep silent holds a few slots,
  not all; more wait for a slot, within their letter's time, those of one zone behind each
  other; a question whose queue is deep fails at once (see :class:`SharedDns`);
- a :class:`~pochta.antispam.auth.breaker.Breaker`: a server that has stopped answering is
  not asked again for a while, so a question then fails at once (``temperror``) instead of
  after ``timeout`` seconds.

A letter waits on a question at most its own remaining time (the caller's ``timeout``).
Every question and what became of it is counted (:func:`pochta.metrics.dns_question`), and
the breaker's state shown (:func:`pochta.metrics.dns_server`). One process, one event loop:
the server's.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from pochta import metrics
from pochta.antispam.auth.breaker import Breaker
from pochta.antispam.auth.resolver import (
    DnsTempError,
    DnsTimeout,
    Question,
    RType,
    failure,
    question,
    records,
    servers_of,
)
from pochta.mime import normalize

if TYPE_CHECKING:
    import dns.name

log = logging.getLogger("pochta.antispam.auth.dns")


class Upstream(Protocol):
    """Where :class:`SharedDns` sends its questions: an
    :class:`~pochta.antispam.auth.resolver.AsyncResolver` that can also tell whether its
    server is there at all."""

    async def query(self, name: str, rtype: RType, timeout: float) -> list[str]: ...

    async def probe(self, timeout: float) -> bool:
        """Whether the server replies at all (any reply) within ``timeout``."""


class DnsAsyncResolver:
    """dnspython's asynchronous resolver: the host's resolvers (``/etc/resolv.conf``) or the
    servers named (``address[:port]``), with a cache of ``cache_size`` answers (0: none;
    dnspython's ``LRUCache(0)`` would keep one). ``cached`` counts the questions answered
    from the cache."""

    def __init__(self, *, nameservers: Sequence[str] | None = None, cache_size: int = 10_000):
        import dns.asyncresolver
        import dns.resolver

        self._resolver = dns.asyncresolver.Resolver(configure=nameservers is None)
        if nameservers is not None:
            self._resolver.nameservers = servers_of(nameservers)
        self._cache = dns.resolver.LRUCache(cache_size) if cache_size > 0 else None
        self._resolver.cache = self._cache
        self._prober = dns.asyncresolver.Resolver(configure=False)  # no cache: asks each time
        self._prober.nameservers = list(self._resolver.nameservers)
        self._prober.retry_servfail = False
        self.cached = 0

    async def query(self, name: str, rtype: RType, timeout: float) -> list[str]:
        import dns.exception
        import dns.name
        import dns.resolver

        try:
            qname = dns.name.from_text(name.strip().rstrip(".").lower() + ".")
            if self._in_cache(qname, rtype):
                self.cached += 1
                metrics.dns_cache_hit()
            answer = await self._resolver.resolve(qname, rtype, search=False, lifetime=timeout)
        except (dns.resolver.NXDOMAIN, dns.resolver.NoAnswer):
            return []
        except dns.exception.DNSException as exc:
            raise failure(name, rtype, exc) from exc
        return records(answer, rtype)

    def _in_cache(self, qname: dns.name.Name, rtype: RType) -> bool:
        """Whether dnspython will answer from its cache: the records (or that there are
        none) of this type, or that the name does not exist (kept under type ANY)."""
        import dns.rcode
        import dns.rdataclass
        import dns.rdatatype

        if self._cache is None:
            return False
        IN = dns.rdataclass.IN
        if self._cache.get((qname, dns.rdatatype.from_text(rtype), IN)) is not None:
            return True
        gone = self._cache.get((qname, dns.rdatatype.ANY, IN))
        return gone is not None and gone.response.rcode() == dns.rcode.NXDOMAIN

    async def probe(self, timeout: float) -> bool:
        """The root zone's NS: a recursive resolver answers it from its cache, an
        authoritative-only server refuses it; either way it replied."""
        import dns.exception

        try:
            await self._prober.resolve(".", "NS", search=False, lifetime=timeout)
        except dns.exception.Timeout:
            return False
        except dns.exception.DNSException:
            return True  # REFUSED, SERVFAIL, NXDOMAIN...: a reply
        return True


def zone_of(name: str) -> str:
    """The zone a name's questions count against: its registrable domain (the Public Suffix
    List's), or, for a name that is none, its last two labels."""
    return normalize.registrable(name) or ".".join(name.split(".")[-2:])


@dataclass
class _Flight:
    """A question in flight, how many letters wait on it, and whether it was sent."""

    task: asyncio.Task[list[str]] = field(init=False)
    waiters: int = 0
    sent: bool = False


@dataclass
class _Zone:
    """One zone's slots, while any of its questions is asked or waits."""

    slots: asyncio.Semaphore
    users: int = 0


class SharedDns:
    """The process's one way to DNS (an AsyncResolver); see the module's doc. ``timeout``:
    seconds one question may take (``antispam.dns_timeout``); ``max_per_zone``: questions of
    one zone out at once (at most half of ``max_in_flight``). A queue is deep when
    ``max_waiting`` questions wait for a slot of the server (default 4 x ``max_in_flight``), or
    4 x ``max_per_zone`` for a slot of their zone: the last would wait four times every slot's
    ``timeout``, past any letter's lifetime, so a new question then fails at once. A zone's
    questions wait for its slots before they count against the server's: a silent zone's
    letters fill its queue, not everyone's."""

    def __init__(
        self,
        upstream: Upstream,
        *,
        timeout: float,
        max_in_flight: int = 256,
        max_per_zone: int = 8,
        max_waiting: int | None = None,
        breaker: Breaker | None = None,
    ) -> None:
        if max_in_flight < 1 or max_per_zone < 1:
            raise ValueError("max_in_flight and max_per_zone must be at least 1")
        self.upstream = upstream
        self.timeout = timeout
        self.max_in_flight = max_in_flight
        self.max_per_zone = max(1, min(max_per_zone, max_in_flight // 2))
        self.max_waiting = 4 * max_in_flight if max_waiting is None else max_waiting
        self.breaker = breaker if breaker is not None else Breaker()
        self.asked = 0  # questions sent to the server
        self.shared = 0  # questions that waited on one already in flight
        self.refused = 0  # questions failed at once because the server was down
        self.overflowed = 0  # questions failed at once because their queue was deep
        self.abandoned = 0  # questions dropped because every letter waiting gave up
        self.waiting = 0  # questions holding their zone's slot, waiting for the server's
        self._flying: dict[Question, _Flight] = {}
        self._zones: dict[str, _Zone] = {}
        self._slots: asyncio.Semaphore | None = None
        self._probes: set[asyncio.Task[None]] = set()

    async def query(self, name: str, rtype: RType, timeout: float) -> list[str]:
        if not self.breaker.allows():
            self._probe_if_due()
            self.refused += 1
            metrics.dns_question("server_down")
            raise DnsTempError(f"{name} {rtype}: the DNS server is not answering")
        key = question(name, rtype)
        flight = self._flying.get(key)
        if flight is None:
            flight = self._start(key)
        else:
            self.shared += 1
            metrics.dns_question("shared")
        flight.waiters += 1
        try:
            async with asyncio.timeout(timeout):
                return list(await asyncio.shield(flight.task))
        except TimeoutError:
            raise DnsTempError(f"{key[0]} {rtype}: no answer within the letter's time") from None
        finally:
            flight.waiters -= 1
            if flight.waiters == 0 and not flight.task.done():
                self._drop(key, flight)

    def _start(self, key: Question) -> _Flight:
        """A new question, unless its queue is deep (DnsTempError at once)."""
        zone = zone_of(key[0])
        entry = self._zones.get(zone)
        deep = None
        if self.waiting >= self.max_waiting:
            deep = f"{self.waiting} DNS questions wait for the server already"
        elif entry is not None and entry.users >= 5 * self.max_per_zone:
            deep = f"{entry.users} DNS questions to {zone} are out or waiting already"
        if deep is not None:
            self.overflowed += 1
            metrics.dns_question("queue_full")
            raise DnsTempError(f"{key[0]} {key[1]}: {deep}")
        if entry is None:
            entry = self._zones[zone] = _Zone(asyncio.Semaphore(self.max_per_zone))
        entry.users += 1
        flight = _Flight()
        flight.task = asyncio.ensure_future(self._ask(key, entry, flight))
        self._flying[key] = flight
        flight.task.add_done_callback(functools.partial(self._landed, key, zone, entry))
        return flight

    def _drop(self, key: Question, flight: _Flight) -> None:
        """No letter waits on the question any more: it gives up its slot (or its place in
        its queue) now. One that was sent got no reply for as long as its letters waited:
        for the breaker, as a timeout (the probe decides whether the server is gone, so a
        sender's silent name servers still cannot trip it; and with a dns_lifetime shorter
        than dns_timeout a server that never answers is still found out)."""
        if self._flying.get(key) is flight:
            del self._flying[key]  # a letter asking it again starts a new one
        flight.task.cancel()
        if flight.sent:
            self.breaker.timed_out()
            self._probe_if_due()
        self.abandoned += 1
        metrics.dns_question("abandoned")

    def _landed(
        self, key: Question, zone: str, entry: _Zone, done: asyncio.Future[list[str]]
    ) -> None:
        flight = self._flying.get(key)
        if flight is not None and flight.task is done:
            del self._flying[key]
        entry.users -= 1  # here, not in _ask: a task cancelled before it ran runs no finally
        if entry.users == 0 and self._zones.get(zone) is entry:
            del self._zones[zone]
        if not done.cancelled():
            done.exception()  # retrieved: every waiter may have given up on it

    async def _ask(self, key: Question, zone: _Zone, flight: _Flight) -> list[str]:
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.max_in_flight)
        async with zone.slots:
            self.waiting += 1
            try:
                await self._slots.acquire()
            finally:
                self.waiting -= 1
            try:
                return await self._send(key, flight)
            finally:
                self._slots.release()

    async def _send(self, key: Question, flight: _Flight) -> list[str]:
        if not self.breaker.allows():
            metrics.dns_question("server_down")
            raise DnsTempError(f"{key[0]} {key[1]}: the DNS server is not answering")
        self.asked += 1
        flight.sent = True
        try:
            answer = await self.upstream.query(key[0], key[1], self.timeout)
        except DnsTimeout:
            metrics.dns_question("timed_out")
            self.breaker.timed_out()
            self._probe_if_due()
            raise
        except DnsTempError:
            # SERVFAIL and the like: a reply, but not an answer; the streak stands
            metrics.dns_question("failed")
            raise
        metrics.dns_question("answered")
        self.breaker.replied()
        return answer

    def _probe_if_due(self) -> None:
        if self.breaker.take_probe():
            task = asyncio.ensure_future(self._probe())
            self._probes.add(task)
            task.add_done_callback(self._probes.discard)

    async def _probe(self) -> None:
        was_down = not self.breaker.allows()
        try:
            replied = await self.upstream.probe(self.timeout)
        except Exception:  # a probe that failed oddly tells nothing: as no reply
            log.exception("DNS probe failed")
            replied = False
        self.breaker.probed(replied)
        down = not self.breaker.allows()
        metrics.dns_server(down=down, went_down=down and not was_down)
        if not replied and not was_down:
            log.warning(
                "the DNS server does not answer: SPF, DKIM and DMARC are temperror at once,"
                " and it is probed again every %g s",
                self.breaker.pause,
            )
        elif replied and was_down:
            log.warning("the DNS server answers again")

    def close(self) -> None:
        """Stop the probes in flight (the loop is closing)."""
        for task in list(self._probes):
            task.cancel()
