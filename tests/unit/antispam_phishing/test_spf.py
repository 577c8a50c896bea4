"""SPF (pochta.antispam.auth.spf) against offline zones: every result and mechanism, the limits."""

from __future__ import annotations

import pytest

from pochta.antispam.auth import spf
from pochta.antispam.auth.resolver import FixtureResolver


def check(
    records: dict[str, dict[str, list[str]]],
    ip: str | None = "192.0.2.10",
    mail_from: str = "user@example.com",
    helo: str = "mail.example.com",
    failing: tuple[str, ...] = (),
) -> spf.SpfResult:
    return spf.check(ip, mail_from, helo, FixtureResolver(records, failing))


def txt(*records: str) -> dict[str, list[str]]:
    return {"TXT": list(records)}


@pytest.mark.parametrize(
    ("record", "ip", "expected"),
    [
        ("v=spf1 ip4:192.0.2.0/24 -all", "192.0.2.10", "pass"),
        ("v=spf1 ip4:192.0.2.0/24 -all", "198.51.100.1", "fail"),
        ("v=spf1 ip4:192.0.2.0/24 ~all", "198.51.100.1", "softfail"),
        ("v=spf1 ip4:192.0.2.0/24 ?all", "198.51.100.1", "neutral"),
        ("v=spf1 ip4:192.0.2.0/24", "198.51.100.1", "neutral"),
        ("v=spf1 -ip4:192.0.2.10 +all", "192.0.2.10", "fail"),
        ("v=spf1 ip6:2001:db8::/32 -all", "2001:db8::5", "pass"),
        ("v=spf1 ip6:2001:db8::/32 -all", "192.0.2.10", "fail"),
        ("v=spf1 ip4:192.0.2.10 -all", "::ffff:192.0.2.10", "pass"),
        ("V=SPF1 IP4:192.0.2.10 -ALL", "192.0.2.10", "pass"),
    ],
)
def test_results_of_ip_mechanisms(record: str, ip: str, expected: str) -> None:
    assert check({"example.com": txt(record)}, ip=ip).result == expected


def test_no_record_is_none_and_other_txt_records_are_ignored() -> None:
    assert check({}).result == "none"
    assert check({"example.com": txt("google-site-verification=abc")}).result == "none"


def test_two_records_are_permerror() -> None:
    r = check({"example.com": txt("v=spf1 -all", "v=spf1 +all")})
    assert r.result == "permerror"


@pytest.mark.parametrize(
    "record",
    [
        "v=spf1 ip4:300.1.1.1 -all",
        "v=spf1 ip4 -all",
        "v=spf1 include -all",
        "v=spf1 a:/33 -all",
        "v=spf1 foo:bar -all",
        "v=spf1 -all redirect=a.example redirect=b.example",
        "v=spf1 exists:%{z}.example -all",
        "v=spf1 ip4:192.0.2.10 all:x",
    ],
)
def test_syntax_errors_are_permerror_even_after_a_match(record: str) -> None:
    assert check({"example.com": txt("v=spf1 ip4:192.0.2.10 " + record[7:])}).result == "permerror"


def test_unknown_modifiers_are_ignored() -> None:
    assert check({"example.com": txt("v=spf1 foo=bar ip4:192.0.2.10 -all")}).result == "pass"


def test_dns_failure_is_temperror() -> None:
    assert check({}, failing=("example.com",)).result == "temperror"


def test_a_and_mx_with_prefixes() -> None:
    zone = {
        "example.com": {
            "TXT": ["v=spf1 a mx/24 -all"],
            "A": ["203.0.113.5"],
            "MX": ["mx.example.com"],
        },
        "mx.example.com": {"A": ["192.0.2.1"]},
    }
    assert check(zone, ip="203.0.113.5").result == "pass"
    assert check(zone, ip="192.0.2.77").result == "pass"  # mx/24
    r = check(zone, ip="198.51.100.1")
    assert (r.result, r.mechanism) == ("fail", "-all")
    other = {
        "example.com": txt("v=spf1 a:other.example//64 -all"),
        "other.example": {"AAAA": ["2001:db8:1::1"]},
    }
    assert check(other, ip="2001:db8:1::ffff").result == "pass"


def test_include_results_map_as_the_rfc_says() -> None:
    base = {"example.com": txt("v=spf1 include:_spf.example.net -all")}
    passing = {**base, "_spf.example.net": txt("v=spf1 ip4:192.0.2.0/24 -all")}
    assert check(passing).result == "pass"
    assert check(passing, ip="198.51.100.1").result == "fail"  # include did not match: -all
    assert check(base).result == "permerror"  # the include has no record
    assert check(base, failing=("_spf.example.net",)).result == "temperror"


