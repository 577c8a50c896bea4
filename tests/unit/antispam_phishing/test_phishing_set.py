"""The phishing test set (tests/data/phishing): each letter shows exactly its expected signs,
authenticates as expected against the offline zone, and gets its expected verdict from the
default rules."""

from __future__ import annotations

import pytest
from tests.unit.antispam_phishing import phishing_2025
from tests.unit.antispam_phishing.helpers import DATA, Case, Key, cases, zone

from pochta.antispam import features
from pochta.antispam.auth.results import AuthResults, authenticate
from pochta.antispam.rules import ruleset as rules
from pochta.antispam.signs import checks as phishing
from pochta.mime.letter import parse
from pochta.types import Envelope

CASES = cases()
IDS = [c.file.removesuffix(".eml") for c in CASES]


def _envelope(case: Case) -> Envelope:
    return Envelope(case.envelope["ip"], case.envelope["mail_from"], ("ivan.petrov@pochta.test",))


def _auth(case: Case, key: Key) -> AuthResults:
    return authenticate(
        case.raw(key),
        ip=case.envelope["ip"],
        mail_from=case.envelope["mail_from"],
        helo=case.envelope["helo"],
        resolver=zone(key),
    )


def test_the_set_is_big_enough_and_bilingual() -> None:
    assert len(CASES) >= 30
    assert sum(c.lang == "ru" for c in CASES) >= 12
    assert sum(c.lang == "en" for c in CASES) >= 12
    verdicts = {c.verdict for c in CASES}
    assert verdicts == {"phishing", "spam", "ham"}
    assert sum(c.verdict == "ham" for c in CASES) >= 10


def test_every_file_is_in_the_manifest_once() -> None:
    files = sorted(p.name for p in DATA.glob("*.eml"))
    assert sorted(c.file for c in CASES) == files


def test_every_sign_is_exercised_by_some_letter() -> None:
    """By this set, or by the 2025 set (tests/data/phishing_2025) for the signs added with
    it."""
    seen = set().union(*(c.symbols for c in CASES))
    seen |= {s for c in phishing_2025.cases() for s in c.expect}
    assert seen == set(phishing.SYMBOLS)


def test_manifest_names_only_known_signs() -> None:
    for case in CASES:
        assert case.symbols <= set(phishing.SYMBOLS), case.file


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_signs(case: Case, key: Key) -> None:
    found = {s.symbol for s in phishing.check(parse(case.raw(key)), _envelope(case))}
    missing, unexpected = case.symbols - found, found - case.symbols
    assert not missing and not unexpected, (
        f"missing {sorted(missing)}, unexpected {sorted(unexpected)}"
    )


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_every_sign_explains_itself_in_both_languages(case: Case, key: Key) -> None:
    for s in phishing.scan(case.raw(key), _envelope(case)):
        assert s.explanation_ru and s.explanation_en and s.evidence
        assert any("а" <= ch <= "я" for ch in s.explanation_ru.lower())
        assert s.explanation_en.isascii() or "'" in s.explanation_en


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_authentication(case: Case, key: Key) -> None:
    got = _auth(case, key).values()
    assert {k: got[k] for k in ("spf", "dkim", "dmarc")} == case.auth


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_verdict_by_the_default_rules(case: Case, key: Key) -> None:
    raw = case.raw(key)
    letter = parse(raw)
    signs = phishing.check(letter, _envelope(case))
    feats = {**features.extract(letter), **case.features}
    hits = rules.evaluate(rules.default(), feats, signs, _auth(case, key))
    verdict = rules.verdict(hits, rules.default().actions)
    shown = [(h.symbol, h.score) for h in hits]
    assert verdict == case.verdict, f"score {rules.score(hits)}: {shown}"


def test_legitimate_letters_have_no_strong_sign(key: Key) -> None:
    weak = {"PHISH_RETURN_PATH_MISMATCH", "PHISH_RECEIVED_MISMATCH"}
    for case in CASES:
        if case.verdict == "ham":
            found = {s.symbol for s in phishing.scan(case.raw(key), _envelope(case))}
            assert found <= weak, case.file
