"""What helper phish28c added or narrowed for today's phishing (issue 28, item 6): the job and
task scam (a job paid by the day, offered by a public mailbox, to take up in a messenger), a
hiding link in an inline calendar invitation (a ``text/calendar`` part with no file name),
business e-mail compromise's payment only when it presses, and an OAuth consent to the
sender's own app mailed from another domain; each beside the legitimate letter it must leave
alone, and their cost on hostile input."""

from __future__ import annotations

import base64
import time

import pytest
from tests.unit.antispam_phishing.helpers import letter
from tests.unit.antispam_phishing.test_signs_2025 import BUDGET, signs, verdict

from pochta.antispam.signs import checks as phishing
from pochta.mime.letter import parse

N = 100_000


# -- the job and task scam ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("sender", "headers", "text"),
    [
        ("Global Staffing HR <hiring.globalstaff2026@gmail.com>", {},
         "We would like to offer you a remote part-time position. The work takes 60-90 minutes a "
         "day on your phone and pays $200-$800 daily.\nMessage our manager on WhatsApp: +1 786 "
         "555 0142.\n"),
        # the answers at a public mailbox, the messenger only as a link
        ("Jessica <jessica@talentreach-jobs.example>", {"Reply-To": "jess.hr@hotmail.com"},
         "We are offering you a part-time job. No experience needed, paid the same day, "
         "300-900 USD a day.\nhttps://wa.me/14155550199\n"),
        ("Марина <marina.podrabotka@mail.ru>", {},
         "Ищем людей на подработку: 30 минут в день со своего смартфона. Доход от 2 000 до "
         "5 000 руб. за день.\nПишите в Telegram: @marina_hr\n"),
        ("HR <wb.rabota@gmail.com>", {},
         "Приглашаем вас на удалённую работу, от 3 000 до 8 000 руб. в день, опыт не нужен, "
         "выплаты ежедневно. Пишите в вотсап.\n"),
    ],
)  # fmt: skip
def test_a_job_paid_by_the_day_offered_by_a_public_mailbox_in_a_messenger(
    sender: str, headers: dict[str, str], text: str
) -> None:
    raw = letter(sender=sender, subject="Work", text=text, headers=headers)
    assert "PHISH_TASK_SCAM" in signs(raw)
    assert verdict(raw)[0] == "phishing"


