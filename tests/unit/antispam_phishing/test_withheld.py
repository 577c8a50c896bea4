"""Exemptions that rest on the From domain alone (the sender's own site, its organization, the
reader's own domain, a mail server's report) are withheld signs, not lost ones: the checks run
before a letter's authentication is known, and the decision adds them back when DMARC shows the
From domain forged (pochta.antispam.signs.checks.find, Scanner's from_forged)."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pytest

from pochta.antispam.auth.results import (
    NO_AUTH,
    AuthResults,
    DkimResult,
    DmarcResult,
)
from pochta.antispam.auth.spf import SpfResult
from pochta.antispam.model import booster
from pochta.antispam.signs import checks
from pochta.antispam.verdict import Analysis, Analyzer, Scanner, Verdict, from_forged
from pochta.app import build
from pochta.config import load_settings
from pochta.mime.letter import Letter, parse
from pochta.types import Envelope

READER = Envelope("203.0.113.9", "postmaster@pochta.test", ("alice@pochta.test",))

# "your mailbox is full" from the reader's own domain's postmaster: the mail administrator's
# name and the account lure are the domain's own business only if the letter is really its
MAILBOX_FULL = (
    b"Return-Path: <postmaster@pochta.test>\r\n"
    b"From: Mail Administrator <postmaster@pochta.test>\r\n"
    b"To: alice@pochta.test\r\n"
    b"Subject: Your mailbox is full: 5 pending messages\r\n\r\n"
    b"Dear user, your mailbox is over its quota and 5 incoming messages are pending.\r\n"
    b"Log in within 24 hours to keep your password and release your pending messages:\r\n"
    b"http://pochta-mail-quota.example/login\r\n"
)

# a shop's newsletter whose link shows a partner's site and counts the click on its own
PARTNER_LINK = (
    b"From: Arnotts <news@arnotts.ie>\r\n"
    b"To: bob@example.org\r\n"
    b"Subject: This week at Arnotts\r\n"
    b"MIME-Version: 1.0\r\n"
    b"Content-Type: text/html; charset=utf-8\r\n\r\n"
    b'<p>Order online at <a href="http://www.arnotts.ie/click?to=buy4now">www.buy4now.ie</a></p>\r\n'
)


def auth(dmarc: str) -> AuthResults:
    return dataclasses.replace(
        NO_AUTH,
        spf=SpfResult("fail" if dmarc == "fail" else "pass", "mailfrom", "", "pochta.test"),
        dmarc=DmarcResult(dmarc, "pochta.test", "reject"),  # type: ignore[arg-type]
    )


def symbols(signs: object) -> set[str]:
    return {s.symbol for s in signs}  # type: ignore[attr-defined]


def test_an_exemption_resting_on_the_reader_domain_withholds_its_signs() -> None:
    found = checks.find(parse(MAILBOX_FULL), READER)
    assert found.complete
    assert not symbols(found.signs) & {"PHISH_MAIL_ADMIN_NAME", "PHISH_ACCOUNT_LURE"}
    assert symbols(found.withheld) == {"PHISH_MAIL_ADMIN_NAME", "PHISH_ACCOUNT_LURE"}
    # what check / run give is unchanged: the signs shown, never the withheld ones
    assert checks.check(parse(MAILBOX_FULL), READER) == found.signs


def test_an_own_site_exemption_withholds_the_link_mismatch() -> None:
    found = checks.find(parse(PARTNER_LINK))
    assert "PHISH_LINK_TEXT_MISMATCH" not in symbols(found.signs)
    assert symbols(found.withheld) == {"PHISH_LINK_TEXT_MISMATCH"}


def test_a_letter_no_exemption_applied_to_withholds_nothing() -> None:
    stranger = MAILBOX_FULL.replace(b"postmaster@pochta.test", b"postmaster@quota-mail.example")
    found = checks.find(parse(stranger), Envelope(sender="postmaster@quota-mail.example"))
    assert symbols(found.signs) >= {"PHISH_MAIL_ADMIN_NAME", "PHISH_ACCOUNT_LURE"}
    assert found.withheld == []


def test_a_failed_dmarc_shows_the_from_domain_forged() -> None:
    assert from_forged(auth("fail"))
    for result in ("pass", "temperror", "permerror"):
        assert not from_forged(auth(result))
    assert not from_forged(NO_AUTH)


def spf_only(spf: str, mail_from: str, dkim: tuple[DkimResult, ...] = ()) -> AuthResults:
    """A From domain that publishes no DMARC policy (pochta.test), SPF as given."""
    domain = mail_from.rpartition("@")[2]
    return AuthResults(
        SpfResult(spf, "mailfrom", mail_from, domain),  # type: ignore[arg-type]
        dkim,
        DmarcResult("none", "pochta.test", reason="no policy"),
    )


def test_without_a_policy_a_failed_spf_of_the_readers_own_domain_shows_it_forged() -> None:
    """A letter in the installation's own name (the envelope's recipients' domain) along a
    path its own SPF refuses, with no DKIM of that domain passing, is the forgery."""
    own = ("pochta.test",)
    assert from_forged(spf_only("fail", "postmaster@pochta.test"), own)
    assert from_forged(spf_only("fail", "bounce@mail.pochta.test"), own)  # the same registrable
    assert from_forged(spf_only("fail", "postmaster@pochta.test"), ("mail.pochta.test",))
    signed = (DkimResult("pass", "pochta.test", "s1"),)
    assert not from_forged(spf_only("fail", "postmaster@pochta.test", signed), own)
    foreign = (DkimResult("pass", "elsewhere.example", "s1"),)
    assert from_forged(spf_only("fail", "postmaster@pochta.test", foreign), own)
    for result in ("softfail", "neutral", "none", "temperror", "permerror", "pass"):
        assert not from_forged(spf_only(result, "postmaster@pochta.test"), own)
    assert not from_forged(spf_only("fail", "bounce@elsewhere.example"), own)  # not the From's


def test_plain_forwarding_of_a_domain_without_a_policy_keeps_its_exemptions() -> None:
    """A .forward that keeps the original MAIL FROM (no SRS) of a domain with neither DKIM nor
    DMARC fails SPF at pochta: that is forwarding, not forgery, for every domain but the
    reader's own. Without an envelope (no readers) SPF alone never shows a forgery."""
    forwarded = spf_only("fail", "postmaster@pochta.test")
    assert not from_forged(forwarded, ("example.org",))  # a reader elsewhere: a forwarder
    assert not from_forged(forwarded)
    assert not from_forged(forwarded, ("pochta.test.example",))  # not the same domain


