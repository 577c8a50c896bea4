"""Lists of networks in the settings (trusted clients, reverse proxies, where a password may
travel in clear) and whether an address is in one: parsed once, checked per connection."""

from __future__ import annotations

import ipaddress
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
