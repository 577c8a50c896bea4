"""Who sends the generated legitimate letters, and through which mail service. Pure.

Most senders are invented (a name from parts, a domain on one of several TLDs, a category
that decides what kinds of letters it sends); a few are real public bodies and banks that send
notices from their own domains, with matching Return-Path, Received and links. Each sender
either runs its own mail servers or uses an e-mail service provider (ESP), whose bounce
address, servers, IP range, tracking links and extra headers it then carries.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

KINDS = (
    "newsletter", "receipt", "shipping", "account", "event", "bill", "government",
    # added with the mail of 2002 in mind (issue 16): promotions, digests, notices
    "promo", "deal", "digest", "travel", "announce", "press", "list", "alert",
)  # fmt: skip
ERAS = ("2002", "today")
"""A sender writes as senders did around 2002 (HTML 3 with FONT tags, http links, no DKIM,
older list software and ESPs) or as they do today."""


@dataclass(frozen=True)
class Esp:
    name: str
    bounce: str  # Return-Path local@domain pattern: {id}, {domain}, {user}
    host: str  # the sending server: {n}, {domain}
    ip_prefix: str  # the first two octets of its servers ("" = anywhere)
    click: str  # a tracked link: {domain}, {id}, {url}
    headers: tuple[tuple[str, str], ...] = ()  # extra header fields: {id}, {domain}


ESPS = (
    Esp("own", "bounce-{id}@{domain}", "mail{n}.{domain}", "", "https://{domain}/r/{id}?u={url}"),
    Esp("own-click", "noreply@{domain}", "mx{n}.{domain}", "",
        "https://click.{domain}/{id}", (("X-Mailer", "PHPMailer 6.8.1"),)),
    Esp("sendgrid", "bounces+{id}@em{n}.{domain}", "o{n}.ptr{id4}.{domain}", "167.89.",
        "https://u{id}.ct.sendgrid.net/ls/click?upn={token}",
        (("X-SG-EID", "{token}"), ("X-Entity-ID", "{token16}"))),
    Esp("mailchimp", "bounce-mc.us{n}_{id}.{id4}-{user}@mail{n}.atl{n}.mcdlv.net",
        "mail{n}.atl{n}.mcdlv.net", "198.2.",
        "https://{brandslug}.us{n}.list-manage.com/track/click?u={token16}&id={id}&e={token8}",
        (("X-Campaign", "mailchimp{token16}.{id}"), ("X-MC-User", "{token16}"))),
    Esp("ses", "0100{token16}-{id}-000000@amazonses.com", "a{n}-{id4}.smtp-out.amazonses.com",
        "54.240.", "https://{token8}.r.us-east-1.awstrack.me/L0/{urlq}/1/{token16}",
        (("Feedback-ID", "1.us-east-1.{token16}:AmazonSES"),)),
    Esp("mailgun", "bounce+{id4}.{id}-{user}@mg.{domain}", "m{n}-{id4}.mailgun.net",
        "209.61.", "https://email.mg.{domain}/c/{token}",
        (("X-Mailgun-Sid", "{token16}"),)),
    Esp("ru-esp", "{id}@bounce.{domain}", "smtp{n}.esp-mailer.ru", "185.71.",
        "https://t.{domain}/click/{id}/{token16}", (("X-Mailer-Campaign", "{id}"),)),
)  # fmt: skip

ESPS_2002 = (
    Esp("own", "bounce-{id}@{domain}", "mail{n}.{domain}", "", "http://{domain}/cgi-bin/r?{id}"),
    Esp("own-list", "{list}-admin@lists.{domain}", "lists.{domain}", "", "",
        (("X-Mailer", "Lyris ListManager Web Interface"),)),
    Esp("own-plain", "newsletter@{domain}", "smtp{n}.{domain}", "", "",
        (("X-Mailer", "Microsoft Outlook Express 6.00.2600.0000"),)),
    Esp("constantcontact", "{token8}@in.constantcontact.com", "ccm{n}.constantcontact.com",
        "63.251.", "http://rs6.net/tn.jsp?t={token16}&r={id}&p={urlq}",
        (("X-Mailer", "Roving Constant Contact 2002 (http://www.constantcontact.com)"),)),
    Esp("exacttarget", "bounce-{id}_HTML-{id4}@bounce.{domain}", "mta{n}.exacttarget.com",
        "207.67.", "http://click.exct.net/?qs={token}",
        (("X-Mailer", "ExactTarget MTA"),)),
    Esp("digital-impact", "{user}.{id}@bounce.{domain}", "smtp{n}.dimpact.net", "64.75.",
        "http://{domain}.rd.digitalimpact.com/r/{id}/{token16}",
        (("X-Mailer", "Digital Impact Mail Engine"),)),
)  # fmt: skip


@dataclass(frozen=True)
class Org:
    brand: str  # the display name
    domain: str  # the From domain
    lang: str  # en / ru
    category: str
    kinds: tuple[str, ...]
    esp: Esp
    mailbox: str  # the From local part
    ip: str  # its sending servers' /24: "a.b.c."
    text_part: float  # the chance a letter carries a plain-text alternative
    layout: str  # table / div / simple / plain
    links: tuple[str, ...] = ()  # extra link hosts of its own (shop., help., cdn.)
    address: str = ""
    notice_from: str = ""  # government: the From address
    site: str = ""  # government / bank: the site its links go to
    extra: dict[str, str] = field(default_factory=dict)
    era: str = "today"  # 2002 or today (ERAS)


CATEGORY_KINDS = {
    "shop": ("newsletter", "promo", "promo", "deal", "receipt", "shipping", "shipping",
             "account"),
    "media": ("newsletter", "newsletter", "digest", "digest", "press", "account", "event"),
    "saas": ("account", "account", "newsletter", "bill", "event", "announce", "alert"),
    "travel": ("receipt", "travel", "travel", "deal", "promo", "newsletter", "account"),
    "utility": ("bill", "bill", "account", "newsletter", "alert"),
    "events": ("event", "event", "receipt", "promo", "newsletter"),
    "education": ("newsletter", "event", "account", "receipt", "shipping", "digest", "list"),
    "bank": ("bill", "account", "newsletter", "alert"),
    "retail": ("promo", "promo", "promo", "deal", "newsletter", "receipt", "shipping"),
    "airline": ("travel", "travel", "travel", "deal", "promo", "account"),
    "software": ("announce", "announce", "press", "newsletter", "alert", "account", "list"),
    "community": ("list", "list", "list", "digest", "announce", "event"),
    "hosting": ("alert", "alert", "alert", "bill", "account", "announce"),
}

_EN_FIRST = ("North", "Maple", "Pixel", "Harbor", "Copper", "Bluebird", "Bright", "Urban",
             "Summit", "Cedar", "Atlas", "Riverside", "Nova", "Golden", "Silverline", "Oakwood",
             "Lumen", "Fieldnote", "Stonegate", "Willow", "Kestrel", "Juniper", "Meridian",
             "Orchard")  # fmt: skip
_EN_SECOND = {
    "shop": ("Outfitters", "Market", "Supply Co", "Goods", "Store", "Home", "Books", "Pets"),
    "media": ("Weekly", "Review", "Journal", "Digest", "Post", "Notes"),
    "saas": ("Cloud", "Labs", "Software", "Analytics", "Docs", "Apps"),
    "travel": ("Travel", "Trips", "Rail", "Hostels", "Tours"),
    "utility": ("Energy", "Mobile", "Broadband", "Water"),
    "events": ("Tickets", "Events", "Live", "Festival"),
    "education": ("Academy", "Learning", "School", "Courses"),
    "bank": ("Credit Union", "Savings", "Bank"),
    "retail": ("Outlet", "Department Store", "Electronics", "Direct", "Warehouse", "Depot"),
    "airline": ("Air", "Airways", "Airlines", "Jet"),
    "software": ("Software", "Systems", "Technologies", "Labs", "Soft"),
    "community": ("Users Group", "Project", "Foundation", "Society", "Network"),
    "hosting": ("Hosting", "Net", "Servers", "Monitor", "DNS"),
}
_RU_FIRST = (("Эко", "eco"), ("Техно", "tehno"), ("Вело", "velo"), ("Зоо", "zoo"),
             ("Арт", "art"), ("Гео", "geo"), ("Мега", "mega"), ("Био", "bio"),
             ("Авто", "avto"), ("Медиа", "media"), ("Северный ", "severny-"),
             ("Городской ", "gorodskoy-"), ("Новый ", "novy-"), ("Добрый ", "dobry-"),
             ("Уральский ", "uralsky-"), ("Волжский ", "volzhsky-"))  # fmt: skip
_RU_SECOND = {
    "shop": (("маркет", "market"), ("лавка", "lavka"), ("дом", "dom"), ("мир", "mir")),
    "media": (("журнал", "zhurnal"), ("вестник", "vestnik"), ("обзор", "obzor")),
    "saas": (("облако", "oblako"), ("софт", "soft"), ("сервис", "servis")),
    "travel": (("тур", "tur"), ("экспресс", "express"), ("путь", "put")),
    "utility": (("энерго", "energo"), ("связь", "svyaz"), ("телеком", "telecom")),
    "events": (("билет", "bilet"), ("афиша", "afisha"), ("фест", "fest")),
    "education": (("школа", "shkola"), ("академия", "akademia"), ("курсы", "kursy")),
    "bank": (("банк", "bank"), ("кредит", "kredit")),
    "retail": (("торг", "torg"), ("универмаг", "univermag"), ("электроника", "electronica"),
               ("опт", "opt")),
    "airline": (("авиа", "avia"), ("эйр", "air"), ("авиалинии", "avialinii")),
    "software": (("софт", "soft"), ("системы", "systems"), ("технологии", "tech")),
    "community": (("клуб", "club"), ("сообщество", "community"), ("форум", "forum")),
    "hosting": (("хостинг", "hosting"), ("хост", "host"), ("дата", "data")),
}
_EN_TLDS = (".com", ".com", ".co", ".io", ".net", ".co.uk", ".org", ".shop", ".app")
_RU_TLDS = (".ru", ".ru", ".ru", ".com", ".su", ".net", ".online")
_MAILBOXES = ("news", "hello", "info", "noreply", "no-reply", "orders", "team", "support",
              "newsletter", "notifications", "mail", "updates")  # fmt: skip
_RU_ADDRESS = ("г. {city}, {street}, д. {n}", "{city}, {street}, {n}, офис {m}")
_EN_ADDRESS = (
    "{n} {street}, {city}",
    "{brand}, {n} {street}, {city}",
    "Suite {m}, {n} {street}, {city}",
)


def _ip(rng: random.Random, prefix: str) -> str:
    """A /24 of sending servers: ``a.b.c.`` (the last octet is chosen per letter)."""
    if prefix:
        return f"{prefix}{rng.randrange(1, 255)}."
    first = rng.choice((5, 37, 46, 62, 77, 91, 104, 138, 146, 185, 193, 212))
    return f"{first}.{rng.randrange(1, 255)}.{rng.randrange(1, 255)}."


def _pick_esp(rng: random.Random, lang: str) -> Esp:
    weights = {
        "own": 3,
        "own-click": 2,
        "sendgrid": 2,
        "mailchimp": 2,
        "ses": 2,
        "mailgun": 1,
        "ru-esp": 3 if lang == "ru" else 0,
    }
    names = [e for e in ESPS if weights[e.name]]
    return rng.choices(names, [weights[e.name] for e in names])[0]


def _pick_esp_2002(rng: random.Random, category: str) -> Esp:
    if category in ("community", "software", "education"):
        weights = (2, 4, 2, 1, 0, 0)
    elif category in ("hosting",):
        weights = (4, 0, 3, 0, 0, 0)
    else:
        weights = (4, 2, 2, 2, 2, 1)
    return rng.choices(ESPS_2002, weights)[0]


def invented(rng: random.Random, lang: str) -> Org:
    from pochta.antispam.model.legit.words import CITIES, STREETS

    category = rng.choice(tuple(CATEGORY_KINDS))
    if lang == "en":
        first = rng.choice(_EN_FIRST)
        second = rng.choice(_EN_SECOND[category])
        brand = f"{first} {second}"
        slug = (first + second).lower().replace(" ", "")
        if rng.random() < 0.3:
            slug = f"{first}-{second}".lower().replace(" ", "")
        domain = slug + rng.choice(_EN_TLDS)
        address = rng.choice(_EN_ADDRESS)
    else:
        (f_ru, f_lat), (s_ru, s_lat) = rng.choice(_RU_FIRST), rng.choice(_RU_SECOND[category])
        brand = (f_ru + s_ru).strip()
        brand = brand[0].upper() + brand[1:]
        domain = (f_lat + s_lat) + rng.choice(_RU_TLDS)
        address = rng.choice(_RU_ADDRESS)
    city = rng.choice(CITIES[lang])
    address = address.format(
        city=city, street=rng.choice(STREETS[lang]), n=rng.randrange(1, 120),
        m=rng.randrange(2, 40), brand=brand,
    )  # fmt: skip
    era = rng.choice(ERAS)
    if era == "2002":
        esp = _pick_esp_2002(rng, category)
        layout = rng.choices(("legacy", "simple", "plain"), (5, 2, 2))[0]
    else:
        esp = _pick_esp(rng, lang)
        layout = rng.choices(("table", "div", "simple", "plain"), (5, 3, 2, 1))[0]
    return Org(
        brand=brand,
        domain=domain,
        lang=lang,
        category=category,
        kinds=CATEGORY_KINDS[category],
        esp=esp,
        mailbox=rng.choice(_MAILBOXES),
        ip=_ip(rng, esp.ip_prefix),
        text_part=rng.choice((0.0, 0.3, 0.7, 1.0)),
        layout=layout,
        links=tuple(rng.sample(("www", "shop", "help", "blog", "app", "account"), 2)),
        address=address,
        era=era,
    )


GOVERNMENT = (
    # brand, lang, From, Return-Path domain / servers, site, what it sends
    ("ФНС России", "ru", "noreply@fcod.nalog.ru", "fcod.nalog.ru", "lkfl2.nalog.ru", "tax"),
    ("Госуслуги", "ru", "no-reply@gosuslugi.ru", "gosuslugi.ru", "www.gosuslugi.ru", "portal"),
    ("Социальный фонд России", "ru", "info@sfr.gov.ru", "sfr.gov.ru", "es.sfr.gov.ru", "pension"),
    ("Портал mos.ru", "ru", "noreply@mos.ru", "mos.ru", "www.mos.ru", "city"),
    ("СберБанк", "ru", "info@sberbank.ru", "sberbank.ru", "online.sberbank.ru", "bank"),
    ("Т-Банк", "ru", "noreply@tbank.ru", "tbank.ru", "www.tbank.ru", "bank"),
    ("GOV.UK", "en", "noreply@notifications.service.gov.uk", "notifications.service.gov.uk",
     "www.gov.uk", "portal"),
    ("HM Revenue and Customs", "en", "noreply@confirmation.tax.service.gov.uk",
     "tax.service.gov.uk", "www.tax.service.gov.uk", "tax"),
    ("Social Security Administration", "en", "no-reply@ssa.gov", "ssa.gov", "www.ssa.gov",
     "pension"),
    ("City of Boston", "en", "noreply@boston.gov", "boston.gov", "www.boston.gov", "city"),
)  # fmt: skip


def government(rng: random.Random) -> list[Org]:
    out = []
    for brand, lang, sender, servers, site, what in GOVERNMENT:
        local, _, domain = sender.partition("@")
        out.append(
            Org(
                brand=brand,
                domain=domain,
                lang=lang,
                category="government",
                kinds=("government",),
                esp=Esp("own", f"bounce@{servers}", f"mail{{n}}.{servers}", "", ""),
                mailbox=local,
                ip=_ip(rng, ""),
                text_part=rng.choice((0.0, 1.0)),
                layout=rng.choice(("simple", "table", "plain")),
                site=site,
                extra={"what": what},
            )
        )
    return out
