"""The phishing signs and combinations added for today's mail (issue 28, item 6), each beside
the legitimate letter it must leave alone; and their bounds on hostile input."""

from __future__ import annotations

import time
from email.message import EmailMessage
from email.policy import SMTP

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.unit.antispam_phishing.helpers import letter

from pochta.antispam import features
from pochta.antispam.rules import ruleset
from pochta.antispam.signs import checks as phishing
from pochta.antispam.signs import lures
from pochta.mime.letter import parse
from pochta.types import Envelope

TO = "john@pochta.test"
LINK = '<p><a href="https://example-site.com/a">open</a></p>'


def signs(raw: bytes, envelope: Envelope | None = None) -> dict[str, tuple[str, ...]]:
    return {s.symbol: s.evidence for s in phishing.scan(raw, envelope)}


def verdict(raw: bytes) -> tuple[str, float]:
    """The default rules' verdict and phishing points (no model, no DNS)."""
    parsed = parse(raw)
    found = phishing.check(parsed)
    rules = ruleset.default()
    hits = ruleset.evaluate(rules, features.extract(parsed), found)
    return ruleset.verdict(hits, rules.actions), ruleset.phishing_score(hits)


def with_image(
    *,
    sender: str = "Notice <notice@example-site.com>",
    subject: str = "Hello",
    text: str = "",
    image: bytes = b"\x89PNG\r\n\x1a\n" + bytes(64),
    headers: dict[str, str] | None = None,
) -> bytes:
    msg = EmailMessage()
    msg["From"] = sender
    msg["To"] = TO
    msg["Subject"] = subject
    msg["Date"] = "Mon, 23 Nov 2026 10:00:00 +0000"
    msg["Message-ID"] = "<i1@example-site.com>"
    for k, v in (headers or {}).items():
        msg[k] = v
    msg.set_content(text)
    msg.add_attachment(image, maintype="image", subtype="png", filename="code.png")
    return msg.as_bytes(policy=SMTP)


BOUNCE = (
    "This message was created automatically by mail delivery software.\n\n"
    "A message that you sent could not be delivered to one or more of its recipients.\n"
    "  someone@far.example: mailbox unavailable\n"
)


def to_reader(**kw: object) -> bytes:
    headers = dict(kw.pop("headers", {}) or {})  # type: ignore[call-overload]
    raw = letter(headers=headers, **kw)  # type: ignore[arg-type]
    return raw.replace(b"To: john@pochta.test", f"To: {TO}".encode())


# -- a free mailbox in a service's name -------------------------------------------------------
@pytest.mark.parametrize(
    "sender",
    [
        "Служба безопасности <sec.sluzhba@gmail.com>",
        "IT Helpdesk <it.helpdesk.desk@outlook.com>",
        "Сбербанк <sber.info@mail.ru>",
        "DHL Express <dhl.customs@yahoo.com>",
    ],
)
def test_a_free_mailbox_in_a_services_name(sender: str) -> None:
    assert "PHISH_FREEMAIL_BRAND" in signs(letter(sender=sender))


@pytest.mark.parametrize(
    "sender",
    [
        "Anna Kowalski <anna.kowalski@gmail.com>",  # a person
        "Support <support@northwind-shop.com>",  # a shop's own support: not a free mailbox
        "Яндекс Диск <disk-noreply@yandex.ru>",  # Yandex's own public mail: DISPLAY_NAME_BRAND's
        "<someone@gmail.com>",  # no name at all
    ],
)
def test_a_free_mailbox_of_a_person_or_a_service_of_its_own(sender: str) -> None:
    assert "PHISH_FREEMAIL_BRAND" not in signs(letter(sender=sender))


# -- the subject names an organization --------------------------------------------------------
def test_the_subject_names_an_organization_the_sender_is_not() -> None:
    raw = letter(subject="Your Netflix membership is on hold")
    assert signs(raw)["PHISH_SUBJECT_BRAND"] == ("Netflix: Your Netflix membership is on hold",)