def test_the_decision_keeps_a_forwarded_letters_withheld_signs_out() -> None:
    """The shop's newsletter forwarded by the reader's old address: SPF fails for arnotts.ie,
    which publishes no DMARC; its own-site exemption holds. The same letter written in the
    reader's own domain's name, along the same refused path, loses it."""
    scanner = Scanner()
    reader = Envelope("198.51.100.7", "news@arnotts.ie", ("bob@example.org",))
    analysis = Analyzer().analyze(parse(PARTNER_LINK), reader)
    assert analysis.readers == ("example.org",)
    assert symbols(analysis.withheld) == {"PHISH_LINK_TEXT_MISMATCH"}
    forwarded = AuthResults(
        SpfResult("fail", "mailfrom", "news@arnotts.ie", "arnotts.ie"),
        (),
        DmarcResult("none", "arnotts.ie", reason="no policy"),
    )
    kept = scanner.decide(analysis.authenticated(forwarded))
    assert "PHISH_LINK_TEXT_MISMATCH" not in symbols(kept.signs)

    own = PARTNER_LINK.replace(b"arnotts.ie", b"example.org")
    envelope = Envelope("198.51.100.7", "news@example.org", ("bob@example.org",))
    analysis = Analyzer().analyze(parse(own), envelope)
    assert symbols(analysis.withheld) == {"PHISH_LINK_TEXT_MISMATCH"}
    refused = AuthResults(
        SpfResult("fail", "mailfrom", "news@example.org", "example.org"),
        (),
        DmarcResult("none", "example.org", reason="no policy"),
    )
    forged = scanner.decide(analysis.authenticated(refused))
    assert "PHISH_LINK_TEXT_MISMATCH" in symbols(forged.signs)


