"""SPF (pochta.antispam.auth.spf: pyspf on pochta's Resolver) against offline zones.

``RFC_CASES`` is written from RFC 7208, one row per rule, with the section it comes from;
then real-looking records (tests/spf_zones.py), the limits (terms, void lookups, MX names,
one letter's questions and time, hostile record sizes) and the seam itself (each check
asks its own resolver; nothing reaches pyspf's own DNS).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from tests.spf_zones import REAL_CASES, REAL_ZONE

from pochta.antispam.auth import spf
from pochta.antispam.auth.resolver import DnsTempError, FixtureResolver, LimitedResolver

Zone = dict[str, dict[str, list[str]]]


def txt(*records: str) -> dict[str, list[str]]:
    return {"TXT": list(records)}


def check(
    records: Zone,
    ip: str | None = "192.0.2.10",
    mail_from: str = "user@example.com",
    helo: str = "mail.example.com",
    failing: tuple[str, ...] = (),
) -> spf.SpfResult:
    return spf.check(ip, mail_from, helo, FixtureResolver(records, failing))


def own(record: str, **more: Any) -> Zone:
    """example.com publishing ``record``, and any other names given."""
    zone: Zone = {"example.com": txt(record)}
    for name, value in more.items():
        zone[name.replace("_", ".")] = value
    return zone


EXAMPLE_NET = {"TXT": ["v=spf1 ip4:192.0.2.0/24 -all"]}
ELEVEN = " ".join(f"a:h{i}.example.net" for i in range(11))
TEN = " ".join(f"a:h{i}.example.net" for i in range(10))
HOSTS = {f"h{i}.example.net": {"A": ["198.51.100.1"]} for i in range(11)}

# (section of RFC 7208, what it says, zone, client ip, MAIL FROM, expected result)
# fmt: off
RFC_CASES: list[tuple[str, str, Zone, str, str, str]] = [
    ("2.6.1", "no SPF record: none", {}, "192.0.2.10", "u@example.com", "none"),
    ("4.5", "other TXT records are not SPF", own("google-site-verification=x"), "192.0.2.10",
     "u@example.com", "none"),
    ("4.5", "v=spf10 is not an SPF record", own("v=spf10 +all"), "192.0.2.10", "u@example.com",
     "none"),
    ("4.5", "two SPF records: permerror", {"example.com": txt("v=spf1 -all", "v=spf1 +all")},
     "192.0.2.10", "u@example.com", "permerror"),
    ("4.6.1", "the version is case-insensitive", own("V=SPF1 IP4:192.0.2.10 -ALL"), "192.0.2.10",
     "u@example.com", "pass"),
    ("4.6.2", "no term matched and no redirect: neutral", own("v=spf1 ip4:192.0.2.0/24"),
     "198.51.100.1", "u@example.com", "neutral"),
    ("4.6.2", "the first matching term decides", own("v=spf1 -ip4:192.0.2.10 +all"),
     "192.0.2.10", "u@example.com", "fail"),
    ("4.6.2", "qualifier -", own("v=spf1 -all"), "192.0.2.10", "u@example.com", "fail"),
    ("4.6.2", "qualifier ~", own("v=spf1 ~all"), "192.0.2.10", "u@example.com", "softfail"),
    ("4.6.2", "qualifier ?", own("v=spf1 ?all"), "192.0.2.10", "u@example.com", "neutral"),
    ("4.6.2", "qualifier + is the default", own("v=spf1 all"), "192.0.2.10", "u@example.com",
     "pass"),
    ("4.6", "a syntax error is permerror even after a match",
     own("v=spf1 ip4:192.0.2.10 foo:bar -all"), "192.0.2.10", "u@example.com", "permerror"),
    ("6", "an unknown modifier is ignored", own("v=spf1 foo=bar ip4:192.0.2.10 -all"),
     "192.0.2.10", "u@example.com", "pass"),
    ("A", "a modifier name must be well formed", own("v=spf1 ip4:192.0.2.10 -all moo.cow/x=y"),
     "192.0.2.10", "u@example.com", "permerror"),
    ("3.3", "the strings of one TXT record are joined", own("v=spf1 ip4:192.0.2.10 -all"),
     "192.0.2.10", "u@example.com", "pass"),
    ("5.2", "include: a pass inside matches", own("v=spf1 include:example.net -all",
     example_net=EXAMPLE_NET), "192.0.2.10", "u@example.com", "pass"),
    ("5.2", "include: a fail inside does not match", own("v=spf1 include:example.net ~all",
     example_net=EXAMPLE_NET), "198.51.100.1", "u@example.com", "softfail"),
    ("5.2", "include of a name without SPF: permerror", own("v=spf1 include:example.net -all"),
     "192.0.2.10", "u@example.com", "permerror"),
    ("5.2", "include with no domain: permerror", own("v=spf1 include -all"), "192.0.2.10",
     "u@example.com", "permerror"),
    ("5.3", "a: the domain's own address", own("v=spf1 a -all") | {"example.com": {
     "TXT": ["v=spf1 a -all"], "A": ["192.0.2.10"]}}, "192.0.2.10", "u@example.com", "pass"),
    ("5.3", "a:/24 covers the network", own("v=spf1 a:h.example.net/24 -all",
     h_example_net={"A": ["192.0.2.1"]}), "192.0.2.77", "u@example.com", "pass"),
    ("5.3", "a//64 for IPv6 clients", own("v=spf1 a:h.example.net//64 -all",
     h_example_net={"AAAA": ["2001:db8:1::1"]}), "2001:db8:1::ffff", "u@example.com", "pass"),
    ("5.3", "a prefix over 32 is permerror", own("v=spf1 a:/33 -all"), "192.0.2.10",
     "u@example.com", "permerror"),
    ("7.1", "a: with a numeric top label is permerror", own("v=spf1 a:example.123 -all"),
     "192.0.2.10", "u@example.com", "permerror"),
    ("5.4", "mx: an exchange's address", own("v=spf1 mx -all") | {"example.com": {
     "TXT": ["v=spf1 mx -all"], "MX": ["mx.example.net"]}, "mx.example.net": {
     "A": ["192.0.2.10"]}}, "192.0.2.10", "u@example.com", "pass"),
    ("4.6.4", "more than 10 MX names: permerror", {"example.com": {
     "TXT": ["v=spf1 mx -all"], "MX": [f"mx{i}.example.net" for i in range(11)]}},
     "192.0.2.10", "u@example.com", "permerror"),
    ("5.5", "ptr: a name validated by its address", own("v=spf1 ptr -all") | {
     "10.2.0.192.in-addr.arpa": {"PTR": ["mail.example.com"]},
     "mail.example.com": {"A": ["192.0.2.10"]}}, "192.0.2.10", "u@example.com", "pass"),
    ("5.5", "ptr: a name whose address differs does not match", own("v=spf1 ptr -all") | {
     "10.2.0.192.in-addr.arpa": {"PTR": ["mail.example.com"]},
     "mail.example.com": {"A": ["198.51.100.1"]}}, "192.0.2.10", "u@example.com", "fail"),
    ("5.6", "ip4 network", own("v=spf1 ip4:192.0.2.0/24 -all"), "192.0.2.10", "u@example.com",
     "pass"),
    ("5.6", "ip6 network", own("v=spf1 ip6:2001:db8::/32 -all"), "2001:db8::5",
     "u@example.com", "pass"),
    ("5.6", "ip6 never matches an IPv4 client", own("v=spf1 ip6:::/0 -all"), "192.0.2.10",
     "u@example.com", "fail"),
    ("5", "an IPv4-mapped IPv6 client is checked as IPv4", own("v=spf1 ip4:192.0.2.10 -all"),
     "::ffff:192.0.2.10", "u@example.com", "pass"),
    ("5.6", "a bad ip4 address is permerror", own("v=spf1 ip4:300.1.1.1 -all"), "192.0.2.10",
     "u@example.com", "permerror"),
    ("5.6", "a prefix with a leading zero is permerror", own("v=spf1 ip4:192.0.2.10/032 -all"),
     "192.0.2.10", "u@example.com", "permerror"),
    ("5.7", "exists: an A record at the expanded name", own(
     "v=spf1 exists:%{ir}.%{l1r-}.allow.example.com -all") | {
     "10.2.0.192.user.allow.example.com": {"A": ["127.0.0.2"]}}, "192.0.2.10",
     "user@example.com", "pass"),
    ("5.7", "exists takes no CIDR", own("v=spf1 exists:x.example.net/24 -all"), "192.0.2.10",
     "u@example.com", "permerror"),
    ("6.1", "redirect when nothing matched", {"sub.example.com": txt(
     "v=spf1 redirect=example.com"), "example.com": txt("v=spf1 ip4:192.0.2.0/24 -all")},
     "192.0.2.10", "u@sub.example.com", "pass"),
    ("6.1", "redirect to a name without SPF: permerror", own("v=spf1 redirect=example.net"),
     "192.0.2.10", "u@example.com", "permerror"),
    ("6.1", "redirect is ignored when all is present", own(
     "v=spf1 -all redirect=example.net", example_net=txt("v=spf1 +all")), "192.0.2.10",
     "u@example.com", "fail"),
    ("6", "redirect given twice: permerror", own(
     "v=spf1 redirect=a.example redirect=b.example"), "192.0.2.10", "u@example.com",
     "permerror"),
    ("6.2", "exp does not change the result", own("v=spf1 -all exp=why.example.com") | {
     "why.example.com": txt("%{i} is not one of our senders")}, "192.0.2.10", "u@example.com",
     "fail"),
    ("6.2", "exp with an empty domain is permerror", own("v=spf1 -all exp="), "192.0.2.10",
     "u@example.com", "permerror"),
    ("7.1", "an unknown macro letter is permerror", own("v=spf1 exists:%{z}.example -all"),
     "192.0.2.10", "u@example.com", "permerror"),
    ("7.1", "a lone % is permerror", own("v=spf1 a:%.example.net -all"), "192.0.2.10",
     "u@example.com", "permerror"),
    ("7.3", "%{d2} keeps the two right labels", {"a.b.example.com": txt(
     "v=spf1 exists:%{d2}.allow.example.net -all"), "example.com.allow.example.net": {
     "A": ["127.0.0.2"]}}, "192.0.2.10", "u@a.b.example.com", "pass"),
    ("7.3", "%{h} is the HELO name", own("v=spf1 exists:%{h}.allow.example.net -all") | {
     "mail.example.com.allow.example.net": {"A": ["127.0.0.2"]}}, "192.0.2.10",
     "u@example.com", "pass"),
    ("4.6.4", "10 DNS-querying terms are allowed", own(f"v=spf1 {TEN} -all") | HOSTS,
     "192.0.2.10", "u@example.com", "fail"),
    ("4.6.4", "an 11th DNS-querying term is permerror", own(f"v=spf1 {ELEVEN} -all") | HOSTS,
     "192.0.2.10", "u@example.com", "permerror"),
    ("4.6.4", "2 void lookups are allowed", own("v=spf1 a:v1.example a:v2.example -all"),
     "192.0.2.10", "u@example.com", "fail"),
    ("4.6.4", "a 3rd void lookup is permerror", own(
     "v=spf1 a:v1.example a:v2.example a:v3.example -all"), "192.0.2.10", "u@example.com",
     "permerror"),
    ("4.6.4", "an include loop ends at the limit: permerror", own(
     "v=spf1 include:example.com -all"), "192.0.2.10", "u@example.com", "permerror"),
    ("4.3", "a domain that is not an FQDN: none", own("v=spf1 +all"), "192.0.2.10",
     "u@localhost", "none"),
    ("4.3", "a label over 63 characters: none", own("v=spf1 +all"), "192.0.2.10",
     f"u@{'a' * 64}.example.com", "none"),
    ("2.4", "a bare domain as MAIL FROM is postmaster@domain", own(
     "v=spf1 exists:%{l}.allow.example.net -all") | {"postmaster.allow.example.net": {
     "A": ["127.0.0.2"]}}, "192.0.2.10", "example.com", "pass"),
]
# fmt: on


@pytest.mark.parametrize(
    ("zone", "ip", "mail_from", "expected"),
    [pytest.param(z, ip, mf, exp, id=f"{sec} {what}") for sec, what, z, ip, mf, exp in RFC_CASES],
)
def test_rfc7208(zone: Zone, ip: str, mail_from: str, expected: str) -> None:
    assert check(zone, ip=ip, mail_from=mail_from).result == expected


def test_multi_string_txt_records_are_joined_by_the_resolver() -> None:
    # 3.3: a record published as "v=spf1 ip4:192.0.2.10" " -all" reaches the evaluator joined
    # (DnsResolver joins the strings, see test_resolver); a fixture gives it joined
    assert check(own("v=spf1 ip4:192.0.2.10" + " -all")).result == "pass"


@pytest.mark.parametrize("failing", ["example.com", "example.net"])
def test_dns_failure_is_temperror(failing: str) -> None:
    # 4.4 (the record itself) and 5.2 (an include's record)
    zone = own("v=spf1 include:example.net -all", example_net=EXAMPLE_NET)
    assert check(zone, failing=(failing,)).result == "temperror"


@pytest.mark.parametrize(("ip", "mail_from", "helo", "expected"), REAL_CASES)
def test_real_looking_records(ip: str, mail_from: str, helo: str, expected: str) -> None:
    resolver = FixtureResolver(REAL_ZONE)
    r = spf.check(ip, mail_from, helo, resolver)
    assert r.result == expected, r
    assert len(resolver.queries) <= 6


def test_result_names_the_deciding_term() -> None:
    r = check(own("v=spf1 ip4:192.0.2.0/24 -all"), ip="198.51.100.1")
    assert (r.mechanism, r.reason) == ("-all", "198.51.100.1 matched -all of example.com")
    r = check(own("v=spf1 ip4:192.0.2.0/24"), ip="198.51.100.1")
    assert (r.mechanism, r.reason) == ("default", "no term of example.com matched 198.51.100.1")
    assert "lookups" in check(own(f"v=spf1 {ELEVEN} -all") | HOSTS).reason.lower()
    assert "void" in check(own("v=spf1 a:v1.example a:v2.example a:v3.example -all")).reason.lower()


def test_identity_and_scope() -> None:
    zone = {"mail.example.com": txt("v=spf1 ip4:192.0.2.10 -all")}
    bounce = check(zone, mail_from="", helo="mail.example.com")
    assert (bounce.result, bounce.scope, bounce.identity) == (
        "pass",
        "helo",
        "postmaster@mail.example.com",
    )
    assert check({}, ip=None).result == "none"
    assert check({}, ip="not-an-ip").result == "none"


# -- bounded -----------------------------------------------------------------------------------
def test_the_limits_stop_the_questions_of_a_hostile_record() -> None:
    """11 includes each with 10 mx of 10 exchanges: the 10-term limit ends it early."""
    zone: Zone = {
        "example.com": txt(
            "v=spf1 " + " ".join(f"include:i{i}.example.net" for i in range(11)) + " -all"
        )
    }
    for i in range(11):
        zone[f"i{i}.example.net"] = {
            "TXT": ["v=spf1 " + " ".join(f"mx:m{j}.example.net" for j in range(10)) + " -all"]
        }
    for j in range(10):
        zone[f"m{j}.example.net"] = {"MX": [f"x{k}.example.net" for k in range(10)]}
        for k in range(10):
            zone[f"x{k}.example.net"] = {"A": ["198.51.100.1"]}
    resolver = FixtureResolver(zone)
    r = spf.check("192.0.2.10", "u@example.com", "h.example.com", resolver)
    assert r.result == "permerror"
    assert len(resolver.queries) <= 1 + 10 * 11


def test_one_letters_questions_and_time_are_bounded() -> None:
    zone = own(f"v=spf1 {TEN} -all") | HOSTS
    few = LimitedResolver(FixtureResolver(zone), max_queries=5, lifetime=60)
    assert spf.check("192.0.2.10", "u@example.com", "h", few).result == "temperror"
    assert few.queries == 5
    now = [0.0]

    class Slow(FixtureResolver):
        def query(self, name: str, rtype: Any) -> list[str]:
            now[0] += 1.0  # each answer takes a second
            return super().query(name, rtype)

    slow = LimitedResolver(Slow(zone), max_queries=100, lifetime=3.5, clock=lambda: now[0])
    r = spf.check("192.0.2.10", "u@example.com", "h", slow)
    assert r.result == "temperror" and "3.5 s" in r.reason
    assert slow.queries == 4  # answered at t = 0, 1, 2, 3; the question at t = 4 > 3.5 refused


@pytest.mark.parametrize("n", [2_000, 60_000])
def test_a_huge_term_is_permerror_at_once(n: int) -> None:
    # pyspf's domain-spec regex is quadratic in a term's length (2 s at 16,000 characters)
    zone = own(f"v=spf1 a:.{'a' * n}! -all")
    t0 = time.process_time()
    r = check(zone)
    assert r.result == "permerror" and "longer than" in r.reason
    # refused before pyspf reads it: milliseconds; read by pyspf: 2 s at 16,000 characters,
    # about 28 s at 60,000. A bound far above the first and far below the second, so that a
    # loaded machine cannot fail it and the quadratic regex cannot pass it
    assert time.process_time() - t0 < 1.0


def test_many_long_terms_stay_cheap() -> None:
    term = "a:." + "a" * (spf.MAX_TERM - 4) + "!"
    zone = own("v=spf1 " + " ".join([term] * 100) + " -all")
    t0 = time.process_time()
    assert check(zone).result == "permerror"
    assert time.process_time() - t0 < 2.0  # 100 terms of 508 characters by pyspf: ~2 s each


# -- the seam -----------------------------------------------------------------------------------
def test_each_check_asks_its_own_resolver_also_in_threads() -> None:
    zone_a = own("v=spf1 ip4:192.0.2.10 -all")
    zone_b = own("v=spf1 -ip4:192.0.2.10 +all")
    results: dict[str, list[str]] = {"a": [], "b": []}

    def run(name: str, zone: Zone) -> None:
        for _ in range(200):
            results[name].append(check(zone).result)

    threads = [threading.Thread(target=run, args=(n, z)) for n, z in (("a", zone_a), ("b", zone_b))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert set(results["a"]) == {"pass"} and set(results["b"]) == {"fail"}


def test_a_fault_inside_the_resolver_is_temperror_not_a_crash() -> None:
    class Broken(FixtureResolver):
        def query(self, name: str, rtype: Any) -> list[str]:
            raise DnsTempError("server gone")

    r = spf.check("192.0.2.10", "u@example.com", "h", Broken())
    assert r.result == "temperror" and "server gone" in r.reason


# -- the public RFC 7208 test suite (tests/data/spf, BSD licence) ------------------------------
SUITE = Path(__file__).parents[2] / "data" / "spf" / "rfc7208-tests.yml"


def test_the_rfc7208_suite_passes_whole() -> None:
    from tests.spf_suite import load, run_case

    cases = load(SUITE)
    failed = [c.name for c in cases if not run_case(c, spf.check).ok]
    assert len(cases) == 203 and failed == []
