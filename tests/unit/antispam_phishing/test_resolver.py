"""The resolvers without a network: the offline fixture, the DNS server setting, the limits of
one letter; the dnspython resolver against a real server is tests/integration/antispam/
test_dns_server.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from pochta.antispam.auth.resolver import (
    DnsResolver,
    DnsTempError,
    FixtureResolver,
    LimitedResolver,
)
from pochta.config import load_settings
from pochta.errors import ConfigError
from pochta.netaddr import parse_server


def test_fixture_resolver() -> None:
    r = FixtureResolver(
        {"Example.COM.": {"TXT": ["v=spf1 -all"], "mx": ["mx1.example.com."]}},
        failing=["broken.example"],
    )
    assert r.query("example.com", "TXT") == ["v=spf1 -all"]
    assert r.query("EXAMPLE.com.", "MX") == ["mx1.example.com"]
    assert r.query("example.com", "A") == []
    assert r.query("nowhere.example", "TXT") == []
    with pytest.raises(DnsTempError):
        r.query("broken.example", "A")
    assert r.queries[0] == ("example.com", "TXT") and len(r.queries) == 5
    with pytest.raises(ValueError, match="unsupported record type"):
        r.add("example.com", "SRV", "x")


def test_a_malformed_name_is_temperror_before_any_question() -> None:
    # a real server is asked in tests/integration/antispam/test_dns_server.py (nsd)
    r = DnsResolver(timeout=0.1, nameservers=["127.0.0.1:9"])
    with pytest.raises(DnsTempError):
        r.query("a" * 64 + ".example.com", "TXT")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("127.0.0.1", ("127.0.0.1", 53)),
        ("127.0.0.1:5353", ("127.0.0.1", 5353)),
        ("::1", ("::1", 53)),
        ("[::1]:5353", ("::1", 5353)),
        (" [2001:db8::53] ", ("2001:db8::53", 53)),
    ],
)
def test_dns_server_addresses(text: str, expected: tuple[str, int]) -> None:
    assert parse_server(text) == expected


@pytest.mark.parametrize("text", ["localhost", "ns.example.com:53", "1.2.3.4:0", "[::1", "1:2:x"])
def test_bad_dns_server_addresses(text: str) -> None:
    with pytest.raises(ValueError, match=r"not an|bad port"):
        parse_server(text)


def test_bad_dns_server_setting_is_a_clear_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="dns_server"):
        load_settings(data_dir=tmp_path, antispam={"dns": "system", "dns_server": "localhost"})


def test_limited_resolver_counts_and_times_out() -> None:
    inner = FixtureResolver({"example.com": {"A": ["192.0.2.1"]}})
    now = [100.0]
    r = LimitedResolver(inner, max_queries=3, lifetime=2.0, clock=lambda: now[0])
    assert r.query("example.com", "A") == ["192.0.2.1"]
    now[0] += 1.9
    assert r.query("example.com", "A") == ["192.0.2.1"]
    now[0] += 0.2  # 2.1 s after the first question
    with pytest.raises(DnsTempError, match="2 s"):
        r.query("example.com", "A")
    fresh = LimitedResolver(inner, max_queries=2, lifetime=60)
    fresh.query("example.com", "A")
    fresh.query("example.com", "A")
    with pytest.raises(DnsTempError, match="more than 2"):
        fresh.query("example.com", "A")
    assert (r.queries, fresh.queries, len(inner.queries)) == (2, 2, 4)
