"""Sender authentication against a real DNS server: Debian's nsd on a loopback port serving
test zones, asked by dnspython exactly as ``antispam.dns = "system"`` asks in production
(``antispam.dns_server`` points it at the fixture; nothing asks any other server)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.dnsserver import NSD, NsdServer, silent_udp_port, txt_rdata
from tests.unit.antispam_phishing.helpers import Key, crlf, make_key, sign

from pochta.antispam.auth import spf
from pochta.antispam.auth.asyncdns import DnsAsyncResolver
from pochta.antispam.auth.resolver import (
    DnsResolver,
    DnsTempError,
    DnsTimeout,
    LimitedResolver,
    RType,
)
from pochta.antispam.auth.results import MAX_QUERIES, authenticate
from pochta.app import analyzer, build
from pochta.config import load_settings
from pochta.mime.letter import parse
from pochta.types import Envelope

pytestmark = pytest.mark.skipif(NSD is None, reason="nsd is not installed (apt-get install nsd)")

LETTER = crlf(
    b"From: Bank <notice@example.org>\n"
    b"To: ivan@pochta.test\n"
    b"Subject: Statement\n"
    b"Date: Tue, 14 Jan 2025 10:00:00 +0000\n"
    b"Message-ID: <s1@example.org>\n"
    b"\n"
    b"Your statement is ready.\n"
)
HOSTILE = " ".join(f"a:h{i}.example.org" for i in range(11))
VOID = " ".join(f"a:v{i}.example.org" for i in range(3))


def zones(key: Key) -> dict[str, str]:
    org = "\n".join(
        [
            f"@ IN TXT {txt_rdata('v=spf1 ip4:192.0.2.0/28 include:_spf.example.net -all')}",
            "@ IN MX 20 mx2",
            "@ IN MX 10 mx1",
            "mx1 IN A 192.0.2.1",
            "mx1 IN AAAA 2001:db8::1",
            "mx2 IN A 192.0.2.2",
            "alias IN CNAME mx1",
            f"_dmarc IN TXT {txt_rdata('v=DMARC1; p=reject; rua=mailto:d@example.org')}",
            f"mail._domainkey IN TXT {txt_rdata(key.txt)}",
            f"long IN TXT {txt_rdata('v=spf1 ' + 'ip4:192.0.2.0/24 ' * 20 + '-all')}",
            f"hostile IN TXT {txt_rdata(f'v=spf1 {HOSTILE} -all')}",
            *(f"h{i} IN A 198.51.100.1" for i in range(11)),
            f"void IN TXT {txt_rdata(f'v=spf1 {VOID} -all')}",
        ]
    )
    net = f"_spf IN TXT {txt_rdata('v=spf1 ip4:198.51.100.0/24 -all')}\n"
    rev = "1 IN PTR mx1.example.org.\n"
    return {"example.org": org + "\n", "example.net": net, "2.0.192.in-addr.arpa": rev}


@pytest.fixture(scope="module")
def key() -> Key:
    return make_key()


@pytest.fixture(scope="module")
def nsd(tmp_path_factory: pytest.TempPathFactory, key: Key) -> Iterator[NsdServer]:
    with NsdServer.start(tmp_path_factory.mktemp("nsd"), zones(key)) as server:
        yield server


@pytest.fixture
def resolver(nsd: NsdServer) -> DnsResolver:
    return DnsResolver(timeout=2.0, nameservers=[nsd.address])


def test_real_answers_of_every_type(resolver: DnsResolver) -> None:
    assert resolver.query("example.org", "TXT") == [
        "v=spf1 ip4:192.0.2.0/28 include:_spf.example.net -all"
    ]
    long = resolver.query("long.example.org", "TXT")  # over 255 bytes: several strings, joined
    assert long == ["v=spf1 " + "ip4:192.0.2.0/24 " * 20 + "-all"]
    assert resolver.query("EXAMPLE.org.", "MX") == ["mx1.example.org", "mx2.example.org"]
    assert resolver.query("mx1.example.org", "A") == ["192.0.2.1"]
    assert resolver.query("mx1.example.org", "AAAA") == ["2001:db8::1"]
    assert resolver.query("alias.example.org", "A") == ["192.0.2.1"]  # the CNAME followed
    assert resolver.query("1.2.0.192.in-addr.arpa", "PTR") == ["mx1.example.org"]
    assert resolver.query("nowhere.example.org", "A") == []  # NXDOMAIN
    assert resolver.query("mx2.example.org", "AAAA") == []  # no record of that type
    with pytest.raises(DnsTempError, match="REFUSED"):
        resolver.query("example.com", "TXT")  # a zone the server does not serve


def test_a_server_that_never_answers_is_temperror_after_the_timeout() -> None:
    sock, port = silent_udp_port()
    with sock:
        r = DnsResolver(timeout=0.3, nameservers=[f"127.0.0.1:{port}"])
        t0 = time.monotonic()
        with pytest.raises(DnsTempError):
            r.query("example.org", "TXT")
        assert time.monotonic() - t0 < 5


def test_dns_system_setting_authenticates_through_the_server(
    nsd: NsdServer, key: Key, tmp_path: Path
) -> None:
    settings = load_settings(
        data_dir=tmp_path / "data", antispam={"dns": "system", "dns_server": nsd.address}
    )
    a = analyzer(settings)
    assert isinstance(a.resolver, DnsResolver)
    signed = sign(LETTER, key, "example.org", "mail")
    real = a.analyze(parse(signed), Envelope("192.0.2.5", "bounce@example.org"), "mx1.example.org")
    assert real.auth.values() == {
        "spf": "pass",
        "dkim": "pass",
        "dmarc": "pass",
        "dmarc_policy": "reject",
    }
    via_include = a.analyze(
        parse(LETTER), Envelope("198.51.100.7", "bounce@example.org"), "relay.example.net"
    )
    assert (via_include.auth.spf.result, via_include.auth.dmarc.result) == ("pass", "pass")
    forged = a.analyze(parse(LETTER), Envelope("203.0.113.9", "x@example.org"), "forger.example")
    assert forged.auth.values() == {
        "spf": "fail",
        "dkim": "none",
        "dmarc": "fail",
        "dmarc_policy": "reject",
    }


def test_limits_hold_against_real_dns(resolver: DnsResolver) -> None:
    hostile = LimitedResolver(resolver, max_queries=MAX_QUERIES, lifetime=10)
    r = spf.check("192.0.2.10", "u@hostile.example.org", "h.example", hostile)
    assert r.result == "permerror" and hostile.queries <= 1 + spf.MAX_LOOKUPS
    void = LimitedResolver(resolver, max_queries=MAX_QUERIES, lifetime=10)
    assert spf.check("192.0.2.10", "u@void.example.org", "h.example", void).result == "permerror"
    assert void.queries == 1 + spf.MAX_VOID + 1
    # one letter's budget spans SPF, DKIM and DMARC: one question, spent on the SPF record
    one = LimitedResolver(resolver, max_queries=1, lifetime=10)
    r = authenticate(LETTER, ip="192.0.2.5", mail_from="b@example.org", helo="h", resolver=one)
    assert (r.spf.result, r.dmarc.result, one.queries) == ("pass", "temperror", 1)


def test_one_letter_stops_at_its_lifetime(nsd: NsdServer) -> None:
    sock, port = silent_udp_port()
    with sock:
        slow = DnsResolver(timeout=0.4, nameservers=[f"127.0.0.1:{port}"])
        t0 = time.monotonic()
        r = authenticate(
            sign(LETTER, make_key(1024), "example.org", "mail"),
            ip="192.0.2.5",
            mail_from="b@example.org",
            helo="h",
            resolver=slow,
            lifetime=1.0,
        )
        took = time.monotonic() - t0
    assert (r.spf.result, r.dkim_result, r.dmarc.result) == ("temperror",) * 3
    assert took < 1.0 + 0.4 + 1.0  # the lifetime, one question's timeout, and slack


# -- the server's path: dnspython's asynchronous resolver, the worker pool -----------------
QUESTIONS: list[tuple[str, RType]] = [
    ("example.org", "TXT"),
    ("long.example.org", "TXT"),
    ("EXAMPLE.org.", "MX"),
    ("mx1.example.org", "A"),
    ("mx1.example.org", "AAAA"),
    ("alias.example.org", "A"),
    ("1.2.0.192.in-addr.arpa", "PTR"),
    ("nowhere.example.org", "A"),  # NXDOMAIN
    ("mx2.example.org", "AAAA"),  # no record of the type
]


def test_the_servers_resolver_answers_as_the_blocking_one_and_keeps_answers(
    tmp_path: Path, key: Key
) -> None:
    with NsdServer.start(tmp_path / "nsd", zones(key)) as own:
        blocking = DnsResolver(timeout=2.0, nameservers=[own.address])
        expected = [blocking.query(name, rtype) for name, rtype in QUESTIONS]
        dns = DnsAsyncResolver(nameservers=[own.address], cache_size=100)

        async def go() -> None:
            assert [await dns.query(n, t, 2.0) for n, t in QUESTIONS] == expected
            with pytest.raises(DnsTempError, match="REFUSED"):
                await dns.query("example.com", "TXT", 2.0)  # a zone it does not serve
            assert await dns.probe(1.0)  # the root's NS: refused, so it is there
            own.stop()
            assert dns.cached == 0
            # kept for their TTL (300 s; the negative answers for the SOA's minimum)
            assert [await dns.query(n, t, 0.5) for n, t in QUESTIONS] == expected
            assert dns.cached == len(QUESTIONS)  # each answered from the cache, counted
            with pytest.raises(DnsTempError):
                await dns.query("mx1.example.org", "TXT", 0.5)  # never asked: the server is gone
            assert dns.cached == len(QUESTIONS)

        asyncio.run(go())


def test_a_cache_of_size_0_keeps_no_answer(tmp_path: Path, key: Key) -> None:
    """``antispam.dns_cache_size = 0`` says "none": dnspython's LRUCache(0) kept one answer."""
    with NsdServer.start(tmp_path / "nsd", zones(key)) as own:
        none = DnsAsyncResolver(nameservers=[own.address], cache_size=0)
        one = DnsAsyncResolver(nameservers=[own.address], cache_size=1)
        record = ["v=spf1 ip4:192.0.2.0/28 include:_spf.example.net -all"]

        async def go() -> None:
            assert await none.query("example.org", "TXT", 2.0) == record
            assert await one.query("example.org", "TXT", 2.0) == record
            own.stop()
            assert await one.query("example.org", "TXT", 0.5) == record  # the one it keeps
            with pytest.raises(DnsTempError):
                await none.query("example.org", "TXT", 0.5)  # the server is gone: nothing kept
            assert (none.cached, one.cached) == (0, 1)

        asyncio.run(go())


