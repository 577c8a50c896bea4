"""DMARC (pochta.antispam.auth.results.check_dmarc) written from RFC 7489, one row per rule
with the section it comes from: policy discovery through the organizational domain (6.6.3),
the record's tags (6.3, 6.4), identifier alignment strict and relaxed (3.1), the result (4.2)
and message sampling by pct (6.6.4)."""

from __future__ import annotations

from typing import Any

import pytest
from tests.spf_zones import REAL_ZONE

from pochta.antispam.auth.resolver import FixtureResolver
from pochta.antispam.auth.results import DkimResult, check_dmarc, parse_dmarc, sampled
from pochta.antispam.auth.spf import SpfResult

Zone = dict[str, dict[str, list[str]]]


def dmarc(name: str, *records: str) -> Zone:
    return {f"_dmarc.{name}": {"TXT": list(records)}}


def spf_of(result: str, domain: str) -> SpfResult:
    return SpfResult(result, "mailfrom", f"bounce@{domain}", domain)  # type: ignore[arg-type]


def dkim_of(result: str, domain: str) -> DkimResult:
    return DkimResult(result, domain, "s")  # type: ignore[arg-type]


NO_SPF = spf_of("none", "")
SPF_SAME = spf_of("pass", "example.com")
SPF_SUB = spf_of("pass", "bounce.example.com")
DKIM_SUB = [dkim_of("pass", "mail.example.com")]
R = "v=DMARC1; p=reject"

