"""Addresses in the settings, parsed: lists of networks (trusted clients, reverse proxies, where
a password may travel in clear) and whether an address is in one, parsed once and checked per
connection; a DNS server's ``address[:port]``. Pure, at the bottom of the layers: the settings
check their values with it."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Sequence

Network = ipaddress.IPv4Network | ipaddress.IPv6Network

LOOPBACK = ("127.0.0.0/8", "::1/128")


def parse_networks(values: Iterable[str | Network]) -> tuple[Network, ...]:
    """The networks of ``values`` (an address is a network of one); ValueError naming the
    first value that is neither."""
    out = []
    for value in values:
        if not isinstance(value, str):
            out.append(value)
            continue
        try:
            out.append(ipaddress.ip_network(value.strip(), strict=False))
        except ValueError:
            raise ValueError(f"{value!r} is not an IP address or network") from None
    return tuple(out)


MAX_FORWARDERS = 100
"""Entries ``antispam.trusted_forwarders`` may hold."""
_DOMAIN = re.compile(r"(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z][a-z0-9-]{0,62}")
"""A listed domain name: ASCII labels (an IDN written in its xn-- form)."""


def parse_forwarders(entries: Iterable[str]) -> tuple[frozenset[str], tuple[Network, ...]]:
    """``antispam.trusted_forwarders``' entries as (domains, networks): a domain name
    ("sneakemail.com", lower case, no final dot) or an IP address or network
    ("207.106.87.0/24"). ValueError: more than :data:`MAX_FORWARDERS` entries, or one that is
    neither."""
    domains: set[str] = set()
    networks: list[Network] = []
    for n, entry in enumerate(entries):
        if n >= MAX_FORWARDERS:
            raise ValueError(f"at most {MAX_FORWARDERS} trusted forwarders")
        text = entry.strip()
        try:
            networks.append(ipaddress.ip_network(text, strict=False))
            continue
        except ValueError:
            pass
        name = text.lower().rstrip(".")
        if len(name) > 253 or not _DOMAIN.fullmatch(name):
            raise ValueError(
                f"trusted forwarder {entry[:80]!r} is neither a domain name"
                " (sneakemail.com) nor an IP network (207.106.87.0/24)"
            )
        domains.add(name)
    return frozenset(domains), tuple(networks)


def within(peer: str, nets: Sequence[Network]) -> bool:
    """Whether the address ``peer`` is in one of ``nets`` (an IPv4 address mapped into IPv6,
    ``::ffff:127.0.0.1``, counts as itself); False for anything that is not an address."""
    try:
        address = ipaddress.ip_address(peer)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return any(address in net for net in nets)


def parse_server(text: str) -> tuple[str, int]:
    """``"127.0.0.1"``, ``"127.0.0.1:5353"``, ``"::1"`` or ``"[::1]:5353"`` as (address,
    port); ValueError for anything else (a host name is not accepted: the resolver's own
    address cannot be looked up)."""
    value = text.strip()
    host, port = value, 53
    if value.startswith("["):
        host, sep, rest = value[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            raise ValueError(f"not an address[:port]: {text!r}")
        if rest:
            port = _port(rest[1:], text)
    elif value.count(":") == 1:
        host, _, p = value.partition(":")
        port = _port(p, text)
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        raise ValueError(f"not an IP address[:port]: {text!r}") from None
    return str(address), port


def _port(text: str, whole: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise ValueError(f"bad port in {whole!r}")
    return int(text)