@pytest.mark.parametrize(
    ("sender", "subject"),
    [
        ("Netflix <info@account.netflix.com>", "Your Netflix membership"),  # its own
        ("Госуслуги <no-reply@gosuslugi.ru>", "Штраф ГИБДД"),  # one organization on another
        ("Friend <friend@example.net>", "Lunch on Friday?"),  # nobody named
    ],
)
def test_the_subject_of_the_organization_itself_or_of_nobody(sender: str, subject: str) -> None:
    assert "PHISH_SUBJECT_BRAND" not in signs(letter(sender=sender, subject=subject))


# -- the reader's own domain, the mail administrator -----------------------------------------
@pytest.mark.parametrize(
    ("sender", "subject"),
    [
        ("pochta.test IT Support <it@helpdesk-mailer.example>", "Password notice"),
        ("Admin <it@helpdesk-mailer.example>", "pochta.test: 5 pending messages"),
        ("Отдел кадров pochta.test <hr@kadry.example>", "Приказ"),
    ],
)
def test_the_readers_domain_from_outside(sender: str, subject: str) -> None:
    assert "PHISH_RECIPIENT_DOMAIN" in signs(to_reader(sender=sender, subject=subject))


@pytest.mark.parametrize(
    ("sender", "subject", "headers"),
    [
        # the reader's own domain writes about itself
        ("pochta.test IT Support <it@pochta.test>", "pochta.test maintenance", {}),
        # the reader's address in the subject is no domain shown
        ("Shop <news@northwind-shop.com>", "Welcome, john@pochta.test", {}),
        # a longer domain that merely contains it
        ("Shop <news@northwind-shop.com>", "mypochta.test.example offers", {}),
        # a mailing list: its To is the list's own address
        ("Matthias <m@egwn.example>", "Holidays for pochta.test", {"List-Id": "<l.pochta.test>"}),
    ],
)
def test_the_readers_domain_left_alone(sender: str, subject: str, headers: dict[str, str]) -> None:
    raw = to_reader(sender=sender, subject=subject, headers=headers)
    assert "PHISH_RECIPIENT_DOMAIN" not in signs(raw)


def test_the_readers_domain_from_the_envelope() -> None:
    raw = letter(sender="pochta.test Admin <a@x-mailer.example>", subject="Hi")
    raw = raw.replace(b"To: john@pochta.test", b"To: undisclosed-recipients:;")
    assert "PHISH_RECIPIENT_DOMAIN" not in signs(raw)
    assert "PHISH_RECIPIENT_DOMAIN" in signs(raw, Envelope(recipients=("john@pochta.test",)))


def test_a_mailing_lists_letter_is_read_when_the_envelope_names_the_readers() -> None:
    """A list header no longer hides a letter posing as the reader's administrator: without
    an envelope its To is the list's address and it is left alone (above); with one, the
    readers are the envelope's."""
    raw = to_reader(
        sender="pochta.test IT Support <it@helpdesk-mailer.example>",
        subject="Password notice",
        headers={"List-Id": "<news.lists.example>"},
    )
    assert "PHISH_RECIPIENT_DOMAIN" not in signs(raw)
    assert "PHISH_RECIPIENT_DOMAIN" in signs(raw, Envelope(recipients=("john@pochta.test",)))


@pytest.mark.parametrize(
    "name", ["Mail Administrator", "Webmail Support", "IT Helpdesk", "Администратор почты"]
)
def test_a_mail_administrators_name_from_outside(name: str) -> None:
    assert "PHISH_MAIL_ADMIN_NAME" in signs(to_reader(sender=f"{name} <a@srv1.host.example>"))


@pytest.mark.parametrize(
    ("sender", "headers"),
    [
        ("IT Helpdesk <helpdesk@pochta.test>", {}),  # the reader's own
        ("Gmail Team <mail-noreply@google.com>", {}),  # a protected organization's own
        ("Webmaster <webmaster@music.example>", {}),  # a web site's, not the mail's
    ],
)
def test_a_mail_administrators_name_left_alone(sender: str, headers: dict[str, str]) -> None:
    assert "PHISH_MAIL_ADMIN_NAME" not in signs(to_reader(sender=sender, headers=headers))