def test_the_reader_domain_is_the_envelopes_not_what_the_sender_writes_in_to() -> None:
    """A sender on its own domain writing "To: staff@<its own domain>" to a reader elsewhere
    made its domain "the reader's" and bought the reader-domain exemption (the review's
    letter). The envelope's recipients name the readers; To only without an envelope."""
    letter = parse(
        MAILBOX_FULL.replace(b"postmaster@pochta.test", b"it@quota-mail.example").replace(
            b"To: alice@pochta.test", b"To: staff@quota-mail.example"
        )
    )
    envelope = Envelope("203.0.113.9", "it@quota-mail.example", ("alice@pochta.test",))
    found = checks.find(letter, envelope)
    assert symbols(found.signs) >= {"PHISH_MAIL_ADMIN_NAME", "PHISH_ACCOUNT_LURE"}
    assert found.withheld == []
    # scanned on its own (no envelope), the To field is all there is to go by
    alone = checks.find(letter)
    assert symbols(alone.withheld) == {"PHISH_MAIL_ADMIN_NAME", "PHISH_ACCOUNT_LURE"}


def test_checks_that_leaned_are_run_again_past_the_deadline() -> None:
    """A letter whose budget ran out keeps no exemption the checks that did run leaned on."""

    def slow(ctx: checks.Context) -> None:
        time.sleep(0.6)

    found = checks.find(
        parse(MAILBOX_FULL),
        READER,
        checks=[checks.mail_admin_name, slow, checks.account_lure],
        deadline=time.monotonic() + 0.3,
    )
    assert not found.complete
    assert symbols(found.withheld) == {"PHISH_MAIL_ADMIN_NAME"}  # account_lure never ran


@pytest.mark.parametrize("with_model", [False, True])
def test_the_decision_adds_the_withheld_signs_when_dmarc_fails(with_model: bool) -> None:
    model = booster.load() if with_model else None
    scanner = Scanner(model=model)
    analysis = Analyzer().analyze(parse(MAILBOX_FULL), READER)
    assert symbols(analysis.withheld) == {"PHISH_MAIL_ADMIN_NAME", "PHISH_ACCOUNT_LURE"}

    forged = scanner.decide(analysis.authenticated(auth("fail")))
    assert symbols(forged.signs) >= {"PHISH_MAIL_ADMIN_NAME", "PHISH_ACCOUNT_LURE"}
    assert forged.label == "phishing"
    assert forged.features["phish.signs"] == analysis.features["phish.signs"] + 2
    assert forged.features["sign.PHISH_ACCOUNT_LURE"] == 1.0

    for result in ("pass", "none"):  # the domain's own letter, or nothing shows it false
        kept = scanner.decide(analysis.authenticated(auth(result)))
        assert not symbols(kept.signs) & {"PHISH_MAIL_ADMIN_NAME", "PHISH_ACCOUNT_LURE"}
        assert kept.label != "phishing"


def test_the_withheld_signs_cross_the_process_boundary() -> None:
    import pickle

    analysis = Analyzer().analyze(parse(PARTNER_LINK))
    again = pickle.loads(pickle.dumps(analysis))
    assert again.withheld == analysis.withheld and again.withheld


