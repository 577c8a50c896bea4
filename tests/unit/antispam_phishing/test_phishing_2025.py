"""The 2025 phishing set (tests/data/phishing_2025, issue 28 item 6): today's phishing, in
Russian and English, and legitimate letters that look alike, each scanned as ``POST /v1/scan``
scans a raw letter (no envelope, no DNS) by a fresh Scanner with the shipped model.

The goals of the issue, with a margin: at least 97 % of the phishing filed as spam or
phishing, at least 80 % named by a phishing sign that carries points; the legitimate
look-alikes stay in the Inbox and are never called phishing."""

from __future__ import annotations

import functools

import pytest
from tests.unit.antispam_phishing import phishing_2025
from tests.unit.antispam_phishing.phishing_2025 import Case

from pochta.antispam.rules import ruleset
from pochta.antispam.signs import checks as phishing
from pochta.antispam.verdict import Scanner, Verdict
from pochta.mime.letter import parse

CASES = phishing_2025.cases()
PHISHING = [c for c in CASES if c.kind == "phishing"]
HAM = [c for c in CASES if c.kind == "ham"]
IDS = [c.file.removesuffix(".eml") for c in CASES]

@functools.cache
def verdict(file: str) -> Verdict:
    case = next(c for c in CASES if c.file == file)
    return _scanner().scan(case.raw)


@functools.cache
def _scanner() -> Scanner:
    return phishing_2025.scanner()


def test_the_set_is_big_enough_and_bilingual() -> None:
    assert len(PHISHING) >= 40
    assert sum(c.lang == "ru" for c in PHISHING) >= 20
    assert sum(c.lang == "en" for c in PHISHING) >= 20
    assert len(HAM) >= 20
    assert {c.lang for c in HAM} == {"ru", "en"}
    assert {c.kind for c in CASES} == {"phishing", "ham"}


def test_every_file_is_in_the_manifest_once() -> None:
    listed = [c.file for c in CASES]
    assert len(listed) == len(set(listed))
    assert sorted(listed) == sorted(p.name for p in phishing_2025.DATA.glob("*.eml"))


def test_manifest_names_only_known_signs_and_ham_expects_none() -> None:
    for case in PHISHING:
        assert case.expect and set(case.expect) <= set(phishing.SYMBOLS), case.file
        assert case.what.strip(), case.file
    for case in HAM:
        assert case.expect == (), case.file


@pytest.mark.parametrize("case", PHISHING, ids=[c.file.removesuffix(".eml") for c in PHISHING])
def test_each_phishing_letter_shows_its_signs(case: Case) -> None:
    found = {s.symbol for s in phishing.scan(case.raw)}
    assert set(case.expect) <= found, f"missing {sorted(set(case.expect) - found)}"


def test_the_scanner_files_the_phishing_as_spam_or_phishing() -> None:
    caught = [c.file for c in PHISHING if verdict(c.file).label != "ham"]
    missed = sorted(set(c.file for c in PHISHING) - set(caught))
    assert len(caught) >= 0.97 * len(PHISHING), f"in the Inbox: {missed}"


def test_the_phishing_is_named_by_a_sign_with_points() -> None:
    rules = ruleset.default()
    named = [c.file for c in PHISHING if phishing_2025.named(verdict(c.file), rules)]
    assert len(named) >= 0.8 * len(PHISHING)
    # and the rules alone call nearly all of it phishing (the label the reader sees)
    called = [c.file for c in PHISHING if verdict(c.file).label == "phishing"]
    assert len(called) >= 0.9 * len(PHISHING), sorted({c.file for c in PHISHING} - set(called))


@pytest.mark.parametrize("case", HAM, ids=[c.file.removesuffix(".eml") for c in HAM])
def test_a_legitimate_look_alike_is_never_phishing(case: Case) -> None:
    v = verdict(case.file)
    rules = ruleset.default()
    assert ruleset.phishing_score(v.hits) < rules.actions.phishing, [
        (h.symbol, h.score) for h in v.hits
    ]
    assert v.label != "phishing"
    # ham_en11_freelancer_gmail_invoice.eml, filed as spam on its words by the model shipped
    # before 2026-11-30, is ham since the model fitted on the non-sealed letters (issue 28)
    assert v.label == "ham", (v.probability, [(h.symbol, h.score) for h in v.hits])


def test_the_signs_the_ham_shows_are_few() -> None:
    """Legitimate letters with a sign that carries points stay a minority of the look-alikes
    (they are built to show them: a school's fee, a ticket's QR code, a .shop newsletter)."""
    rules = ruleset.default()
    with_sign = [c.file for c in HAM if phishing_2025.named(verdict(c.file), rules)]
    assert len(with_sign) <= len(HAM) // 2, with_sign


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_every_sign_explains_itself(case: Case) -> None:
    for s in phishing.scan(parse(case.raw)):
        assert s.explanation_ru and s.explanation_en and s.evidence
        assert all(len(e) <= 400 for e in s.evidence)