@pytest.mark.parametrize(
    "headers",
    [
        {"List-Id": "Staff <staff.list.example>"},
        {"List-Post": "<mailto:l@list.example>"},
        {"Mailing-List": "contact staff-help@list.example; run by ezmlm"},
    ],
)
def test_a_mailing_lists_header_exempts_no_mail_administrators_name(
    headers: dict[str, str],
) -> None:
    """A list's header is one line the sender writes: "IT Helpdesk" with a List-Id written in
    was no sign at all (issue 28)."""
    raw = to_reader(sender="IT Helpdesk <helpdesk@staff-mail.example>", headers=headers)
    assert "PHISH_MAIL_ADMIN_NAME" in signs(raw)


@pytest.mark.parametrize(
    ("return_path", "sender", "text", "fires"),
    [
        # a server's delivery report: from MAILER-DAEMON or postmaster, nothing to act on
        ("<>", "Mail Delivery System <Mailer-Daemon@mx.host.example>", BOUNCE, False),
        ("<MAILER-DAEMON@relay.example>", "Mail Delivery System <postmaster@mx.host.example>",
         BOUNCE, False),
        # the envelope sender is the sender's to write: a report carried by a mailing list
        # (its own bounce address) is still a report, and a null one buys nothing below
        ("<bulk@srv.example>", "Mail Delivery System <Mailer-Daemon@mx.host.example>",
         BOUNCE, False),
        # the same name with a link to act on: a phishing letter posing as a bounce
        ("<>", "Mail Delivery System <Mailer-Daemon@mx.host.example>",
         BOUNCE + "Release your 7 pending messages: https://mail-release.example/login\n", True),
        # ... or with a request to answer, or an account lure: no link needed for those
        ("<>", "Mail Delivery System <Mailer-Daemon@mx.host.example>",
         BOUNCE + "Reply with your password to verify your account.\n", True),
        ("<>", "Mail Delivery System <Mailer-Daemon@mx.host.example>",
         BOUNCE + "Your mailbox storage is full. 8 pending messages could not be delivered.\n",
         True),
        # a bounce's name from somebody's own address
        ("<>", "Mail Delivery System <admin@mx.host.example>", BOUNCE, True),
    ],
)
def test_a_delivery_report_is_a_mail_servers_own(
    return_path: str, sender: str, text: str, fires: bool
) -> None:
    raw = to_reader(sender=sender, text=text, headers={"Return-Path": return_path})
    assert ("PHISH_MAIL_ADMIN_NAME" in signs(raw)) is fires


@pytest.mark.parametrize(
    "headers",
    [
        {"Reply-To": "quota@mail-release.example"},  # answers go elsewhere
        {"List-Id": "Bounces <bounces.list.example>"},  # a list's header is no report's
    ],
)
def test_a_delivery_report_that_sends_the_reader_elsewhere_is_none(
    headers: dict[str, str],
) -> None:
    sender = "Mail Delivery System <Mailer-Daemon@mx.host.example>"
    raw = to_reader(sender=sender, text=BOUNCE, headers={"Return-Path": "<>", **headers})
    fires = "Reply-To" in headers
    assert ("PHISH_MAIL_ADMIN_NAME" in signs(raw)) is fires


