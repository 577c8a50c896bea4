"""Short personal letters that pochta writes itself, for training its model. Deterministic.

Why: the training ham of the public corpus is mailing-list discussion of 2002 and the other
generated letters (:mod:`pochta_factory.legit`) are commercial mail: nothing in training is a
one-line note from one person to another ("Got your message, will reply tonight."), so a
model learns "few words, no digits, no link to the sender's own site = spam" and files such a
note in Spam (``benchmarks/short_letters.py``, issue 28). These letters show it that side of
mail: one to four lines, with the line as the subject, a "Re:" reply (sometimes quoting the
letter it answers) or a topic; with or without a greeting and a name; from a free-mail or a
company address; a Message-ID on the sender's domain, on the mail provider's host or none;
plain text, sometimes with an HTML copy; never a link; English and Russian.

The lines are pochta's own: none of them is one of ``benchmarks/short_letters.py``'s held-out
lines. They are TRAINING letters, never an evaluation set; their words do not enter the token
table (``pochta_factory.training.TOKENS_FROM_GENERATED``): they teach the model's structural
columns only.

    letters(count, seed, times) -> list[Generated]   # kind "personal"; same seed = same bytes
"""

from __future__ import annotations

import datetime
import random
from collections.abc import Sequence
from email.message import EmailMessage
from email.policy import SMTP
from email.utils import format_datetime

from pochta.types import Envelope
from pochta_factory.legit import words
from pochta_factory.legit.compose import Person, person

KIND = "personal"
SEED = 2027  # not legit.SEED: the commercial letters stay byte for byte as they were
COMPANY_SHARE = 0.35  # the share of senders writing from a company address

LINES = {
    "en": (
        "Got your message, will reply tonight.",
        "I left the keys with the neighbour.",
        "Are you free on Saturday afternoon?",
        "Thank you so much for yesterday.",
        "Could you send me the draft again?",
        "I will be in the office after lunch.",
        "No rush, whenever you have a moment.",
        "Let's talk about it on Monday.",
        "The train is delayed, I will be there soon.",
        "Did you get the parcel?",
        "Great news, congratulations!",
        "I agree with your changes.",
        "Can you pick up the kids today?",
        "Here are my notes from the call.",
        "Mum says hello.",
        "I fixed the typo in the second paragraph.",
        "We are out of milk.",
        "Yes, that works for me.",
        "Sorry, I missed your call.",
        "Please forward this to Tom.",
        "Where did we put the tent?",
        "I booked the table for seven.",
        "Dinner at our place on Friday?",
        "Just checking that you arrived safely.",
        "I think the second option is better.",
        "Can you have a look before I send it?",
        "The plumber comes tomorrow morning.",
        "Not sure yet, I will let you know.",
        "Here is the recipe I promised.",
        "Good luck with the interview!",
        "I have updated the spreadsheet.",
        "Thanks for the quick answer.",
        "Shall we meet at the station?",
        "The draft looks fine to me.",
        "I'm working from home today.",
        "Could you remind me of the address?",
        "Done, see the corrected version below.",
        "Have a safe flight.",
        "My laptop died, I'll call you instead.",
        "Nice to hear from you again.",
    ),
    "ru": (
        "Получил, спасибо, вечером отвечу.",
        "Ты свободна в субботу?",
        "Я буду в офисе после обеда.",
        "Перешли, пожалуйста, Саше.",
        "Давай обсудим в понедельник.",
        "Поезд задерживается, скоро буду.",
        "Посылку получила?",
        "Поздравляю, отличная новость!",
        "С правками согласен.",
        "Заберёшь детей сегодня?",
        "Вот мои заметки после звонка.",
        "Извини, пропустил твой звонок.",
        "Я забронировал столик на семь.",
        "Ужин у нас в пятницу?",
        "Напиши, как доехала.",
        "Мне кажется, второй вариант лучше.",
        "Глянь, пожалуйста, перед отправкой.",
        "Пока не знаю, позже скажу.",
        "Вот рецепт, как обещала.",
        "Удачи на собеседовании!",
        "Обновил таблицу.",
        "Спасибо за быстрый ответ.",
        "Встретимся у вокзала?",
        "Черновик меня устраивает.",
        "Сегодня работаю из дома.",
        "Напомни адрес, пожалуйста.",
        "Исправил, новая версия ниже.",
        "Хорошего полёта!",
        "Рада снова тебя слышать.",
        "Ключи оставил у соседки.",
    ),
}  # fmt: skip
MORE = {
    "en": (
        "Let me know what you think.", "Talk soon.", "Speak tomorrow.",
        "It can wait until next week.", "Thanks again.", "Hope you are well.",
        "Give my love to everyone.", "The rest is unchanged.",
    ),
    "ru": (
        "Напиши, что думаешь.", "До связи.", "Созвонимся завтра.", "Это может подождать.",
        "Ещё раз спасибо.", "Надеюсь, у тебя всё хорошо.", "Всем привет.",
    ),
}  # fmt: skip
TOPICS = {
    "en": ("weekend", "tomorrow", "the draft", "notes", "dinner", "quick question", "keys",
           "the trip", "Saturday", "hello", "plans", "the flat", "photos", "update"),
    "ru": ("выходные", "завтра", "черновик", "заметки", "ужин", "вопрос", "ключи", "поездка",
           "суббота", "привет", "планы", "квартира", "фото", "новости"),
}  # fmt: skip
WROTE = {"en": "On {date}, {name} wrote:", "ru": "{date}, {name} написал(а):"}
SIGN = {"en": ("Thanks,", "Best,", "Cheers,", "Regards,", ""),
        "ru": ("Спасибо,", "Обнимаю,", "С уважением,", "")}  # fmt: skip
