"""The commercial mail a real mailbox gets besides receipts and notices, as it looked around
2002 and today: HTML-heavy promotions (capital headings, prices, "click here", many links and
images), deal alerts, plain-text digests, travel notices, software announcements, press
releases, mailing-list announcements and automated alerts and reports. Pure.

Every composer takes a :class:`~pochta.antispam.model.legit.compose.Writer` and returns a
:class:`~pochta.antispam.model.legit.compose.Content`; every choice comes from the writer's
``random.Random``. The phrase banks are here, in English and Russian.
"""

from __future__ import annotations

import random

from pochta.antispam.model.legit import words
from pochta.antispam.model.legit.compose import Block, Content, Writer, _footer, _signoff

Bank = dict[str, tuple[str, ...]]


def _pick(w: Writer, bank: dict[str, Bank], slot: str, **more: str) -> str:
    return w.fill(w.rng.choice(bank[w.lang][slot]), **more)


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _prose(w: Writer, low: int, high: int) -> str:
    """A paragraph of ``low`` to ``high - 1`` sentences from the phrase banks."""
    rng = w.rng
    pool = [*words.BLURBS[w.lang], *PROSE[w.lang]]
    return " ".join(w.fill(p) for p in rng.sample(pool, min(len(pool), rng.randrange(low, high))))


def _bulk_to(w: Writer) -> str:
    """Most mailings name the recipient; some, especially around 2002, do not."""
    r = w.rng.random()
    if r < (0.15 if w.org.era == "2002" else 0.04):
        return "undisclosed-recipients:;"
    if r < (0.25 if w.org.era == "2002" else 0.06):
        return f"{w.org.brand if w.org.brand.isascii() else 'Subscribers'} " \
            f"<subscribers@{w.org.domain}>"
    return ""


PROSE: dict[str, tuple[str, ...]] = {
    "en": (
        "We have been working on this for a while, and we think you will like the result.",
        "Many of you wrote to us last month with questions, and we have tried to answer them "
        "all here.",
        "As always, the full story is on our web site, with photos and a few extras.",
        "Our team tested every item before it went on the site.",
        "If you have ideas for a future issue, reply to this message; we read every letter.",
        "Prices include tax; delivery times depend on where you live.",
        "The offer is open to all customers in {city} and online.",
        "Our shops close on public holidays, but orders placed online ship as usual.",
        "Thanks to everyone who sent in photos from {event}.",
        "Next month we will look at {topic}, so stay tuned.",
        "This season our buyers travelled further than ever to find new makers.",
        "Members who sign in before {date} get free delivery on their next order.",
    ),
    "ru": (
        "Мы долго работали над этим и надеемся, что результат вам понравится.",
        "В прошлом месяце вы прислали много вопросов — постарались ответить на все.",
        "Полная версия — на нашем сайте, с фотографиями и дополнениями.",
        "Каждый товар мы проверили перед тем, как выставить на сайт.",
        "Если у вас есть идеи для следующего выпуска, просто ответьте на это письмо.",
        "Цены указаны с учётом НДС, сроки доставки зависят от региона.",
        "Предложение действует в городе {city} и в интернет-магазине.",
        "В праздничные дни магазины закрыты, но заказы на сайте отправляются как обычно.",
        "В следующем месяце расскажем про {topic} — оставайтесь с нами.",
        "Участники клуба, вошедшие в личный кабинет до {date}, получат бесплатную доставку.",
    ),
}


