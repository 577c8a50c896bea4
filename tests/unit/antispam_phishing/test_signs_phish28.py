"""The signs helper phish28 added or widened for today's phishing (issue 28, item 6): links to
free hosting, callback lures (a number to call, no link), a brand's name cut by a hyphen in the
display name, money to a card number or to new bank details, signing in "through Telegram";
each beside the legitimate letter it must leave alone, and their cost on hostile input."""

from __future__ import annotations

import pytest
from tests.unit.antispam_phishing.helpers import letter
from tests.unit.antispam_phishing.test_signs_2025 import (
    BUDGET,
    crafted_check_seconds,
    signs,
    verdict,
)

from pochta.antispam.signs import lures, protected

N = 100_000


def _link(href: str, text: str = "Open the document") -> str:
    return f'<p>Hello,</p><p><a href="{href}">{text}</a></p>'


# -- links to free hosting --------------------------------------------------------------------
@pytest.mark.parametrize(
    "href",
    [
        "https://docs-view-7f3a.pages.dev/view?id=1",
        "https://acknowledge-2026.web.app/ack",
        "https://a.b.firebaseapp.com/",
        "https://ipfs.io/ipfs/bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi",
        "https://storage.googleapis.com/bucket-x/index.html",
        "https://mysite.wixsite.com/login",
    ],
)
def test_a_link_to_free_hosting(href: str) -> None:
    found = signs(letter(html=_link(href), text=None))
    assert "PHISH_LINK_FREE_HOSTING" in found


@pytest.mark.parametrize(
    "href",
    [
        "https://example-site.com/a",
        "https://project.github.io/docs/",  # a developer's documentation: left out of the list
        "https://pages.dev.example-site.com/",  # the name inside another party's host
        "https://mypages.dev/",  # another registrable domain that ends the same way
        "https://www.google.com/",
    ],
)
def test_no_free_hosting(href: str) -> None:
    assert "PHISH_LINK_FREE_HOSTING" not in signs(letter(html=_link(href), text=None))


def test_the_free_hosting_list_is_hosts_and_says_where_it_came_from() -> None:
    hosting = protected.free_hosting()
    assert {"pages.dev", "web.app", "ipfs.io", "netlify.app"} <= hosting
    assert not {"github.io", "com", "google.com", "blogspot.com"} & hosting
    assert "Where it came from" in protected._data("free_hosting.txt")


def test_a_brand_on_free_hosting_is_phishing_and_a_preview_site_is_not() -> None:
    lure = letter(
        sender="Amanda Price <a.price@apex-logistics.example>",
        subject="Amanda Price shared a file with you",
        html=_link("https://sharepoint-docs-7f3a.pages.dev/view", "Q1 Payroll.xlsx")
        + "<p>Sign in with your Microsoft 365 account to view.</p>",
        text=None,
    )
    assert verdict(lure)[0] == "phishing"
    preview = letter(
        sender="Dana Wu <dana@studio-kite.example>",
        subject="Landing page preview",
        text="Hi John,\nthe preview is at https://landing-v3.studio-kite.pages.dev/\nDana\n",
    )
    assert "PHISH_LINK_FREE_HOSTING" in signs(preview)
    assert verdict(preview) == ("ham", 0.5)
    # a web studio's preview of the reader's own new site: the reader's domain in the subject
    studio = letter(
        sender="Dana Wu <dana@studio-kite.example>",
        subject="pochta.test redesign: preview ready",
        text="Hi John,\nthe new pochta.test site is up at https://pochta-redesign.pages.dev/\n",
    )
    assert {"PHISH_LINK_FREE_HOSTING", "PHISH_RECIPIENT_DOMAIN"} <= set(signs(studio))
    assert verdict(studio)[0] == "ham"


# -- callback lures ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text",
    [
        "Your subscription renewed for $399.99. If you did not authorize this charge, call our "
        "billing desk at +1 (808) 555-0147 within 24 hours.",
        "You sent $649.99 to Coinbase. To cancel the transaction call +1 802 555 0133 now.",
        "We detected unauthorized activity on your account. Call +1 (802) 555-0190 today.",
        "Если это были не вы, срочно позвоните в службу поддержки\nпо номеру +7 (495) 555-01-23.",
        "Для переноса доставки позвоните оператору по номеру +7 (999) 555-18-40 и назовите код "
        "из SMS.",
    ],
)
def test_a_callback_lure(text: str) -> None:
    raw = letter(sender="Billing <billing@pay-notice.example>", subject="Invoice", text=text)
    assert "PHISH_CALLBACK_LURE" in signs(raw)


@pytest.mark.parametrize(
    ("sender", "text"),
    [
        # a number and no charge the reader did not make
        ("Norton <noreply@shop.example>", "Questions? Call us at 1-844-555-0100 (Mon-Fri)."),
        # a newsletter's "to cancel, contact" (the 2002 conference news that showed it)
        ("Conference News <news@conf.example>",
         "To cancel your registration, contact Andrew Calvo at\n707-827-7176."),
        # a signature's number under a disclaimer's "unauthorized use"
        ("Mark Lee <mark.lee@lawfirm.example>",
         "Attached is the draft. Call me at +1 (415) 555-0100 with questions.\n\nThis message "
         "is confidential. Any unauthorized use or disclosure is prohibited."),
        # a short bank number is no stranger's
        ("Bank <info@bank-notice.example>",
         "Если вы не совершали операцию, позвоните по номеру 900."),
        # the organization's own letter from its own domain: its business
        ("Т-Банк <noreply@tbank.ru>",
         "Если это были не вы, позвоните нам по номеру 8 800 555-77-78, мы заблокируем карту."),
    ],
)  # fmt: skip
def test_no_callback_lure(sender: str, text: str) -> None:
    raw = letter(sender=sender, subject="Notice", text=text)
    assert "PHISH_CALLBACK_LURE" not in signs(raw)