@pytest.mark.parametrize(
    ("sender", "text"),
    [
        # a recruiter from gmail.com: a salary by the year, a call or a message on WhatsApp
        ("Rachel <rachel.recruits@gmail.com>",
         "I thought of you for a remote Senior Backend Engineer role, $165,000-$185,000 a year. "
         "Open to a 20-minute call? I'm also on WhatsApp.\n"),
        # a recruiter from mail.ru: a salary by the month
        ("Ольга <olga.hr@mail.ru>",
         "Удалённая работа главным бухгалтером, оклад 140 000 руб. в месяц, опыт от пяти лет. "
         "Напишите мне в Telegram.\n"),
        # a job board's own shifts paid by the day, with no experience, and its Telegram bot
        ("Работа рядом <vacancies@rabota-ryadom.example>",
         "Курьер, подработка: от 3 500 руб. в день, выплаты ежедневно, опыт не нужен.\n"
         "Откликайтесь в нашем Telegram-боте: https://t.me/rabota_bot\n"),
        # all of it but the messenger: the answer by e-mail
        ("HR <hiring@gmail.com>",
         "A remote part-time job, 1-2 hours a day from your phone, $300 a day. Reply to this "
         "e-mail.\n"),
        # a friend's babysitting request names no daily pay
        ("Anna <anna.k@gmail.com>",
         "Are you still looking for a side job? Our neighbours need a babysitter on weekends, "
         "no experience needed, text Maria on WhatsApp.\n"),
        # review2: a person's own job for a day, one sum a day (no range of pay), in a messenger
        ("Катя <katya.ivanova@gmail.com>",
         "Привет! Ищем няню на подработку по выходным для Миши, 2 500 руб. в день, опыт не "
         "нужен, главное любить детей. Если интересно, напиши мне в WhatsApp.\n"),
        ("Kate <kate.miller@gmail.com>",
         "Hi Tom, are you still after a side job? We need a babysitter on Saturdays, $120 a "
         "day, no experience needed. Message me on WhatsApp.\n"),
        ("Сергей <s.petrov@mail.ru>",
         "Нужна подработка на субботу? Помочь с переездом на дачу, 3 000 руб. за день, опыт "
         "не нужен. Пиши в телеграм.\n"),
        ("Лена <lena.k@yandex.ru>",
         "Подработка для студентов в нашем кафе: 4 часа в день, 2 000 руб. в день, без опыта, "
         "обучим. Пишите в Telegram.\n"),
        ("Mark <mark.dogs@gmail.com>",
         "Hey, I need someone for a part-time job walking Rex while I'm away: 30 minutes a "
         "day, $25 a day. Text me on WhatsApp.\n"),
        ("Anna <anna.b@outlook.com>",
         "Our family is offering a part-time job for a student: help my mum with groceries, 2 "
         "hours a day, $60 a day, no experience needed. Ping me on Viber.\n"),
        ("Ольга <olga.m@mail.ru>",
         "Предлагаем подработку в нашем магазине, оплата 1 800 руб. в день, выплаты каждый "
         "день, опыт не нужен. Пишите в вотсап.\n"),
        ("Tom <tom.r@gmail.com>",
         "Remote work for my small shop: answering customer chats from your phone, $50 a day, "
         "paid daily. Message me on Telegram.\n"),
    ],
)  # fmt: skip
def test_no_task_scam(sender: str, text: str) -> None:
    raw = letter(sender=sender, subject="Job", text=text)
    assert "PHISH_TASK_SCAM" not in signs(raw)
    assert verdict(raw)[0] != "phishing"


# -- business e-mail compromise: a payment that presses -----------------------------------------
@pytest.mark.parametrize(
    "text",
    [
        "Оля, оплати завтра счёт Вектора за февраль, он у тебя в почте. Я весь день на "
        "переговорах, звонить не могу.\n",
        "Could you pay the mill invoice tomorrow? I'm in meetings at the bank all day and "
        "can't take calls.\n",
        # review2: "today" is when the writer is away, not when to pay; a confidential file
        "Could you pay the mill invoice tomorrow? I'm in meetings at the bank all day today "
        "and can't take calls.\n",
        "Оля, оплати завтра счёт Вектора. Я сегодня весь день на переговорах, звонить не могу.\n",
        "Could you pay the mill invoice tomorrow? I'm in meetings all day and can't take "
        "calls. The confidential board pack is on the drive.\n",
    ],
)
def test_a_payment_for_tomorrow_while_in_meetings_is_no_bec(text: str) -> None:
    raw = letter(sender="Elena <elena.markova@gmail.com>", subject="Invoice", text=text)
    assert "PHISH_BEC_REQUEST" not in signs(raw)
    assert verdict(raw)[0] != "phishing"


@pytest.mark.parametrize(
    "text",
    [
        "Could you pay the mill invoice today? I'm in meetings all day and can't take calls.\n",
        "Please process the payment before 3 pm. I'm in a board meeting and can't talk.\n",
        "Оплати счёт поставщику. Я на совещании, звонить не могу. Пока никому не говори.\n",
        "Оплати счёт поставщику до 15:00. Я на переговорах, звонить не могу.\n",
        # review2: secrecy anywhere; the deadline in the subject's line
        "Please pay the attached invoice. I'm in meetings and can't talk. Keep this between us.\n",
        "Please pay the attached invoice. I'm in meetings and can't talk. It is strictly "
        "confidential.\n",
    ],
)
def test_a_payment_now_or_in_secret_while_unreachable_is_bec(text: str) -> None:
    raw = letter(sender="Andrew <director.andrew@gmail.com>", subject="Invoice", text=text)
    assert "PHISH_BEC_REQUEST" in signs(raw)


