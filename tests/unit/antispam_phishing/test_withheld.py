"""Exemptions that rest on the From domain alone (the sender's own site, its organization, the
reader's own domain, a mail server's report) are withheld signs, not lost ones: the checks run
before a letter's authentication is known, and the decision adds them back when DMARC shows the
From domain forged (pochta.antispam.signs.checks.find, Scanner's from_forged)."""

from __future__ import annotations

import dataclasses

import pytest

from pochta.antispam.auth.results import NO_AUTH, AuthResults, DmarcResult
from pochta.antispam.auth.spf import SpfResult
from pochta.antispam.model import booster
from pochta.antispam.signs import checks
from pochta.antispam.verdict import Analyzer, Scanner, from_forged
from pochta.mime.letter import parse
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


def test_only_a_failed_dmarc_shows_the_from_domain_forged() -> None:
    assert from_forged(auth("fail"))
    for result in ("pass", "none", "temperror", "permerror"):
        assert not from_forged(auth(result))
    assert not from_forged(NO_AUTH)


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
