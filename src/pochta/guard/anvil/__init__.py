"""Connection governance, as Postfix's anvil: may a new connection from this address come in?

Each protocol (smtp, lmtp, imap, http) has its own ``Limits``: connections open at once and
connection attempts per ``period`` (a sliding window), per client address, per network (the
address's /24 for IPv4, /64 for IPv6) and in total. An IPv4-mapped IPv6 address
(``::ffff:192.0.2.1``) counts as the IPv4 address it carries. Addresses in the trusted
networks (by default exactly ``127.0.0.1`` and ``::1``), and peers that are not IP addresses
(a unix socket), are exempt and not counted.

This module decides and does no I/O: the counts live in a ``ConnectionTable``
(:mod:`pochta.types`; shared by the processes of ``pochta serve --processes N``:
:mod:`pochta.guard.anvil.mapped`), and the time comes from an injected clock. Why it
lives in guard/ and not in server/: like the login limits, it is a protection decision that
the protocol edges (server/) only ask and translate into their replies.

**Rates.** Attempts are counted in fixed windows of ``period`` seconds (window ``w`` is
``floor(now / period)``); the rate at a moment ``f`` (0..1) into window ``w`` is estimated as
``previous * (1 - f) + current`` (the attempts of window ``w - 1``, weighted by how much of it
is still within the last ``period``, plus those of ``w``). An attempt is allowed while that
estimate + 1 stays within the limit. Two counters per key, and sums of them over processes are
the counters of the sum, which is what lets N processes share one limit (a token bucket's state
does not add up). What it guarantees (tests/unit/guard/test_anvil.py checks each):

- in every window, at most ``limit`` attempts are allowed (the estimate is at least
  ``current``); over any ``period`` seconds, at most ``2 * limit``;
- a client that never makes more than ``(limit - 1) // 2`` attempts in any ``period`` seconds
  is never refused, whatever their pattern.

**What counts toward a rate.** Every attempt from an address counts toward that address's
rate, refused ones included (as Postfix's anvil counts connection attempts): a client that
hammers stays refused. Toward its network's rate and the total rate only accepted connections
count, so one address's refused flood does not shut out its neighbours or everyone.

**Across processes** the check and the count are not one atomic step: two processes that
accept at the same instant may each see one connection less than there is, so a limit can be
exceeded by at most (processes - 1) connections for a moment.
"""

from __future__ import annotations

import hashlib
import ipaddress
import math
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from pochta.netaddr import Network, parse_networks
from pochta.types import Clock, ConnectionTable, ConnectionTally

Scope = Literal["ip", "network", "total"]

DEFAULT_TRUSTED = ("127.0.0.1", "::1")


@dataclass(frozen=True, slots=True)
class Limits:
    """One protocol's limits; 0 means none. The field names are the names refusals carry
    (in /metrics and the log)."""

    per_ip: int = 0
    rate_per_ip: int = 0
    per_network: int = 0
    rate_per_network: int = 0
    total: int = 0
    rate_total: int = 0


LIMIT_NAMES = tuple(f.name for f in fields(Limits))


@dataclass(frozen=True, slots=True)
class Client:
    """A client as the limits see it: its address and its network's, packed (4 or 16 bytes),
    and the network's prefix length; as text on demand (refusals and the log need it)."""

    packed: bytes
    network_packed: bytes
    prefix: int

    @property
    def address(self) -> str:
        return str(ipaddress.ip_address(self.packed))

    @property
    def network(self) -> str:
        return f"{ipaddress.ip_address(self.network_packed)}/{self.prefix}"


Masks = tuple[tuple[int, int, int], ...]  # (bytes of the address, network, mask) per network
MAPPED = bytes(10) + b"\xff\xff"  # ::ffff:a.b.c.d