_COMPANIES = ("northfield", "bluehill", "lakeside", "greenway", "stonebridge", "ridgeline",
              "silverline", "westbrook", "oakwood", "brightwater", "kedr", "volna", "sever",
              "zvezda", "rassvet", "granit")  # fmt: skip
_TLDS = {"en": (".com", ".co.uk", ".io", ".net", ".org"), "ru": (".ru", ".ru", ".com", ".su")}
_MAILERS = ("Thunderbird", "Apple Mail", "Microsoft Outlook 16.0", "K-9 Mail", "Mutt/2.2",
            "Evolution 3.44")  # fmt: skip


def _sender(rng: random.Random, lang: str) -> tuple[Person, str]:
    """A person and the host their mail leaves from (their provider's or company's)."""
    p = person(rng, lang)
    local, _, domain = p.email.partition("@")
    if rng.random() < COMPANY_SHARE:
        domain = rng.choice(_COMPANIES) + rng.choice(_TLDS[lang])
        p = Person(p.first, p.last, f"{local.replace('.', '', rng.random() < 0.3)}@{domain}")
        host = f"{rng.choice(('mail', 'smtp', 'mx', 'exchange'))}.{domain}"
    else:
        host = f"{rng.choice(('smtp', 'mail', 'out', 'relay'))}{rng.randrange(1, 30)}.{domain}"
    return p, host


def _body(rng: random.Random, lang: str, line: str, frm: Person, to: Person, reply: bool,
          when: datetime.datetime) -> str:  # fmt: skip
    parts: list[str] = []
    if rng.random() < 0.5:
        parts.append(rng.choice(words.GREETING_NAMED[lang]).format(name=to.first))
    text = line
    if rng.random() < 0.35:
        text += " " + rng.choice(MORE[lang])
    parts.append(text)
    if rng.random() < 0.6:
        sign = rng.choice(SIGN[lang])
        parts.append(f"{sign}\n{frm.first}" if sign else frm.first)
    body = "\n\n".join(parts) + "\n"
    if reply and rng.random() < 0.5:
        before = when - datetime.timedelta(hours=rng.randrange(1, 48))
        quoted = rng.choice(LINES[lang])
        body += "\n" + WROTE[lang].format(date=format_datetime(before), name=to.full) + "\n"
        body += f"> {quoted}\n"
    return body


