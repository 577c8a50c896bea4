"""Every path that reads DNS stays bounded, whatever the sender publishes: DKIM asks one key
per signature for at most MAX_SIGNATURES signatures, DMARC at most two names, SPF within
RFC 7208's limits (hypothesis: any record, any zone), and one letter in all at most
MAX_QUERIES questions."""

from __future__ import annotations

import time

from hypothesis import given, settings
from hypothesis import strategies as st
from tests.unit.antispam_phishing.helpers import Key, crlf, sign

from pochta.antispam.auth import spf
from pochta.antispam.auth.resolver import FixtureResolver, LimitedResolver, RType
from pochta.antispam.auth.results import (
    MAX_QUERIES,
    MAX_SIGNATURES,
    authenticate,
    check_dmarc,
    verify_dkim,
)

LETTER = crlf(
    b"From: a@example.com\nTo: b@example.org\nSubject: hi\n"
    b"Date: Tue, 14 Jan 2025 10:00:00 +0000\nMessage-ID: <m@example.com>\n\nhello\n"
)


def test_dkim_asks_one_key_per_signature_and_stops_at_the_limit(key: Key) -> None:
    raw = LETTER
    for i in range(MAX_SIGNATURES + 3):
        raw = sign(raw, key, f"d{i}.example.com", "s")
    resolver = FixtureResolver(
        {f"s._domainkey.d{i}.example.com": {"TXT": [key.txt]} for i in range(MAX_SIGNATURES + 3)}
    )
    results = verify_dkim(raw, resolver)
    assert len(results) == MAX_SIGNATURES and len(resolver.queries) == MAX_SIGNATURES


def test_dmarc_asks_at_most_two_names() -> None:
    resolver = FixtureResolver()
    none = spf.SpfResult("none", "mailfrom", "", "")
    check_dmarc("a.b.c.d.example.co.uk", none, [], resolver)
    assert [n for n, _ in resolver.queries] == [
        "_dmarc.a.b.c.d.example.co.uk",
        "_dmarc.example.co.uk",
    ]


class AnyZone:
    """Answers every question from a few generated records: includes and redirects to any
    name loop back here, every name has MX and A answers (or none)."""

    def __init__(self, records: list[str], addresses: list[str], mx: list[str]) -> None:
        self.records, self.addresses, self.mx = records, addresses, mx
        self.queries = 0

    def query(self, name: str, rtype: RType) -> list[str]:
        self.queries += 1
        if rtype == "TXT":
            return self.records
        if rtype == "MX":
            return self.mx
        if rtype in ("A", "AAAA"):
            return [a for a in self.addresses if (":" in a) == (rtype == "AAAA")]
        return ["mail.example.com"]


names = st.sampled_from(["example.com", "%{d}", "%{i}.x.example", "a.example", "%{l}.%{d2}"])
terms = st.one_of(
    st.builds(lambda q, n: f"{q}include:{n}", st.sampled_from(["", "-", "~", "?"]), names),
    st.builds(lambda n, c: f"a:{n}{c}", names, st.sampled_from(["", "/24", "//64"])),
    st.builds(lambda n: f"mx:{n}", names),
    st.builds(lambda n: f"exists:{n}", names),
    st.just("ptr"),
    st.just("ip4:192.0.2.0/24"),
    st.builds(lambda n: f"redirect={n}", names),
    st.builds(lambda n: f"exp={n}", names),
    st.sampled_from(["-all", "~all", "+all", "a", "mx"]),
    st.text(alphabet="%{}:/=.-_a", max_size=20),
)
records = st.lists(terms, max_size=15).map(lambda ts: " ".join(["v=spf1", *ts]))


@settings(max_examples=150, deadline=None)
@given(
    recs=st.lists(records, min_size=0, max_size=2),
    addresses=st.lists(st.sampled_from(["192.0.2.5", "198.51.100.1", "2001:db8::1"]), max_size=3),
    mx=st.lists(st.sampled_from([f"mx{i}.example.com" for i in range(12)]), max_size=12),
)
def test_spf_on_any_records_ends_within_the_limits(
    recs: list[str], addresses: list[str], mx: list[str]
) -> None:
    zone = AnyZone(recs, addresses, mx)
    t0 = time.process_time()
    r = spf.check("192.0.2.5", "user@example.com", "mail.example.com", zone)
    assert r.result in spf.SPF_CODES
    # the record, 10 terms each with up to 10 names to resolve, an exp= per record
    assert zone.queries <= 1 + spf.MAX_LOOKUPS * 11 + 1 + spf.MAX_LOOKUPS
    assert time.process_time() - t0 < 3.0  # a runaway evaluation, not a slow machine


def test_one_letter_never_asks_more_than_max_queries(key: Key) -> None:
    mx_heavy = " ".join(f"mx:m{i}.example.net" for i in range(10))
    zone: dict[str, dict[str, list[str]]] = {"example.com": {"TXT": [f"v=spf1 {mx_heavy} -all"]}}
    for i in range(10):
        zone[f"m{i}.example.net"] = {"MX": [f"x{k}.example.net" for k in range(10)]}
    for k in range(10):
        zone[f"x{k}.example.net"] = {"A": ["198.51.100.1"]}
    raw = LETTER
    for i in range(MAX_SIGNATURES + 2):
        raw = sign(raw, key, "example.com", f"s{i}")
    inner = FixtureResolver(zone)
    limited = LimitedResolver(inner, max_queries=10_000, lifetime=60)
    r = authenticate(raw, ip="192.0.2.5", mail_from="u@example.com", helo="h", resolver=limited)
    assert r.spf.result == "fail"  # every exchange resolved, none is the client
    assert 20 < len(inner.queries) <= MAX_QUERIES
    assert sum(n.endswith("._domainkey.example.com") for n, _ in inner.queries) == MAX_SIGNATURES
