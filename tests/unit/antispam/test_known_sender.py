"""A known sender's usual mail (verdict.known_sender): the rules' phishing verdict gives way
to a model sure of ham only for a From address the installation has filed as ham, never for
an unknown sender, a sender that imitates another party, or one that fails DMARC."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import pytest
from tests.mailtools import letter

from pochta.antispam.auth.results import NO_AUTH
from pochta.antispam.model.booster import Model
from pochta.antispam.shingles.counters.memory import MemoryStore
from pochta.antispam.shingles.counters.service import Counters
from pochta.antispam.shingles.registry import update_refs
from pochta.antispam.signs.registry import Sign
from pochta.antispam.verdict import (
    KNOWN_SENDER,
    SPOOFING,
    Analysis,
    Scanner,
    known_sender,
)
from pochta.mime.letter import parse

NOW = 1_800_000_000.0
# 4.0 + 2.5 phishing points: at the default rules' phishing threshold (5) on their own
PHISHING = (Sign("PHISH_CARD_DATA_REQUEST", "", ""), Sign("PHISH_LINK_IP", "", ""))


class Sure(Model):
    """A model that gives every letter the same P(spam)."""

    def __init__(self, p: float) -> None:
        super().__init__(None, [], 0.5)
        self.p = p

    def probability(self, features: Mapping[str, float]) -> float:
        return self.p

    def content_probability(self, features: Mapping[str, float]) -> float:
        return self.p


def scanner(p: float) -> Scanner:
    return Scanner(model=Sure(p), counters=Counters(MemoryStore(), buffered=False))


def analysis(s: Scanner, signs: tuple[Sign, ...] = PHISHING) -> Analysis:
    raw = letter(sender="Shop News <news@shop.example>", text="Our offers this week.\n")
    return dataclasses.replace(s.analyzer.analyze(parse(raw)), signs=signs)


def known(s: Scanner, a: Analysis, letters: int = 2) -> None:
    """The installation counted ``letters`` of this sender's letters as ham."""
    assert s.counters is not None
    for k in range(letters):
        s.counters.update(update_refs(a.shingles), "ham", at=NOW - 3600 * (k + 1))


def test_a_known_senders_letter_the_model_is_sure_of_is_ham() -> None:
    s = scanner(0.001)
    a = analysis(s)
    known(s, a)
    v = s.decide(a, now=NOW)
    assert v.label == "ham" and v.probability == 0.001
    assert {h.symbol for h in v.hits} >= {"PHISH_CARD_DATA_REQUEST", "PHISH_LINK_IP"}
    assert v.features[KNOWN_SENDER] <= -0.5


def test_an_unknown_sender_stays_phishing() -> None:
    s = scanner(0.001)
    a = analysis(s)
    known(s, a, letters=1)  # one letter: the lean is -1/3, not yet known
    assert s.decide(a, now=NOW).label == "phishing"
    assert scanner(0.001).decide(analysis(scanner(0.001)), now=NOW).label == "phishing"


def test_a_model_not_sure_of_ham_leaves_the_phishing_verdict() -> None:
    s = scanner(0.05)
    a = analysis(s)
    known(s, a, letters=5)
    v = s.decide(a, now=NOW)
    assert v.label == "phishing" and v.probability is None


@pytest.mark.parametrize("sign", sorted(SPOOFING))
def test_a_known_sender_imitating_another_party_stays_phishing(sign: str) -> None:
    s = scanner(0.001)
    a = analysis(s, (*PHISHING, Sign(sign, "", "")))
    known(s, a, letters=5)
    assert s.decide(a, now=NOW).label == "phishing"


def test_failing_dmarc_or_a_partial_analysis_is_not_a_known_sender() -> None:
    f = {KNOWN_SENDER: -0.9}
    assert known_sender(f, PHISHING, NO_AUTH, ())
    failed = dataclasses.replace(NO_AUTH, dmarc=dataclasses.replace(NO_AUTH.dmarc, result="fail"))
    assert not known_sender(f, PHISHING, failed, ())
    assert not known_sender(f, PHISHING, NO_AUTH, ("signs",))
    assert not known_sender({KNOWN_SENDER: -0.4}, PHISHING, NO_AUTH, ())
    assert not known_sender({}, PHISHING, NO_AUTH, ())