# (section, what, zone, From domain, SPF, DKIM, expected (result, policy, found at))
CASES: list[tuple[str, str, Zone, str, SpfResult, list[DkimResult], tuple[str, str, str]]] = [
    (
        "6.6.3/1",
        "the From domain's own record",
        dmarc("example.com", R),
        "example.com",
        SPF_SAME,
        [],
        ("pass", "reject", "example.com"),
    ),
    (
        "6.6.3/3",
        "no record at the From domain: the organizational domain's",
        dmarc("example.com", R),
        "news.example.com",
        NO_SPF,
        [],
        ("fail", "reject", "example.com"),
    ),
    (
        "6.3 sp",
        "sp= is the policy for a subdomain found at the organizational domain",
        dmarc("example.com", "v=DMARC1; p=reject; sp=none"),
        "news.example.com",
        NO_SPF,
        [],
        ("fail", "none", "example.com"),
    ),
    (
        "6.3 sp",
        "sp= is not used for the organizational domain's own mail",
        dmarc("example.com", "v=DMARC1; p=reject; sp=none"),
        "example.com",
        NO_SPF,
        [],
        ("fail", "reject", "example.com"),
    ),
    (
        "6.6.3/3",
        "the organizational domain comes from the Public Suffix List",
        dmarc("example.co.uk", R),
        "a.b.example.co.uk",
        NO_SPF,
        [],
        ("fail", "reject", "example.co.uk"),
    ),
    (
        "6.6.3/5",
        "two DMARC records: no policy, and no look at the organizational domain",
        dmarc("news.example.com", R, "v=DMARC1; p=none") | dmarc("example.com", R),
        "news.example.com",
        NO_SPF,
        [],
        ("none", "", ""),
    ),
    (
        "6.6.3/2",
        "a TXT record that is not DMARC is discarded",
        dmarc("news.example.com", "v=spf1 -all") | dmarc("example.com", R),
        "news.example.com",
        NO_SPF,
        [],
        ("fail", "reject", "example.com"),
    ),
    (
        "6.4",
        "v=DMARC1 must match exactly",
        dmarc("example.com", "v=dmarc1; p=reject"),
        "example.com",
        NO_SPF,
        [],
        ("none", "", ""),
    ),
    (
        "6.4",
        "v= must be the first tag",
        dmarc("example.com", "p=reject; v=DMARC1"),
        "example.com",
        NO_SPF,
        [],
        ("none", "", ""),
    ),
    (
        "6.4",
        "spaces around = are allowed",
        dmarc("example.com", "v = DMARC1 ;p = quarantine"),
        "example.com",
        NO_SPF,
        [],
        ("fail", "quarantine", "example.com"),
    ),
    (
        "6.6.3/6",
        "an invalid p= with a valid rua= counts as p=none",
        dmarc("example.com", "v=DMARC1; p=bogus; rua=mailto:d@example.com"),
        "example.com",
        NO_SPF,
        [],
        ("fail", "none", "example.com"),
    ),
    (
        "6.6.3/6",
        "an invalid p= without rua=: no DMARC (and no organizational fallback)",
        dmarc("news.example.com", "v=DMARC1; p=bogus") | dmarc("example.com", R),
        "news.example.com",
        NO_SPF,
        [],
        ("none", "", ""),
    ),
    (
        "6.6.3/6",
        "no p= but a valid rua=: p=none",
        dmarc("example.com", "v=DMARC1; rua=mailto:d@example.com"),
        "example.com",
        NO_SPF,
        [],
        ("fail", "none", "example.com"),
    ),
    (
        "6.6.3/6",
        "an invalid sp= without rua=: no DMARC",
        dmarc("example.com", "v=DMARC1; p=reject; sp=maybe"),
        "example.com",
        NO_SPF,
        [],
        ("none", "", ""),
    ),
    (
        "6.3",
        "unknown tags are ignored",
        dmarc("example.com", "v=DMARC1; p=reject; foo=bar"),
        "example.com",
        NO_SPF,
        [],
        ("fail", "reject", "example.com"),
    ),
    (
        "3.1.1",
        "relaxed DKIM alignment: the same organizational domain",
        dmarc("example.com", R),
        "example.com",
        NO_SPF,
        DKIM_SUB,
        ("pass", "reject", "example.com"),
    ),
    (
        "3.1.1",
        "strict DKIM alignment: the same name only",
        dmarc("example.com", "v=DMARC1; p=reject; adkim=s"),
        "example.com",
        NO_SPF,
        DKIM_SUB,
        ("fail", "reject", "example.com"),
    ),
    (
        "3.1.2",
        "relaxed SPF alignment",
        dmarc("example.com", R),
        "example.com",
        SPF_SUB,
        [],
        ("pass", "reject", "example.com"),
    ),
    (
        "3.1.2",
        "strict SPF alignment",
        dmarc("example.com", "v=DMARC1; p=reject; aspf=s"),
        "example.com",
        SPF_SUB,
        [],
        ("fail", "reject", "example.com"),
    ),
    (
        "3.1",
        "relaxed alignment under a public suffix: siblings align",
        dmarc("example.co.uk", R),
        "a.example.co.uk",
        spf_of("pass", "b.example.co.uk"),
        [],
        ("pass", "reject", "example.co.uk"),
    ),
    (
        "3.1",
        "relaxed alignment under a public suffix: other registrants do not",
        dmarc("example.co.uk", R),
        "example.co.uk",
        spf_of("pass", "other.co.uk"),
        [],
        ("fail", "reject", "example.co.uk"),
    ),
    (
        "4.2",
        "a pass that is not aligned does not count",
        dmarc("example.com", R),
        "example.com",
        spf_of("pass", "esp.example.net"),
        [dkim_of("pass", "esp.example.net")],
        ("fail", "reject", "example.com"),
    ),
    (
        "4.2",
        "an aligned identity that did not pass does not count",
        dmarc("example.com", R),
        "example.com",
        spf_of("fail", "example.com"),
        [dkim_of("fail", "example.com")],
        ("fail", "reject", "example.com"),
    ),
    ("6.6.2", "no DMARC record anywhere: none", {}, "example.com", SPF_SAME, [], ("none", "", "")),
]


@pytest.mark.parametrize(
    ("zone", "from_domain", "spf", "dkim", "expected"),
    [pytest.param(z, f, s, d, e, id=f"{sec} {what}") for sec, what, z, f, s, d, e in CASES],
)
def test_rfc7489(
    zone: Zone, from_domain: str, spf: SpfResult, dkim: list[DkimResult], expected: Any
) -> None:
    r = check_dmarc(from_domain, spf, dkim, FixtureResolver(zone))
    assert (r.result, r.policy, r.record_domain) == expected


