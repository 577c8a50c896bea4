"""The server's DNS: asked on the event loop, shared by every letter, never waited on by a
thread or a worker process.

:class:`DnsAsyncResolver` asks with dnspython's ``dns.asyncresolver`` (the library the
blocking :class:`~pochta.antispam.auth.resolver.DnsResolver` uses; already a dependency, and
its cache is the one kept here: ``dns.resolver.LRUCache``, bounded, each answer kept for its
TTL, a name that does not exist or has no record of the type for its SOA's negative TTL).

:class:`SharedDns` stands in front of it for the whole process:

- one question in flight per (name, type): letters from the same sender, arriving together,
  wait on one question;
- at most ``max_in_flight`` questions out at once (each holds a socket); more wait for a slot,
  within their letter's time;
- a :class:`~pochta.antispam.auth.breaker.Breaker`: a server that has stopped answering is
  not asked again for a while, so a question then fails at once (``temperror``) instead of
  after ``timeout`` seconds.

A letter waits on a question at most its own remaining time (the caller's ``timeout``); the
question itself goes on for others to ``timeout``. One process, one event loop: the server's.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Sequence
from typing import Protocol

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
    servers named (``address[:port]``), with a cache of ``cache_size`` answers."""

    def __init__(self, *, nameservers: Sequence[str] | None = None, cache_size: int = 10_000):
        import dns.asyncresolver
        import dns.resolver

        self._resolver = dns.asyncresolver.Resolver(configure=nameservers is None)
        if nameservers is not None:
            self._resolver.nameservers = servers_of(nameservers)
        self._resolver.cache = dns.resolver.LRUCache(cache_size)
        self._prober = dns.asyncresolver.Resolver(configure=False)  # no cache: asks each time
        self._prober.nameservers = list(self._resolver.nameservers)
        self._prober.retry_servfail = False

    async def query(self, name: str, rtype: RType, timeout: float) -> list[str]:
        import dns.exception
        import dns.resolver

        try:
            answer = await self._resolver.resolve(
                name.strip().rstrip(".").lower() + ".", rtype, search=False, lifetime=timeout
            )
        except (dns.resolver.NXDOMAIN, dns.resolver.NoAnswer):
            return []
        except dns.exception.DNSException as exc:
            raise failure(name, rtype, exc) from exc
        return records(answer, rtype)

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


class SharedDns:
    """The process's one way to DNS (an AsyncResolver); see the module's doc. ``timeout``:
    seconds one question may take (``antispam.dns_timeout``)."""

    def __init__(
        self,
        upstream: Upstream,
        *,
        timeout: float,
        max_in_flight: int = 256,
        breaker: Breaker | None = None,
    ) -> None:
        if max_in_flight < 1:
            raise ValueError("max_in_flight must be at least 1")
        self.upstream = upstream
        self.timeout = timeout
        self.max_in_flight = max_in_flight
        self.breaker = breaker if breaker is not None else Breaker()
        self.asked = 0  # questions sent to the server
        self.shared = 0  # questions that waited on one already in flight
        self.refused = 0  # questions failed at once because the server was down
        self._flying: dict[Question, asyncio.Future[list[str]]] = {}
        self._slots: asyncio.Semaphore | None = None
        self._probes: set[asyncio.Task[None]] = set()

    async def query(self, name: str, rtype: RType, timeout: float) -> list[str]:
        if not self.breaker.allows():
            self._probe_if_due()
            self.refused += 1
            raise DnsTempError(f"{name} {rtype}: the DNS server is not answering")
        key = question(name, rtype)
        flying = self._flying.get(key)
        if flying is None:
            flying = asyncio.ensure_future(self._ask(key))
            self._flying[key] = flying
            flying.add_done_callback(functools.partial(self._landed, key))
        else:
            self.shared += 1
        try:
            async with asyncio.timeout(timeout):
                return list(await asyncio.shield(flying))
        except TimeoutError:
            raise DnsTempError(f"{key[0]} {rtype}: no answer within the letter's time") from None

    def _landed(self, key: Question, done: asyncio.Future[list[str]]) -> None:
        if self._flying.get(key) is done:
            del self._flying[key]
        if not done.cancelled():
            done.exception()  # retrieved: every waiter may have given up on it

    async def _ask(self, key: Question) -> list[str]:
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.max_in_flight)
        async with self._slots:
            if not self.breaker.allows():
                raise DnsTempError(f"{key[0]} {key[1]}: the DNS server is not answering")
            self.asked += 1
            try:
                answer = await self.upstream.query(key[0], key[1], self.timeout)
            except DnsTimeout:
                self.breaker.timed_out()
                self._probe_if_due()
                raise
            except DnsTempError:
                raise  # SERVFAIL and the like: a reply, but not an answer; the streak stands
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
