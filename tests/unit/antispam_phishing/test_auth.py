"""DKIM and DMARC (pochta.antispam.auth.results) with keys generated here and an offline zone,
and the Authentication-Results header."""

from __future__ import annotations

import pytest
from tests.unit.antispam_phishing.helpers import Key, crlf, make_key, sign

from pochta.antispam.auth import results as auth
from pochta.antispam.auth.resolver import FixtureResolver
from pochta.antispam.auth.results import (
    AuthResults,
    DkimResult,
    authenticate,
    check_dmarc,
    verify_dkim,
)
from pochta.antispam.auth.spf import SpfResult
from pochta.errors import ConfigError

LETTER = crlf(
    "From: ФНС России <noreply@fcod.nalog.ru>\n"
    "To: ivan@pochta.test\n"
    "Subject: Налоговое уведомление\n"
    "Date: Mon, 23 Nov 2026 10:00:00 +0300\n"
    "Message-ID: <n1@fcod.nalog.ru>\n"
    "MIME-Version: 1.0\n"
    "Content-Type: text/plain; charset=utf-8\n"
    "Content-Transfer-Encoding: 8bit\n"
    "\n"
    "Уважаемый Иван Сергеевич!\nУведомление в личном кабинете.\n".encode()
)


def zone(key: Key, **extra: dict[str, list[str]]) -> FixtureResolver:
    records = {
        "mail._domainkey.nalog.ru": {"TXT": [key.txt]},
        "nalog.ru": {"TXT": ["v=spf1 ip4:192.0.2.0/28 -all"]},
        "_dmarc.nalog.ru": {"TXT": ["v=DMARC1; p=reject; sp=quarantine"]},
    }
    records.update(extra)
    return FixtureResolver(records)


# -- DKIM -----------------------------------------------------------------------------------
def test_dkim_pass(key: Key) -> None:
    [r] = verify_dkim(sign(LETTER, key, "nalog.ru", "mail"), zone(key))
    assert (r.result, r.domain, r.selector) == ("pass", "nalog.ru", "mail")
    assert r.header_b


def test_dkim_fails_when_the_body_or_a_signed_header_changes(key: Key) -> None:
    signed = sign(LETTER, key, "nalog.ru", "mail")
    [body] = verify_dkim(signed.replace("кабинете".encode(), "кабинетe".encode()), zone(key))
    assert (body.result, body.reason) == ("fail", "body hash mismatch")
    [header] = verify_dkim(signed.replace(b"Subject: ", b"Subject: Re: "), zone(key))
    assert header.result == "fail"


def test_dkim_with_another_key_fails(key: Key) -> None:
    other = make_key(1024)
    [r] = verify_dkim(sign(LETTER, other, "nalog.ru", "mail"), zone(key))
    assert r.result == "fail"


def test_dkim_permerrors() -> None:
    key = make_key(1024)
    signed = sign(LETTER, key, "nalog.ru", "mail")
    [no_key] = verify_dkim(signed, FixtureResolver())
    assert (no_key.result, no_key.reason) == ("permerror", "no key at mail._domainkey.nalog.ru")
    bad = FixtureResolver({"mail._domainkey.nalog.ru": {"TXT": ["v=DKIM1; k=rsa; p=AAAA"]}})
    assert verify_dkim(signed, bad)[0].result == "permerror"
    revoked = FixtureResolver({"mail._domainkey.nalog.ru": {"TXT": ["v=DKIM1; k=rsa; p="]}})
    assert verify_dkim(signed, revoked)[0].result == "permerror"
    broken = signed.replace(b"a=rsa-sha256", b"a=rsa-md5", 1)
    assert verify_dkim(broken, zone(key))[0].result == "permerror"


def test_dkim_keys_below_the_minimum_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    small = make_key(1024)
    signed = sign(LETTER, small, "nalog.ru", "mail")
    resolver = FixtureResolver({"mail._domainkey.nalog.ru": {"TXT": [small.txt]}})
    assert verify_dkim(signed, resolver)[0].result == "pass"
    monkeypatch.setattr(auth, "MIN_KEY_BITS", 2048)
    [r] = verify_dkim(signed, resolver)
    assert (r.result, r.reason) == ("permerror", "bad key: public key too small: 1024")


def test_dkim_temperror(key: Key) -> None:
    signed = sign(LETTER, key, "nalog.ru", "mail")
    resolver = FixtureResolver(failing=["mail._domainkey.nalog.ru"])
    assert verify_dkim(signed, resolver)[0].result == "temperror"


def test_unsigned_letter_and_several_signatures(key: Key) -> None:
    assert verify_dkim(LETTER, zone(key)) == ()
    twice = sign(sign(LETTER, key, "nalog.ru", "mail"), key, "esp.example", "s1")
    results = verify_dkim(twice, zone(key))
    assert [(r.domain, r.result) for r in results] == [
        ("esp.example", "permerror"),
        ("nalog.ru", "pass"),
    ]
    assert (
        AuthResults(SpfResult("none", "mailfrom", "", ""), results, auth.NO_AUTH.dmarc).dkim_result
        == "pass"
    )


