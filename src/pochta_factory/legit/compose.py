"""What one generated letter says: its subject and blocks, by kind and language. Pure.

A letter is a list of :class:`Block` (heading, paragraph, button, item rows, a summary table,
an image, small print) that :mod:`pochta_factory.legit.render` turns into HTML and
plain text. Every choice comes from the ``random.Random`` passed in.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import random
import urllib.parse
from dataclasses import dataclass, field

from pochta_factory.legit import words
from pochta_factory.legit.orgs import Org


@dataclass
class Block:
    kind: str  # heading, para, button, items, summary, image, small, link
    text: str = ""
    url: str = ""
    rows: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class Content:
    subject: str
    preheader: str
    blocks: list[Block]
    footer: list[Block]
    bulk: bool  # a mailing (List-Unsubscribe, Precedence) rather than a service message
    attachments: list[tuple[str, str, bytes]] = field(default_factory=list)  # name, type, data
    unsubscribe: str = ""
    headers: list[tuple[str, str]] = field(default_factory=list)  # more fields (list servers)
    text_only: bool = False  # sent as plain text whatever the sender's layout
    sender: str = ""  # the From address when it is not the organization's mailbox
    sender_name: str = ""
    bounce: str = ""  # the envelope sender when it is not the sender's ESP's (a list server)
    to: str = ""  # the To field when it is not the recipient (a list, undisclosed recipients)


@dataclass
class Person:
    first: str
    last: str
    email: str

    @property
    def full(self) -> str:
        return f"{self.first} {self.last}"


def person(rng: random.Random, lang: str) -> Person:
    first = rng.choice(words.FIRST_NAMES[lang])
    last = rng.choice(words.LAST_NAMES[lang])
    if lang == "ru" and first[-1] in "ая" and first not in ("Никита",):
        last = last + "а"  # a woman's surname
    lat_first = words.LATIN.get(first, first).lower()
    lat_last = words.LATIN.get(last.rstrip("а") if lang == "ru" else last, last).lower()
    style = rng.randrange(4)
    local = (
        f"{lat_first}.{lat_last}",
        f"{lat_first[0]}{lat_last}",
        f"{lat_first}{rng.randrange(10, 99)}",
        f"{lat_last}.{lat_first[0]}",
    )[style]
    return Person(first, last, f"{local}@{rng.choice(words.MAILBOX_DOMAINS)}")


class Writer:
    """Fills one letter's slots consistently (the same order number, date, brand...)."""

    def __init__(self, rng: random.Random, org: Org, to: Person, when: datetime.datetime):
        self.rng = rng
        self.org = org
        self.lang = org.lang
        self.to = to
        self.when = when
        self.order = str(rng.randrange(10_000, 99_999_999))
        self.slots = {
            "brand": org.brand,
            "name": to.first,
            "first": rng.choice(words.FIRST_NAMES[self.lang]),
            "email": to.email,
            "order": self.order,
            "date": self.day(rng.randrange(1, 20)),
            "weekday": words.WEEKDAYS[self.lang][(when.weekday() + 2) % 7],
            "month": words.MONTHS["en" if self.lang == "en" else "ru_nom"][when.month - 1],
            "month_nom": words.MONTHS["ru_nom"][when.month - 1],
            "topic": rng.choice(words.TOPICS[self.lang]),
            "event": rng.choice(words.EVENTS[self.lang]),
            "percent": str(rng.choice((10, 15, 20, 25, 30, 40, 50))),
            "n": str(rng.randrange(3, 9)),
            "issue": str(rng.randrange(12, 480)),
            "domain": org.domain,
            "city": rng.choice(words.CITIES[self.lang]),
            "category": rng.choice(words.CATEGORIES[self.lang]),
            "device": rng.choice(words.TEXT[self.lang]["devices"]),
            "plan": rng.choice(words.TEXT[self.lang]["plans"]),
            "last4": f"{rng.randrange(0, 10_000):04d}",
            "carrier": "",
            "amount": self.money(rng.choice((9.99, 14.5, 29, 49.9, 120, 390, 1490, 2750))),
        }
        self.currency = rng.choice(("$", "$", "€", "£")) if self.lang == "en" else "₽"
        if org.domain.endswith(".co.uk"):
            self.currency = "£"
        self.slots["amount"] = self.money(rng.choice((9.99, 14.5, 29, 49.9, 120, 390, 1490)))

    # -- slots --------------------------------------------------------------------------------
    def day(self, ahead: int) -> str:
        d = self.when + datetime.timedelta(days=ahead)
        if self.lang == "en":
            month = words.MONTHS["en"][d.month - 1]
            return self.rng.choice((f"{month} {d.day}", f"{d.day} {month}", f"{d.month}/{d.day}"))
        return self.rng.choice(
            (f"{d.day} {words.MONTHS['ru'][d.month - 1]}", f"{d.day:02d}.{d.month:02d}")
        )

    def money(self, value: float) -> str:
        cur = getattr(self, "currency", "$")  # set after the first amounts
        if self.lang == "ru":
            value = round(value * self.rng.choice((10, 30, 80)))
            text = f"{int(value):,}".replace(",", "\u00a0")
            return self.rng.choice((f"{text} ₽", f"{text} руб.", f"{text}\u00a0₽"))
        text = f"{value:,.2f}"
        return self.rng.choice((f"{cur}{text}", f"{cur}{text}", f"{text} {cur}"))

    def fill(self, template: str, **more: str) -> str:
        return template.format(**{**self.slots, **more})

    def say(self, slot: str, **more: str) -> str:
        return self.fill(self.rng.choice(words.TEXT[self.lang][slot]), **more)

    # -- links --------------------------------------------------------------------------------
    def token(self, n: int) -> str:
        raw = hashlib.blake2b(str(self.rng.random()).encode(), digest_size=32).digest()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")[:n]

    def page(self, path: str) -> str:
        org = self.org
        if org.site:
            return f"https://{org.site}/{path}"
        host = self.rng.choice((*org.links, "www", "")) if org.links else "www"
        scheme = "https" if self.rng.random() < 0.85 and org.era != "2002" else "http"
        return f"{scheme}://{host + '.' if host else ''}{org.domain}/{path}"

    def link(self, path: str, tracked: float) -> str:
        """A link to one of the sender's pages, through its ESP's click tracking with the
        chance ``tracked``."""
        url = self.page(path)
        esp = self.org.esp
        if not esp.click or self.org.site or self.rng.random() >= tracked:
            if self.rng.random() < 0.5 and self.org.era != "2002":
                medium = self.rng.choice(("newsletter", "email", "trigger"))
                url += f"?utm_source=email&utm_medium={medium}&utm_campaign={self.token(6)}"
            return url
        return esp.click.format(
            domain=self.org.domain,
            id=self.rng.randrange(10_000, 9_999_999),
            url=urllib.parse.quote(url, safe=""),
            urlq=urllib.parse.quote(url, safe=""),
            token=self.token(40),
            token16=self.token(16),
            token8=self.token(8),
            brandslug=self.org.domain.split(".")[0],
            n=self.rng.randrange(1, 30),
        )

    def greeting(self) -> str:
        if self.rng.random() < 0.6:
            return self.fill(self.rng.choice(words.GREETING_NAMED[self.lang]))
        return self.fill(self.rng.choice(words.GREETING_PLAIN[self.lang]))

    def image(self, name: str) -> Block:
        host = self.rng.choice(("cdn", "img", "static", "images"))
        return Block("image", self.org.brand, f"https://{host}.{self.org.domain}/{name}.png")


