"""Trusted forwarders (``antispam.trusted_forwarders``, issue 28): forwarding services and
relays whose Received fields the installation trusts, so that the sender checks read the hop
before them.

A letter that reaches pochta through a forwarding service (an address-masking service such
as sneakemail.com, an alumni or a vanity domain's forwarder, the mailbox provider a user's
mail is fetched from) carries the forwarder's path, not the sender's: an address-masking
service writes its own address in From and the original sender's into the display name, a
plain forwarder rewrites the envelope sender to its own (SRS). Only the reader can say that
a forwarder is theirs, as SpamAssassin's ``trusted_networks`` says which relays are: the
operator lists them.

:func:`origin` walks the Received fields from the top (the newest, written by the server
that received the letter last: pochta's own trace on a letter delivered over SMTP). A field
whose ``from`` part names a trusted host, or a local one (loopback, private addresses), was
handed over by a host the installation trusts, so the field below it was written by that
host and is read too; the first field whose ``from`` part names neither is the **origin**:
the hop where the letter entered the trusted chain, as a trusted host wrote it. No field
below it is read (the sender writes those). Without a trusted hop above it there is no
origin: the checks read the letter as before.

What a name in the list is matched against is what the receiving host wrote: for a hop into
pochta itself, the client's HELO (pochta's trace names no reverse DNS), which the client
chooses; an IP network in the list matches the client's address, which it does not. The
checks that rest on the origin also rest on the From domain (``Context.trust_from``): their
signs are withheld, and shown again when authentication shows the From domain forged.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pochta.netaddr import Network, parse_forwarders

MAX_FIELDS = 30
"""Received fields read from the top, at most."""
MAX_FIELD = 1024
"""Characters of one Received field read."""

LOCAL_NETS = tuple(
    ipaddress.ip_network(n)
    for n in (
        *("127.0.0.0/8", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16"),
        *("100.64.0.0/10", "::1/128", "fc00::/7", "fe80::/10"),
    )
)
"""Loopback, private (RFC 1918, 4193), shared (RFC 6598) and link-local networks: a hop
from one was a hand-over inside the receiving side."""
_LOCAL_NAMES = ("localhost", "localhost.localdomain")

# The ``from`` part of a Received field: from its start up to `` by `` (or the end).
_FROM_PART = re.compile(
    r"\s{0,16}from\s{1,16}(.{0,900}?)(?:\s(?:by|with|id|for)\s|;|$)", re.IGNORECASE | re.DOTALL
)
_HOST = re.compile(r"(?:[a-z0-9][a-z0-9-]{0,62}\.){1,126}[a-z][a-z0-9-]{1,62}", re.I)
_SPLIT = str.maketrans("[]()", "    ")
MAX_HOST = 253
_IPV4 = re.compile(r"(?<![\w.:])(\d{1,3}(?:\.\d{1,3}){3})(?![\w.])")
_IPV6 = re.compile(r"\[(?:ipv6:)?([0-9a-f:.]{2,45})\]", re.I)


@dataclass(frozen=True, slots=True)
class Forwarders:
    """The trusted forwarders: domains (a host name equal to one or under it) and IP
    networks. Empty: nothing trusted, every check reads the letter as before."""

    domains: frozenset[str] = frozenset()
    networks: tuple[Network, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.domains or self.networks)

    @classmethod
    def parse(cls, entries: Iterable[str]) -> Forwarders:
        """From the setting's entries (:func:`pochta.netaddr.parse_forwarders`): a domain
        name or an IP address or network. ValueError names an entry that is neither."""
        return cls(*parse_forwarders(entries))

    def names(self, host: str | None) -> bool:
        """``host`` is one of the listed domains or under one."""
        if not host or not self.domains:
            return False
        labels = host.lower().rstrip(".").split(".")
        return any(".".join(labels[i:]) in self.domains for i in range(len(labels) - 1))

    def holds(self, address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
        return any(address in net for net in self.networks if net.version == address.version)


@dataclass(frozen=True, slots=True)
class Hop:
    """What a Received field's ``from`` part names: host names (HELO, reverse DNS) and IP
    addresses."""

    hosts: tuple[str, ...]
    addresses: tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, ...]

    @property
    def local(self) -> bool:
        """Handed over on the receiving host or its own network: every address in
        :data:`LOCAL_NETS` (an address the receiving host wrote), or no address and the name
        localhost."""
        if self.addresses:
            return all(any(a in net for net in LOCAL_NETS if net.version == a.version)
                       for a in self.addresses)  # fmt: skip
        return bool(self.hosts) and all(h in _LOCAL_NAMES for h in self.hosts)


def hop(value: str) -> Hop | None:
    """The ``from`` part of one Received field; None for a field without one (qmail's
    "(qmail 123 invoked from network)", a field written by the same host as the next)."""
    m = _FROM_PART.match(value[:MAX_FIELD])
    if m is None:
        return None
    part = m.group(1)
    hosts: list[str] = []
    for word in part.translate(_SPLIT).split()[:32]:
        h = word.strip(",;:").rstrip(".").lower().removeprefix("helo=")
        if len(h) <= MAX_HOST and h not in hosts and (h in _LOCAL_NAMES or _HOST.fullmatch(h)):
            hosts.append(h)
    addresses: list[ipaddress.IPv4Address | ipaddress.IPv6Address] = []
    for rx in (_IPV4, _IPV6):
        for found in rx.finditer(part):
            try:
                a = ipaddress.ip_address(found.group(1))
            except ValueError:
                continue
            if a not in addresses:
                addresses.append(a)
    return Hop(tuple(hosts[:8]), tuple(addresses[:8]))


def origin(fields: Sequence[str], forwarders: Forwarders) -> Hop | None:
    """The hop before the trusted ones (see the module's doc), or None: nothing trusted, no
    trusted hop passed, or no untrusted hop below them."""
    if not forwarders:
        return None
    passed = False
    for value in fields[:MAX_FIELDS]:
        h = hop(value)
        if h is None or h.local:
            continue
        if any(forwarders.names(x) for x in h.hosts) or any(
            forwarders.holds(a) for a in h.addresses
        ):
            passed = True
            continue
        return h if passed else None
    return None