def test_the_probe_of_a_server_that_never_answers_times_out() -> None:
    sock, port = silent_udp_port()
    with sock:
        dns = DnsAsyncResolver(nameservers=[f"127.0.0.1:{port}"])

        async def go() -> None:
            t0 = time.monotonic()
            assert not await dns.probe(0.3)
            with pytest.raises(DnsTimeout):
                await dns.query("example.org", "TXT", 0.3)
            assert time.monotonic() - t0 < 2.0

        asyncio.run(go())


def test_a_letter_through_the_intake_authenticates_as_the_blocking_analyzer(
    nsd: NsdServer, key: Key, tmp_path: Path
) -> None:
    """The whole server path against the real server: SPF asked at the end of DATA, the
    worker's plan, the key and policies asked, the signature verified in a worker, DMARC in
    the server: the same results and features as the blocking analyzer's."""
    settings = load_settings(
        data_dir=tmp_path / "data",
        # no budget cut: a loaded machine's first letters in a fresh worker take over the
        # default second, and a verdict cut short has other features than the whole one
        antispam={
            "dns": "system",
            "dns_server": nsd.address,
            "pool_processes": 1,
            "budget_seconds": 60.0,
            "deadline_seconds": 120.0,
        },
    )
    pochta = build(settings)
    blocking = pochta.scanner.analyzer  # `pochta scan`'s: blocking DNS, in this process
    assert isinstance(blocking.resolver, DnsResolver)
    pochta.intake.start()
    try:
        signed = sign(LETTER, key, "example.org", "mail")
        envelopes = [
            (signed, Envelope("192.0.2.5", "bounce@example.org"), "mx1.example.org"),
            (LETTER, Envelope("198.51.100.7", "bounce@example.org"), "relay.example.net"),
            (LETTER, Envelope("203.0.113.9", "x@example.org"), "forger.example"),
        ]

        async def go() -> None:
            for raw, envelope, helo in envelopes:
                want = blocking.analyze(parse(raw), envelope, helo)
                got, _ = await pochta.intake.analyze(raw, envelope, helo)
                assert got.auth == want.auth
                assert got.features == want.features and got.plan is None
                prepared = await pochta.intake.prepare(
                    raw, envelope, helo, analyze=True, shingles=True
                )
                assert prepared.analysis is not None and prepared.analysis.auth == want.auth

        asyncio.run(go())
        assert pochta.intake.pool is not None and pochta.intake.pool.stats.completed >= 7
    finally:
        pochta.close()