def prose(w: Writer, low: int, high: int) -> str:
    """A paragraph of ``low`` to ``high - 1`` sentences from the phrase banks."""
    rng = w.rng
    pool = [*words.BLURBS[w.lang], *words.PROSE[w.lang]]
    return " ".join(w.fill(p) for p in rng.sample(pool, min(len(pool), rng.randrange(low, high))))


def _signoff(w: Writer) -> list[Block]:
    return [Block("para", w.say("signoff") + "\n" + w.say("team"))]


def _footer(w: Writer, bulk: bool) -> tuple[list[Block], str]:
    out = []
    unsubscribe = ""
    if bulk:
        out.append(Block("small", w.say("footer_subscribed")))
        unsubscribe = w.link(f"unsubscribe?u={w.token(12)}", 0.3)
        out.append(Block("link", w.say("footer_unsubscribe"), unsubscribe))
    else:
        out.append(Block("small", w.say("footer_transactional")))
    if w.org.address:
        out.append(Block("small", w.org.address))
    if w.rng.random() < 0.4:
        out.append(
            Block(
                "link",
                w.rng.choice(
                    (
                        "Privacy",
                        "Privacy policy",
                        "Конфиденциальность" if w.lang == "ru" else "Terms",
                    )
                ),
                w.page("privacy"),
            )
        )
    return out, unsubscribe