def test_a_callback_in_a_brands_name_from_a_free_mailbox_is_phishing() -> None:
    raw = letter(
        sender="Geek Squad Support <orders.gs2026@gmail.com>",
        subject="Invoice GS-40921",
        text="Your plan renewed for $449.00. If you did not request it, contact our "
        "cancellation team at 1-888-555-0199 to stop the payment.",
    )
    assert verdict(raw)[0] == "phishing"


# -- a brand's name cut in the display name ---------------------------------------------------
@pytest.mark.parametrize("name", ["Meta-Mask", "Meta.Mask Support", "Pay-Pal Service"])
def test_a_brand_cut_by_a_hyphen_in_the_display_name(name: str) -> None:
    raw = letter(sender=f"{name} <info@builder-kensetsu.example>", subject="Notice")
    assert "PHISH_DISPLAY_NAME_BRAND" in signs(raw)


@pytest.mark.parametrize(
    "name",
    [
        "Jean-Pierre Dupont",
        "Anna-Maria Meta",
        "Coca-Cola Fan Club",
        # initials are no brand cut in two: not VK, DHL, MTS, VTB
        "V.K. Singh",
        "Dr. V.K. Sharma",
        "D.H.L. Kumar",
        "M.T.S. Reddy",
        "Rao V.T.B.",
    ],
)
def test_a_hyphenated_name_is_no_brand(name: str) -> None:
    raw = letter(sender=f"{name} <jp@example-site.com>", subject="Notice")
    assert "PHISH_DISPLAY_NAME_BRAND" not in signs(raw)


# -- fees and account lures, widened ----------------------------------------------------------
@pytest.mark.parametrize(
    "text",
    [
        "Переведите предоплату 1 990 руб. на карту менеджера 2202 2061 4455 7781.",
        "I changed my bank, can you update my direct deposit before payroll?",
        "Please note that our bank details have changed, pay the invoice to the new account.",
        "Сообщаем о смене банковских реквизитов, оплату переводите на новый счёт.",
    ],
)
def test_money_to_a_card_or_new_bank_details(text: str) -> None:
    raw = letter(sender="A <a@stranger.example>", subject="Hi", text=text)
    assert "PHISH_FEE_REQUEST" in signs(raw)


@pytest.mark.parametrize(
    "text",
    [
        "Оплатить заказ можно картой на сайте или при получении.",
        "The bank closed early today, I will pay you tomorrow.",
        "Номер карты никому не сообщайте.",
    ],
)
def test_no_money_request(text: str) -> None:
    raw = letter(sender="A <a@stranger.example>", subject="Hi", text=text)
    assert "PHISH_FEE_REQUEST" not in signs(raw)


def test_signing_in_through_telegram_is_an_account_lure() -> None:
    raw = letter(
        sender="Ольга <olga@yandex.ru>",
        subject="Проголосуй",
        text="Там надо войти через Telegram и ввести код, это быстро: https://konkurs.example/v",
    )
    assert "PHISH_ACCOUNT_LURE" in signs(raw)
    plain = letter(sender="Ольга <olga@yandex.ru>", subject="Привет", text="Напиши мне в Telegram")
    assert "PHISH_ACCOUNT_LURE" not in signs(plain)
    # the state portal's sign-in, offered by schools, clinics and shops
    clinic = letter(
        sender="Поликлиника №3 <info@poliklinika3.ru>",
        subject="Запись к врачу",
        text="Записаться к врачу можно на сайте: вход через Госуслуги. https://clck.ru/3AbCd\n",
    )
    assert "PHISH_ACCOUNT_LURE" not in signs(clinic)


# -- cost ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text",
    [
        "call " * (N // 5),
        "call (1" + "-1" * (N // 2),
        ("позвоните " + "а" * 70 + " ") * (N // 81),
        "1 " * (N // 2),
        "назовите " * (N // 9),
        "переведите " * (N // 11),
    ],
)
def test_crafted_text_costs_little(text: str) -> None:
    assert crafted_check_seconds("Meta-Mask ", text) < BUDGET


def test_many_free_hosting_links_are_read_once() -> None:
    html = "".join(f'<a href="https://s{i}.pages.dev/">x</a>' for i in range(2000))
    found = signs(letter(html=html, text=None))
    assert len(found["PHISH_LINK_FREE_HOSTING"]) == 3


def test_the_callback_patterns_give_bounded_quotes() -> None:
    text = "If you did not authorize it, call 1-800-555-0199. " * 50
    for rx in (lures.CALLBACK_CALL, lures.CALLBACK_REASON):
        found = lures.find(rx, text)
        assert 1 <= len(found) <= 3 and all(len(q) <= 60 for q in found)


def test_a_best_buy_is_a_phrase_and_geek_squad_a_brand() -> None:
    deals = letter(
        sender="Weekly Best Buy Picks <deals@dealsite.example>",
        subject="This week's best buy: a $99 blender",
        text="Our best buy this week: https://dealsite.example/blender\n",
    )
    assert "PHISH_DISPLAY_NAME_BRAND" not in signs(deals)
    for name in ("Geek Squad", "Best Buy Support"):
        raw = letter(sender=f"{name} <help@dealsite.example>", subject="Invoice")
        assert "PHISH_DISPLAY_NAME_BRAND" in signs(raw)
