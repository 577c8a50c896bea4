"""DNS for sender authentication, behind one tiny interface.

``Resolver.query(name, rtype)`` answers TXT, A, AAAA, MX and PTR questions with a list of
strings: TXT records with their strings joined, addresses in ``ipaddress`` form, MX exchanges
in preference order, PTR names; trailing dots dropped. A name that does not exist and a name
without records of that type both answer ``[]`` (SPF counts both as "void"). A lookup that
could not be answered now (timeout, SERVFAIL, no server) raises :class:`DnsTempError`, which
the checks turn into ``temperror``; it never leaves :mod:`pochta.antispam.auth.results`.

Two resolvers ship: :class:`FixtureResolver`, a dict, for tests (never any network), and
:class:`DnsResolver` over dnspython for production: the host's resolvers (``/etc/resolv.conf``)
or one server named in the settings (``antispam.dns_server = "127.0.0.1:5353"``).

:class:`LimitedResolver` wraps either for one letter: at most ``max_queries`` questions and
``lifetime`` seconds in all, then every further question is ``DnsTempError``. With each
question's own timeout this bounds what one letter's SPF, DKIM and DMARC can cost, whatever
the sender's records say (RFC 7208 4.6.4 asks for a limit on the total time; the counts of
terms and void lookups are the SPF evaluator's).

The server does not ask through these: its questions are asynchronous
(:class:`AsyncResolver`, :mod:`pochta.antispam.auth.asyncdns`), asked on the event loop while a
worker process reads the letter, and the checks run on the answers gathered
(:mod:`pochta.antispam.auth.replay`). The synchronous ones serve the CLI (``pochta scan``), the
tests, and the checks re-run on gathered answers.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, Literal, Protocol

from pochta.netaddr import parse_server

RType = Literal["TXT", "A", "AAAA", "MX", "PTR"]
RTYPES: tuple[RType, ...] = ("TXT", "A", "AAAA", "MX", "PTR")


class DnsTempError(Exception):
    """A lookup failed for now (timeout, SERVFAIL): the result is ``temperror``."""


class DnsTimeout(DnsTempError):
    """No reply came in time: the server may be gone (what the server's breaker counts), as
    opposed to a reply that says it cannot answer (SERVFAIL, REFUSED)."""


class NeedAnswer(Exception):
    """Raised by a resolver that replays answers gathered so far (:mod:`~pochta.antispam.auth.
    replay`) for a question it has no answer to yet: the caller asks it, then runs the check
    again. The checks let it through untouched."""

    def __init__(self, name: str, rtype: RType) -> None:
        super().__init__(f"{name} {rtype}")
        self.question = (name, rtype)


class Resolver(Protocol):
    def query(self, name: str, rtype: RType) -> list[str]:
        """The records of ``name``; ``[]`` when there are none; DnsTempError for now."""


class AsyncResolver(Protocol):
    async def query(self, name: str, rtype: RType, timeout: float) -> list[str]:
        """As :meth:`Resolver.query`, awaited, waiting at most ``timeout`` seconds (then
        :class:`DnsTimeout`)."""


Question = tuple[str, RType]
"""A DNS question: (name lower-cased without the final dot, record type)."""


def question(name: str, rtype: RType) -> Question:
    return (_key(name), rtype)


def _key(name: str) -> str:
    return name.strip().rstrip(".").lower()


class FixtureResolver:
    """An offline zone: ``{name: {rtype: [records]}}``. Names in ``failing`` raise
    DnsTempError for every question. ``queries`` lists every question asked, in order.

    >>> r = FixtureResolver({"example.com": {"TXT": ["v=spf1 -all"]}})
    >>> r.query("EXAMPLE.com.", "TXT")
    ['v=spf1 -all']
    """

    def __init__(
        self,
        records: Mapping[str, Mapping[str, Sequence[str]]] | None = None,
        failing: Collection[str] = (),
    ) -> None:
        self.records: dict[str, dict[str, list[str]]] = {}
        for name, by_type in (records or {}).items():
            for rtype, values in by_type.items():
                self.add(name, rtype, *values)
        self.failing = {_key(n) for n in failing}
        self.queries: list[tuple[str, RType]] = []

    def add(self, name: str, rtype: str, *values: str) -> None:
        rt = rtype.upper()
        if rt not in RTYPES:
            raise ValueError(f"unsupported record type {rtype!r}")
        bucket = self.records.setdefault(_key(name), {}).setdefault(rt, [])
        bucket.extend(v.rstrip(".") if rt in ("MX", "PTR") else v for v in values)

    def query(self, name: str, rtype: RType) -> list[str]:
        key = _key(name)
        self.queries.append((key, rtype))
        if key in self.failing:
            raise DnsTempError(f"{key}: lookup failed (fixture)")
        return list(self.records.get(key, {}).get(rtype, ()))


class AsyncFixture:
    """An :class:`AsyncResolver` over a synchronous one (a :class:`FixtureResolver`): the
    in-memory fake of the server's resolver. ``delay``: seconds each answer takes; names in
    ``silent`` never get a reply (the sender's name servers keep silent), nor does anything
    while ``dead`` (the DNS server itself is gone): :class:`DnsTimeout` after the timeout.
    ``asked`` counts the questions, ``probes`` the probes."""

    def __init__(
        self,
        resolver: Resolver,
        *,
        delay: float = 0.0,
        silent: Collection[str] = (),
        dead: bool = False,
    ) -> None:
        self.resolver = resolver
        self.delay = delay
        self.silent = {_key(n) for n in silent}
        self.dead = dead
        self.asked = 0
        self.probes = 0

    async def query(self, name: str, rtype: RType, timeout: float) -> list[str]:
        import asyncio

        self.asked += 1
        if self.dead or _key(name) in self.silent or self.delay > timeout:
            await asyncio.sleep(timeout)
            raise DnsTimeout(f"{name} {rtype}: no reply in {timeout:g} s (fixture)")
        if self.delay:
            await asyncio.sleep(self.delay)
        return self.resolver.query(name, rtype)

    async def probe(self, timeout: float) -> bool:
        import asyncio

        self.probes += 1
        if self.dead:
            await asyncio.sleep(timeout)
            return False
        return True


def servers_of(texts: Sequence[str]) -> list[Any]:
    """dnspython's nameserver objects for ``address[:port]`` texts (``parse_server``)."""
    import dns.nameserver

    return [dns.nameserver.Do53Nameserver(*parse_server(text)) for text in texts]


def records(answer: Any, rtype: RType) -> list[str]:
    """A dnspython answer as :class:`Resolver` returns it: TXT strings joined, MX exchanges in
    preference order, names without the final dot."""
    out: list[tuple[int, str]] = []
    for rdata in answer:
        if rtype == "TXT":
            out.append((0, b"".join(rdata.strings).decode("utf-8", "replace")))
        elif rtype == "MX":
            out.append((int(rdata.preference), str(rdata.exchange).rstrip(".").lower()))
        elif rtype == "PTR":
            out.append((0, str(rdata.target).rstrip(".").lower()))
        else:
            out.append((0, str(rdata.address)))
    if rtype == "MX":
        out.sort(key=lambda p: p[0])
    return [v for _, v in out]


def failure(name: str, rtype: RType, exc: Exception) -> DnsTempError:
    """dnspython's exception for a question that got no usable answer, as a DnsTempError
    (:class:`DnsTimeout` when no reply came at all)."""
    import dns.exception

    if isinstance(exc, dns.exception.Timeout):
        return DnsTimeout(f"{name} {rtype}: {exc}")
    return DnsTempError(f"{name} {rtype}: {exc}")  # SERVFAIL, REFUSED, a malformed name...


class DnsResolver:
    """The real resolver (dnspython). ``timeout``: seconds one question may take, over all
    servers and retries. ``nameservers``: ``address[:port]`` of the servers to ask (default:
    the host's, from ``/etc/resolv.conf``)."""

    def __init__(self, timeout: float = 3.0, nameservers: Sequence[str] | None = None) -> None:
        import dns.resolver

        self._resolver = dns.resolver.Resolver(configure=nameservers is None)
        if nameservers is not None:
            self._resolver.nameservers = servers_of(nameservers)
        self._resolver.lifetime = timeout

    def query(self, name: str, rtype: RType) -> list[str]:
        import dns.exception
        import dns.resolver

        try:
            answer = self._resolver.resolve(_key(name) + ".", rtype, search=False)
        except (dns.resolver.NXDOMAIN, dns.resolver.NoAnswer):
            return []
        except dns.exception.DNSException as exc:  # timeout, SERVFAIL, malformed name...
            raise failure(name, rtype, exc) from exc
        return records(answer, rtype)


class LimitedResolver:
    """At most ``max_queries`` questions and ``lifetime`` seconds (from the first question)
    through ``resolver``; past either, DnsTempError (the check's result is ``temperror``).
    ``queries`` counts the questions asked."""

    def __init__(
        self,
        resolver: Resolver,
        *,
        max_queries: int,
        lifetime: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.resolver = resolver
        self.max_queries = max_queries
        self.lifetime = lifetime
        self.clock = clock
        self.queries = 0
        self._deadline: float | None = None

    def query(self, name: str, rtype: RType) -> list[str]:
        now = self.clock()
        if self._deadline is None:
            self._deadline = now + self.lifetime
        if self.queries >= self.max_queries:
            raise DnsTempError(f"more than {self.max_queries} DNS questions for one letter")
        if now > self._deadline:
            raise DnsTempError(f"DNS took more than {self.lifetime:g} s for one letter")
        self.queries += 1
        return self.resolver.query(name, rtype)