def newsletter(w: Writer) -> Content:
    rng = w.rng
    sale = rng.random() < 0.35
    blocks: list[Block] = []
    if rng.random() < 0.7:
        blocks.append(w.image("logo"))
    blocks.append(Block("para", w.greeting()))
    blocks.append(Block("para", w.say("sale_intro" if sale else "newsletter_intro")))
    for _ in range(rng.randrange(2, 7)):
        if sale or (w.org.category == "shop" and rng.random() < 0.6):
            product = rng.choice(words.PRODUCTS[w.lang])
            price = w.money(rng.choice((9.5, 14.99, 24, 39.9, 59, 89, 129)))
            if rng.random() < 0.5:
                blocks.append(w.image(f"p/{rng.randrange(1000, 9999)}"))
            blocks.append(Block("heading", product))
            blocks.append(Block("para", price))
            blocks.append(
                Block("button", w.say("shop_now"), w.link(f"p/{rng.randrange(100, 999)}", 0.8))
            )
        else:
            topic = rng.choice(words.TOPICS[w.lang])
            blocks.append(Block("heading", topic[0].upper() + topic[1:]))
            n = rng.choice((1, 1, 2, 3))
            blocks.append(Block("para", " ".join(rng.sample(words.BLURBS[w.lang], n))))
            if rng.random() < 0.4:  # a longer piece: more of the story in the letter itself
                blocks.append(Block("para", prose(w, 2, 8)))
            blocks.append(
                Block("link", w.say("read_more"), w.link(f"blog/{w.token(8).lower()}", 0.8))
            )
    if rng.random() < 0.5:
        blocks.append(Block("para", w.say("help")))
    blocks += _signoff(w) if rng.random() < 0.5 else []
    footer, unsubscribe = _footer(w, True)
    subject = w.fill(rng.choice(words.SUBJECTS[w.lang]["newsletter"]))
    return Content(
        subject[0].upper() + subject[1:],
        rng.choice(words.BLURBS[w.lang]),
        blocks,
        footer,
        True,
        unsubscribe=unsubscribe,
    )


def _order_rows(w: Writer) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    rng = w.rng
    items = []
    total = 0.0
    for product in rng.sample(words.PRODUCTS[w.lang], rng.randrange(1, 5)):
        qty = rng.choice((1, 1, 1, 2, 3))
        price = rng.choice((4.99, 12.5, 19, 24.99, 39, 64.5, 89))
        total += qty * price
        items.append((f"{product} × {qty}", w.money(qty * price)))
    summary = [(w.say("subtotal"), w.money(total))]
    if rng.random() < 0.6:
        summary.append((w.say("shipping_cost"), w.money(rng.choice((0, 3.99, 4.5, 7)))))
    if rng.random() < 0.4:
        summary.append((w.say("tax"), w.money(total * 0.2)))
    summary.append((w.say("total"), w.money(total * 1.1)))
    summary.append(("", w.say("paid_with")))
    return items, summary


def receipt(w: Writer) -> Content:
    rng = w.rng
    items, summary = _order_rows(w)
    blocks = [w.image("logo")] if rng.random() < 0.6 else []
    blocks += [
        Block("para", w.greeting()),
        Block("para", w.say("receipt_intro")),
        Block("items", rows=items),
        Block("summary", rows=summary),
    ]
    if rng.random() < 0.5:
        city = rng.choice(words.CITIES[w.lang])
        street = rng.choice(words.STREETS[w.lang])
        blocks.append(
            Block(
                "para", f"{w.say('ship_to')}: {w.to.full}, {street} {rng.randrange(1, 99)}, {city}"
            )
        )
    blocks.append(Block("button", w.say("view_order"), w.link(f"orders/{w.order}", 0.4)))
    blocks.append(Block("para", w.say("help")))
    blocks += _signoff(w)
    footer, _ = _footer(w, False)
    attachments = []
    if rng.random() < 0.25:
        name = ("receipt" if w.lang == "en" else "chek") + f"_{w.order}.pdf"
        attachments.append((name, "application/pdf", _pdf(rng)))
    return Content(
        w.fill(rng.choice(words.SUBJECTS[w.lang]["receipt"])),
        w.say("receipt_intro"),
        blocks,
        footer,
        False,
        attachments,
    )