@pytest.mark.parametrize(
    ("text", "pct"),
    [
        ("v=DMARC1; p=reject; pct=50", 50),
        ("v=DMARC1; p=reject; pct=0", 0),
        ("v=DMARC1; p=reject; pct=150", 100),
        ("v=DMARC1; p=reject; pct=abc", 100),
        ("v=DMARC1; p=reject; pct=-5", 100),
        ("v=DMARC1; p=reject", 100),
    ],
)
def test_pct_values(text: str, pct: int) -> None:
    # 6.3: an integer 0-100, default 100; a bad value takes the default
    record = parse_dmarc(text)
    assert record is not None and record.pct == pct


@pytest.mark.parametrize(
    ("policy", "pct", "applied"),
    [
        ("reject", 100, "reject"),
        ("reject", 0, "quarantine"),
        ("quarantine", 0, "none"),
        ("none", 0, "none"),
    ],
)
def test_pct_lowers_the_policy_outside_the_sample(policy: str, pct: int, applied: str) -> None:
    # 6.6.4: not selected under reject: quarantine; under quarantine: local policy (none)
    zone = dmarc("example.com", f"v=DMARC1; p={policy}; pct={pct}")
    r = check_dmarc("example.com", NO_SPF, [], FixtureResolver(zone), b"letter")
    assert (r.result, r.policy, r.pct, r.applied) == ("fail", policy, pct, applied)


def test_sampling_is_stable_and_takes_pct_percent() -> None:
    keys = [f"letter {i}".encode() for i in range(4000)]
    share = sum(sampled(25, k) for k in keys) / len(keys)
    assert 0.22 < share < 0.28
    assert [sampled(25, k) for k in keys[:50]] == [sampled(25, k) for k in keys[:50]]
    assert all(sampled(100, k) for k in keys[:50]) and not any(sampled(0, k) for k in keys[:50])


def test_a_passing_letter_keeps_the_published_policy() -> None:
    zone = dmarc("example.com", "v=DMARC1; p=reject; pct=0")
    r = check_dmarc("example.com", SPF_SAME, [], FixtureResolver(zone), b"x")
    assert (r.result, r.applied) == ("pass", "reject")


def test_dns_failure_is_temperror_and_so_is_a_temporary_identity() -> None:
    failing = FixtureResolver(failing=["_dmarc.example.com"])
    assert check_dmarc("example.com", SPF_SAME, [], failing).result == "temperror"
    zone = FixtureResolver(dmarc("example.com", R))
    assert check_dmarc("example.com", spf_of("temperror", "example.com"), [], zone).result == (
        "temperror"
    )


def test_no_single_from_domain_is_permerror() -> None:
    # pochta's choice for 6.6.1's letters without one author domain
    assert check_dmarc(None, SPF_SAME, [], FixtureResolver()).result == "permerror"


@pytest.mark.parametrize(
    ("from_domain", "spf", "expected"),
    [
        ("gmail.com", spf_of("pass", "gmail.com"), ("pass", "none", "none")),
        ("googlemail.gmail.com", spf_of("softfail", "x.example"), ("fail", "quarantine", "")),
        ("mail.ru", spf_of("pass", "mail.ru"), ("pass", "reject", "reject")),
        ("mail.ru", spf_of("softfail", "mail.ru"), ("fail", "reject", "reject")),
        ("gosuslugi.ru", spf_of("fail", "gosuslugi.ru.forger.example"), ("fail", "reject", "")),
        ("shop.example", spf_of("pass", "sendgrid.net"), ("fail", "quarantine", "")),
    ],
)
def test_real_looking_policies(from_domain: str, spf: SpfResult, expected: Any) -> None:
    r = check_dmarc(from_domain, spf, [], FixtureResolver(REAL_ZONE), from_domain.encode())
    assert (r.result, r.policy) == expected[:2]
    if expected[2]:
        assert r.applied == expected[2]
    else:
        assert r.applied in (expected[1], {"reject": "quarantine"}.get(expected[1], "none"))
