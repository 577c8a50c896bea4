"""The signs added for the peer-style set, each in Russian and in English: extortion,
obfuscated links, user@ parts in URLs, links under abused TLDs; what fires and what must
not (the legitimate letters that look alike)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.unit.antispam_phishing.helpers import letter

from pochta.antispam.signs import checks as phishing
from pochta.antispam.signs import extortion, links, protected, wording
from pochta.mime.normalize import known_suffix

BTC_LEGACY = "1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN2"  # the Bitcoin wiki's example, valid checksum
BTC_BECH32 = "bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq"
ETH = "0x52908400098527886E0F7030069857D2E4169EE7"
TRON = "TKP673qr6ukgrKkh6eaC3VcTjBJPoY3ZE6"


def signs(raw: bytes) -> dict[str, tuple[str, ...]]:
    return {s.symbol: s.evidence for s in phishing.scan(raw)}


# -- extortion --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text",
    [
        f"Я взломал твой компьютер и записал видео с камеры. Переведи 0.02 BTC на кошелёк "
        f"{BTC_LEGACY}. У тебя 48 часов, иначе видео получат все твои контакты.",
        f"Ваша база данных у нас. Переведите 2000 USDT (TRC20) на адрес {TRON} до конца дня, "
        f"в противном случае мы опубликуем её.",
        f"I recorded you through your webcam. Send $1450 in Bitcoin to {BTC_BECH32} within "
        f"48 hours, or the video goes to all your contacts.",
        f"We downloaded your database. Pay 0.35 ETH to {ETH} before the deadline or we publish "
        f"it.",
        "I am in a meeting and need a favour today: buy four Google Play gift cards of $100, "
        "scratch the back and send me photos of the codes. It is urgent.",
        "Купите, пожалуйста, подарочные карты Google Play на 20 000 рублей и пришлите мне "
        "фото кодов. Это срочно, сегодня до 15:00.",
    ],
)
def test_extortion(text: str) -> None:
    assert "PHISH_EXTORTION" in signs(letter(text=text))


@pytest.mark.parametrize(
    "text",
    [
        # a newsletter printing donation addresses; a date two weeks ahead
        f"Chain Digest is funded by its readers; donations are welcome but never expected:\n"
        f"BTC: {BTC_BECH32}\nETH: {ETH}\nThe soft fork activates in about 14 days.",
        # an exchange confirms a deposit, and warns
        f"Пополнение на 150 USDT зачислено. Адрес для пополнения: {TRON}. Зачисление занимает "
        f"5–10 минут. Не переводите средства по просьбе «службы поддержки».",
        # a shop sells gift cards with a deadline
        "Gift cards make easy presents: buy one before Sunday, the offer ends in 2 days.",
        # an invoice with a deadline and bank details, no crypto
        "Счёт № 318 оплатите до 30.11, после этого начисляется пеня. Реквизиты: р/с "
        "40702810900000012345, БИК 044525225.",
        # a wallet without any demand to pay into it
        f"Your withdrawal to {BTC_LEGACY} was completed in 3 hours.",
    ],
)
def test_no_extortion(text: str) -> None:
    assert "PHISH_EXTORTION" not in signs(letter(text=text))


def test_extortion_evidence_names_the_wallet_and_the_pressure() -> None:
    text = f"Переведи 300 USD в биткоинах на {BTC_LEGACY}. У тебя 48 часов."
    assert signs(letter(text=text))["PHISH_EXTORTION"] == (
        f"bitcoin: {BTC_LEGACY}",
        "переведи",
        "48 часов",
    )


def test_wallet_shapes_and_checksums() -> None:
    found = extortion.wallets(
        f"{BTC_LEGACY} {BTC_LEGACY[:-1]}3 {BTC_BECH32} {ETH} {TRON} 1Z999AA10123456784"
    )
    assert [(w.kind, w.valid) for w in found] == [
        ("bitcoin", True),
        ("bitcoin", False),  # one character changed: the checksum fails, the shape stays
        ("bitcoin", False),  # bech32: shape only
        ("ethereum", False),
        ("tron", True),
    ]
    assert extortion.wallets(f"x{ETH}y") == []  # inside a longer word: no address


WALLET_PIECES = [
    BTC_LEGACY, BTC_LEGACY[:26], BTC_LEGACY[:25], BTC_BECH32, BTC_BECH32[:14], ETH, ETH[:41],
    TRON, TRON[:33], "x", "0", " ", "\n", "é", "bc1", "BC1", "0x", "T", "3", "\ud800",
]  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(WALLET_PIECES), max_size=8).map("".join))
def test_wallets_past_the_re2_first_look(text: str) -> None:
    """The RE2 first look lets through every text Python's pattern finds an address in: the
    same addresses as the pattern alone."""
    alone = [m.group(0) for m in extortion._WALLET.finditer(text)][:10]
    assert [w.address for w in extortion.wallets(text)] == alone


# -- obfuscated links -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("Перейдите на сайт vyplaty-grazhdanam[.]online и заполните заявку.",
         "vyplaty-grazhdanam[.]online"),
        ("Заявка: vyplaty-rf(.)site/zayavka — откройте в браузере.", "vyplaty-rf(.)site"),
        ("Кешбэк можно вывести на сайте keshbek-vozvrat точка ру", "keshbek-vozvrat точка ру"),
        ("Copy this address into your browser: hxxps://parcel-redelivery-fee.info/pay",
         "hxxps://parcel-redelivery-fee.info/pay"),
        ("Claim it at claim-bonus2026 . net (our links are blocked by filters).",
         "claim-bonus2026 . net"),
        ("Go to paypal-resolution dot com and sign in.", "paypal-resolution dot com"),
    ],
)
def test_obfuscated_links(text: str, shown: str) -> None:
    assert signs(letter(text=text))["PHISH_LINK_OBFUSCATED"] == (shown,)


@pytest.mark.parametrize(
    "text",
    [
        # warnings name fraudsters' sites defanged
        "Мошенники рассылают ссылки вида tbank-keshbek[.]top. Никогда не переходите по ним.",
        "Never open hxxp://invoice-viewer[.]top, it is phishing.",
        # a security bulletin: a list of indicators
        "Indicators:\nhxxps://lk-nalog[.]top/a\nhxxps://lk-fns[.]top/b\nnalog-lk[.]xyz\n"
        "vychet-lk[.]site\nfns-vozvrat[.]online\nlkfl-nalog[.]top\n",
        # prose
        "The dot com bubble burst in 2000. Visit us any time.",
        "Your payment was declined. To keep watching, update the card.",
        "Our site runs on .NET and Python.",
        # a friend names a real shop in words
        "Зайди на сайт ozon точка ру, там скидки.",
    ],
)
def test_not_obfuscated_links(text: str) -> None:
    assert "PHISH_LINK_OBFUSCATED" not in signs(letter(text=text))


# -- user@ parts ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "href",
    [
        "https://www.sberbank.ru@secure-node-77.example/lk",
        "http://paypal.com@login@resolution-desk.example/case",
        "https://esia.gosuslugi.ru%2Flogin%40pay-fines.example/",
        "http://www.paypal.com%40evil.example/",
        "https://login.microsoftonline.com-common-oauth2-authorize-client-id-00000002-0000-0ff1"
        "-ce00-000000000000-response-type-code@docs-viewer.example/open",
    ],
)
def test_link_userinfo(href: str) -> None:
    found = signs(letter(html=f'<p><a href="{href}">Открыть / Open</a></p>'))
    assert "PHISH_LINK_USERINFO" in found


def test_link_userinfo_in_plain_text_and_its_evidence() -> None:
    raw = letter(text="Войдите: https://www.sberbank.ru@secure-node-77.example/lk\n")
    assert signs(raw)["PHISH_LINK_USERINFO"] == ("www.sberbank.ru@secure-node-77.example",)


@pytest.mark.parametrize(
    "href",
    [
        "https://medium.com/@author/a-story",
        "https://www.tiktok.com/@shop?lang=ru",
        "mailto:support@example.com",
        "https://example.com/?email=a%40b.example",
    ],
)
def test_no_userinfo(href: str) -> None:
    assert "PHISH_LINK_USERINFO" not in signs(letter(html=f'<a href="{href}">link</a>'))


# -- suspicious TLDs --------------------------------------------------------------------------
@pytest.mark.parametrize(
    "href",
    [
        "https://pochta-kvota.top/login",
        "https://lk-vychet.tk/",
        "https://salary-adjustment-2027.zip/",
        "http://voicemail-0042.mov/play",
    ],
)
def test_link_suspicious_tld(href: str) -> None:
    assert signs(letter(html=f'<p>Войдите / sign in: <a href="{href}">here</a></p>'))[
        "PHISH_LINK_SUSPICIOUS_TLD"
    ]


@pytest.mark.parametrize(
    "href",
    ["https://blog.google/products/", "https://example.com/", "https://xn--80aswg.xn--p1ai/"],
)
def test_ordinary_tlds(href: str) -> None:
    assert "PHISH_LINK_SUSPICIOUS_TLD" not in signs(letter(html=f'<a href="{href}">x</a>'))


def test_the_shipped_lists_say_where_they_came_from() -> None:
    for name in ("suspicious_tlds.txt", "redirectors.txt"):
        text = protected._data(name)
        assert "Where it came from" in text and "2026" in text, name
    tlds = protected.suspicious_tlds()
    assert {"tk", "ml", "ga", "cf", "gq", "top", "zip", "mov"} <= tlds
    assert not {"com", "ru", "net", "org", "google", "рф"} & tlds
    assert {"list-manage.com", "sendgrid.net", "safelinks.protection.outlook.com"} <= (
        protected.redirectors()
    )


def test_helpers_on_their_own() -> None:
    assert links.tld("a.b.top") == "top"
    assert links.userinfo("https://a.example/x@y") is None
    assert links.carried_hosts("https://www.google.com/url?q=https%3A%2F%2Fshop.example%2F") == [
        "shop.example"
    ]
    folded = wording.fold("Перейдите на сайт SBER-BONUS[.]RU")
    assert [o.host for o in links.obfuscated(folded, known_suffix)] == ["sber-bonus.ru"]
