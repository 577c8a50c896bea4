"""The signs helper phish28b added or narrowed for today's phishing (issue 28, item 6): money
asked of an organization by a public mailbox (business e-mail compromise), a messenger's code
asked for on somebody's site, a hiding link in an attached calendar invitation, an identity
provider's consent or device sign-in page sent by an outsider, general storage hosts counted
only for a page, and the callback lure's reasons narrowed; each beside the
legitimate letter it must leave alone, and their cost on hostile input."""

from __future__ import annotations

import time

import pytest
from tests.unit.antispam_phishing.helpers import letter
from tests.unit.antispam_phishing.test_signs_2025 import (
    BUDGET,
    crafted_check_seconds,
    signs,
    verdict,
)

from pochta.antispam.signs import checks as phishing
from pochta.antispam.signs import protected
from pochta.mime.letter import parse

N = 100_000


# -- business e-mail compromise ---------------------------------------------------------------
@pytest.mark.parametrize(
    ("sender", "headers", "text"),
    [
        # the payroll diversion: a manager's name on a gmail.com mailbox, unreachable
        ("Michael Grant <m.grant.office@gmail.com>", {},
         "Hi John,\nI changed my bank and need my direct deposit updated before payroll. "
         "I'm in meetings all day, so email only please.\n"),
        # the supplier's new bank details, answers going to an outlook.com mailbox
        ("Laura Kim <laura.kim@northfield-supplies.co>", {"Reply-To": "l.kim.ar@outlook.com"},
         "Please note that our bank details have changed. Kindly remit the open invoices to "
         "our new account below.\n"),
        # gift cards
        ("David Chen <ceo.dchen.office@gmail.com>", {},
         "Are you at your desk? I need six Apple gift cards of $200 for a client today. "
         "Send me photos of the codes.\n"),
        # a payment while the writer cannot be reached
        ("Андрей Соколов <director.sokolov.av@gmail.com>", {},
         "Срочно нужно оплатить счёт поставщику сегодня. Я на совещании, звонить не могу.\n"),
        ("Бухгалтерия <buh.stroykomplekt@mail.ru>", {},
         "Уведомляем о смене банковских реквизитов, оплату просим перечислить на новый "
         "расчётный счёт. По телефону бухгалтерия сейчас недоступна.\n"),
    ],
)  # fmt: skip
def test_money_asked_of_an_organization_by_a_public_mailbox(
    sender: str, headers: dict[str, str], text: str
) -> None:
    raw = letter(sender=sender, subject="Request", text=text, headers=headers)
    assert "PHISH_BEC_REQUEST" in signs(raw)
    assert verdict(raw)[0] == "phishing"


@pytest.mark.parametrize(
    ("sender", "to", "text"),
    [
        # a colleague in the reader's own domain
        ("Michael Grant <michael.grant@pochta.test>", "john@pochta.test",
         "I changed my bank, please update my direct deposit before payroll.\n"),
        # a supplier's own letter from its own domain
        ("Бухгалтерия <buh@tehsnab.ru>", "john@pochta.test",
         "С 1 апреля изменились наши банковские реквизиты, письмо во вложении.\n"),
        # a freelancer's invoice from gmail.com: a payment, but nobody hiding
        ("Anna Design <anna.design.studio@gmail.com>", "john@pochta.test",
         "Attached is my invoice. Payment by bank transfer within 14 days, as agreed.\n"),
        # friends between public mailboxes: no organization to rob
        ("Michael <m.grant.office@gmail.com>", "john.smith@yahoo.com",
         "I changed my bank, send the money for the tickets to my new account.\n"),
        # a public mailbox, and no money asked
        ("David <ceo.dchen.office@gmail.com>", "john@pochta.test",
         "I'm in a meeting and can't talk now, let's meet at 5.\n"),
        # a parent's gift cards for the teachers: no codes to send
        ("Parents' committee <pta.room5@gmail.com>", "john@pochta.test",
         "Are you available on Friday? We want to buy gift cards for the teachers, $10 each.\n"),
        # a freelancer asking whether the reader is free, and paid by bank transfer
        ("Anna Design <anna.design.studio@gmail.com>", "john@pochta.test",
         "Are you available for a call? Payment by bank transfer, as agreed.\n"),
        # review1: new bank details told calmly from the writer's own public mailbox, which
        # payroll, accounts and tenants meet every month (5 points alone made them phishing)
        ("Maria Lopez <maria.lopez1987@gmail.com>", "hr@pochta.test",
         "Hi HR team,\nI recently changed my bank. Could you please update my direct deposit? "
         "I will fill out the form in Workday too.\nThanks, Maria\n"),
        ("Ирина Петрова <irina.petrova82@mail.ru>", "buh@pochta.test",
         "Добрый день! Прошу перечислять зарплату на новую карту, заявление принесу в "
         "понедельник.\n"),
        ("Бухгалтерия <buh.stroykomplekt@mail.ru>", "john@pochta.test",
         "Уведомляем о смене банковских реквизитов, оплату просим перечислить на новый "
         "расчётный счёт.\n"),
        ("Pat <pat.landlord@gmail.com>", "john@pochta.test",
         "From next month please pay the rent to my new bank account, details below.\n"),
        # a payment mentioned, not asked: "the wire transfer is done"
        ("Grandpa Joe <joe1944@aol.com>", "john@pochta.test",
         "Can't talk right now, the wire transfer for the trip is done.\n"),
    ],
)  # fmt: skip
def test_no_bec_request(sender: str, to: str, text: str) -> None:
    raw = letter(sender=sender, subject="Hi", text=text).replace(
        b"To: john@pochta.test", f"To: {to}".encode()
    )
    assert "PHISH_BEC_REQUEST" not in signs(raw)