def _code(rng: random.Random, n: int = 6) -> str:
    return "".join(rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ23456789") for _ in range(n))


PROMO: dict[str, Bank] = {
    "en": {
        "headline": (
            "{percent}% OFF EVERYTHING", "THE BIG {season} SALE", "LAST CHANCE: SALE ENDS TONIGHT",
            "NEW ARRIVALS ARE HERE", "MEMBERS-ONLY PREVIEW", "FREE SHIPPING THIS WEEKEND",
            "HOLIDAY GIFT GUIDE", "CLEARANCE: UP TO {percent}% OFF", "Our {season} Collection",
            "Just landed: new {category}", "Save big on {category}", "DOUBLE POINTS WEEK",
        ),
        "subject": (
            "{percent}% off everything - today only!", "FREE shipping + {percent}% off",
            "Last chance: our sale ends tonight", "New {category} just arrived",
            "{name}, your exclusive offer inside", "The {season} Sale starts NOW",
            "Don't miss out: up to {percent}% off {category}",
            "Gift ideas for everyone on your list",
            "Save {percent}% this weekend at {brand}", "Weekly specials from {brand}",
            "{brand} Hot Deals: {category} from {amount}", "Your coupon expires {date}",
        ),
        "lead": (
            "Save up to {percent}% on {category}. Offer ends {date}.",
            "This week only: take an extra {percent}% off sale items with code {code}.",
            "Shop our biggest sale of the season. Thousands of items reduced!",
            "Enjoy FREE standard shipping on orders over {amount}.",
            "Our buyers picked the best {category} of the season, at prices you'll love.",
            "As a valued customer, you get early access to our {season} sale.",
        ),
        "cta": ("Shop now", "Click here", "Shop the sale", "See all deals", "Click here to shop",
                "Get it now", "Order today", "View details"),
        "was": ("Was {old}, now {new}", "Reg. {old}  Sale {new}", "{new} (save {save})",
                "Only {new}!", "Now {new}", "{new}"),
        "fine": (
            "Offer valid through {date} while supplies last. Not valid on previous purchases.",
            "Prices and availability subject to change. See site for details.",
            "Discount applies to regular-priced items only. Cannot be combined with other offers.",
            "Free shipping applies to standard delivery within the continental US.",
        ),
        "browser": ("Having trouble viewing this email? Click here.",
                    "View this email in your browser", "Can't see the images? View online"),
        "forward": ("Forward to a friend", "Tell a friend"),
        "season": ("Spring", "Summer", "Fall", "Winter", "Holiday", "Back to School"),
    },
    "ru": {
        "headline": (
            "РАСПРОДАЖА ДО {percent}%", "ТОЛЬКО 3 ДНЯ: СКИДКИ НА {category_up}", "НОВАЯ КОЛЛЕКЦИЯ",
            "БЕСПЛАТНАЯ ДОСТАВКА В ВЫХОДНЫЕ", "ЧЁРНАЯ ПЯТНИЦА", "Новинки сезона",
            "Скидки на {category}", "ПОСЛЕДНИЙ ДЕНЬ АКЦИИ", "Двойные баллы всю неделю",
        ),
        "subject": (
            "Только до воскресенья: скидки до {percent}%", "{name}, для вас персональная скидка",
            "Новая коллекция уже в магазине", "Распродажа {category}: до -{percent}%",
            "Бесплатная доставка + подарок к заказу", "Последний день скидок!",
            "Промокод на {percent}% внутри", "Горячие предложения недели от {brand}",
        ),
        "lead": (
            "Скидки до {percent}% на {category} до {date}.",
            "Только на этой неделе — дополнительная скидка {percent}% по промокоду {code}.",
            "Бесплатная доставка при заказе от {amount}.",
            "Мы отобрали лучшие {category} сезона по выгодным ценам.",
            "Как постоянный покупатель, вы получаете доступ к распродаже раньше всех.",
        ),
        "cta": ("Купить", "Перейти в каталог", "Смотреть все скидки", "Подробнее", "Выбрать",
                "Нажмите здесь"),
        "was": ("Было {old}, стало {new}", "{new} вместо {old}", "Всего {new}!", "{new}"),
        "fine": (
            "Акция действует до {date} или до окончания товара. Подробности на сайте.",
            "Скидки не суммируются. Цены действительны для интернет-магазина.",
        ),
        "browser": ("Открыть письмо в браузере", "Если письмо отображается некорректно, "
                    "нажмите здесь"),
        "forward": ("Переслать другу",),
        "season": ("весенняя", "летняя", "осенняя", "зимняя", "новогодняя"),
    },
}  # fmt: skip


def _price_pair(w: Writer) -> tuple[str, str, str]:
    base = w.rng.choice((19.99, 24.5, 39, 49.95, 79, 99, 129, 199, 249, 399))
    cut = w.rng.choice((0.5, 0.6, 0.7, 0.75, 0.8))
    return w.money(base), w.money(base * cut), w.money(base * (1 - cut))


def promo(w: Writer) -> Content:
    """A promotional HTML letter: banner, a heading in capitals, a coupon, a grid of products
    with old and new prices, "click here" buttons, social links, an unsubscribe footer."""
    rng = w.rng
    code = _code(rng)
    more = {"code": code, "season": rng.choice(PROMO[w.lang]["season"]),
            "category_up": w.slots["category"].upper()}  # fmt: skip
    blocks: list[Block] = []
    if rng.random() < 0.5:
        blocks.append(Block("link", _pick(w, PROMO, "browser"), w.link("view/" + w.token(10), 0.5)))
    blocks.append(w.image("banner"))
    if rng.random() < 0.3:
        blocks.append(w.image(f"hero/{rng.randrange(100, 999)}"))
    blocks.append(Block("heading", _pick(w, PROMO, "headline", **more)))
    blocks.append(Block("para", _pick(w, PROMO, "lead", **more)))
    if rng.random() < 0.6:
        blocks.append(Block("para", _prose(w, 1, 8)))
    if rng.random() < 0.5:
        label = "Use code" if w.lang == "en" else "Промокод"
        blocks.append(Block("summary", rows=[(label, code)]))
    for _ in range(rng.randrange(3, 10)):
        old, new, save = _price_pair(w)
        if rng.random() < 0.8:
            blocks.append(w.image(f"p/{rng.randrange(1000, 99999)}"))
        product = rng.choice(words.PRODUCTS[w.lang])
        blocks.append(Block("heading", product.upper() if rng.random() < 0.3 else product))
        blocks.append(Block("para", _pick(w, PROMO, "was", old=old, new=new, save=save)))
        blocks.append(
            Block("button", _pick(w, PROMO, "cta"), w.link(f"p/{rng.randrange(100, 9999)}", 0.8))
        )
    blocks.append(Block("button", _pick(w, PROMO, "cta"), w.link("sale", 0.8)))
    if rng.random() < 0.6:
        blocks.append(Block("small", _pick(w, PROMO, "fine", **more)))
    if rng.random() < 0.5 and w.org.era != "2002":
        slug = w.org.domain.split(".")[0]
        for site in rng.sample(("facebook.com", "twitter.com", "instagram.com", "pinterest.com",
                                "youtube.com", "vk.com" if w.lang == "ru" else "x.com"), 3):
            blocks.append(Block("link", site.split(".")[0].title(), f"https://www.{site}/{slug}"))
    if rng.random() < 0.3:
        blocks.append(Block("link", _pick(w, PROMO, "forward"), w.link("forward", 0.5)))
    footer, unsubscribe = _footer(w, True)
    subject = _pick(w, PROMO, "subject", **more)
    if rng.random() < 0.15:
        subject = subject.upper()
    return Content(_cap(subject), _pick(w, PROMO, "lead", **more), blocks, footer, True,
                   unsubscribe=unsubscribe, to=_bulk_to(w))  # fmt: skip


DEAL: dict[str, Bank] = {
    "en": {
        "subject": (
            "Price alert: {product} is now {new}", "Fare alert: {city} to {city2} from {new}",
            "Today's deals: {n} picks under {amount}", "Deal of the day: {product}",
            "Price drop on an item you're watching", "Weekend getaways from {new}",
            "{n} hot deals you asked us to watch",
        ),
        "intro": (
            "Prices dropped on items on your watch list.",
            "Here are today's best deals, picked by our editors.",
            "You asked us to tell you when fares from {city} drop. They just did.",
            "Fresh deals, updated every morning. Quantities are limited.",
        ),
        "item": ("{product}: {new} (was {old})", "{product} - now {new}, save {save}",
                 "{city2} from {new} round trip", "{product} for {new}"),
        "cta": ("See deal", "Book now", "Get this deal", "View price history", "Details"),
        "foot": ("You set up this alert at {domain}. Change or stop your alerts any time.",
                 "Prices were correct at the time of sending and may change."),
    },
    "ru": {
        "subject": (
            "Снижение цены: {product} теперь {new}", "Билеты {city} — {city2} от {new}",
            "{n} выгодных предложений дня", "Товар дня: {product}",
            "Цена на товар из избранного снизилась",
        ),
        "intro": (
            "Цены на товары из вашего списка желаний снизились.",
            "Лучшие предложения дня по версии редакции.",
            "Вы просили сообщить, когда подешевеют билеты из города {city}. Сообщаем!",
        ),
        "item": ("{product}: {new} (было {old})", "{product} — {new}, выгода {save}",
                 "{city2} от {new} туда и обратно"),
        "cta": ("Смотреть", "Купить", "Забронировать", "Подробнее"),
        "foot": ("Вы подписались на уведомления на сайте {domain}. Отключить их можно в профиле.",
                 "Цены актуальны на момент отправки письма."),
    },
}  # fmt: skip


def deal(w: Writer) -> Content:
    """A deal or price alert: a few items with prices and links, text or HTML."""
    rng = w.rng
    cities = words.CITIES[w.lang]
    old, new, save = _price_pair(w)
    more = {"product": rng.choice(words.PRODUCTS[w.lang]), "old": old, "new": new,
            "save": save, "city2": rng.choice(cities)}  # fmt: skip
    blocks = [w.image("logo")] if rng.random() < 0.5 else []
    if rng.random() < 0.5:
        blocks.append(Block("para", w.greeting()))
    blocks.append(Block("para", _pick(w, DEAL, "intro", **more)))
    for _ in range(rng.randrange(2, 9)):
        old, new, save = _price_pair(w)
        item = {"product": rng.choice(words.PRODUCTS[w.lang]), "old": old, "new": new,
                "save": save, "city2": rng.choice(cities)}  # fmt: skip
        if rng.random() < 0.4:
            blocks.append(w.image(f"d/{rng.randrange(1000, 99999)}"))
        blocks.append(Block("para", _pick(w, DEAL, "item", **item)))
        blocks.append(Block("link", _pick(w, DEAL, "cta"), w.link(f"deal/{w.token(8)}", 0.7)))
    blocks.append(Block("small", _pick(w, DEAL, "foot")))
    footer, unsubscribe = _footer(w, True)
    return Content(_cap(_pick(w, DEAL, "subject", **more)), "", blocks, footer, True,
                   unsubscribe=unsubscribe, text_only=rng.random() < 0.25,
                   to=_bulk_to(w))  # fmt: skip


DIGEST: dict[str, Bank] = {
    "en": {
        "title": ("{brand} Weekly", "The {brand} Digest", "{brand} News", "{brand} Insider",
                  "{brand} Tips & Tricks"),
        "subject": ("{title}, Issue #{issue}", "{title} - {date}", "[{brand}] Weekly digest",
                    "{title}: {topic}", "{title} #{issue}: {topic}"),
        "inside": ("IN THIS ISSUE", "In this issue:", "CONTENTS", "This week:"),
        "sponsor": (
            "SPONSOR: Try {product} free for 30 days. Visit the site for details.",
            "This issue is brought to you by {product}. Readers save {percent}% this month.",
            "ADVERTISEMENT: {product} - the easy way to {topic}.",
        ),
        "sub": (
            "You are subscribed to {title} as {email}.",
            "You received this because you subscribed at {domain}.",
            "Copyright {year} {brand}. All rights reserved. Please forward this newsletter to "
            "friends, unchanged.",
        ),
        "unsub": ("To unsubscribe, visit {url}", "To change your subscription or unsubscribe: "
                  "{url}", "To unsubscribe, send a blank message to {leave}"),
    },
    "ru": {
        "title": ("Еженедельник {brand}", "Дайджест {brand}", "Новости {brand}",
                  "Рассылка «{brand}»"),
        "subject": ("{title}, выпуск №{issue}", "{title}: {topic}", "[{brand}] Дайджест недели"),
        "inside": ("В ЭТОМ ВЫПУСКЕ", "В выпуске:", "СОДЕРЖАНИЕ"),
        "sponsor": ("РЕКЛАМА: {product} — попробуйте бесплатно 30 дней.",
                    "Партнёр выпуска — {product}. Читателям скидка {percent}%."),
        "sub": ("Вы подписаны на рассылку «{title}» с адресом {email}.",
                "Вы получили это письмо, потому что подписались на сайте {domain}."),
        "unsub": ("Отписаться: {url}", "Чтобы отписаться, отправьте пустое письмо на {leave}"),
    },
}  # fmt: skip


def digest(w: Writer) -> Content:
    """A newsletter or digest, mostly plain text: a contents list, numbered items with a
    headline, a blurb and a link, sometimes a sponsor's paragraph, subscription small print."""
    rng = w.rng
    title = _pick(w, DIGEST, "title")
    topics = rng.sample(words.TOPICS[w.lang], rng.randrange(3, 8))
    rule = rng.choice(("=" * 60, "-" * 60, "*" * 50, "_" * 60, ""))
    blocks = [Block("heading", f"{title.upper()}  #{w.slots['issue']}  {w.slots['date']}")]
    if rule:
        blocks.append(Block("para", rule))
    blocks.append(Block("para", _pick(w, DIGEST, "inside") + "\n" + "\n".join(
        f"{i}. {_cap(t)}" for i, t in enumerate(topics, 1))))  # fmt: skip
    for i, topic in enumerate(topics, 1):
        if rule:
            blocks.append(Block("para", rule))
        head = f"{i}. {_cap(topic)}"
        blocks.append(Block("heading", head.upper() if rng.random() < 0.4 else head))
        blocks.append(Block("para", _prose(w, 2, 7)))
        blocks.append(Block("link", w.say("read_more"), w.link(f"{w.token(6).lower()}", 0.4)))
        if i == 2 and rng.random() < 0.4:
            sponsor = _pick(w, DIGEST, "sponsor", product=rng.choice(words.PRODUCTS[w.lang]))
            blocks.append(Block("para", sponsor))
            blocks.append(Block("link", "", w.link(f"sponsor/{rng.randrange(10, 99)}", 0.9)))
    url = w.page(f"newsletter/unsubscribe?e={w.token(10)}")
    leave = f"leave-{w.slots['issue']}-{w.token(6).lower()}@lists.{w.org.domain}"
    foot = [
        Block("small", _pick(w, DIGEST, "sub", title=title, year=str(w.when.year))),
        Block("small", _pick(w, DIGEST, "unsub", url=url, leave=leave)),
    ]
    subject = _pick(w, DIGEST, "subject", title=title, topic=_cap(rng.choice(topics)))
    return Content(subject, "", blocks, foot, True, unsubscribe=url,
                   text_only=rng.random() < 0.75, to=_bulk_to(w))  # fmt: skip


TRAVEL: dict[str, Bank] = {
    "en": {
        "subject": (
            "Your booking confirmation {ref}", "Check in now for your flight to {city2}",
            "Your trip to {city2} is coming up", "Your e-ticket receipt {ref}",
            "Flight schedule change: {flight}", "Your hotel reservation in {city2}",
            "Important information about your flight {flight}",
        ),
        "intro": (
            "Thank you for booking with {brand}. Your reservation is confirmed.",
            "Online check-in for your flight to {city2} is now open.",
            "Your trip is just a few days away. Here is everything you need.",
            "The departure time of your flight has changed. Please review your new itinerary.",
            "Your hotel reservation is confirmed. We look forward to welcoming you.",
        ),
        "bag": (
            "Baggage allowance: 1 checked bag up to 23 kg and 1 carry-on item.",
            "Please arrive at the airport at least 2 hours before departure.",
            "Bring a valid photo ID or passport. Boarding closes 20 minutes before departure.",
            "Check-in from 3 pm, check-out until 11 am. Breakfast is included.",
        ),
        "cta": ("Check in online", "Manage my booking", "View itinerary", "Choose your seat",
                "Add bags", "View reservation"),
    },
    "ru": {
        "subject": ("Подтверждение бронирования {ref}", "Регистрация на рейс {flight} открыта",
                    "Ваша поездка в {city2} скоро", "Маршрутная квитанция {ref}",
                    "Изменение расписания рейса {flight}", "Бронирование отеля в городе {city2}"),
        "intro": (
            "Спасибо за бронирование в {brand}. Ваш заказ подтверждён.",
            "Открыта онлайн-регистрация на рейс в {city2}.",
            "До поездки осталось несколько дней. Вот всё, что нужно знать.",
            "Время вылета изменилось. Пожалуйста, проверьте новое расписание.",
        ),
        "bag": ("Норма багажа: 1 место до 23 кг и ручная кладь.",
                "Приезжайте в аэропорт не позднее чем за 2 часа до вылета.",
                "Возьмите с собой паспорт. Посадка заканчивается за 20 минут до вылета."),
        "cta": ("Зарегистрироваться", "Управление бронированием", "Маршрутная квитанция",
                "Выбрать место"),
    },
}  # fmt: skip


def travel(w: Writer) -> Content:
    """A booking, check-in or schedule notice: a booking reference, flights or a stay, the
    fare, a check-in button."""
    rng = w.rng
    ref = _code(rng, 6)
    iata = "".join(rng.choice("ABCDEFGHIJKLMNOPRSTUVWXYZ") for _ in range(2))
    flight = f"{iata} {rng.randrange(100, 2999)}"
    city2 = rng.choice(words.CITIES[w.lang])
    more = {"ref": ref, "flight": flight, "city2": city2}
    blocks = [w.image("logo")] if rng.random() < 0.6 else []
    blocks += [Block("para", w.greeting()), Block("para", _pick(w, TRAVEL, "intro", **more))]
    label = "Booking reference" if w.lang == "en" else "Номер бронирования"
    rows = [(label, ref)]
    legs = []
    for k in range(rng.choice((1, 2, 2, 3))):
        dep = f"{rng.randrange(5, 23):02d}:{rng.choice(('00', '15', '30', '45', '05', '50'))}"
        arr = f"{rng.randrange(0, 24):02d}:{rng.choice(('10', '25', '40', '55'))}"
        a, b = (w.slots["city"], city2) if k % 2 == 0 else (city2, w.slots["city"])
        legs.append((f"{iata} {rng.randrange(100, 2999)}  {a} - {b}",
                     f"{w.day(rng.randrange(2, 30))} {dep} - {arr}"))  # fmt: skip
    blocks.append(Block("summary", rows=rows))
    blocks.append(Block("items", rows=legs))
    if rng.random() < 0.7:
        fare = "Total fare" if w.lang == "en" else "Стоимость"
        blocks.append(Block("summary", rows=[(fare, w.money(rng.choice((89, 149, 260, 412))))]))
    blocks.append(Block("button", _pick(w, TRAVEL, "cta"), w.link(f"booking/{ref}", 0.3)))
    blocks.append(Block("para", _pick(w, TRAVEL, "bag")))
    if rng.random() < 0.4:
        blocks.append(Block("link", _pick(w, TRAVEL, "cta"), w.link(f"manage/{ref}", 0.3)))
    blocks += _signoff(w) if rng.random() < 0.5 else []
    footer, _ = _footer(w, False)
    return Content(_pick(w, TRAVEL, "subject", **more), "", blocks, footer, False)


ANNOUNCE: dict[str, Bank] = {
    "en": {
        "product": ("{brand} Studio", "{brand} Server", "{brand} Desktop", "{brand} Sync",
                    "{brand} Mail", "{brand} Toolkit", "{brand} Backup"),
        "subject": ("{product} {version} released", "Announcing {product} {version}",
                    "New in {product} {version}: {feature}", "[ANNOUNCE] {product} {version}",
                    "{product} {version} is available now", "Upgrade to {product} {version}"),
        "intro": (
            "We are pleased to announce the release of {product} {version}.",
            "{product} {version} is now available for download.",
            "Today we released {product} {version}, our biggest update this year.",
        ),
        "feature": ("faster search", "a new import wizard", "support for Unicode file names",
                    "scheduled backups", "a redesigned toolbar", "an improved spell checker",
                    "IMAP support", "a command-line interface", "dark mode",
                    "two-factor sign-in", "XML export", "Mac OS X support", "plugin API"),
        "price": ("Upgrades are free for registered users.",
                  "Upgrade pricing starts at {amount} for existing customers.",
                  "A 30-day trial is available; a license costs {amount}.",
                  "{product} is free and open source."),
    },
    "ru": {
        "product": ("{brand} Студия", "{brand} Сервер", "{brand} Офис", "{brand} Синхро"),
        "subject": ("Вышла версия {product} {version}", "{product} {version}: {feature}",
                    "[ANNOUNCE] {product} {version}", "Обновление {product} до версии {version}"),
        "intro": ("Рады сообщить о выходе {product} {version}.",
                  "Доступна для загрузки новая версия {product} {version}."),
        "feature": ("быстрый поиск", "мастер импорта", "резервное копирование по расписанию",
                    "новая панель инструментов", "поддержка IMAP", "тёмная тема",
                    "двухфакторный вход", "экспорт в XML"),
        "price": ("Обновление бесплатно для зарегистрированных пользователей.",
                  "Стоимость лицензии — {amount}.", "Пробный период — 30 дней."),
    },
}  # fmt: skip


def announce(w: Writer) -> Content:
    """A software or product release: what is new, where to download, what it costs."""
    rng = w.rng
    version = f"{rng.randrange(1, 9)}.{rng.randrange(0, 20)}"
    if rng.random() < 0.4:
        version += f".{rng.randrange(1, 9)}"
    product = _pick(w, ANNOUNCE, "product")
    features = rng.sample(ANNOUNCE[w.lang]["feature"], rng.randrange(3, 7))
    more = {"product": product, "version": version, "feature": features[0]}
    blocks = [w.image("logo")] if rng.random() < 0.3 else []
    if rng.random() < 0.4:
        blocks.append(Block("para", w.greeting()))
    blocks.append(Block("para", _pick(w, ANNOUNCE, "intro", **more)))
    if rng.random() < 0.5:
        blocks.append(Block("para", _prose(w, 1, 4)))
    head = "What's new" if w.lang == "en" else "Что нового"
    blocks.append(Block("heading", head.upper() if rng.random() < 0.4 else head))
    blocks.append(Block("items", rows=[(f"* {_cap(f)}", "") for f in features]))
    blocks.append(Block("link", "Download" if w.lang == "en" else "Скачать",
                        w.link(f"download/{version}", 0.3)))  # fmt: skip
    blocks.append(Block("link", "Release notes" if w.lang == "en" else "Список изменений",
                        w.link(f"releases/{version}", 0.2)))  # fmt: skip
    blocks.append(Block("para", _pick(w, ANNOUNCE, "price", **more)))
    blocks += _signoff(w)
    bulk = rng.random() < 0.8
    footer, unsubscribe = _footer(w, bulk)
    return Content(_pick(w, ANNOUNCE, "subject", **more), "", blocks, footer, bulk,
                   unsubscribe=unsubscribe, text_only=rng.random() < 0.5)  # fmt: skip


PRESS: dict[str, Bank] = {
    "en": {
        "subject": ("{brand} announces {what}", "Press release: {brand} {what}",
                    "{brand} reports {quarter} results", "FOR IMMEDIATE RELEASE: {brand} {what}"),
        "what": ("a partnership with {partner}", "the opening of its {city} office",
                 "record {quarter} revenue", "a new line of {category}",
                 "the acquisition of {partner}", "a new chief executive"),
        "body": (
            "The agreement brings together two companies with a shared focus on customers.",
            "Revenue for the quarter grew {percent}% compared with the same period last year.",
            "The new office will employ about {n}0 people by the end of next year.",
            "The products will be available in stores and online from {date}.",
            "Analysts expect the market for {category} to keep growing over the next years.",
        ),
        "quote": ('"We are delighted with the result," said {person}, chief executive of {brand}.',
                  '"This is an important step for our customers," said {person}.'),
        "about": ("About {brand}: {brand} is a provider of {category} based in {city}.",),
    },
    "ru": {
        "subject": ("{brand} объявляет: {what}", "Пресс-релиз: {brand} — {what}",
                    "{brand}: итоги {quarter}"),
        "what": ("партнёрство с компанией {partner}", "открытие офиса в городе {city}",
                 "рекордная выручка за {quarter}", "новая линейка: {category}"),
        "body": ("Выручка за период выросла на {percent}% по сравнению с прошлым годом.",
                 "В новом офисе к концу года будут работать около {n}0 человек.",
                 "Новинки появятся в магазинах и на сайте с {date}.",
                 "Соглашение объединяет две компании с общим вниманием к клиентам."),
        "quote": ("«Мы рады результату», — отметил {person}, генеральный директор {brand}.",
                  "«Это важный шаг для наших клиентов», — сказал {person}."),
        "about": ("О компании {brand}: {brand} — поставщик решений в области «{category}», "
                  "город {city}.",),
    },
}  # fmt: skip


def press(w: Writer) -> Content:
    """A press release: a dateline, paragraphs, a quote, "about", a media contact."""
    rng = w.rng
    quarter = rng.choice(("Q1", "Q2", "Q3", "Q4")) if w.lang == "en" else rng.choice(
        ("первый квартал", "второй квартал", "третий квартал", "первое полугодие"))
    first, last = rng.choice(words.FIRST_NAMES[w.lang]), rng.choice(words.LAST_NAMES[w.lang])
    more = {"quarter": quarter, "person": f"{first} {last}",
            "partner": rng.choice(("Northwind", "Contoso", "Globex", "Initech", "Umbrella",
                                   "Вектор", "Альфа-Систем"))}  # fmt: skip
    what = _pick(w, PRESS, "what", **more)
    lead = "FOR IMMEDIATE RELEASE" if w.lang == "en" else "ПРЕСС-РЕЛИЗ"
    blocks = [Block("heading", lead)]
    blocks.append(Block("para", f"{w.slots['city'].upper()}, {w.slots['date']} - "
                        f"{w.slots['brand']} {what}."))  # fmt: skip
    for text in rng.sample(PRESS[w.lang]["body"], rng.randrange(2, 4)):
        blocks.append(Block("para", w.fill(text, **more)))
    if rng.random() < 0.6:
        blocks.append(Block("para", _prose(w, 2, 5)))
    blocks.append(Block("para", _pick(w, PRESS, "quote", **more)))
    blocks.append(Block("para", w.fill(PRESS[w.lang]["about"][0], **more)))
    blocks.append(Block("link", w.page("press"), w.page("press")))
    contact = "Media contact" if w.lang == "en" else "Контакты для СМИ"
    blocks.append(Block("small", f"{contact}: {rng.choice(words.FIRST_NAMES[w.lang])} "
                        f"{rng.choice(words.LAST_NAMES[w.lang])}, press@{w.org.domain}, "
                        f"+1 {rng.randrange(200, 999)} {rng.randrange(200, 999)} "
                        f"{rng.randrange(1000, 9999)}"))  # fmt: skip
    footer, unsubscribe = _footer(w, True)
    return Content(_cap(_pick(w, PRESS, "subject", what=what, **more)), "", blocks, footer,
                   True, unsubscribe=unsubscribe, text_only=rng.random() < 0.6)  # fmt: skip


LIST: dict[str, Bank] = {
    "en": {
        "name": ("announce", "users", "news", "events", "members", "discuss"),
        "subject": ("[{tag}] {project} {version} released", "[{tag}] Call for papers: {event}",
                    "[{tag}] Meeting on {date}: {topic}", "[{tag}] Reminder: {event} registration "
                    "closes {date}", "[{tag}] New mirror and download site",
                    "[{tag}] Minutes of the {month} meeting"),
        "body": (
            "The {event} will take place on {date} in {city}. We invite talks on {topic} and "
            "related subjects. Submissions are due by {due}.",
            "Version {version} fixes several bugs reported on this list and adds {feature}. "
            "Source and binary packages are on the download page.",
            "Our next meeting is on {date} at 7 pm. {first} will talk about {topic}. Pizza and "
            "drinks are sponsored by {brand}.",
            "Thanks to everyone who came. The slides and notes are now on the web site.",
            "Registration costs {amount} for members and includes lunch on both days.",
        ),
    },
    "ru": {
        "name": ("announce", "users", "news", "club"),
        "subject": ("[{tag}] Вышла версия {project} {version}", "[{tag}] Приём докладов: {event}",
                    "[{tag}] Встреча {date}: {topic}", "[{tag}] Напоминание о регистрации"),
        "body": (
            "Мероприятие «{event}» пройдёт {date} в городе {city}. Приглашаем доклады на тему "
            "«{topic}». Заявки принимаются до {due}.",
            "В версии {version} исправлены ошибки, о которых писали в этой рассылке, и "
            "добавлено: {feature}. Пакеты — на странице загрузки.",
            "Следующая встреча — {date} в 19:00. {first} расскажет про {topic}.",
            "Регистрационный взнос — {amount}, для членов клуба скидка.",
        ),
    },
}  # fmt: skip


def mailing_list(w: Writer) -> Content:
    """An announcement to a mailing list (Mailman-style header fields), written by a person
    of the organization, in plain text, signed."""
    rng = w.rng
    name = rng.choice(LIST[w.lang]["name"])
    slug = w.org.domain.split(".")[0]
    tag = rng.choice((slug.title(), f"{slug}-{name}", name.upper()))
    first = rng.choice(words.FIRST_NAMES[w.lang])
    last = rng.choice(words.LAST_NAMES[w.lang])
    more = {"tag": tag, "project": w.org.brand, "version": f"{rng.randrange(0, 5)}."
            f"{rng.randrange(1, 30)}", "feature": rng.choice(ANNOUNCE[w.lang]["feature"]),
            "due": w.day(rng.randrange(20, 60)), "first": first}  # fmt: skip
    blocks = [Block("para", w.fill(rng.choice(("Hi all,", "Hello everyone,", "Dear members,",
                                                 "Folks,")) if w.lang == "en" else
                                   rng.choice(("Всем привет!", "Коллеги,", "Добрый день!"))))]
    for text in rng.sample(LIST[w.lang]["body"], rng.randrange(1, 3)):
        blocks.append(Block("para", w.fill(text, **more)))
    if rng.random() < 0.5:
        blocks.append(Block("para", _prose(w, 1, 4)))
    blocks.append(Block("link", "", w.page(rng.choice(("events", "download", "news", "wiki")))))
    blocks.append(Block("para", f"-- \n{first} {last}\n{w.org.brand}"))
    host = f"lists.{w.org.domain}"
    listname = f"{slug}-{name}"
    headers = [
        ("Sender", f"{listname}-admin@{host}"),
        ("Errors-To", f"{listname}-admin@{host}"),
        ("X-BeenThere", f"{listname}@{host}"),
        ("X-Mailman-Version", rng.choice(("2.0.13", "2.0.11", "2.1.9", "2.1.29"))),
        ("Precedence", "bulk"),
        ("List-Help", f"<mailto:{listname}-request@{host}?subject=help>"),
        ("List-Post", f"<mailto:{listname}@{host}>"),
        ("List-Subscribe", f"<http://{host}/mailman/listinfo/{listname}>, "
                           f"<mailto:{listname}-request@{host}?subject=subscribe>"),
        ("List-Id", f"{slug.title()} {name} <{listname}.{host}>"),
        ("List-Unsubscribe", f"<http://{host}/mailman/listinfo/{listname}>, "
                             f"<mailto:{listname}-request@{host}?subject=unsubscribe>"),
        ("List-Archive", f"<http://{host}/pipermail/{listname}/>"),
    ]  # fmt: skip
    headers = [h for h in headers if h[0] in ("Sender", "List-Id") or rng.random() < 0.85]
    foot = [Block("small", "_" * 47 + f"\n{listname} mailing list\n{listname}@{host}\n"
                  f"http://{host}/mailman/listinfo/{listname}")]  # fmt: skip
    subject = _pick(w, LIST, "subject", **more)
    local = words.LATIN.get(first, first).lower() if w.lang == "ru" else first.lower()
    return Content(subject, "", blocks, foot, False, headers=headers, text_only=True,
                   sender=f"{local}@{w.org.domain}", sender_name=f"{first} {last}",
                   bounce=f"{listname}-admin@{host}", to=f"{listname}@{host}")  # fmt: skip


ALERT: dict[str, Bank] = {
    "en": {
        "subject": (
            "[ALERT] {host}: disk usage {pct}%", "[RESOLVED] {host}: disk usage {pct}%",
            "Weekly report for {site}: {visits} visits", "Backup completed: {n} files",
            "Backup FAILED on {host}", "Your domain {site} expires on {date}",
            "Build #{issue} failed", "Build #{issue} fixed", "Daily summary for {date}",
            "Your monthly usage report", "Cron <root@{host}> /usr/local/bin/backup.sh",
            "Certificate for {site} expires in {n} days",
        ),
        "lead": (
            "This is an automated message from {brand} monitoring.",
            "Here is your weekly summary.", "The following check changed state:",
            "Report generated on {date}.", "",
        ),
        "foot": ("You are receiving this because alerts are enabled for your account. Manage "
                 "notification settings at {url}", "Do not reply to this message.",
                 "-- \n{brand} Monitoring"),
    },
    "ru": {
        "subject": ("[ALERT] {host}: диск заполнен на {pct}%", "Еженедельный отчёт по {site}",
                    "Резервное копирование завершено", "Ошибка резервного копирования на {host}",
                    "Срок регистрации домена {site} истекает {date}", "Сводка за {date}",
                    "Сертификат для {site} истекает через {n} дн."),
        "lead": ("Это автоматическое сообщение системы мониторинга {brand}.",
                 "Ваш еженедельный отчёт.", "Отчёт сформирован {date}.", ""),
        "foot": ("Настроить уведомления: {url}", "Не отвечайте на это письмо."),
    },
}  # fmt: skip


def alert(w: Writer) -> Content:
    """An automated alert or report: numbers in a table, a link to the dashboard."""
    rng = w.rng
    host = f"{rng.choice(('web', 'db', 'mail', 'app', 'srv', 'node'))}{rng.randrange(1, 40):02d}"
    site = rng.choice((w.org.domain, f"{rng.choice(words.LAST_NAMES['en']).lower()}-"
                       f"{rng.choice(('shop', 'blog', 'studio', 'family'))}.com"))  # fmt: skip
    more = {"host": host, "site": site, "pct": str(rng.randrange(80, 100)),
            "visits": f"{rng.randrange(100, 90000):,}"}  # fmt: skip
    blocks = []
    lead = _pick(w, ALERT, "lead", **more)
    if lead:
        blocks.append(Block("para", lead))
    keys_en = ("Visits", "Unique visitors", "Page views", "Bounce rate", "CPU", "Memory",
               "Disk /", "Disk /var", "Load average", "Uptime", "Errors", "Files", "Transferred",
               "Duration", "Status", "Checks passed", "Response time")  # fmt: skip
    keys_ru = ("Визиты", "Посетители", "Просмотры", "Отказы", "CPU", "Память", "Диск /",
               "Нагрузка", "Время работы", "Ошибки", "Файлы", "Передано", "Статус")  # fmt: skip
    keys = rng.sample(keys_en if w.lang == "en" else keys_ru, rng.randrange(3, 8))

    def value() -> str:
        return rng.choice((f"{rng.randrange(1, 99999):,}", f"{rng.randrange(0, 100)}%",
                           f"{rng.random() * 4:.2f}", f"{rng.randrange(1, 900)} ms",
                           f"{rng.randrange(1, 999)} MB", "OK", "WARNING", "CRITICAL"))  # fmt: skip

    blocks.append(Block("summary", rows=[(k, value()) for k in keys]))
    if rng.random() < 0.4:
        blocks.append(Block("para", "\n".join(
            f"{w.when.strftime('%Y-%m-%d')} {rng.randrange(0, 24):02d}:{rng.randrange(0, 60):02d}"
            f" {rng.choice(('INFO', 'WARN', 'ERROR'))} {rng.choice(words.TOPICS['en'])}"
            for _ in range(rng.randrange(2, 6)))))  # fmt: skip
    url = w.page(f"dashboard/{w.token(6).lower()}")
    blocks.append(Block("link", "Dashboard" if w.lang == "en" else "Панель управления", url))
    foot = [Block("small", _pick(w, ALERT, "foot", url=w.page("settings/notifications")))]
    return Content(_pick(w, ALERT, "subject", **more), "", blocks, foot, False,
                   text_only=rng.random() < 0.6,
                   sender=f"{rng.choice(('alerts', 'monitor', 'reports', 'noreply', 'root'))}"
                   f"@{w.org.domain}")  # fmt: skip


COMPOSERS = {
    "promo": promo,
    "deal": deal,
    "digest": digest,
    "travel": travel,
    "announce": announce,
    "press": press,
    "list": mailing_list,
    "alert": alert,
}