def masks(trusted: Sequence[Network]) -> Masks:
    return tuple(
        (net.max_prefixlen // 8, int(net.network_address), int(net.netmask)) for net in trusted
    )


def _packed(peer: str) -> bytes | None:
    """The address as 4 or 16 bytes (an IPv4-mapped one as its IPv4 address); None for what
    is not an IP address. socket.inet_pton parses (no I/O): 10x ipaddress's speed."""
    try:
        return socket.inet_pton(socket.AF_INET, peer)
    except OSError:
        pass
    try:
        packed = socket.inet_pton(socket.AF_INET6, peer.split("%", 1)[0])  # fe80::1%eth0
    except OSError:
        return None
    return packed[12:] if packed[:12] == MAPPED else packed


def _client(peer: str, trusted: Masks, ipv4_prefix: int, ipv6_prefix: int) -> Client | None:
    packed = _packed(peer)
    if packed is None:
        return None
    value = int.from_bytes(packed, "big")
    size = len(packed)
    for length, network, mask in trusted:
        if length == size and value & mask == network:
            return None
    bits = size * 8
    prefix = ipv4_prefix if size == 4 else ipv6_prefix
    mask = ((1 << bits) - 1) ^ ((1 << (bits - prefix)) - 1)
    return Client(packed, (value & mask).to_bytes(size, "big"), prefix)


def client_of(
    peer: str, trusted: Sequence[Network], *, ipv4_prefix: int = 24, ipv6_prefix: int = 64
) -> Client | None:
    """The client behind ``peer`` (the address text a socket gives), or None when it is exempt:
    in a trusted network, or not an IP address (a unix socket)."""
    return _client(peer, masks(trusted), ipv4_prefix, ipv6_prefix)


# -- the window arithmetic --------------------------------------------------------------------
def window_of(now: float, period: float) -> tuple[int, float]:
    """The window ``now`` falls in, and how far into it (0 <= fraction < 1)."""
    position = now / period
    window = math.floor(position)
    return window, position - window


def seen_from(entry_window: int, current: int, previous: int, window: int) -> tuple[int, int]:
    """(current, previous) attempts as seen from ``window`` of counters last written in
    ``entry_window``: they move back one window per window passed, and fall off after two."""
    if entry_window == window:
        return current, previous
    if entry_window == window - 1:
        return 0, current
    return 0, 0


def estimate(tally: ConnectionTally, fraction: float) -> float:
    """The attempts of the last ``period`` seconds, estimated at ``fraction`` into the window."""
    return tally.previous * (1.0 - fraction) + tally.current


def over(limit: int, value: float) -> bool:
    """Whether one more would exceed ``limit`` (0: no limit)."""
    return limit > 0 and value + 1 > limit


def decide(
    limits: Limits,
    ip: ConnectionTally,
    network: ConnectionTally,
    total: ConnectionTally,
    fraction: float,
) -> str | None:
    """The first limit a new connection would exceed (a ``Limits`` field name), or None."""
    checks = (
        ("per_ip", limits.per_ip, ip.connections),
        ("rate_per_ip", limits.rate_per_ip, estimate(ip, fraction)),
        ("per_network", limits.per_network, network.connections),
        ("rate_per_network", limits.rate_per_network, estimate(network, fraction)),
        ("total", limits.total, total.connections),
        ("rate_total", limits.rate_total, estimate(total, fraction)),
    )
    for name, limit, value in checks:
        if over(limit, value):
            return name
    return None


# -- the gate ---------------------------------------------------------------------------------
@dataclass(eq=False)
class Admission:
    """The answer for one connection. ``refused``: the limit that refused it (None: allowed);
    ``client``: None when the peer is exempt; ``untracked``: the table had no room for some
    of its counts (it was let in on the limits that could be checked). An allowed connection
    is counted until ``release()`` (idempotent)."""

    protocol: str
    client: Client | None
    refused: str | None = None
    untracked: bool = False
    _gate: Gate | None = field(default=None, repr=False)
    _keys: tuple[tuple[int, bool], ...] = field(default=(), repr=False)

    @property
    def allowed(self) -> bool:
        return self.refused is None

    def release(self) -> None:
        gate, self._gate = self._gate, None
        if gate is not None:
            gate.release(self._keys)


class Gate:
    """Admits or refuses connections by ``limits[protocol]`` (a protocol not listed: no
    limits, nothing counted). ``secret`` keys the hashes that stand for addresses in the table
    (an attacker cannot aim his addresses at someone else's entries)."""

    def __init__(
        self,
        table: ConnectionTable,
        limits: Mapping[str, Limits],
        *,
        secret: bytes,
        trusted: Sequence[Network] = parse_networks(DEFAULT_TRUSTED),
        period: float = 60.0,
        ipv4_prefix: int = 24,
        ipv6_prefix: int = 64,
        clock: Clock,
    ) -> None:
        if period <= 0:
            raise ValueError("period must be positive")
        self.table = table
        self.limits = dict(limits)
        self.trusted = tuple(trusted)
        self.period = period
        self.ipv4_prefix = ipv4_prefix
        self.ipv6_prefix = ipv6_prefix
        self._clock = clock
        self._secret = secret[:64]  # blake2b keys: at most 64 bytes
        self._masks = masks(self.trusted)
        self._hashes: dict[tuple[str, Scope], Any] = {}

    def key(self, protocol: str, scope: Scope, packed: bytes = b"") -> int:
        """The 64-bit table key of (protocol, scope, packed address or network); never 0."""
        base = self._hashes.get((protocol, scope))
        if base is None:
            base = hashlib.blake2b(digest_size=8, key=self._secret)
            base.update(f"{protocol}\0{scope}\0".encode())
            self._hashes[(protocol, scope)] = base
        h = base.copy()
        h.update(packed)
        return int.from_bytes(h.digest(), "little") or 1

    def client(self, peer: str) -> Client | None:
        return _client(peer, self._masks, self.ipv4_prefix, self.ipv6_prefix)

    def admit(self, protocol: str, peer: str) -> Admission:
        """Whether a new ``protocol`` connection from ``peer`` may come in; counted when it
        may (and its attempt counted toward the address's rate either way)."""
        limits = self.limits.get(protocol)
        client = self.client(peer)
        if limits is None or client is None:
            return Admission(protocol, client)
        window, fraction = window_of(self._clock(), self.period)
        keys = (
            (self.key(protocol, "ip", client.packed), False),
            (self.key(protocol, "network", client.network_packed), False),
            (self.key(protocol, "total"), True),
        )
        ip, network, total = (self.table.read(k, window, total=t) for k, t in keys)
        refused = decide(limits, ip, network, total, fraction)
        if refused is not None:
            self.table.add(keys[0][0], window, attempts=1)
            return Admission(protocol, client, refused)
        counted = []
        for key, is_total in keys:
            if self.table.add(key, window, connections=1, attempts=1, total=is_total):
                counted.append((key, is_total))
        untracked = len(counted) < len(keys)
        return Admission(protocol, client, None, untracked, self, tuple(counted))

    def release(self, keys: Sequence[tuple[int, bool]]) -> None:
        """A connection admitted with ``keys`` has ended."""
        window, _ = window_of(self._clock(), self.period)
        for key, is_total in keys:
            self.table.add(key, window, connections=-1, total=is_total)

    def close(self) -> None:
        self.table.close()
