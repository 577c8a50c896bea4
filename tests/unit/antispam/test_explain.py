"""Explanations per letter: the features that pushed a verdict most, in English and Russian."""

from __future__ import annotations

import math

import pytest
from tests.mailtools import letter

from pochta.antispam.model import booster, explain
from pochta.antispam.verdict import Scanner


def test_phrases_say_what_the_value_was() -> None:
    en, ru = explain.phrase("shingle.14.spam_lean_24h", 0.8)
    assert en == "letters from this address in the last 24 h were mostly spam"
    assert ru == "письма с этого адреса за последние сутки были в основном спамом"
    en, _ = explain.phrase("shingle.23.spam_lean_14d", -0.2)
    assert en == "letters linking to these domains in the last 14 days were partly legitimate"
    en, ru = explain.phrase("shingle.8.spam_lean_1h", 0.0)
    assert en == "nothing is known of letters with this subject in the last hour"
    assert "ничего не известно" in ru
    assert explain.phrase("text.exclamations", 7.0) == (
        "7 exclamation marks in the text", "восклицательных знаков в тексте: 7")  # fmt: skip
    en, ru = explain.phrase("sign.PHISH_LINK_IP", 1.0)
    assert "IP" in en and ru
    assert explain.phrase("headers.has_message_id", 0.0)[0] == "no Message-ID"
    assert explain.phrase("auth.dmarc.pass", 1.0)[0] == "DMARC: pass"
    assert explain.phrase("something.new", 2.5) == ("something.new = 2.50",) * 2


def test_every_column_of_the_shipped_model_has_a_phrase() -> None:
    model = booster.load()
    assert model is not None
    for column in model.columns:
        en, ru = explain.phrase(column, 1.0)
        assert en and ru
        assert "=" not in en, column  # a real phrase, not the fallback


@pytest.fixture(scope="module")
def scanner() -> Scanner:
    return Scanner(model=booster.load())


def test_the_top_five_are_the_largest_shap_values(scanner: Scanner) -> None:
    raw = letter(sender="Deals <deals@cheap-stuff.biz>", subject="FREE!!! Act now",
                 text="Buy now, only $19.99!!! Click here: http://cheap-stuff.biz/x\n")  # fmt: skip
    v = scanner.scan(raw)
    assert scanner.model is not None and v.probability is not None
    reasons = scanner.explain(v)
    assert len(reasons) == 5
    sizes = [abs(r.push) for r in reasons]
    assert sizes == sorted(sizes, reverse=True)
    pushes, expected = scanner.model.contributions(v.features)
    assert max(abs(p) for p in pushes) == pytest.approx(sizes[0])
    # SHAP values add up to the letter's log-odds
    logit = math.log(v.probability / (1 - v.probability))
    assert sum(pushes) + expected == pytest.approx(logit, abs=1e-6)
    d = reasons[0].as_dict()
    assert d["toward"] in ("spam", "ham") and d["unit"] == "log-odds" and d["en"] and d["ru"]


def test_a_phishing_verdict_is_explained_by_the_rules() -> None:
    from pathlib import Path

    raw = Path(__file__).parents[2] / "data" / "phishing" / "ru01_nalog_foreign_tld.eml"
    s = Scanner(model=booster.load())
    v = s.scan(raw.read_bytes())
    assert v.label == "phishing" and v.probability is None
    reasons = s.explain(v)
    assert reasons and all(r.unit == "points" and r.feature.startswith("rule.") for r in reasons)
    assert reasons[0].push == max(h.score for h in v.hits)


def test_unknown_counters_push_nothing(scanner: Scanner) -> None:
    raw = letter(subject="Your order #4471 has shipped", text="Your parcel is on its way.\n")
    v = scanner.scan(raw)  # no counters: every shingle unknown
    assert scanner.model is not None
    pushes, _ = scanner.model.contributions(v.features)
    lean = [p for c, p in zip(scanner.model.columns, pushes, strict=True) if ".spam_lean_" in c]
    assert lean and all(p == pytest.approx(0.0, abs=1e-12) for p in lean)
    assert not any(".spam_lean_" in r.feature for r in scanner.explain(v))


def test_a_value_the_letter_lacked_is_null_in_json() -> None:
    """A feature missing from a letter is NaN to the model and can still push its verdict;
    ``POST /v1/scan?explain=true`` answered 500 ("Out of range float values are not JSON
    compliant") on such a reason."""
    import json

    reason = explain.Reason("text.words", math.nan, 0.25, "log-odds", "unknown", "неизвестно")
    d = reason.as_dict()
    assert d["value"] is None and d["push"] == 0.25
    assert json.loads(json.dumps(d, allow_nan=False)) == d