# -- DMARC ----------------------------------------------------------------------------------
def spf_of(result: str, domain: str) -> SpfResult:
    return SpfResult(result, "mailfrom", f"bounce@{domain}", domain)  # type: ignore[arg-type]


def dkim_of(result: str, domain: str) -> DkimResult:
    return DkimResult(result, domain, "s")  # type: ignore[arg-type]


def test_dmarc_alignment_relaxed_and_strict() -> None:
    relaxed = FixtureResolver({"_dmarc.example.com": {"TXT": ["v=DMARC1; p=reject"]}})
    strict = FixtureResolver(
        {"_dmarc.example.com": {"TXT": ["v=DMARC1; p=reject; adkim=s; aspf=s"]}}
    )
    sub_spf = spf_of("pass", "bounce.example.com")
    r = check_dmarc("example.com", sub_spf, (), relaxed)
    assert (r.result, r.spf_aligned, r.policy) == ("pass", True, "reject")
    assert check_dmarc("example.com", sub_spf, (), strict).result == "fail"
    assert check_dmarc("example.com", spf_of("pass", "example.com"), (), strict).result == "pass"
    r = check_dmarc(
        "example.com", spf_of("fail", "example.com"), [dkim_of("pass", "mail.example.com")], relaxed
    )
    assert (r.result, r.dkim_aligned) == ("pass", True)
    assert (
        check_dmarc(
            "example.com", spf_of("fail", "x.org"), [dkim_of("pass", "mail.example.com")], strict
        ).result
        == "fail"
    )


def test_dmarc_unaligned_passes_do_not_count() -> None:
    resolver = FixtureResolver({"_dmarc.example.com": {"TXT": ["v=DMARC1; p=quarantine"]}})
    r = check_dmarc(
        "example.com",
        spf_of("pass", "esp.example.net"),
        [dkim_of("pass", "esp.example.net")],
        resolver,
    )
    assert (r.result, r.policy) == ("fail", "quarantine")


def test_dmarc_organizational_domain_and_subdomain_policy() -> None:
    resolver = FixtureResolver({"_dmarc.nalog.ru": {"TXT": ["v=DMARC1; p=reject; sp=quarantine"]}})
    r = check_dmarc("fcod.nalog.ru", spf_of("fail", "fcod.nalog.ru"), (), resolver)
    assert (r.result, r.policy, r.record_domain) == ("fail", "quarantine", "nalog.ru")
    r = check_dmarc("nalog.ru", spf_of("fail", "nalog.ru"), (), resolver)
    assert r.policy == "reject"


def test_dmarc_none_temperror_permerror() -> None:
    assert (
        check_dmarc("example.com", spf_of("pass", "example.com"), (), FixtureResolver()).result
        == "none"
    )
    assert (
        check_dmarc(None, spf_of("pass", "example.com"), (), FixtureResolver()).result
        == "permerror"
    )
    failing = FixtureResolver(failing=["_dmarc.example.com"])
    assert (
        check_dmarc("example.com", spf_of("pass", "example.com"), (), failing).result == "temperror"
    )
    record = FixtureResolver({"_dmarc.example.com": {"TXT": ["v=DMARC1; p=reject"]}})
    r = check_dmarc("example.com", spf_of("temperror", "example.com"), (), record)
    assert r.result == "temperror"


@pytest.mark.parametrize(
    ("record", "policy"),
    [
        ("v=DMARC1; p=none", "none"),
        ("v=DMARC1;p=quarantine;pct=50", "quarantine"),
        ("v=DMARC1; p=bogus; rua=mailto:d@example.com", "none"),
        ("v=DMARC1; rua=mailto:d@example.com", "none"),
    ],
)
def test_dmarc_record_parsing(record: str, policy: str) -> None:
    resolver = FixtureResolver({"_dmarc.example.com": {"TXT": [record]}})
    r = check_dmarc("example.com", spf_of("fail", "example.com"), (), resolver)
    assert (r.result, r.policy) == ("fail", policy)


@pytest.mark.parametrize("record", ["v=DMARC1; p=bogus", "v=spf1 -all", "p=reject; v=DMARC1"])
def test_unusable_dmarc_records_are_no_policy(record: str) -> None:
    resolver = FixtureResolver({"_dmarc.example.com": {"TXT": [record]}})
    assert check_dmarc("example.com", spf_of("fail", "example.com"), (), resolver).result == "none"


def test_two_dmarc_records_are_no_policy() -> None:
    resolver = FixtureResolver(
        {"_dmarc.example.com": {"TXT": ["v=DMARC1; p=reject", "v=DMARC1; p=none"]}}
    )
    assert check_dmarc("example.com", spf_of("fail", "example.com"), (), resolver).result == "none"