# -- a messenger's code on somebody's site ------------------------------------------------------
@pytest.mark.parametrize(
    "text",
    [
        "Проголосуй за племянницу: войди через Telegram и введи код. https://konkurs.example/v/1",
        "Дарю Premium: укажи номер телефона и введи код, который придёт в Telegram: "
        "https://tg-gift.example/a",
        "Please vote for Lily: log in with your WhatsApp number and enter the code you get. "
        "https://kids-award.example/vote/88",
    ],
)
def test_a_messenger_code_on_another_site(text: str) -> None:
    raw = letter(sender="Ольга <olga.sm1rnova@yandex.ru>", subject="Просьба", text=text)
    assert "PHISH_MESSENGER_CODE" in signs(raw)
    assert verdict(raw)[0] == "phishing"  # from a public mailbox


@pytest.mark.parametrize(
    ("sender", "text"),
    [
        # the school's own sign-in through Telegram, on its own site, no code
        ("Школа <hello@sigma-school.example>",
         "Войти можно через Telegram: подтвердите вход в приложении. https://sigma-school.example/login"),
        # a code, on the sender's own site
        ("Shop <noreply@shop-site.example>",
         "Enter the code we sent to your WhatsApp on https://shop-site.example/verify"),
        # a link to the messenger itself
        ("Ольга <olga@yandex.ru>", "Введи код в Telegram, вот канал: https://t.me/somechannel"),
        # a code and a messenger, no link at all
        ("Ольга <olga@yandex.ru>", "Никому не говори код из Telegram!"),
        # a shop's promo code, its Telegram channel in another sentence, a tracker's link
        ("Shop <news@shop-site.example>",
         "Enter code SAVE20 at checkout! Follow us on Telegram and WhatsApp. "
         "https://click.mailtrack.example/x https://shop-site.example"),
        ("Магазин <news@shop-site.example>",
         "Введите код SALE при оформлении заказа.\n\nПодписывайтесь на наш Telegram-канал! "
         "https://vk.com/shop https://sendsay-track.example/c"),
        # a service's sign-in code, its community on Telegram
        ("Exchange <noreply@cryptoex.example>",
         "Your verification code is 123456. Enter the code to continue. Join our Telegram "
         "community! https://twitter.com/cryptoex"),
    ],
)  # fmt: skip
def test_no_messenger_code(sender: str, text: str) -> None:
    assert "PHISH_MESSENGER_CODE" not in signs(letter(sender=sender, subject="Hi", text=text))


def test_a_messenger_code_with_a_brand_alone_is_not_phishing_without_a_lure() -> None:
    """The sign alone (3 points) from an organization's domain is not phishing."""
    raw = letter(
        sender="Contest <info@contest-site.example>",
        subject="Vote",
        text="Vote for your favourite: enter the code from WhatsApp at https://other.example/v",
    )
    assert "PHISH_MESSENGER_CODE" in signs(raw)
    assert verdict(raw)[0] != "phishing"