MAILBOX_FULL = crlf(
    b"From: Mail Administrator <postmaster@example.org>\n"
    b"To: ivan@example.org\n"
    b"Subject: Your mailbox is full: 5 pending messages\n"
    b"Date: Tue, 14 Jan 2025 10:00:00 +0000\n"
    b"Message-ID: <q1@example.org>\n"
    b"\n"
    b"Dear user, your mailbox is over its quota and 5 incoming messages are pending.\n"
    b"Log in within 24 hours to keep your password and release your pending messages:\n"
    b"http://mail-quota.example/login\n"
)


def test_an_exemption_resting_on_a_forged_from_domain_is_withdrawn_by_dmarc(
    nsd: NsdServer, tmp_path: Path
) -> None:
    """The reader's own domain's postmaster may speak of mailboxes and passwords (the signs
    are withheld while the checks run, before authentication); the same letter from a server
    the domain's SPF refuses fails DMARC, and the server's decision adds the signs back."""
    settings = load_settings(
        data_dir=tmp_path / "data",
        antispam={"dns": "system", "dns_server": nsd.address, "pool_processes": 1},
    )
    pochta = build(settings)
    assert pochta.scanner is not None
    pochta.intake.start()
    try:

        async def verdict(ip: str) -> tuple[str, set[str], str]:
            envelope = Envelope(ip, "postmaster@example.org", ("ivan@example.org",))
            prepared = await pochta.intake.prepare(
                MAILBOX_FULL, envelope, "mx1.example.org", analyze=True, shingles=True
            )
            assert prepared.analysis is not None and pochta.scanner is not None
            v = prepared.verdict or pochta.scanner.decide(prepared.analysis)
            return v.auth.dmarc.result, {s.symbol for s in v.signs}, v.label

        own = asyncio.run(verdict("192.0.2.5"))  # the domain's own server: SPF pass
        forged = asyncio.run(verdict("203.0.113.9"))
        # stored, the letter shows its reader what its verdict counted (webmail, the API)
        ivan = pochta.mailbox.index.add_user("ivan@example.org", "x")
        shown = []
        for ip in ("192.0.2.5", "203.0.113.9"):
            envelope = Envelope(ip, "postmaster@example.org", ("ivan@example.org",))
            done = pochta.mailbox.deliver(
                MAILBOX_FULL, [ivan], envelope=envelope, helo="mx1.example.org", scan=True
            )
            _, parsed = pochta.mailbox.message(ivan.id, done.ids[0])
            shown.append({s.symbol for s in pochta.mailbox.warnings(parsed)})
    finally:
        pochta.close()
    lure = {"PHISH_MAIL_ADMIN_NAME", "PHISH_ACCOUNT_LURE"}
    assert own[0] == "pass" and not own[1] & lure and own[2] != "phishing"
    assert forged[0] == "fail" and forged[1] >= lure and forged[2] == "phishing"
    assert not shown[0] & lure and shown[1] >= lure
