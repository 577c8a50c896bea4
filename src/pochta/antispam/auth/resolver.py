"""DNS for sender authentication, behind one tiny interface.

``Resolver.query(name, rtype)`` answers TXT, A, AAAA, MX and PTR questions with a list of
strings: TXT records with their strings joined, addresses in ``ipaddress`` form, MX exchanges
in preference order, PTR names; trailing dots dropped. A name that does not exist and a name
without records of that type both answer ``[]`` (SPF counts both as "void"). A lookup that
could not be answered now (timeout, SERVFAIL, no server) raises :class:`DnsTempError`, which
the checks turn into ``temperror``; it never leaves :mod:`pochta.antispam.auth.results`.

Two resolvers ship: :class:`FixtureResolver`, a dict, for tests (never any network), and
:class:`DnsResolver` over dnspython for production.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Literal, Protocol

RType = Literal["TXT", "A", "AAAA", "MX", "PTR"]
RTYPES: tuple[RType, ...] = ("TXT", "A", "AAAA", "MX", "PTR")


class DnsTempError(Exception):
    """A lookup failed for now (timeout, SERVFAIL): the result is ``temperror``."""


class Resolver(Protocol):
    def query(self, name: str, rtype: RType) -> list[str]:
        """The records of ``name``; ``[]`` when there are none; DnsTempError for now."""


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


class DnsResolver:
    """The real resolver (dnspython), with a per-question ``timeout`` in seconds."""

    def __init__(self, timeout: float = 3.0, nameservers: Sequence[str] | None = None) -> None:
        import dns.resolver

        self._resolver = dns.resolver.Resolver(configure=nameservers is None)
        if nameservers is not None:
            self._resolver.nameservers = list(nameservers)
        self._resolver.lifetime = timeout

    def query(self, name: str, rtype: RType) -> list[str]:
        import dns.exception
        import dns.resolver

        try:
            answer = self._resolver.resolve(_key(name) + ".", rtype, search=False)
        except (dns.resolver.NXDOMAIN, dns.resolver.NoAnswer):
            return []
        except (dns.exception.Timeout, dns.resolver.NoNameservers) as exc:
            raise DnsTempError(f"{name} {rtype}: {exc}") from exc
        except dns.exception.DNSException as exc:  # malformed name, YXDOMAIN...
            raise DnsTempError(f"{name} {rtype}: {exc}") from exc
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