def test_a_deadline_in_the_subject_presses() -> None:  # review2
    text = "Please pay the attached invoice. I'm in meetings and can't talk.\n"
    raw = letter(sender="Andrew <director.andrew@gmail.com>", subject="Urgent", text=text)
    assert "PHISH_BEC_REQUEST" in signs(raw)
    raw = letter(sender="Andrew <director.andrew@gmail.com>", subject="Invoice", text=text)
    assert "PHISH_BEC_REQUEST" not in signs(raw)


# -- an inline calendar invitation --------------------------------------------------------------
def _inline_invite(description: str, *, encoding: str = "7bit", filename: bool = False) -> bytes:
    ics = (
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nMETHOD:REQUEST\r\nBEGIN:VEVENT\r\nUID:1@x\r\n"
        f"DTSTART:20260311T150000Z\r\nSUMMARY:Review\r\nDESCRIPTION:{description}\r\n"
        "END:VEVENT\r\nEND:VCALENDAR\r\n"
    )
    body = base64.encodebytes(ics.encode()).decode() if encoding == "base64" else ics
    name = '\r\nContent-Disposition: attachment; filename="invite.ics"' if filename else ""
    return (
        "From: HR <hr@verifyhr-portal.example>\r\nTo: john@pochta.test\r\n"
        "Subject: Invitation: your salary statement\r\nMessage-ID: <c1@x>\r\n"
        "MIME-Version: 1.0\r\nContent-Type: multipart/alternative; boundary=b\r\n\r\n"
        "--b\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nAccept the invitation.\r\n"
        "--b\r\nContent-Type: text/calendar; charset=utf-8; method=REQUEST\r\n"
        f"Content-Transfer-Encoding: {encoding}{name}\r\n\r\n{body}\r\n--b--\r\n"
    ).encode()


@pytest.mark.parametrize("encoding", ["7bit", "base64"])
def test_a_hiding_link_in_an_inline_invitation(encoding: str) -> None:
    raw = _inline_invite("View: https://hr-statement-2026.top/view", encoding=encoding)
    assert parse(raw).attachments == ()  # not a file: the body's
    assert signs(raw)["PHISH_CALENDAR_LINK"] == ("hr-statement-2026.top",)


def test_an_inline_meeting_invitation_and_an_attached_one_read_once() -> None:
    raw = _inline_invite("Join: https://teams.microsoft.com/l/meetup-join/19 Agenda: "
                         "https://docs.google.com/document/d/1a")  # fmt: skip
    assert "PHISH_CALENDAR_LINK" not in signs(raw)
    raw = _inline_invite("View: http://203.0.113.7/login", filename=True)
    assert len(parse(raw).attachments) == 1
    assert signs(raw)["PHISH_CALENDAR_LINK"] == ("203.0.113.7",)


def test_many_inline_invitations_cost_little() -> None:
    ics = (
        "BEGIN:VCALENDAR\r\nDESCRIPTION:" + "https://a.pages.dev/ " * 20_000 + "http://"
        + "a" * 200_000 + "\r\nEND:VCALENDAR\r\n"
    )  # fmt: skip
    parts = "".join(f"--b\r\nContent-Type: text/calendar\r\n\r\n{ics}\r\n" for _ in range(8))
    raw = (
        "From: a@b.example\r\nTo: john@pochta.test\r\nSubject: x\r\nMIME-Version: 1.0\r\n"
        f"Content-Type: multipart/mixed; boundary=b\r\n\r\n{parts}--b--\r\n"
    ).encode()
    parsed = parse(raw)
    t0 = time.process_time()
    found = {s.symbol: s.evidence for s in phishing.check(parsed)}
    assert time.process_time() - t0 < BUDGET
    assert found["PHISH_CALENDAR_LINK"] == ("a.pages.dev",)


# -- an OAuth consent to the sender's own app, mailed from another domain ------------------------
_AUTHORIZE = (
    "https://login.microsoftonline.com/common/oauth2/v2.0/authorize?client_id=5f2c&amp;"
    "response_type=code&amp;redirect_uri=https%3A%2F%2Fapp.slotwise.io%2Foauth&amp;scope=x"
)