def shipping(w: Writer) -> Content:
    rng = w.rng
    name, _, pattern = rng.choice(words.CARRIERS[w.lang])
    w.slots["carrier"] = name
    track = "".join(
        rng.choice("0123456789ABCDEFGHJKLMNPRSTUVWXYZ") for _ in range(rng.choice((10, 12, 14)))
    )
    items, _ = _order_rows(w)
    blocks = [w.image("logo")] if rng.random() < 0.5 else []
    blocks += [Block("para", w.greeting()), Block("para", w.say("shipping_intro"))]
    if pattern:
        label = "Tracking number" if w.lang == "en" else "Трек-номер"
        blocks.append(Block("summary", rows=[(label, track)]))
        blocks.append(Block("button", w.say("track"), pattern.format(track=track)))
    else:
        blocks.append(Block("button", w.say("track"), w.link(f"orders/{w.order}/tracking", 0.4)))
    if rng.random() < 0.6:
        blocks.append(Block("items", rows=[(n, "") for n, _ in items]))
    blocks.append(Block("para", w.say("help")))
    blocks += _signoff(w)
    footer, _ = _footer(w, False)
    return Content(
        w.fill(rng.choice(words.SUBJECTS[w.lang]["shipping"])),
        w.say("shipping_intro"),
        blocks,
        footer,
        False,
    )


_ACCOUNT = {
    "Confirm": ("account_confirm", "confirm", "verify"),
    "Password": ("account_password", "account_link", "security"),
    "Sign-in": ("account_signin", "account_link", "security/activity"),
    "Renewal": ("account_renewal", "account_link", "billing"),
    "Welcome": ("account_welcome", "account_link", "start"),
    "Update": ("account_update", "account_link", "profile"),
}


def account(w: Writer) -> Content:
    rng = w.rng
    subjects = words.SUBJECTS[w.lang]["account"]
    i = rng.randrange(len(subjects))
    what = ("Confirm", "Password", "Sign-in", "Renewal", "Welcome", "Update", "Renewal",
            "Renewal")[i]  # fmt: skip
    text_slot, button, path = _ACCOUNT[what]
    blocks = [w.image("logo")] if rng.random() < 0.4 else []
    blocks += [Block("para", w.greeting()), Block("para", w.say(text_slot))]
    blocks.append(Block("button", w.say(button), w.link(f"{path}?t={w.token(24)}", 0.3)))
    if what in ("Password", "Sign-in", "Update"):
        blocks.append(Block("para", w.say("if_not_you")))
    if what == "Welcome":
        for _ in range(rng.randrange(2, 4)):
            topic = rng.choice(words.TOPICS[w.lang])
            blocks.append(
                Block(
                    "link", topic[0].upper() + topic[1:], w.link(f"help/{w.token(6).lower()}", 0.5)
                )
            )
    if rng.random() < 0.6:
        blocks.append(Block("para", w.say("help")))
    blocks += _signoff(w)
    footer, _ = _footer(w, False)
    return Content(w.fill(subjects[i]), w.say(text_slot), blocks, footer, False)