# -- the whole letter and the header --------------------------------------------------------
def test_authenticate_a_real_and_a_forged_letter(key: Key) -> None:
    signed = sign(LETTER, key, "nalog.ru", "mail")
    resolver = zone(key, **{"fcod.nalog.ru": {"TXT": ["v=spf1 redirect=nalog.ru"]}})
    real = authenticate(
        signed,
        ip="192.0.2.5",
        mail_from="bounce@fcod.nalog.ru",
        helo="fcod.nalog.ru",
        resolver=resolver,
    )
    assert real.values() == {
        "spf": "pass",
        "dkim": "pass",
        "dmarc": "pass",
        "dmarc_policy": "quarantine",
    }
    forged = authenticate(
        LETTER,
        ip="203.0.113.9",
        mail_from="noreply@fcod.nalog.ru",
        helo="evil.example",
        resolver=resolver,
    )
    assert forged.values() == {
        "spf": "fail",
        "dkim": "none",
        "dmarc": "fail",
        "dmarc_policy": "quarantine",
    }


def test_several_from_addresses_are_dmarc_permerror(key: Key) -> None:
    letter = LETTER.replace(b"From: ", b"From: a@example.com, ", 1)
    r = authenticate(letter, ip="192.0.2.5", mail_from="x@nalog.ru", helo="h", resolver=zone(key))
    assert r.dmarc.result == "permerror"


def test_authentication_results_header(key: Key) -> None:
    signed = sign(LETTER, key, "nalog.ru", "mail")
    r = authenticate(
        signed,
        ip="192.0.2.5",
        mail_from="bounce@nalog.ru",
        helo="fcod.nalog.ru",
        resolver=zone(key),
    )
    value = r.header("mx.pochta.test")
    parts = value.split("; ")
    assert parts[0] == "mx.pochta.test"
    assert parts[1].startswith("spf=pass (") and parts[1].endswith(" smtp.mailfrom=bounce@nalog.ru")
    assert parts[2].startswith("dkim=pass header.d=nalog.ru header.s=mail header.b=")
    assert parts[3] == "dmarc=pass (p=quarantine) header.from=fcod.nalog.ru"  # sp= of nalog.ru


def test_header_for_a_bounce_unsigned_and_unchecked() -> None:
    r = authenticate(
        LETTER, ip="192.0.2.5", mail_from="", helo="fcod.nalog.ru", resolver=FixtureResolver()
    )
    value = r.header("mx.pochta.test")
    assert "spf=none (fcod.nalog.ru publishes no SPF record) smtp.helo=fcod.nalog.ru" in value
    assert "dkim=none (no signatures)" in value
    assert "dmarc=none (no DMARC policy) header.from=fcod.nalog.ru" in value
    assert auth.NO_AUTH.header("mx").startswith("mx; spf=none")


def test_header_quotes_and_escapes() -> None:
    r = AuthResults(
        SpfResult("fail", "mailfrom", "odd user@example.com", "example.com", reason="a (b) c"),
        (DkimResult("pass", "example.com", "s", "ab/cd+ef="),),
        auth.NO_AUTH.dmarc,
    )
    value = r.header("mx")
    assert 'smtp.mailfrom="odd user@example.com"' in value
    assert r"(a \(b\) c)" in value
    assert 'header.b="ab/cd+ef="' in value


@pytest.mark.parametrize("bad", ["", "mx pochta", "mx;x"])
def test_bad_authserv_id_is_a_config_error(bad: str) -> None:
    with pytest.raises(ConfigError):
        auth.NO_AUTH.header(bad)


def test_unchecked_results_name_the_letters_own_identities() -> None:
    """Issue 21: with DNS checks off the header said smtp.mailfrom="" and header.from=""
    although the letter has both."""
    from pochta.antispam.verdict import Analyzer
    from pochta.mime.letter import parse
    from pochta.types import Envelope

    envelope = Envelope(ip="192.0.2.5", sender="bounce@nalog.ru", recipients=("ivan@pochta.test",))
    analysis = Analyzer(resolver=None).analyze(parse(LETTER), envelope, "mail.nalog.ru")
    value = analysis.auth.header("mx.pochta.test")
    assert "spf=none (not checked) smtp.mailfrom=bounce@nalog.ru" in value
    assert "dmarc=none (not checked) header.from=fcod.nalog.ru" in value
    assert analysis.auth.values() == auth.NO_AUTH.values()  # the rules see the same words
    bounce = Envelope(ip="192.0.2.5", sender="", recipients=("ivan@pochta.test",))
    value = Analyzer().analyze(parse(LETTER), bounce, "mail.nalog.ru").auth.header("mx")
    assert "spf=none (not checked) smtp.helo=mail.nalog.ru" in value
    value = Analyzer().analyze(parse(LETTER)).auth.header("mx")  # the scan API, no envelope
    assert 'smtp.mailfrom=""' in value and "header.from=fcod.nalog.ru" in value