@pytest.mark.parametrize(
    ("part", "fires"),
    [
        ("Content-Type: message/delivery-status\r\n\r\nReporting-MTA: dns; mx.host.example\r\n",
         False),
        ("Content-Type: text/rfc822-headers\r\n\r\nSubject: hello\r\n", False),
        ('Content-Type: text/html\r\nContent-Disposition: attachment; filename="m.html"\r\n'
         "\r\n<p>Your message</p>\r\n", True),  # a page to open
        ('Content-Type: application/zip\r\nContent-Disposition: attachment; filename="m.zip"\r\n'
         "Content-Transfer-Encoding: base64\r\n\r\nUEsDBA==\r\n", True),
        # the returned letter is plain: a report's own
        ("Content-Type: message/rfc822\r\n\r\nFrom: bob@pochta.test\r\nSubject: hi\r\n\r\n"
         "See you at 5.\r\n", False),
        # a returned letter written as the reader's is read too: its From is the sender's to
        # write, so a link in it is something to act on, the reader's own or a forger's
        ("Content-Type: message/rfc822\r\n\r\nFrom: bob@pochta.test\r\nSubject: hi\r\n"
         "Content-Type: text/html\r\n\r\n<p>See https://pochta.test/agenda</p>\r\n", True),
        # ... but a returned letter somebody else wrote is no report of the reader's own: a lure
        # dressed as a bounce ("your pending messages" from PayPal), or backscatter
        ("Content-Type: message/rfc822\r\n\r\nFrom: PayPal <service@paypal.com>\r\n"
         "Subject: Confirm your account\r\nContent-Type: text/html\r\n\r\n"
         '<a href="https://paypal.account-check.example/">Confirm</a>\r\n', True),
        # ... and so is one that names no writer at all
        ("Content-Type: message/rfc822\r\n\r\nSubject: Confirm your account\r\n\r\n"
         "https://paypal.account-check.example/\r\n", True),
        # a mail link to another party: the answer goes elsewhere
        ('Content-Type: text/html\r\n\r\n<a href="mailto:restore@mail-release.example">Restore'
         "</a>\r\n", True),
    ],
)
def test_a_delivery_report_with_a_file_to_open_is_none(part: str, fires: bool) -> None:
    raw = (
        "Return-Path: <>\r\n"
        "From: Mail Delivery System <Mailer-Daemon@mx.host.example>\r\n"
        f"To: {TO}\r\n"
        "Subject: Undelivered Mail Returned to Sender\r\n"
        "MIME-Version: 1.0\r\n"
        'Content-Type: multipart/report; report-type=delivery-status; boundary="b"\r\n\r\n'
        f"--b\r\nContent-Type: text/plain\r\n\r\n{BOUNCE}\r\n--b\r\n{part}--b--\r\n"
    ).encode()
    assert ("PHISH_MAIL_ADMIN_NAME" in signs(raw)) is fires


@pytest.mark.parametrize(
    ("writer", "fires"),
    [
        ("Jane <jane.doe@gmail.com>", False),  # the reader's own address, on a free mailbox
        ("JANE.DOE@GMAIL.COM", False),
        ("Jane <jane.roe@gmail.com>", True),  # a stranger on the same free mailbox service
        ("<postmaster@mx.host.example>", True),
    ],
)
def test_a_returned_letter_is_the_readers_own_by_the_envelope(writer: str, fires: bool) -> None:
    """A reader on a free mailbox service has no domain of her own: her address decides."""
    raw = (
        "Return-Path: <>\r\n"
        "From: Mail Delivery System <Mailer-Daemon@mx.host.example>\r\n"
        "To: jane.doe@gmail.com\r\n"
        "Subject: Undelivered Mail Returned to Sender\r\n"
        "MIME-Version: 1.0\r\n"
        'Content-Type: multipart/report; report-type=delivery-status; boundary="b"\r\n\r\n'
        f"--b\r\nContent-Type: text/plain\r\n\r\n{BOUNCE}\r\n--b\r\n"
        f"Content-Type: message/rfc822\r\n\r\nFrom: {writer}\r\nSubject: hi\r\n\r\n"
        "See you at 5.\r\n--b--\r\n"
    ).encode()
    envelope = Envelope(sender="", recipients=("jane.doe@gmail.com",))
    assert ("PHISH_MAIL_ADMIN_NAME" in signs(raw, envelope)) is fires


READER_ENV = Envelope("203.0.113.9", "", ("alice@pochta.test",))


def report(returned: str, sender: str = "Mail Delivery System <MAILER-DAEMON@mx.host.example>",
           received: str = "from mx.host.example ([192.0.2.25])") -> bytes:  # fmt: skip
    """A delivery report to alice@pochta.test returning ``returned`` (a letter's header and
    body, CRLF)."""
    return (
        f"Received: {received} by mx.pochta.test (pochta) with ESMTP;"
        " Mon, 02 Jun 2025 10:00:05 +0000\r\n"
        "Return-Path: <>\r\n"
        f"From: {sender}\r\n"
        "To: alice@pochta.test\r\n"
        "Subject: Undelivered Mail Returned to Sender\r\n"
        "MIME-Version: 1.0\r\n"
        'Content-Type: multipart/report; report-type=delivery-status; boundary="b"\r\n\r\n'
        f"--b\r\nContent-Type: text/plain\r\n\r\n{BOUNCE}\r\n--b\r\n"
        "Content-Type: message/delivery-status\r\n\r\nReporting-MTA: dns; mx.host.example\r\n"
        f"--b\r\nContent-Type: message/rfc822\r\n\r\n{returned}--b--\r\n"
    ).encode()