@pytest.mark.parametrize(
    ("sender", "headers"),
    [
        # the display name is the app's name, and so is the From domain's
        ("Slotwise <hello@slotwise-mail.example>", {}),
        ("Slot-Wise Team <hello@slotwise-mail.example>", {}),
        # the envelope sender is the app's domain
        ("Calendar setup <hello@notify.example>", {"Return-Path": "<bounce@slotwise.io>"}),
    ],
)
def test_a_consent_to_the_senders_own_app_from_another_domain(
    sender: str, headers: dict[str, str]
) -> None:
    raw = letter(sender=sender, html=f'<a href="{_AUTHORIZE}">Connect</a>', text=None,
                 headers=headers)  # fmt: skip
    assert "PHISH_OAUTH_CONSENT" not in signs(raw)


@pytest.mark.parametrize(
    "sender",
    [
        # a provider's name in the display name: the app is not the sender's
        "Microsoft 365 Slotwise <no-reply@m365-apps-notify.example>",
        "Microsoft 365 Admin <no-reply@m365-apps-notify.example>",
        # another name
        "Secure Docs <no-reply@docs-notify.example>",
        # review2: the app's name as a display name only, the sender's to write
        "Slotwise <hello@mailer.example>",
        "Slot-Wise Team <slotwise.team@gmail.com>",
    ],
)
def test_a_consent_to_a_third_partys_app_still_shows(sender: str) -> None:
    raw = letter(sender=sender, html=f'<a href="{_AUTHORIZE}">Approve</a>', text=None)
    assert "PHISH_OAUTH_CONSENT" in signs(raw)


# -- hostile text ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text",
    [
        "remote job " * (N // 11),
        "$1 " * (N // 3),
        "remote job $1-$2 a day " * (N // 23),  # review2: TASK_RANGE matched all along
        "1 000 руб. " * (N // 11),
        "подработка опыт не нужен " * (N // 25),
        "paid " * (N // 5),
        "9-" * (N // 2),
        "in meetings can't talk pay the invoice " * (N // 39),
        "i'm in meetings and can't talk. please pay the invoice. " * (N // 56),  # review2
    ],
)
def test_crafted_text_costs_little(text: str) -> None:
    parsed = parse(letter(sender="A <a.b@gmail.com>", subject=text[:5000], text=text))
    t0 = time.process_time()
    phishing.check(parsed)
    assert time.process_time() - t0 < BUDGET


# -- review2: an invitation in UTF-16 -----------------------------------------------------------
@pytest.mark.parametrize(("charset", "codec"), [("utf-16", "utf-16"), ("UTF-16LE", "utf-16-le")])
def test_an_inline_invitation_in_utf16_is_read_in_its_charset(charset: str, codec: str) -> None:
    ics = "BEGIN:VCALENDAR\r\nDESCRIPTION:View: http://203.0.113.7/login\r\nEND:VCALENDAR\r\n"
    body = base64.encodebytes(ics.encode(codec)).decode()
    raw = (
        "From: HR <hr@verifyhr-portal.example>\r\nTo: john@pochta.test\r\nSubject: x\r\n"
        "MIME-Version: 1.0\r\nContent-Type: multipart/alternative; boundary=b\r\n\r\n"
        "--b\r\nContent-Type: text/plain\r\n\r\nAccept the invitation.\r\n"
        f"--b\r\nContent-Type: text/calendar; charset={charset}; method=REQUEST\r\n"
        f"Content-Transfer-Encoding: base64\r\n\r\n{body}\r\n--b--\r\n"
    ).encode()
    assert signs(raw)["PHISH_CALENDAR_LINK"] == ("203.0.113.7",)


def test_an_attached_invitation_in_utf16_with_a_byte_order_mark() -> None:
    ics = "BEGIN:VCALENDAR\r\nDESCRIPTION:View: http://203.0.113.7/login\r\nEND:VCALENDAR\r\n"
    raw = letter(sender="HR <hr@verifyhr-portal.example>", text="See the invitation.\n",
                 files=[("invite.ics", ics.encode("utf-16"))])  # fmt: skip
    assert signs(raw)["PHISH_CALENDAR_LINK"] == ("203.0.113.7",)
