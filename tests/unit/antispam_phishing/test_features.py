"""Content features (pochta.antispam.features): a fixed schema of floats."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.unit.antispam_phishing.helpers import DATA, letter

from pochta.antispam import features
from pochta.antispam.auth.results import NO_AUTH
from pochta.antispam.signs import checks as phishing
from pochta.antispam.signs import protected
from pochta.antispam.signs.registry import SYMBOLS, Sign
from pochta.mime.letter import parse


def extract(raw: bytes) -> dict[str, float]:
    return features.extract(parse(raw))


def test_schema_is_fixed_and_documented() -> None:
    doc = features.__doc__ or ""
    for path in sorted(DATA.glob("*.eml"))[:10]:
        f = extract(path.read_bytes())
        assert list(f) == list(features.FEATURES)
        assert all(isinstance(v, float) and math.isfinite(v) for v in f.values())
    for name in features.FEATURES:
        stem = name.split(".")[0] + "."
        assert stem in doc, name


@pytest.mark.parametrize(
    ("text", "lang"),
    [
        ("Добрый день, коллеги! Отчёт готов.", "ru"),
        ("Hello, the report is ready.", "en"),
        ("Γειά σου κόσμε", "other"),
        ("12345 !!!", "other"),
        ("Отчёт за третий квартал готов, see attached", "ru"),
    ],
)
def test_language_by_script(text: str, lang: str) -> None:
    assert features.language(text) == lang


def test_text_html_links_and_case() -> None:
    raw = letter(
        subject="СКИДКИ!!! ТОЛЬКО СЕГОДНЯ",
        text=None,
        html="<p>КУПИТЕ ОКНА ЗА 4 990 РУБ. И ДВЕРИ ЗА 9 990 РУБ.</p>"
        '<a href="https://a.example/1">1</a><a href="http://b.example/2">2</a>'
        '<a href="https://www.a.example/3">3</a><a href="http://192.0.2.1/x">4</a>'
        '<a href="https://bit.ly/x">5</a><img src="x.png"><form></form>',
    )
    f = extract(raw)
    assert f["html.only"] == 1.0 and f["text.chars"] == 0.0 and f["html.share"] == 1.0
    assert f["links.count"] == 5.0 and f["links.distinct_domains"] == 4.0
    assert f["links.ip"] == 1.0 and f["links.shortener"] == 1.0 and f["links.https_share"] == 0.6
    assert f["text.upper_ratio"] == 1.0 and f["text.money"] == 2.0 and f["lang.ru"] == 1.0
    assert f["subject.upper_ratio"] == 1.0 and f["subject.exclamations"] == 3.0
    assert f["html.images"] == 1.0 and f["html.forms"] == 1.0


def test_headers_and_sender() -> None:
    f = extract(
        letter(
            sender="ФНС <noreply@fcod.nalog.ru>",
            subject="Re: x",
            headers={"In-Reply-To": "<a@b>", "List-Unsubscribe": "<https://x>"},
        )
    )
    assert f["sender.protected"] == 1.0 and f["sender.freemail"] == 0.0
    assert f["subject.reply"] == 1.0 and f["headers.has_in_reply_to"] == 1.0
    assert f["headers.has_list_unsubscribe"] == 1.0 and f["headers.has_message_id"] == 1.0
    assert f["sender.display_name_chars"] == 3.0 and f["recipients.count"] == 1.0
    gmail = extract(letter(sender="Ivan <ivan@gmail.com>"))
    assert gmail["sender.protected"] == 0.0 and gmail["sender.freemail"] == 1.0


def test_the_models_public_mail_services_are_the_signs_list() -> None:
    assert protected.freemail() == features.FREEMAIL
    for sender, public in [
        ("A <a@msn.com>", 1.0),  # not in features' own list before phish28c
        ("A <a@yahoo.co.uk>", 1.0),
        ("A <a@gmail.com>", 1.0),
        ("A <a@example.com>", 0.0),
    ]:
        assert extract(letter(sender=sender))["sender.freemail"] == public, sender


def test_attachments_counted() -> None:
    f = extract(letter(files=[("a.pdf", b"x" * 100), ("b.txt", b"y" * 50)]))
    assert f["attachments.count"] == 2.0 and f["attachments.bytes"] == 150.0


def test_sign_and_auth_features() -> None:
    f = features.from_signs([phishing.sign("PHISH_LINK_IP", ["x"])])
    assert list(f) == list(features.SIGN_FEATURES)
    assert (
        f["sign.PHISH_LINK_IP"] == 1.0
        and f["sign.PHISH_FAKE_REPLY"] == 0.0
        and f["phish.signs"] == 1.0
    )
    a = features.from_auth(NO_AUTH)
    assert list(a) == list(features.AUTH_FEATURES)
    assert a["auth.spf.none"] == a["auth.dkim.none"] == a["auth.dmarc.none"] == 1.0
    assert sum(a.values()) == 4.0
    assert features.from_auth(None) == a


def test_empty_letter() -> None:
    f = extract(b"")
    assert f["lang.other"] == 1.0 and f["links.count"] == 0.0


MONEY_PIECES = [
    "1", "12 000", "3.5", " ", "\n", "руб", "РУБ", "р.", "Р", ".", "₽", "$", "usd", "UṠD", "uſd",
    "долл", "ДОЛЛ", "евро", "€", "тыс", "ТЫС", "млн", "£", "a", "б", "\ud800",
]  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(MONEY_PIECES), max_size=10).map("".join))
def test_money_past_the_re2_first_look(text: str) -> None:
    """The RE2 first look (a unit or a sign anywhere) lets through every text Python's
    pattern counts an amount in: the same count as the pattern alone."""
    alone = sum(1 for m in features._MONEY.finditer(text) if m.lastgroup is not None)
    assert features.money(text) == alone


@pytest.mark.parametrize(
    "text",
    ["$500", "12 000 руб", "5 РУБ.", "7 р.", "1₽", "5 usd", "5 uſd", "2 долл", "3 евро", "€5",
     "9€", "£4", "3 тыс.", "4 млн"],
)  # fmt: skip
def test_each_amount_alone_is_counted(text: str) -> None:
    assert features.money(f"Pay {text} now") == 1


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([*SYMBOLS, "NOT_A_SYMBOL"]), max_size=8))
def test_sign_features_every_symbol_in_order(symbols: list[str]) -> None:
    """Every symbol's feature, in SYMBOLS' order: 1.0 for a sign that fired, else 0.0 (an
    unknown symbol makes none, yet counts in ``phish.signs``)."""
    f = features.from_signs([Sign(s, "", "") for s in symbols])
    assert list(f) == [*(f"sign.{s}" for s in SYMBOLS), "phish.signs"]
    assert f == {
        **{f"sign.{s}": float(s in symbols) for s in SYMBOLS},
        "phish.signs": float(len(set(symbols))),
    }