def test_a_stored_letter_shows_its_reader_the_signs_its_verdict_counted(tmp_path: Path) -> None:
    """Webmail's banner and the API's warnings read the stored letter (no envelope, no DNS):
    a withheld sign is shown when pochta's own verdict field says it was counted at delivery,
    whatever the letter's To field or other fields say."""
    p = build(load_settings(data_dir=tmp_path / "data"))
    try:

        def stored(verdict: str) -> Letter:
            return parse(f"X-Pochta-Spam: {verdict}\r\n".encode() + MAILBOX_FULL)

        lure = {"PHISH_MAIL_ADMIN_NAME", "PHISH_ACCOUNT_LURE"}
        counted = (
            "phishing; score=8.00; symbols=PHISH_URGENCY,PHISH_MAIL_ADMIN_NAME,PHISH_ACCOUNT_LURE"
        )
        assert symbols(p.mailbox.warnings(stored(counted))) >= lure
        assert (
            not symbols(p.mailbox.warnings(stored("ham; score=1.50; symbols=PHISH_URGENCY"))) & lure
        )
        assert not symbols(p.mailbox.warnings(parse(MAILBOX_FULL))) & lure  # no verdict at all
        # a sign the checks show is shown whatever the field says
        stranger = MAILBOX_FULL.replace(b"postmaster@pochta.test", b"postmaster@quota.example")
        assert symbols(p.mailbox.warnings(parse(stranger))) >= lure
    finally:
        p.close()


def test_the_counted_symbols_are_read_from_pochtas_own_field_only() -> None:
    from pochta.antispam.verdict import Verdict

    assert Verdict.counted(None) == Verdict.counted("ham; score=0.00; symbols=-") == frozenset()
    assert Verdict.counted("spam; probability=0.9; score=2.00; symbols=A,B; list=block") == {
        "A",
        "B",
    }
    assert Verdict.counted("spam; score=2.00; partial=timeout; symbols=A") == {"A"}
    assert Verdict.counted("garbage") == frozenset()
    assert Verdict.counted("x; symbols=" + "A," * 100_000) == {"A"}  # read up to a bound


NOTICE = (
    b"From: {sender}\r\nTo: bob@example.org\r\nSubject: Mailbox notice\r\nMIME-Version: 1.0\r\n"
    b"Content-Type: text/plain; charset=utf-8\r\n\r\nTo receive your refund, pay the processing"
    b" fee and update your payment details. Your mailbox is full: release your pending"
    b" messages at the portal. Your password will expire today.\r\n"
)


def _decided(sender: bytes, mail_from: str, envelope: Envelope) -> tuple[Analysis, Verdict]:
    analysis = Analyzer().analyze(parse(NOTICE.replace(b"{sender}", sender)), envelope)
    domain = mail_from.rpartition("@")[2]
    refused = AuthResults(
        SpfResult("fail", "mailfrom", mail_from, domain),
        (),
        DmarcResult("none", domain, reason="no policy"),
    )
    return analysis, Scanner().decide(analysis.authenticated(refused))


def test_a_scanned_letter_in_the_readers_domain_from_a_refused_path_loses_its_exemption() -> None:
    """``POST /v1/scan`` gives no recipients: the readers are the To field's, as the signs'
    exemption takes them, so SPF refusing the reader's own domain's path takes it back."""
    analysis, verdict = _decided(
        b'"Mail Administrator" <admin@example.org>',
        "admin@example.org",
        Envelope("198.51.100.7", "admin@example.org"),
    )
    assert analysis.readers == ("example.org",)
    assert {"PHISH_ACCOUNT_LURE", "PHISH_MAIL_ADMIN_NAME"} <= symbols(analysis.withheld)
    assert {"PHISH_ACCOUNT_LURE", "PHISH_MAIL_ADMIN_NAME"} <= symbols(verdict.signs)
    assert verdict.label == "phishing"


def test_a_protected_organizations_domain_from_a_refused_path_loses_its_exemption() -> None:
    """A protected organization's From domain is trusted by the same exemption: SPF refusing
    a MAIL FROM of that domain, no DMARC to ask, takes it back as for the reader's own."""
    envelope = Envelope("198.51.100.7", "info@nalog.ru", ("bob@example.org",))
    analysis, verdict = _decided(b'"FNS" <info@nalog.ru>', "info@nalog.ru", envelope)
    assert "nalog.ru" in analysis.readers
    assert {"PHISH_ACCOUNT_LURE", "PHISH_FEE_REQUEST"} <= symbols(analysis.withheld)
    assert {"PHISH_ACCOUNT_LURE", "PHISH_FEE_REQUEST"} <= symbols(verdict.signs)