@pytest.mark.parametrize(
    ("returned", "fires"),
    [
        # the reader's own plain letter returned: a report's own, nothing to act on
        ("From: Alice <alice@pochta.test>\r\nSubject: Встреча в пятницу\r\n\r\n"
         "Коллеги, переносим встречу на 15:00.\r\n", False),
        ("From: Alice <alice@pochta.test>\r\nSubject: Friday\r\n\r\nSee you at 5.\r\n", False),
        # a forged bounce returning a lure written "From: <the reader>": the reader's name
        # bought the exemption, the lure sat in the letter it returned (issue 28)
        ("From: Alice <alice@pochta.test>\r\nSubject: Доступ к почте\r\n"
         "Content-Type: text/html; charset=utf-8\r\n\r\n"
         '<p>Ваш почтовый ящик переполнен. <a href="https://pochta-test.mail-quota.example/">'
         "Освободить место</a></p>\r\n", True),
        ("From: alice@pochta.test\r\nSubject: Mailbox quota\r\n"
         "Content-Type: text/html\r\n\r\n"
         '<p>Release your 7 pending messages: <a href="https://mail-release.example/login">'
         "Release</a></p>\r\n", True),
        # ... or with no link at all: a request to answer, an account lure
        ("From: alice@pochta.test\r\nSubject: Verify\r\n\r\n"
         "Reply with your password to verify your account.\r\n", True),
        ("From: alice@pochta.test\r\nSubject: Почта\r\n\r\n"
         "Ваш почтовый ящик переполнен, 14 писем задержаны.\r\n", True),
        # ... or a file to open inside it
        ("From: alice@pochta.test\r\nSubject: scan\r\nMIME-Version: 1.0\r\n"
         'Content-Type: multipart/mixed; boundary="i"\r\n\r\n--i\r\n'
         "Content-Type: text/plain\r\n\r\nsee attached\r\n--i\r\n"
         'Content-Type: application/zip; name="doc.zip"\r\n'
         "Content-Transfer-Encoding: base64\r\n\r\nUEsDBA==\r\n--i--\r\n", True),
    ],
)
def test_a_returned_letter_written_as_the_readers_is_read_too(returned: str, fires: bool) -> None:
    assert ("PHISH_MAIL_ADMIN_NAME" in signs(report(returned), READER_ENV)) is fires


PLAIN = "From: alice@pochta.test\r\nSubject: Friday\r\n\r\nSee you at 5.\r\n"


@pytest.mark.parametrize(
    ("sender", "received", "fires"),
    [
        # a report written as from the reader's own address: no server reports so
        ("Mail Delivery System <postmaster@pochta.test>", "from mx.host.example ([192.0.2.25])",
         True),
        # the reader's own domain's server ... from a stranger's server
        ("Mail Delivery System <MAILER-DAEMON@pochta.test>",
         "from bulk.stranger.example ([198.51.100.50])", True),
        # ... or from its own
        ("Mail Delivery System <MAILER-DAEMON@pochta.test>", "from mx.pochta.test ([192.0.2.26])",
         False),
    ],
)
def test_a_report_written_as_from_the_reader_is_none(
    sender: str, received: str, fires: bool
) -> None:
    envelope = Envelope("203.0.113.9", "", ("postmaster@pochta.test",))
    raw = report(PLAIN.replace("alice@", "postmaster@"), sender=sender, received=received)
    assert ("PHISH_MAIL_ADMIN_NAME" in signs(raw, envelope)) is fires