def event(w: Writer) -> Content:
    rng = w.rng
    blocks = [w.image("banner")] if rng.random() < 0.6 else []
    blocks += [Block("para", w.greeting()), Block("para", w.say("event_intro"))]
    start = rng.choice(("10:00", "12:30", "16:00", "18:30", "19:00"))
    blocks.append(Block("summary", rows=[
        ("Date" if w.lang == "en" else "Дата", w.slots["date"]),
        ("Time" if w.lang == "en" else "Время", start),
        ("Place" if w.lang == "en" else "Место", rng.choice(("Online", "Zoom", w.slots["city"]))
         if w.lang == "en" else rng.choice(("онлайн", w.slots["city"]))),
    ]))  # fmt: skip
    agenda = rng.sample(words.TEXT[w.lang]["agenda"], rng.randrange(2, 5))
    blocks.append(
        Block(
            "items", rows=[(w.fill(a, topic=rng.choice(words.TOPICS[w.lang])), "") for a in agenda]
        )
    )
    blocks.append(Block("button", w.say("register"), w.link(f"events/{w.token(6).lower()}", 0.7)))
    if rng.random() < 0.5:
        blocks.append(
            Block("link", w.say("calendar"), w.link(f"events/{w.token(6).lower()}.ics", 0.3))
        )
    blocks += _signoff(w)
    bulk = rng.random() < 0.7
    footer, unsubscribe = _footer(w, bulk)
    attachments = []
    if rng.random() < 0.3:
        attachments.append(("invite.ics", "text/calendar", _ics(w, start)))
    return Content(
        w.fill(rng.choice(words.SUBJECTS[w.lang]["event"])),
        w.say("event_intro"),
        blocks,
        footer,
        bulk,
        attachments,
        unsubscribe,
    )


def bill(w: Writer) -> Content:
    rng = w.rng
    blocks = [w.image("logo")] if rng.random() < 0.5 else []
    blocks += [Block("para", w.greeting()), Block("para", w.say("bill_intro"))]
    rows = [(("Account" if w.lang == "en" else "Лицевой счёт"), str(rng.randrange(10**7, 10**9)))]
    rows.append((("Amount due" if w.lang == "en" else "К оплате"), w.slots["amount"]))
    if rng.random() < 0.6:
        rows.append(
            (("Due date" if w.lang == "en" else "Оплатить до"), w.day(rng.randrange(7, 25)))
        )
    blocks.append(Block("summary", rows=rows))
    blocks.append(Block("button", w.say("pay"), w.link("account/bills", 0.3)))
    blocks.append(Block("para", w.say("help")))
    blocks += _signoff(w)
    footer, _ = _footer(w, False)
    attachments = []
    if rng.random() < 0.3:
        attachments.append(
            (
                ("statement" if w.lang == "en" else "schet") + f"_{w.order}.pdf",
                "application/pdf",
                _pdf(rng),
            )
        )
    return Content(
        w.fill(rng.choice(words.SUBJECTS[w.lang]["bill"])),
        w.say("bill_intro"),
        blocks,
        footer,
        False,
        attachments,
    )


_GOV = {
    ("ru", "tax"): (
        (
            "Уведомление о поступлении документа в личный кабинет",
            "Налоговое уведомление за {year} год",
        ),
        (
            "Уважаемый(ая) {full}! В ваш личный кабинет налогоплательщика поступил документ: "
            "налоговое уведомление № {doc} от {date}. Сумма налога к уплате: {amount}. "
            "Уплатить налог необходимо не позднее {due}.",
            "Уважаемый(ая) {full}! Ваше обращение № {doc} рассмотрено, ответ размещён в личном "
            "кабинете налогоплательщика.",
        ),
        "lkfl2/lkfl/documents",
    ),
    ("ru", "portal"): (
        (
            "Заявление № {doc} принято",
            "Изменился статус заявления № {doc}",
            "Запись на приём подтверждена",
        ),
        (
            "{first}, ваше заявление № {doc} принято ведомством. Срок рассмотрения — до {due}. "
            "Статус можно отслеживать в личном кабинете.",
            "{first}, вы записаны на приём {date} в {time}. Возьмите с собой паспорт.",
        ),
        "order/{doc}",
    ),
    ("ru", "pension"): (
        ("Сведения о состоянии индивидуального лицевого счёта", "Ответ на ваше обращение № {doc}"),
        (
            "Уважаемый(ая) {full}! Сведения о состоянии вашего индивидуального лицевого счёта "
            "сформированы и доступны в личном кабинете.",
            "Уважаемый(ая) {full}! По вашему обращению № {doc} от {date} подготовлен ответ.",
        ),
        "lk/documents",
    ),
    ("ru", "city"): (
        ("Показания приборов учёта приняты", "Начисления за ЖКУ за {month}"),
        (
            "{first}, показания счётчиков воды за {month} приняты. Спасибо!",
            "{first}, единый платёжный документ за {month} сформирован. Сумма к оплате: "
            "{amount}. Оплатить можно до {due}.",
        ),
        "ru/services/epd",
    ),
    ("ru", "bank"): (
        ("Выписка по счёту за {month}", "Ваш кешбэк за {month}", "Изменения в тарифах с {due}"),
        (
            "{first}, выписка по счёту ••{last4} за {month} готова. Её можно скачать в личном "
            "кабинете или в приложении.",
            "{first}, за {month} вам начислено {amount} кешбэка. Спасибо, что пользуетесь картой.",
            "{first}, сообщаем об изменении условий обслуживания с {due}. Подробности — на "
            "сайте банка.",
        ),
        "documents",
    ),
    ("en", "portal"): (
        (
            "We've received your application",
            "Your application reference {doc}",
            "Your appointment is confirmed",
        ),
        (
            "Dear {full}, we have received your application. Your reference number is {doc}. "
            "We will contact you by {due}.",
            "Dear {full}, your appointment on {date} at {time} is confirmed. Bring your "
            "reference number {doc}.",
        ),
        "track-application",
    ),
    ("en", "tax"): (
        ("Your tax return has been received", "You have a new message from HMRC"),
        (
            "Dear {full}, we have received your Self Assessment tax return for the {year} tax "
            "year. Your submission reference is {doc}.",
            "Dear {full}, there is a new message for you in your personal tax account. Sign in "
            "to read it.",
        ),
        "personal-account/messages",
    ),
    ("en", "pension"): (
        ("A new message is available in your my Social Security account",),
        (
            "Dear {full}, a new document is available in your my Social Security account. To "
            "protect your privacy, we do not include personal information in email.",
        ),
        "myaccount/",
    ),
    ("en", "city"): (
        ("Your property tax bill is ready", "Your street parking permit was renewed"),
        (
            "Dear {full}, your quarterly property tax bill of {amount} is available online. "
            "Payment is due by {due}.",
            "Dear {full}, your resident parking permit has been renewed until {due}.",
        ),
        "departments/assessing",
    ),
}