# -- a hiding link in an attached calendar invitation -----------------------------------------
def _invite(description: str, url: str = "") -> bytes:
    lines = [
        "BEGIN:VCALENDAR", "VERSION:2.0", "METHOD:REQUEST", "BEGIN:VEVENT",
        "UID:1@x", "DTSTART:20260311T150000Z", "SUMMARY:Review",
        f"DESCRIPTION:{description}", *([f"URL:{url}"] if url else []),
        "END:VEVENT", "END:VCALENDAR",
    ]  # fmt: skip
    return ("\r\n".join(lines) + "\r\n").encode()


@pytest.mark.parametrize(
    "description",
    [
        "REVIEW DOCUMENT: https://docusign-envelope-4471.pages.dev/sign?e=john@pochta.test",
        "Требование: https://nalog-lk-trebovanie.top/doc?id=1\\nПри себе паспорт",
        "Open: http://203.0.113.7/login",
        "Folded line: https://sharepoint-doc\r\n s.pages.dev/view",  # an ICS line folded
        "View: https://storage.googleapis.com/b-1/index.html",
    ],
)
def test_a_hiding_link_in_a_calendar_invitation(description: str) -> None:
    raw = letter(
        sender="DocuSign <k.ellis@dental-office.example>",
        subject="Sign",
        text="See the invitation.",
        files=[("invite.ics", _invite(description))],
    )
    assert "PHISH_CALENDAR_LINK" in signs(raw)


def test_a_meeting_invitation_has_no_hiding_link() -> None:
    ics = _invite(
        "Join Zoom: https://acme.zoom.us/j/812345\\nAgenda: https://docs.google.com/document/d/1a"
        "\\nReport: https://acmereports.blob.core.windows.net/r/q1.pdf?sig=x",
        "https://acme.zoom.us/j/812345",
    )
    raw = letter(sender="Priya <priya@lumen.example>", subject="Invitation", files=[("i.ics", ics)])
    assert "PHISH_CALENDAR_LINK" not in signs(raw)
    # nor an office's Google Maps pin or a webinar's shortened page (review1: a shortener
    # counted, and an urgent subject made an in-person meeting phishing)
    ics = _invite("Адрес: https://maps.app.goo.gl/q1w2e3\\nSlides: https://bit.ly/3xYzWeb")
    raw = letter(
        sender="Priya <priya@lumen.example>",
        subject="Срочно: встреча по договору",
        text="Добрый день, приглашение во вложении. Просьба подтвердить сегодня.",
        files=[("i.ics", ics)],
    )
    assert "PHISH_CALENDAR_LINK" not in signs(raw)
    assert verdict(raw)[0] != "phishing"
    # nor is a hiding link in a file that is no calendar
    raw = letter(files=[("notes.txt", b"https://x.pages.dev/")])
    assert "PHISH_CALENDAR_LINK" not in signs(raw)


def test_a_brand_with_a_hiding_calendar_link_is_phishing() -> None:
    ics = _invite("REVIEW DOCUMENT: https://docusign-envelope-4471.pages.dev/sign")
    raw = letter(
        sender="DocuSign via Karen Ellis <karen.ellis@dental-office.example>",
        subject="Please review and sign",
        text="Open the attached invitation to review the document.",
        files=[("invite.ics", ics)],
    )
    assert verdict(raw)[0] == "phishing"


# -- general storage: a page only -------------------------------------------------------------
@pytest.mark.parametrize(
    ("href", "counts"),
    [
        ("https://storage.googleapis.com/bucket-x/index.html", True),
        ("https://acme.blob.core.windows.net/v/login.php?x=1", True),
        ("https://acme.blob.core.windows.net/v/doc#john@pochta.test", True),
        ("https://x.azurewebsites.net/?email=john@pochta.test", True),
        ("https://x.azurewebsites.net/v?u=john%40pochta.test", True),
        ("https://acme.blob.core.windows.net/exports/r.pdf?sv=2024&sig=abc", False),
        ("https://sites.google.com/view/5b-class/schedule", False),
        ("https://storage.googleapis.com/bucket/img/logo.png", False),
        ("https://portal-acme.azurewebsites.net/", False),
    ],
)
def test_general_storage_counts_for_a_page_only(href: str, counts: bool) -> None:
    raw = letter(html=f'<p><a href="{href}">Open</a></p>', text=None)
    assert ("PHISH_LINK_FREE_HOSTING" in signs(raw)) is counts


