"""The resolvers: the offline fixture, and the dnspython one with its answers faked (no
network in tests)."""

from __future__ import annotations

from collections.abc import Callable

import dns.exception
import dns.rdata
import dns.rdataclass
import dns.rdatatype
import dns.resolver
import pytest

from pochta.antispam.auth.resolver import DnsResolver, DnsTempError, FixtureResolver


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


def _fake(answers: dict[tuple[str, str], list[str]] | Exception) -> Callable[..., object]:
    def resolve(name: str, rtype: str, search: bool = False) -> object:
        if isinstance(answers, Exception):
            raise answers
        texts = answers.get((name, rtype))
        if texts is None:
            raise dns.resolver.NXDOMAIN()
        kind = dns.rdatatype.from_text(rtype)
        return [dns.rdata.from_text(dns.rdataclass.IN, kind, t) for t in texts]

    return resolve


def test_dns_resolver_reads_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    r = DnsResolver(timeout=0.1, nameservers=["127.0.0.1"])
    monkeypatch.setattr(
        r._resolver,
        "resolve",
        _fake(
            {
                ("example.com.", "TXT"): ['"v=spf1 ip4:192.0.2.0/24" " -all"'],
                ("example.com.", "MX"): ["20 mx2.example.com.", "10 mx1.example.com."],
                ("example.com.", "A"): ["192.0.2.1"],
                ("example.com.", "AAAA"): ["2001:db8::1"],
                ("1.2.0.192.in-addr.arpa.", "PTR"): ["mail.example.com."],
            }
        ),
    )
    assert r.query("example.com", "TXT") == ["v=spf1 ip4:192.0.2.0/24 -all"]
    assert r.query("Example.com.", "MX") == ["mx1.example.com", "mx2.example.com"]
    assert r.query("example.com", "A") == ["192.0.2.1"]
    assert r.query("example.com", "AAAA") == ["2001:db8::1"]
    assert r.query("1.2.0.192.in-addr.arpa", "PTR") == ["mail.example.com"]
    assert r.query("nowhere.example", "TXT") == []


@pytest.mark.parametrize(
    "error", [dns.exception.Timeout(), dns.resolver.NoNameservers(), dns.exception.DNSException()]
)
def test_dns_resolver_temporary_errors(monkeypatch: pytest.MonkeyPatch, error: Exception) -> None:
    r = DnsResolver(timeout=0.1, nameservers=["127.0.0.1"])
    monkeypatch.setattr(r._resolver, "resolve", _fake(error))
    with pytest.raises(DnsTempError):
        r.query("example.com", "TXT")


def test_dns_resolver_no_answer_is_empty(monkeypatch: pytest.MonkeyPatch) -> None:
    r = DnsResolver(timeout=0.1, nameservers=["127.0.0.1"])
    monkeypatch.setattr(r._resolver, "resolve", _fake(dns.resolver.NoAnswer()))
    assert r.query("example.com", "MX") == []