def government(w: Writer) -> Content:
    rng = w.rng
    subjects, texts, path = _GOV[(w.lang, w.org.extra["what"])]
    i = rng.randrange(len(subjects))
    slots = {
        "full": w.to.full,
        "doc": f"{rng.randrange(10**6, 10**9)}",
        "year": str(w.when.year - 1),
        "due": w.day(rng.randrange(14, 60)),
        "time": rng.choice(("09:40", "11:15", "14:00", "16:30")),
    }
    blocks = [Block("para", w.fill(texts[min(i, len(texts) - 1)], **slots))]
    blocks.append(
        Block(
            "button",
            "Личный кабинет" if w.lang == "ru" else "Sign in",
            w.link(path.format(doc=slots["doc"]), 0.0),
        )
    )
    if rng.random() < 0.6:
        blocks.append(
            Block(
                "small",
                "Это письмо сформировано автоматически, отвечать на него не нужно."
                if w.lang == "ru"
                else "This is an automated message. Please do not reply.",
            )
        )
    attachments = []
    if rng.random() < 0.2:
        attachments.append(
            (
                f"{'uvedomlenie' if w.lang == 'ru' else 'notice'}_{slots['doc']}.pdf",
                "application/pdf",
                _pdf(rng),
            )
        )
    return Content(w.fill(subjects[i], **slots), "", blocks, [], False, attachments)


COMPOSERS = {
    "newsletter": newsletter,
    "receipt": receipt,
    "shipping": shipping,
    "account": account,
    "event": event,
    "bill": bill,
    "government": government,
}


def _pdf(rng: random.Random) -> bytes:
    body = bytes(rng.randrange(256) for _ in range(rng.randrange(800, 4000)))
    return (
        b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<< /Type /Catalog >>\nendobj\n"
        + body
        + b"\n%%EOF\n"
    )


def _ics(w: Writer, start: str) -> bytes:
    d = w.when + datetime.timedelta(days=3)
    stamp = d.strftime("%Y%m%d") + "T" + start.replace(":", "") + "00"
    return (
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//" + w.org.brand + "//EN\r\nBEGIN:VEVENT\r\n"
        f"UID:{w.token(16)}@{w.org.domain}\r\nDTSTART:{stamp}\r\nSUMMARY:{w.slots['event']}\r\n"
        "END:VEVENT\r\nEND:VCALENDAR\r\n"
    ).encode()