def test_the_storage_list_is_apart_from_free_hosting() -> None:
    storage = protected.general_storage()
    assert {"storage.googleapis.com", "blob.core.windows.net", "sites.google.com"} <= storage
    assert not storage & protected.free_hosting()
    assert "Where it came from" in protected._data("general_storage.txt")


# -- the callback lure's reasons, narrowed ---------------------------------------------------
@pytest.mark.parametrize(
    "text",
    [
        "We have processed your refund of $249.00. If you have questions about your refund, "
        "call us at 1-888-555-0133.",
        "Возврат по заказу оформлен. Если остались вопросы по возврату, звоните: 8 800 555-21-40.",
        "Ваш заказ заблокирован на складе до оплаты. Телефон склада: +7 (495) 555-10-10.",
    ],
)
def test_a_shops_refund_with_a_number_is_no_callback_lure(text: str) -> None:
    raw = letter(sender="Shop <orders@shop-site.example>", subject="Refund", text=text)
    assert "PHISH_CALLBACK_LURE" not in signs(raw)


@pytest.mark.parametrize(
    "text",
    [
        "To cancel the renewal and get a refund, call 1-888-555-0199 within 24 hours.",
        "Чтобы заблокировать карту, позвоните по номеру +7 (495) 555-41-07.",
        "Для оформления возврата средств позвоните по номеру +7 (495) 555-41-07.",
    ],
)
def test_the_callback_reasons_that_stay(text: str) -> None:
    raw = letter(sender="Billing <billing@pay-notice.example>", subject="Notice", text=text)
    assert "PHISH_CALLBACK_LURE" in signs(raw)


# -- an identity provider's page that hands the account to another party -----------------------
_AUTHORIZE = (
    "https://login.microsoftonline.com/common/oauth2/v2.0/authorize?client_id=5f2c&amp;"
    "response_type=code&amp;redirect_uri={redirect}&amp;scope=Mail.Read"
)


def test_an_oauth_consent_to_another_partys_app() -> None:
    href = _AUTHORIZE.format(redirect="https%3A%2F%2Fsecuredocs-viewer.app%2Fauth")
    raw = letter(
        sender="Docs <no-reply@docs-notify.example>",
        subject="Approve the viewer",
        html=f'<p><a href="{href}">Approve access</a></p>',
        text=None,
    )
    assert signs(raw)["PHISH_OAUTH_CONSENT"] == (
        "login.microsoftonline.com → securedocs-viewer.app",
    )


@pytest.mark.parametrize(
    ("sender", "redirect"),
    [
        # a service's own "connect your calendar": back to its own site
        ("Slotwise <hello@slotwise.example>", "https%3A%2F%2Fapp.slotwise.example%2Foauth"),
        # back to the provider itself
        ("Docs <no-reply@docs-notify.example>", "https%3A%2F%2Fportal.office.com%2Flanding"),
        # no redirect that is a web address
        ("Docs <no-reply@docs-notify.example>", "urn%3Aietf%3Awg%3Aoauth%3A2.0%3Aoob"),
    ],
)
def test_no_oauth_consent(sender: str, redirect: str) -> None:
    href = _AUTHORIZE.format(redirect=redirect)
    raw = letter(sender=sender, html=f'<p><a href="{href}">Connect</a></p>', text=None)
    assert "PHISH_OAUTH_CONSENT" not in signs(raw)
    # nor a look-alike's page: other signs' business
    href = href.replace("login.microsoftonline.com", "login.microsoftonline.com.evil.example")
    raw = letter(sender=sender, html=f'<p><a href="{href}">Connect</a></p>', text=None)
    assert "PHISH_OAUTH_CONSENT" not in signs(raw)


@pytest.mark.parametrize("where", ["before", "after"])
def test_junk_fields_do_not_hide_the_redirect(where: str) -> None:
    """review1: phish28b read at most 50 fields (``parse_qs(max_num_fields=50)``) and took a
    longer query for no redirect, so 60 junk fields hid the consent; the query is bounded by
    its length (``MAX_HREF``) instead."""
    junk = "&amp;x=1" * 60
    href = _AUTHORIZE.format(redirect="https%3A%2F%2Fviewer.example%2Fa")
    href = href.replace("?", "?" + junk[5:] + "&amp;") if where == "before" else href + junk
    raw = letter(sender="D <d@docs.example>", html=f'<a href="{href}">Go</a>', text=None)
    assert signs(raw)["PHISH_OAUTH_CONSENT"] == ("login.microsoftonline.com → viewer.example",)