def test_a_huge_returned_letter_is_not_read_and_not_disarmed() -> None:
    returned = PLAIN + "See you at 5.\r\n" * (phishing.MAX_RETURNED // 14)
    assert "PHISH_MAIL_ADMIN_NAME" in signs(report(returned), READER_ENV)


# -- account and fee lures --------------------------------------------------------------------
@pytest.mark.parametrize(
    "text",
    [
        "You can keep your current password by confirming it below.",
        "Your mailbox storage is full. 8 pending messages could not be delivered.",
        "Чтобы сохранить текущий пароль, перейдите по ссылке.",
        "Ваш почтовый ящик переполнен, 14 писем задержаны.",
        "Enter your 12-word recovery phrase to sync your wallet.",
        "Введите фразу восстановления кошелька.",
        "Re-register MFA before 5 PM.",
        "Войдите с корпоративной почтой, чтобы прочитать приказ.",
    ],
)
def test_an_account_lure(text: str) -> None:
    assert "PHISH_ACCOUNT_LURE" in signs(letter(text=text))


@pytest.mark.parametrize(
    ("sender", "text"),
    [
        ("Friend <f@example.net>", "I keep forgetting my password, lol."),
        ("List <l@example.net>", "The server got 5000 incoming messages an hour."),
        # the organization's own, and the reader's own IT department
        ("Google <no-reply@accounts.google.com>", "Your storage is full."),
        ("IT <it@pochta.test>", "Your password expires in 3 days."),
    ],
)
def test_no_account_lure(sender: str, text: str) -> None:
    assert "PHISH_ACCOUNT_LURE" not in signs(to_reader(sender=sender, text=text))


@pytest.mark.parametrize(
    "text",
    [
        "Pay the customs fee of 1.99 USD to release your parcel.",
        "Please pay a redelivery fee of $0.30.",
        "Please update your payment method to keep watching.",
        "Необходимо оплатить таможенную пошлину в размере 189 руб.",
        "Оплатите доставку 299 руб по ссылке.",
    ],
)
def test_a_fee_request(text: str) -> None:
    assert "PHISH_FEE_REQUEST" in signs(letter(text=text))


@pytest.mark.parametrize(
    "text", ["The delivery is free.", "Счет на оплату во вложении.", "No fee is charged."]
)
def test_no_fee_request(text: str) -> None:
    assert "PHISH_FEE_REQUEST" not in signs(letter(text=text))


# -- hidden text ------------------------------------------------------------------------------
def test_invisible_characters_inside_words() -> None:
    s = signs(letter(subject="Your Ama\u200bzon order is sus\u200bpended"))
    assert s["PHISH_HIDDEN_TEXT"] == ("a[U+200B]z", "s[U+200B]p")
    body = "Pass\u200bword ex\u200cpires, veri\u2060fy now"
    assert "PHISH_HIDDEN_TEXT" in signs(letter(text=body))


@pytest.mark.parametrize(
    "text",
    [
        "Donau\u00addampf\u00adschiff\u00adfahrt",  # soft hyphens: a newsletter's wrapping
        "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645",  # Persian needs its ZWNJ
        "Family: \U0001f468\u200d\U0001f469\u200d\U0001f467",  # an emoji sequence
        "Two splits only: pa\u200bss and wo\u200brd.",  # fewer than SPLIT_IN_TEXT in the text
    ],
)
def test_invisible_characters_that_belong(text: str) -> None:
    assert "PHISH_HIDDEN_TEXT" not in signs(letter(text=text))


def test_more_hidden_html_than_visible() -> None:
    hidden = '<div style="display:none">' + "harmless words " * 30 + "</div>"
    assert "PHISH_HIDDEN_TEXT" in signs(letter(text=None, html=f"<p>Verify now</p>{hidden}"))
    preheader = '<span style="display:none">Winter sale: 20 % off</span>'
    visible = "<p>" + "Our winter collection is here. " * 10 + "</p>"
    assert "PHISH_HIDDEN_TEXT" not in signs(letter(text=None, html=preheader + visible))


# -- data: links, HTML files ------------------------------------------------------------------
@pytest.mark.parametrize(
    "href",
    ["data:text/html;base64,PGgxPkhpPC9oMT4=", "javascript:alert(1)", "JAVA\tSCRIPT:x()"],
)
def test_a_link_to_a_page_inside_the_link(href: str) -> None:
    raw = letter(text=None, html=f'<p><a href="{href}">Review</a></p>')
    assert "PHISH_LINK_DATA_URL" in signs(raw)
    assert verdict(raw)[0] == "phishing"


def test_an_image_inside_the_letter_is_no_data_link() -> None:
    raw = letter(text=None, html='<p><img src="data:image/png;base64,iVBORw0KGgo="> Hi</p>')
    assert "PHISH_LINK_DATA_URL" not in signs(raw)


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("invoice.html", b'<form action="https://x.example/p"><input type="password"></form>'),
        ("doc.htm", b"<script>document.write(atob('PGZvcm0+'))</script>"),
        ("vm.html", b'<meta http-equiv="refresh" content="0; url=https://x.example/">'),
        ("notice.svg", b"<svg><script>window.location.href='https://x.example'</script></svg>"),
    ],
)
def test_an_html_file_that_collects_or_redirects(name: str, content: bytes) -> None:
    raw = letter(text="See the attachment.", files=[(name, content)])
    assert "PHISH_HTML_ATTACHMENT" in signs(raw)
    assert verdict(raw)[0] == "phishing"


