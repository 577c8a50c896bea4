"""The connection gate's arithmetic (pochta.guard.anvil): what the module's docstring promises,
checked over generated arrival patterns, with an injected clock and the in-memory table."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pochta.guard.anvil import (
    Admission,
    Gate,
    Limits,
    client_of,
    decide,
    estimate,
    seen_from,
    window_of,
)
from pochta.guard.anvil.memory import MemoryConnections, MemoryConnectionTable
from pochta.netaddr import parse_networks
from pochta.types import ConnectionTally

PERIOD = 60.0
SECRET = b"anvil-test-secret-0123456789"


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def gate(limits: Limits, clock: Clock, table: MemoryConnectionTable | None = None) -> Gate:
    return Gate(
        table or MemoryConnectionTable(),
        {"smtp": limits},
        secret=SECRET,
        period=PERIOD,
        clock=clock,
    )


# -- addresses ----------------------------------------------------------------------------------
def test_clients_their_networks_and_who_is_exempt() -> None:
    trusted = parse_networks(["127.0.0.1", "::1", "10.1.0.0/16"])
    assert client_of("192.0.2.77", trusted) is not None
    c = client_of("192.0.2.77", trusted)
    assert c is not None
    assert (c.address, c.network) == ("192.0.2.77", "192.0.2.0/24")
    c6 = client_of("2001:db8:1:2:aaaa::5", trusted)
    assert c6 is not None
    assert c6.network == "2001:db8:1:2::/64"
    mapped = client_of("::ffff:192.0.2.77", trusted)  # IPv4-mapped: the IPv4 address
    assert mapped == c
    assert client_of("127.0.0.1", trusted) is None
    assert client_of("::ffff:127.0.0.1", trusted) is None
    assert client_of("::1", trusted) is None
    assert client_of("10.1.200.3", trusted) is None
    assert client_of("127.0.0.2", trusted) is not None  # the rest of 127/8 plays strangers
    assert client_of("", trusted) is None  # a unix socket
    assert client_of("fe80::1%eth0", trusted) is not None
    with pytest.raises(ValueError, match=r"'10\.0\.0\.300' is not an IP address or network"):
        parse_networks(["10.0.0.300"])


def test_the_default_trusted_networks_are_exactly_the_two_loopback_addresses() -> None:
    g = gate(Limits(per_ip=1), Clock())
    assert [str(n) for n in g.trusted] == ["127.0.0.1/32", "::1/128"]


# -- the window arithmetic --------------------------------------------------------------------
@given(st.integers(-5, 5), st.integers(0, 100), st.integers(0, 100), st.integers(0, 10))
def test_counts_move_back_one_window_per_window_and_fall_off_after_two(
    written: int, current: int, previous: int, later: int
) -> None:
    window = written + later
    now, before = seen_from(written, current, previous, window)
    expected = [(current, previous), (0, current)][later] if later < 2 else (0, 0)
    assert (now, before) == expected


@given(st.floats(0, 1e9, allow_nan=False), st.floats(0.001, 1e5, allow_nan=False))
def test_a_moment_falls_in_one_window(now: float, period: float) -> None:
    window, fraction = window_of(now, period)
    assert 0.0 <= fraction < 1.0
    assert window * period <= now + 1e-6 * period


@given(st.integers(0, 1000), st.integers(0, 1000), st.floats(0, 1, exclude_max=True))
def test_the_estimate_lies_between_the_current_window_and_both(
    current: int, previous: int, fraction: float
) -> None:
    value = estimate(ConnectionTally(0, current, previous), fraction)
    assert current <= value <= current + previous


def test_the_previous_window_weighs_what_is_left_of_it() -> None:
    assert estimate(ConnectionTally(0, 3, 10), 0.25) == 10.5
    assert estimate(ConnectionTally(0, 3, 10), 0.0) == 13
    # a burst at the end of one window still counts just after the next begins
    clock = Clock(PERIOD - 1)
    g = gate(Limits(rate_per_ip=10), clock)
    assert all(g.admit("smtp", "192.0.2.1").allowed for _ in range(10))
    clock.now = PERIOD + 0.05 * PERIOD  # 95% of the burst's window is within the last period
    assert g.admit("smtp", "192.0.2.1").refused == "rate_per_ip"
    clock.now = PERIOD + 0.95 * PERIOD  # 5%: 0.5 + the refused one (1): room again
    assert g.admit("smtp", "192.0.2.1").allowed


def test_no_limit_is_zero_and_the_first_one_exceeded_is_named() -> None:
    none = ConnectionTally()
    busy = ConnectionTally(connections=10, current=10)
    assert decide(Limits(), busy, busy, busy, 0.5) is None
    assert decide(Limits(per_ip=10, total=5), busy, none, busy, 0.5) == "per_ip"
    assert decide(Limits(per_ip=11, rate_per_ip=10), busy, none, none, 0.5) == "rate_per_ip"
    assert decide(Limits(per_network=10), none, busy, none, 0.0) == "per_network"
    assert decide(Limits(total=10), none, none, busy, 0.0) == "total"
    assert decide(Limits(rate_total=10), none, none, busy, 0.0) == "rate_total"
    assert decide(Limits(per_ip=11, rate_per_ip=11), busy, none, none, 0.0) is None


# -- concurrency ------------------------------------------------------------------------------
ADDRESSES = ["192.0.2.1", "192.0.2.2", "192.0.2.3", "198.51.100.1", "::ffff:192.0.2.1"]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.booleans(), st.integers(0, len(ADDRESSES) - 1), st.integers(0, 50))),
    st.integers(1, 4),
    st.integers(1, 6),
    st.integers(1, 8),
)
def test_open_connections_never_exceed_any_limit(
    steps: list[tuple[bool, int, int]], per_ip: int, per_network: int, total: int
) -> None:
    """Opens and closes in any order: at every moment the open admitted connections of an
    address, of its /24 and of all stay within their limits, and a refusal counts nothing."""
    g = gate(Limits(per_ip=per_ip, per_network=per_network, total=total), Clock())
    held: list[Admission] = []
    for is_open, who, pick in steps:
        if is_open:
            a = g.admit("smtp", ADDRESSES[who])
            if a.allowed:
                held.append(a)
            else:
                again = [x for x in held if x.client == a.client]
                if a.refused == "per_ip":
                    assert len(again) == per_ip
        elif held:
            held.pop(pick % len(held)).release()
        by_ip: dict[str, int] = {}
        by_net: dict[str, int] = {}
        for a in held:
            assert a.client is not None
            by_ip[a.client.address] = by_ip.get(a.client.address, 0) + 1
            by_net[a.client.network] = by_net.get(a.client.network, 0) + 1
        assert all(n <= per_ip for n in by_ip.values())
        assert all(n <= per_network for n in by_net.values())
        assert len(held) <= total
    for a in held:
        a.release()
        a.release()  # idempotent
    assert g.admit("smtp", ADDRESSES[0]).allowed  # everything counted out


def test_trusted_addresses_are_never_limited_nor_counted() -> None:
    g = gate(Limits(per_ip=1, total=1, rate_per_ip=1), Clock())
    trusted = [g.admit("smtp", "127.0.0.1") for _ in range(100)]
    assert all(a.allowed and a.client is None for a in trusted)
    assert g.admit("smtp", "192.0.2.9").allowed  # the total was not used up by them


def test_a_protocol_without_limits_counts_nothing() -> None:
    g = gate(Limits(per_ip=1), Clock())
    assert all(g.admit("imap", "192.0.2.1").allowed for _ in range(10))


# -- rates ------------------------------------------------------------------------------------
def run(limit: int, times: list[float]) -> list[bool]:
    """Attempts at the given moments (sorted) against rate_per_ip = limit; each allowed one
    is closed at once, so only the rate can refuse."""
    clock = Clock(0.0)
    g = gate(Limits(rate_per_ip=limit), clock)
    out = []
    for t in times:
        clock.now = t
        a = g.admit("smtp", "192.0.2.1")
        out.append(a.allowed)
        a.release()
    return out


arrivals = st.lists(st.floats(0, 6 * PERIOD, allow_nan=False), max_size=200).map(sorted)


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 30), arrivals)
def test_each_window_allows_at_most_the_limit_and_any_period_twice_that(
    limit: int, times: list[float]
) -> None:
    allowed = [t for t, ok in zip(times, run(limit, times), strict=True) if ok]
    for _, group in itertools.groupby(allowed, key=lambda t: window_of(t, PERIOD)[0]):
        assert len(list(group)) <= limit
    for i, start in enumerate(allowed):
        within = [t for t in allowed[i:] if t < start + PERIOD]
        assert len(within) <= 2 * limit


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 30), arrivals)
def test_a_client_within_half_the_limit_in_every_period_is_never_refused(
    limit: int, times: list[float]
) -> None:
    k = (limit - 1) // 2
    kept: list[float] = []
    for t in times:  # thin the pattern so that no period holds more than k attempts
        if len([x for x in kept if x > t - PERIOD]) < k:
            kept.append(t)
    assert all(run(limit, kept))


def test_refused_attempts_count_toward_the_address_rate_only() -> None:
    """A flood from one address keeps that address out, not its neighbours nor everyone."""
    clock = Clock(0.0)
    g = gate(Limits(rate_per_ip=5, rate_per_network=8, rate_total=8), clock)
    flood = [g.admit("smtp", "192.0.2.1") for _ in range(50)]
    assert sum(a.allowed for a in flood) == 5
    assert {a.refused for a in flood[5:]} == {"rate_per_ip"}
    neighbour = [g.admit("smtp", "192.0.2.2") for _ in range(3)]
    assert all(a.allowed for a in neighbour)  # 5 + 3 accepted: within the network's 8
    clock.now = 1.5 * PERIOD  # half of the 50 attempts are still within the last period
    assert g.admit("smtp", "192.0.2.1").refused == "rate_per_ip"
    clock.now = 3 * PERIOD + 1  # the refused attempts aged out with the rest
    assert g.admit("smtp", "192.0.2.1").allowed


def test_a_steady_client_at_the_rate_is_let_in() -> None:
    """A client that opens one connection every period / (limit - 3) seconds, for ten periods."""
    limit = 20
    step = PERIOD / (limit - 3)
    assert all(run(limit, [i * step for i in range(int(10 * PERIOD / step))]))


# -- several processes ------------------------------------------------------------------------
@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 2), min_size=1, max_size=120), st.integers(1, 20))
def test_processes_sharing_the_counts_share_one_limit(workers: list[int], per_ip: int) -> None:
    """However the kernel spreads one client's connections over three processes, together
    they let in exactly per_ip (each decides with the others' counts)."""
    shared = MemoryConnections()
    clock = Clock()
    gates = [gate(Limits(per_ip=per_ip), clock, MemoryConnectionTable(shared)) for _ in range(3)]
    allowed = [gates[w].admit("smtp", "203.0.113.5").allowed for w in workers]
    assert sum(allowed) == min(per_ip, len(workers))


def test_a_table_without_room_lets_the_connection_in_untracked() -> None:
    clock = Clock()
    g = gate(Limits(per_ip=1, total=3), clock, MemoryConnectionTable(capacity=2))
    first = g.admit("smtp", "192.0.2.1")  # its address and network fill the room
    assert first.allowed
    assert not first.untracked
    other = g.admit("smtp", "198.51.100.1")
    assert other.allowed
    assert other.untracked  # no room for its address: let in on the total alone
    assert g.admit("smtp", "203.0.113.1").allowed
    assert g.admit("smtp", "203.0.113.2").refused == "total"  # the total always has room