def test_redirect_and_its_errors() -> None:
    zone = {
        "sub.example.com": txt("v=spf1 redirect=example.com"),
        "example.com": txt("v=spf1 ip4:192.0.2.0/24 -all"),
    }
    r = check(zone, mail_from="bounce@sub.example.com")
    assert (r.result, r.domain) == ("pass", "sub.example.com")
    assert check({"example.com": txt("v=spf1 redirect=nowhere.example")}).result == "permerror"
    ignored = {"example.com": txt("v=spf1 ip4:192.0.2.10 redirect=nowhere.example")}
    assert check(ignored).result == "pass"  # redirect only when nothing matched


def test_exists_with_macros() -> None:
    zone = {
        "example.com": txt("v=spf1 exists:%{ir}.%{l1r-}.allow.example.com -all"),
        "10.2.0.192.user.allow.example.com": {"A": ["127.0.0.2"]},
    }
    assert check(zone, mail_from="user@example.com").result == "pass"
    assert check(zone, mail_from="other@example.com").result == "fail"


def test_macro_expansion() -> None:
    ev = spf._Evaluator(
        FixtureResolver(),
        spf.ipaddress.ip_address("192.0.2.3"),
        "strong-bad",
        "email.example.com",
        "mx.example.org",
    )
    assert ev._expand("%{s}", "email.example.com") == "strong-bad@email.example.com"
    assert ev._expand("%{o}", "x") == "email.example.com"
    assert ev._expand("%{d4}", "email.example.com") == "email.example.com"
    assert ev._expand("%{d2}", "email.example.com") == "example.com"
    assert ev._expand("%{dr}", "email.example.com") == "com.example.email"
    assert ev._expand("%{l-}", "x") == "strong.bad"
    assert ev._expand("%{lr-}", "x") == "bad.strong"
    assert (
        ev._expand("%{ir}.%{v}._spf.%{d2}", "email.example.com")
        == "3.2.0.192.in-addr._spf.example.com"
    )
    assert ev._expand("%{h}", "x") == "mx.example.org"
    ev6 = spf._Evaluator(
        FixtureResolver(), spf.ipaddress.ip_address("2001:db8::cb01"), "u", "e.com", ""
    )
    assert ev6._expand("%{ir}.%{v}", "e.com").startswith("1.0.b.c.0.0.0.0")
    assert ev6._expand("%{ir}.%{v}", "e.com").endswith("8.b.d.0.1.0.0.2.ip6")


def test_ptr_validates_the_name() -> None:
    zone = {
        "example.com": txt("v=spf1 ptr -all"),
        "10.2.0.192.in-addr.arpa": {"PTR": ["mail.example.com", "mail.evil.example"]},
        "mail.example.com": {"A": ["192.0.2.10"]},
    }
    assert check(zone).result == "pass"
    forged = {**zone, "mail.example.com": {"A": ["198.51.100.1"]}}
    assert check(forged).result == "fail"


def test_more_than_ten_lookups_is_permerror() -> None:
    zone = {
        "example.com": txt("v=spf1 " + " ".join(f"a:h{i}.example.com" for i in range(11)) + " -all")
    }
    for i in range(11):
        zone[f"h{i}.example.com"] = {"A": ["198.51.100.1"]}
    assert check(zone).result == "permerror"
    zone["example.com"] = txt(
        "v=spf1 " + " ".join(f"a:h{i}.example.com" for i in range(10)) + " -all"
    )
    assert check(zone).result == "fail"


def test_more_than_two_void_lookups_is_permerror() -> None:
    zone = {"example.com": txt("v=spf1 a:v1.example a:v2.example a:v3.example -all")}
    assert check(zone).result == "permerror"
    zone = {"example.com": txt("v=spf1 a:v1.example a:v2.example -all")}
    assert check(zone).result == "fail"


def test_include_loops_end_at_the_lookup_limit() -> None:
    zone = {"example.com": txt("v=spf1 include:example.com -all")}
    assert check(zone).result == "permerror"


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
    assert check({}, mail_from="user@localhost").result == "none"
    bare = check({"example.com": txt("v=spf1 ip4:192.0.2.10 -all")}, mail_from="example.com")
    assert (bare.result, bare.identity) == ("pass", "postmaster@example.com")