def letter(rng: random.Random, when: datetime.datetime) -> tuple[bytes, Envelope, str, str]:
    """One personal letter: its bytes, envelope, language and the sender's domain."""
    lang = "ru" if rng.random() < 0.4 else "en"
    frm, host = _sender(rng, lang)
    to = person(rng, lang)
    line = rng.choice(LINES[lang])
    way = rng.randrange(3)
    reply = way == 1
    if way == 0:
        subject = line[: rng.choice((20, 30, 60))].rstrip()
    elif reply:
        subject = "Re: " + rng.choice((line[:24].rstrip(), rng.choice(TOPICS[lang])))
    else:
        subject = rng.choice(TOPICS[lang])
        subject = subject[0].upper() + subject[1:]
    domain = frm.email.partition("@")[2]
    ip = f"{rng.randrange(11, 220)}.{rng.randrange(0, 255)}.{rng.randrange(0, 255)}."
    ip += str(rng.randrange(2, 250))
    msg = EmailMessage(policy=SMTP)
    arrived = when + datetime.timedelta(seconds=rng.randrange(1, 60))
    msg["Return-Path"] = f"<{frm.email}>"
    msg["Received"] = (
        f"from {host} ({host} [{ip}]) by mx{rng.randrange(1, 5)}.{to.email.partition('@')[2]} "
        f"with ESMTP id {rng.getrandbits(48):x} for <{to.email}>; {format_datetime(arrived)}"
    )
    msg["From"] = f"{frm.full} <{frm.email}>" if rng.random() < 0.85 else frm.email
    msg["To"] = f"{to.full} <{to.email}>" if rng.random() < 0.5 else to.email
    msg["Subject"] = subject
    zone = datetime.timezone(datetime.timedelta(hours=rng.choice((-5, 0, 1, 3))))
    msg["Date"] = format_datetime(when.astimezone(zone))
    where = rng.random()
    token = f"{rng.getrandbits(64):x}.{rng.getrandbits(24):x}"
    if where < 0.55:
        msg["Message-ID"] = f"<{token}@{domain}>"
    elif where < 0.85:
        msg["Message-ID"] = f"<{token}@{host}>"
    elif where < 0.95:
        msg["Message-ID"] = f"<{token}@{rng.choice(('localhost', 'laptop.home', 'pc01'))}>"
    if reply:
        ref = f"<{rng.getrandbits(64):x}@{to.email.partition('@')[2]}>"
        msg["In-Reply-To"] = ref
        msg["References"] = ref
    if rng.random() < 0.4:
        msg["User-Agent"] = rng.choice(_MAILERS)
    body = _body(rng, lang, line, frm, to, reply, when)
    msg.set_content(body, charset="utf-8", cte=rng.choice(("8bit", "quoted-printable")))
    if rng.random() < 0.3:
        paras = "".join(f"<div>{p.replace(chr(10), '<br>')}</div>" for p in body.split("\n\n"))
        msg.add_alternative(f"<html><body>{paras}</body></html>\n", subtype="html")
        msg.set_boundary(f"=_{rng.getrandbits(96):024x}")  # the library's own is random
    return msg.as_bytes(), Envelope(ip=ip, sender=frm.email, recipients=(to.email,)), lang, domain


Made = tuple[float, bytes, Envelope, str, str]  # arrival, bytes, envelope, language, domain


def letters(
    count: int, *, seed: int = SEED, times: Sequence[float] = (), start: float = 0.0,
    end: float = 0.0,
) -> list[Made]:  # fmt: skip
    """``count`` letters as (arrival, bytes, envelope, language, sender's domain), sorted by
    arrival; arrival times drawn from ``times`` with up to a day's jitter, else uniform
    between ``start`` and ``end``."""
    rng = random.Random(seed)
    pool = sorted(times)
    out = []
    for _ in range(count):
        at = rng.choice(pool) + rng.uniform(-43_200, 43_200) if pool else rng.uniform(start, end)
        raw, env, lang, domain = letter(rng, datetime.datetime.fromtimestamp(at, datetime.UTC))
        out.append((at, raw, env, lang, domain))
    out.sort(key=lambda x: x[0])
    return out