@pytest.mark.parametrize(
    "href",
    [
        "https://microsoft.com/devicelogin",
        "https://www.microsoft.com/devicelogin/",
        "https://login.microsoftonline.com/common/oauth2/deviceauth",
        "https://www.google.com/device",
        "https://login.microsoft.com/device",
    ],
)
def test_an_outsider_sends_the_reader_to_the_device_sign_in(href: str) -> None:
    raw = letter(
        sender="Daniel Reyes <d.reyes@coastline.example>",
        subject="Teams meeting",
        html=f'<p>To join, go to <a href="{href}">{href}</a> and enter the code H7KQ-2WPN.</p>',
        text=None,
    )
    assert "PHISH_DEVICE_LOGIN" in signs(raw)
    assert verdict(raw)[0] == "phishing"


def test_the_device_sign_in_from_the_readers_own_it_or_elsewhere_on_the_provider() -> None:
    own = letter(
        sender="IT <it@pochta.test>",
        text="Set up the room's Teams device at https://microsoft.com/devicelogin\n",
    )
    assert "PHISH_DEVICE_LOGIN" not in signs(own)
    other = letter(
        sender="Daniel <d.reyes@coastline.example>",
        text="Our Teams page: https://www.microsoft.com/en-us/microsoft-teams/devices\n",
    )
    assert "PHISH_DEVICE_LOGIN" not in signs(other)


@pytest.mark.parametrize(
    "text",
    [
        # an integrator sets up a meeting room: the code is the one the console shows
        "To finish the Teams Room setup, go to https://microsoft.com/devicelogin and enter the "
        "code shown on the console.",
        # a school's TV sign-in, the code on the screen
        "Чтобы войти на телевизоре, откройте https://www.google.com/device и введите код с экрана.",
        # pages of the providers whose path merely ends in "device", even beside a code
        "Find your phone: https://support.google.com/android/device (case H7KQ-2WPN).",
        "The Surface offer: https://www.microsoft.com/en-us/p/device, coupon SURF2026X.",
    ],
)
def test_no_device_login_without_a_code_or_off_the_sign_in_page(text: str) -> None:
    """review1: any protected organization's page whose path ended in "device" was the
    sign, and an outsider's link alone was phishing (5 points) without a code to type."""
    raw = letter(sender="AV <support@avintegrator.example>", subject="Setup", text=text)
    assert "PHISH_DEVICE_LOGIN" not in signs(raw)
    assert verdict(raw)[0] != "phishing"


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("Join at https://microsoft.com/devicelogin with code FQK5HW3UF now.", "FQK5HW3UF"),
        ("Откройте https://www.google.com/device и введите GQVQ-JKEC.", "GQVQ-JKEC"),
    ],
)
def test_the_device_code_the_letter_gives_is_shown(text: str, code: str) -> None:
    raw = letter(sender="D <d.reyes@coastline.example>", subject="Meeting", text=text)
    assert signs(raw)["PHISH_DEVICE_LOGIN"][-1] == code


# -- cost -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text",
    [
        "переводите на " * (N // 14),
        "pay the " * (N // 8),
        "in a meeting can " * (N // 17),
        "введите код " * (N // 12),
        "telegram " * (N // 9),
        "gift " * (N // 5),
        "buy gift cards send me the " * (N // 27),
    ],
)
def test_crafted_text_costs_little(text: str) -> None:
    assert crafted_check_seconds("Ольга ", text) < BUDGET
    # and from a public mailbox to an organization, where the BEC check reads the text
    parsed = parse(letter(sender="A <a.b@gmail.com>", subject=text[:5000], text=text))
    t0 = time.process_time()
    phishing.check(parsed)
    assert time.process_time() - t0 < BUDGET


def test_a_crafted_calendar_file_costs_little() -> None:
    big = _invite("https://a.pages.dev/ " * 20_000 + "http://" + "a" * 200_000)
    parsed = parse(letter(files=[(f"i{i}.ics", big) for i in range(8)]))
    t0 = time.process_time()
    found = {s.symbol: s.evidence for s in phishing.check(parsed)}
    assert time.process_time() - t0 < BUDGET
    assert found["PHISH_CALENDAR_LINK"] == ("a.pages.dev",)
