"""Which clients logged into an account before: its addresses and their networks.

A successful login marks (account, address) and (account, network) for ``remember_for``
seconds (renewed by every later success); the network is the address's /24 for IPv4, its
/64 for IPv6 (what one household, office or mobile operator's pool hands one client). A
login from a marked address or network is a *known client* of that account
(``pochta.guard.logins``). Marks are keyed hashes of the account, the client and the
``binding`` (a fingerprint of the account's password hash, ``pochta.mailbox.accounts``):
never an address or an e-mail, and a password change leaves every old mark unreachable, so
an address that logged in with a stolen password stops being known once it is changed.

The marks live in a ``KnownClientsBackend``: in memory (``known.memory``: one process, tests),
SQLite (``known.sqlite``) or Redis (``known.redis``).
"""

from __future__ import annotations

import ipaddress
from typing import Literal

from pochta.errors import InvalidInput
from pochta.guard.names import check_name, subject_digest
from pochta.guard.ratelimit import MIN_SECRET
from pochta.types import KnownClientsBackend

V4_PREFIX = 24
V6_PREFIX = 64

Known = Literal["address", "network"]


def address(ip: str) -> str:
    """``ip`` written one way (an IPv4-mapped IPv6 address as IPv4); anything that is not
    an address (a test client's name) as it is."""
    try:
        addr = ipaddress.ip_address(ip.strip())
    except ValueError:
        return ip
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return str(addr.ipv4_mapped)
    return str(addr)


def network(ip: str) -> str | None:
    """The /24 (IPv4) or /64 (IPv6) network of ``ip``; None when ``ip`` is not an address."""
    try:
        addr = ipaddress.ip_address(address(ip))
    except ValueError:
        return None
    prefix = V4_PREFIX if addr.version == 4 else V6_PREFIX
    return str(ipaddress.ip_network((addr, prefix), strict=False))


class KnownClients:
    """The addresses and networks each account logged in from, on one backend. ``secret``
    keys the hashes; ``tag`` groups the keys (one Redis Cluster slot)."""

    def __init__(
        self,
        backend: KnownClientsBackend,
        secret: bytes | str,
        *,
        remember_for: float,
        tag: str = "login",
        prefix: str = "pochta:known",
    ) -> None:
        self._secret = secret.encode() if isinstance(secret, str) else bytes(secret)
        if len(self._secret) < MIN_SECRET:
            raise InvalidInput(f"the known-clients key secret has at least {MIN_SECRET} bytes")
        if not remember_for > 0:
            raise InvalidInput("known clients are remembered for > 0 seconds")
        self.backend = backend
        self.remember_for = remember_for
        self.tag = check_name(tag, "known-clients tag")
        self.prefix = prefix

    def _keys(self, account: str, binding: str, ip: str) -> list[str]:
        clients = [f"ip:{address(ip)}"]
        net = network(ip)
        if net is not None:
            clients.append(f"net:{net}")
        return [
            f"{self.prefix}:{{{self.tag}}}:"
            + subject_digest(self._secret, "known", f"{account}\0{binding}\0{client}")
            for client in clients
        ]

    def known(self, account: str, binding: str, ip: str) -> Known | None:
        """``address`` when the account logged in from ``ip``, ``network`` when only from
        its network, None when from neither (within ``remember_for``)."""
        found = self.backend.known(self._keys(account, binding, ip))
        if found[0]:
            return "address"
        return "network" if any(found[1:]) else None

    def remember(self, account: str, binding: str, ip: str) -> None:
        self.backend.remember(self._keys(account, binding, ip), self.remember_for)

    def forget(self, account: str, binding: str, ip: str) -> None:
        self.backend.forget(self._keys(account, binding, ip))