def test_an_html_report_is_no_trap() -> None:
    report = b"<html><body><table><tr><td>Sales</td><td>42</td></tr></table></body></html>"
    raw = letter(text="The weekly report.", files=[("report.html", report)])
    assert "PHISH_HTML_ATTACHMENT" not in signs(raw)


def test_html_files_are_read_up_to_their_bound() -> None:
    late = b" " * lures.MAX_HTML_FILE + b"<form>"
    assert lures.html_attachment(late) == []
    many = [(f"f{i}.html", b"<p>hi</p>") for i in range(lures.MAX_HTML_FILES)]
    raw = letter(text="x", files=[*many, ("last.html", b"<form>")])
    assert "PHISH_HTML_ATTACHMENT" not in signs(raw)  # the 11th file is not read


# -- QR codes ---------------------------------------------------------------------------------
def test_a_qr_code_to_scan() -> None:
    raw = with_image(text="Scan the QR code with your phone to verify your wallet.")
    assert "PHISH_QR_CODE" in signs(raw)
    bare = with_image(subject="Требуется повторная авторизация", text="См. вложение.")
    assert "PHISH_QR_CODE" in signs(bare)


def test_no_qr_lure() -> None:
    long_text = "Show the QR code at the entrance. " + "The programme has many talks. " * 40
    assert "PHISH_QR_CODE" not in signs(with_image(text=long_text))
    assert "PHISH_QR_CODE" not in signs(letter(text="Scan the QR code."))  # no image
    linked = with_image(text="Photos from the trip https://photos.example.net/album")
    assert "PHISH_QR_CODE" not in signs(linked)


def test_a_qr_code_with_a_lure_is_phishing_and_a_ticket_is_not() -> None:
    lure = with_image(
        sender="Microsoft Authenticator <mfa@auth-reset.example>",
        subject="Action required: re-register MFA",
        text="See attached.",
    )
    assert verdict(lure)[0] == "phishing"
    ticket = with_image(
        sender="DevConf <tickets@devconf.example>",
        subject="Your ticket",
        text="Show the QR code attached at the entrance to get your badge.",
    )
    assert verdict(ticket) == ("ham", 0.0)


# -- combinations -----------------------------------------------------------------------------
def test_a_brand_from_elsewhere_is_phishing() -> None:
    raw = letter(
        sender="SharePoint Online <no-reply@fincorp.example>",
        subject="Jane shared a file with you",
        text="Open: https://fincorp-docs.example/sp",
        headers={"Received": "from mail.fincorp.example (mail.fincorp.example [203.0.113.5])"},
    )
    got = verdict(raw)
    assert got[0] == "phishing", got


def test_the_readers_domain_with_a_lure_is_phishing() -> None:
    raw = to_reader(
        sender="pochta.test IT Helpdesk <it@helpdesk.example>",
        subject="Password expiry notice",
        text="You can keep your current password: https://helpdesk.example/keep",
    )
    assert verdict(raw)[0] == "phishing"


def test_a_protected_address_from_elsewhere_with_a_lure_is_phishing() -> None:
    headers = {
        "Return-Path": "<bounce@cheaphost.example>",
        "Received": "from mail.cheaphost.example (mail.cheaphost.example [203.0.113.9])",
    }
    raw = letter(
        sender="PayPal <service@paypal.com>",
        subject="Your account has been limited",
        text="Resolve now: https://paypal-resolution.xyz/limit",
        headers=headers,
    )
    assert verdict(raw)[0] == "phishing"
    # the same letter through PayPal's own servers is PayPal's (DMARC tells, when DNS runs)
    own = raw.replace(b"cheaphost.example", b"paypal.com")
    assert "PROTECTED_SENDER_FROM_ELSEWHERE" not in {
        h.symbol
        for h in ruleset.evaluate(
            ruleset.default(), features.extract(parse(own)), phishing.check(parse(own))
        )
    }


def test_an_account_lure_from_elsewhere_is_phishing() -> None:
    raw = letter(
        sender="Notice <n@srv1.host.example>",
        subject="Mailbox notice",
        text="Dear user, your mailbox is full. Release pending messages: https://host.example/r",
        headers={"Received": "from vps-1.other.example (vps-1.other.example [203.0.113.7])"},
    )
    assert verdict(raw)[0] == "phishing"


def test_hidden_text_with_another_sign_is_phishing() -> None:
    hidden = '<div style="display:none">' + "harmless words " * 30 + "</div>"
    raw = letter(
        sender="Notice <n@srv1.host.example>",
        text=None,
        html=f"<p>Verify your mailbox to avoid deactivation.</p>{hidden}",
    )
    assert verdict(raw)[0] == "phishing"


# -- bounds -----------------------------------------------------------------------------------
BUDGET = 0.5  # CPU seconds for 100 KB of crafted input (as in test_linear_time.py)
N = 100_000


@pytest.mark.parametrize(
    "text",
    [
        "keep " * (N // 5),
        "pay the " * (N // 8),
        "a\u200b" * (N // 2),
        "qr " * (N // 3),
        "сохранить " * (N // 10),
        "mailbox " * (N // 8),
    ],
)
def test_crafted_text_costs_little(text: str) -> None:
    assert crafted_check_seconds("Mail Admin ", text) < BUDGET


def crafted_check_seconds(name: str, text: str) -> float:
    """CPU seconds the checks take on a parsed letter whose display name is ``name`` 2,000
    times and whose subject (its first 5,000 characters) and text are ``text``."""
    raw = letter(sender=f"{name * 2000} <a@b.example>", subject=text[:5000], text=text)
    parsed = parse(raw)
    t0 = time.process_time()
    phishing.check(parsed)
    return time.process_time() - t0


def test_a_crafted_html_file_costs_little() -> None:
    content = b"<input " * (lures.MAX_HTML_FILE // 7) + b"<meta http-equiv=refresh " * 1000
    t0 = time.process_time()
    lures.html_attachment(content * 4)
    assert time.process_time() - t0 < BUDGET


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=400))
def test_any_text_gives_bounded_quotes(text: str) -> None:
    for rx in (lures.ACCOUNT_LURE, lures.FEE_REQUEST, lures.MAIL_ROLE, lures.ROLE, lures.QR):
        found = lures.find(rx, text)
        assert len(found) <= 3 and all(len(q) <= 60 for q in found)
    assert len(lures.split_words(text)) <= 3


def test_the_readers_own_address_written_on_a_strangers_letter() -> None:
    """A lure "from" the reader's own domain counts when the letter came from elsewhere."""
    stranger = {
        "Return-Path": "<x@cheap-host.example>",
        "Received": "from vps.cheap-host.example (vps.cheap-host.example [203.0.113.8])",
    }
    own = {
        "Return-Path": "<it@pochta.test>",
        "Received": "from srv-exch01.pochta.test (srv-exch01.pochta.test [10.0.0.12])",
    }
    text = "Your password expires today. Keep your current password: https://x.example/k"
    for headers, fires in ((stranger, True), (own, False)):
        raw = to_reader(sender="IT <it@pochta.test>", text=text, headers=headers)
        assert ("PHISH_ACCOUNT_LURE" in signs(raw)) is fires
