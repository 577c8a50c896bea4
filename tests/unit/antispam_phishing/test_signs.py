"""Each phishing check on small letters: what fires, what must not, and the evidence."""

from __future__ import annotations

import io
import zipfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.unit.antispam_phishing.helpers import letter

from pochta.antispam.signs import attachments
from pochta.antispam.signs import checks as phishing
from pochta.mime.letter import parse
from pochta.types import Envelope


def signs(raw: bytes, envelope: Envelope | None = None) -> dict[str, tuple[str, ...]]:
    return {s.symbol: s.evidence for s in phishing.scan(raw, envelope)}


def test_registry_is_complete_and_documented() -> None:
    doc = phishing.__doc__ or ""
    assert len(phishing.SYMBOLS) == len(set(phishing.SYMBOLS)) == len(phishing.CHECKS)
    for symbol, spec in phishing.SPECS.items():
        assert symbol.startswith("PHISH_") and symbol in doc
        assert spec.ru and spec.en


def test_a_plain_letter_shows_nothing() -> None:
    assert signs(letter()) == {}


# -- words ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "greeting",
    [
        "Уважаемый клиент!",
        "Уважаемый(ая) пользователь,",
        "Дорогой друг!",
        "Мой дорогой друг,",
        "Dear Customer,",
        "Dear valued customer,",
        "Hello friend,",
        "Dear Sir/Madam,",
        "Уважаемые пользователи!",
        "Привет, друг!",
        "Dear account holder,",
    ],
)
def test_impersonal_greetings(greeting: str) -> None:
    assert "PHISH_IMPERSONAL_GREETING" in signs(letter(text=f"{greeting}\nНовости недели.\n"))


@pytest.mark.parametrize(
    "greeting", ["Уважаемый Иван Сергеевич!", "Dear John,", "Привет, Лёша!", "Добрый день!"]
)
def test_personal_or_plain_greetings_are_fine(greeting: str) -> None:
    assert "PHISH_IMPERSONAL_GREETING" not in signs(letter(text=f"{greeting}\nНовости.\n"))


def test_nameless_greeting_counts_only_for_government_senders() -> None:
    gov = letter(sender="ФНС России <info@nalog-info.com>", text="Добрый день!\nУведомление.\n")
    assert signs(gov)["PHISH_IMPERSONAL_GREETING"] == ("добрый день!",)
    shop = letter(sender="Shop <news@shop.example>", text="Добрый день!\nСкидки.\n")
    assert "PHISH_IMPERSONAL_GREETING" not in signs(shop)


@pytest.mark.parametrize(
    "text",
    [
        "Вы выиграли автомобиль!",
        "Вам положена компенсация 15 000 рублей.",
        "Работа без опыта.",
        "Доход от 25 до 100 тыс в неделю.",
        "Около двух штук зелёных за сутки.",
        "You have won a prize!",
        "Earn $500 per day from home.",
        "The inheritance of 5 million dollars",
        "Получите в подарок iPhone",
        "Прибавка к пенсии для всех",
    ],
)
def test_generous_offers(text: str) -> None:
    assert "PHISH_GENEROUS_OFFER" in signs(letter(text=text))


def test_ordinary_commerce_is_no_generous_offer() -> None:
    text = "Скидка 10% на зимние шины до конца месяца. Доставка бесплатно.\nПризнательны за заказ."
    assert "PHISH_GENEROUS_OFFER" not in signs(letter(text=text))


@pytest.mark.parametrize(
    "subject",
    [
        "Ваш аккаунт заблокирован",
        "Задолженность по договору",
        "Последнее предупреждение",
        "Подтвердите вашу учетную запись, иначе аккаунт будет удален",
        "Your account is suspended",
        "Verify your account",
        "Unusual sign-in activity",
        "Final notice",
    ],
)
def test_alarming_subjects(subject: str) -> None:
    assert "PHISH_ALARMING_SUBJECT" in signs(letter(subject=subject))


@pytest.mark.parametrize("subject", ["Заявление принято", "Запись подтверждена", "Meeting notes"])
def test_calm_subjects(subject: str) -> None:
    assert "PHISH_ALARMING_SUBJECT" not in signs(letter(subject=subject))


def test_urgency_in_the_text() -> None:
    assert "PHISH_URGENCY" in signs(
        letter(text="Оплатите в течение 24 часов, иначе карта будет заблокирована.")
    )
    assert "PHISH_URGENCY" in signs(
        letter(text="Act within 12 hours or your account will be closed.")
    )
    assert "PHISH_URGENCY" not in signs(letter(text="Заказ будет доставлен в течение 3 дней."))


def test_fake_reply() -> None:
    assert signs(letter(subject="Re: Счёт"))["PHISH_FAKE_REPLY"] == ("Re: Счёт",)
    assert "PHISH_FAKE_REPLY" in signs(letter(subject="[list] RE[2]: contract"))
    assert "PHISH_FAKE_REPLY" in signs(letter(subject="Ответ: договор"))
    real = letter(subject="Re: Счёт", headers={"In-Reply-To": "<a@b>"})
    assert "PHISH_FAKE_REPLY" not in signs(real)
    assert "PHISH_FAKE_REPLY" not in signs(letter(subject="Re: x", headers={"References": "<a@b>"}))
    assert "PHISH_FAKE_REPLY" not in signs(letter(subject="Fwd: Счёт"))
    assert "PHISH_FAKE_REPLY" not in signs(letter(subject="Renewal: contract"))


# -- requests for data ----------------------------------------------------------------------
@pytest.mark.parametrize(
    "text",
    [
        "Укажите номер карты и CVV.",
        "Сообщите код из SMS.",
        "Введите ПИН-код карты.",
        "Пришлите данные карты для зачисления.",
        "Please enter your card number.",
        "Номер карты, срок действия карты и три цифры на обратной стороне.",
    ],
)
def test_card_data_requests(text: str) -> None:
    assert "PHISH_CARD_DATA_REQUEST" in signs(letter(text=text))


@pytest.mark.parametrize(
    "text",
    [
        "Никому не сообщайте код из SMS и CVV.",
        "Сотрудники банка никогда не спрашивают PIN-код\nи номер карты.",
        "We will never ask for your card number or security code.",
        "Ваша карта **1234 выпущена.",
        "Do not share your one-time code with anyone.",
    ],
)
def test_warnings_are_not_requests(text: str) -> None:
    assert "PHISH_CARD_DATA_REQUEST" not in signs(letter(text=text))


def test_personal_data_requests() -> None:
    assert "PHISH_PERSONAL_DATA_REQUEST" in signs(
        letter(text="Подтвердите паспортные данные по ссылке.")
    )
    assert "PHISH_PERSONAL_DATA_REQUEST" in signs(letter(text="Please confirm your password here."))
    assert "PHISH_PERSONAL_DATA_REQUEST" not in signs(
        letter(text="Вы сменили пароль. Если это были не вы, позвоните нам.")
    )
    assert "PHISH_PERSONAL_DATA_REQUEST" not in signs(
        letter(text="We will never ask for your password.")
    )


def test_html_form() -> None:
    html = (
        '<p>Keep your mailbox</p><form action="https://x.example/p">'
        '<input type="password" name="p"></form>'
    )
    assert signs(letter(text=None, html=html))["PHISH_HTML_FORM"] == (
        "forms: 1, password fields: 1",
    )


# -- the sender -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("sender", "symbol"),
    [
        ("Info <info@nalog.de>", "PHISH_SENDER_FOREIGN_TLD"),
        ("Info <info@gosuslugi.com>", "PHISH_SENDER_FOREIGN_TLD"),
        ("Info <info@sberbank-online.com>", "PHISH_SENDER_LOOKALIKE"),
        ("Info <info@sberbamk.ru>", "PHISH_SENDER_LOOKALIKE"),
        ("Info <info@paypa1.com>", "PHISH_SENDER_LOOKALIKE"),
        ("Info <info@rnail.ru>", "PHISH_SENDER_LOOKALIKE"),
        ("Info <info@nalog.ru.lk-info.com>", "PHISH_SENDER_LOOKALIKE"),
        ("Info <info@xn--80ak6aa92e.com>", "PHISH_SENDER_IDN"),
    ],
)
def test_sender_imitations(sender: str, symbol: str) -> None:
    assert symbol in signs(letter(sender=sender))


@pytest.mark.parametrize(
    "sender",
    [
        "ФНС России <noreply@fcod.nalog.ru>",
        "Ivan <ivan@gmail.com>",
        "Mail <x@mail.com>",
        "Shop <news@snapple.com>",
        "Сайт <info@xn--80aswg.xn--p1ai>",
        "Bank <info@sberbank.com>",
    ],
)
def test_real_or_unrelated_senders(sender: str) -> None:
    found = signs(letter(sender=sender))
    assert not {
        "PHISH_SENDER_LOOKALIKE",
        "PHISH_SENDER_FOREIGN_TLD",
        "PHISH_SENDER_IDN",
        "PHISH_DISPLAY_NAME_BRAND",
    } & set(found)


def test_display_name_brand() -> None:
    assert "PHISH_DISPLAY_NAME_BRAND" in signs(
        letter(sender="Служба безопасности Сбербанка <a@b-secure.com>")
    )
    assert "PHISH_DISPLAY_NAME_BRAND" in signs(letter(sender="Cбербанк <a@example.com>"))  # Latin C
    assert "PHISH_DISPLAY_NAME_BRAND" in signs(
        letter(sender="Google Support <fake.google@gmail.com>")
    )
    assert "PHISH_DISPLAY_NAME_BRAND" not in signs(
        letter(sender="Google <no-reply@accounts.google.com>")
    )
    assert "PHISH_DISPLAY_NAME_BRAND" not in signs(
        letter(sender="Pineapple Express <a@example.com>")
    )


def test_display_name_address() -> None:
    found = signs(letter(sender='"service@paypal.com" <robot@mailer.example>'))
    assert "PHISH_DISPLAY_NAME_ADDRESS" in found
    same = letter(sender='"info@example.net" <info@example.net>')
    assert "PHISH_DISPLAY_NAME_ADDRESS" not in signs(same)


def test_return_path_and_envelope_sender() -> None:
    raw = letter(headers={"Return-Path": "<bounce@other.example>"})
    assert signs(raw)["PHISH_RETURN_PATH_MISMATCH"] == (
        "Return-Path: bounce@other.example",
        "From: example.net",
    )
    # the envelope wins over the header; a bounce (empty sender) is never a mismatch
    assert "PHISH_RETURN_PATH_MISMATCH" not in signs(raw, Envelope(sender="b@mail.example.net"))
    assert "PHISH_RETURN_PATH_MISMATCH" not in signs(raw, Envelope(sender=""))
    gmail = letter(sender="Ivan <ivan@gmail.com>", headers={"Return-Path": "<ivan@googlemail.com>"})
    assert "PHISH_RETURN_PATH_MISMATCH" not in signs(gmail)  # one organization


def test_received_hosts_and_mismatch() -> None:
    values = [
        "from mx.relay.example (mx.relay.example [192.0.2.1]) by mx.pochta.test with ESMTP",
        "from localhost (localhost [127.0.0.1]) by mx.relay.example",
        "from [192.0.2.5] (helo=mail.example.net) by x",
        "by only.example with LMTP",
    ]
    assert phishing.received_hosts(values) == ["mx.relay.example", "mail.example.net"]
    bad = letter(
        headers={"Received": "from smtp.spam.example (smtp.spam.example [203.0.113.5]) by mx"}
    )
    assert "PHISH_RECEIVED_MISMATCH" in signs(bad)
    good = letter(headers={"Received": "from out.example.net (out.example.net [192.0.2.9]) by mx"})
    assert "PHISH_RECEIVED_MISMATCH" not in signs(good)
    assert "PHISH_RECEIVED_MISMATCH" not in signs(letter())  # nothing to compare


def test_reply_to_mismatch() -> None:
    assert "PHISH_REPLY_TO_MISMATCH" in signs(letter(headers={"Reply-To": "x@other.example"}))
    assert "PHISH_REPLY_TO_MISMATCH" not in signs(
        letter(headers={"Reply-To": "help@support.example.net"})
    )


# -- links ----------------------------------------------------------------------------------
def test_link_text_mismatch_is_compared_at_the_registrable_domain() -> None:
    html = '<a href="http://evil.example/login">https://www.sberbank.ru/login</a>'
    assert signs(letter(html=html))["PHISH_LINK_TEXT_MISMATCH"] == (
        "www.sberbank.ru → evil.example",
    )
    same = '<a href="https://online.sberbank.ru/x">www.sberbank.ru</a><a href="https://sber.ru/">sberbank.ru</a>'
    assert "PHISH_LINK_TEXT_MISMATCH" not in signs(letter(html=same))
    words = '<a href="https://habr.com/a">Как Mail.ru сократила хранилище</a><a href="https://x.example">report.pdf</a>'
    assert "PHISH_LINK_TEXT_MISMATCH" not in signs(letter(html=words))


@pytest.mark.parametrize(
    "href",
    [
        "http://192.0.2.7/login",
        "http://[2001:db8::1]/x",
        "http://3232235777/x",
        "http://0xC0A80001/x",
    ],
)
def test_links_to_ip_addresses(href: str) -> None:
    assert "PHISH_LINK_IP" in signs(letter(html=f'<a href="{href}">click</a>'))


def test_shorteners_in_html_and_text() -> None:
    assert "PHISH_LINK_SHORTENER" in signs(letter(text="Подробности: https://clck.ru/3Ab7 ."))
    assert "PHISH_LINK_SHORTENER" in signs(letter(html='<a href="https://bit.ly/x">x</a>'))
    assert "PHISH_LINK_SHORTENER" not in signs(letter(text="https://example.net/page"))


def test_link_lookalike_and_off_brand() -> None:
    found = signs(letter(html='<a href="https://sberbank-bonus.xyz/">bonus</a>'))
    assert found["PHISH_LINK_LOOKALIKE"] == ("sberbank-bonus.xyz ≈ sberbank (Сбербанк)",)
    assert "PHISH_LINK_OFF_BRAND" not in found  # the letter does not speak for anybody
    off = letter(
        sender="Госуслуги <no-reply@uved-portal.example>",
        text="Статус: https://status-check.example/q",
    )
    assert signs(off)["PHISH_LINK_OFF_BRAND"] == ("Госуслуги: status-check.example",)
    # the organization's own domain links where it likes (a forgery is authentication's job)
    own = letter(
        sender="Google Calendar <calendar-notification@google.com>",
        text="Join: https://us02web.zoom.us/j/831",
    )
    assert "PHISH_LINK_OFF_BRAND" not in signs(own)
    home = letter(
        sender="Госуслуги <no-reply@gosuslugi.ru>",
        text="https://www.gosuslugi.ru/lk и приложение https://apps.apple.com/app/id1",
    )
    assert "PHISH_LINK_OFF_BRAND" not in signs(home)
    user = letter(sender="Ivan <ivan@gmail.com>", text="https://my-blog.example/")
    assert "PHISH_LINK_OFF_BRAND" not in signs(user)  # a gmail user does not speak for Google


def _newsletter(
    ad: list[str],
    *,
    others: int = 12,
    own: list[str] | None = None,
    listed: bool = True,
    sender: str = "Tech Daily <news@techdaily.example>",
) -> bytes:
    """A technology newsletter about Microsoft Outlook: ``others`` links to sites of their
    own, ``own`` links (Microsoft's sites), and the advertisement's links ``ad``."""
    sites = [f"https://www.site{i}.example/story" for i in range(others)] + (own or [])
    anchors = [f'<a href="{u}">story {i}</a>' for i, u in enumerate(sites)]
    anchors += [f'<a href="{u}">Outlook add-ons</a>' for u in ad]
    html = "<p>This week: Microsoft Outlook tips.</p>" + "<br>".join(anchors)
    headers = {"List-Unsubscribe": "<mailto:leave@techdaily.example>"} if listed else {}
    return letter(sender=sender, subject="Tech Daily", text=None, html=html, headers=headers)


def test_a_lookalike_among_a_newsletters_many_sites_is_no_call_to_action() -> None:
    """A list's letter that links to ten sites or more (not the imitated organization's),
    the look-alike at most one link in ten: an advertisement, not a lure's destination."""
    one = ["https://outlook.4team.biz/addon"]
    assert "PHISH_LINK_LOOKALIKE" not in signs(_newsletter(one))
    embedded = ["https://www.outlooksecure.com/", "https://www.outlooksecure.com/buy"]
    assert "PHISH_LINK_LOOKALIKE" not in signs(_newsletter(embedded, others=20))
    # not a list's letter; too few other sites; the look-alike the main destination
    assert "PHISH_LINK_LOOKALIKE" in signs(_newsletter(one, listed=False))
    assert "PHISH_LINK_LOOKALIKE" in signs(_newsletter(one, others=8))
    main = [f"https://outlook.4team.biz/{i}" for i in range(3)]
    assert "PHISH_LINK_LOOKALIKE" in signs(_newsletter(main))
    # a lure copying the organization's own newsletter: its sites are no other destinations
    ms = [f"https://www.{d}/x" for d in ("microsoft.com", "office.com", "live.com", "xbox.com",
                                          "skype.com", "outlook.com", "onedrive.com")]  # fmt: skip
    assert "PHISH_LINK_LOOKALIKE" in signs(_newsletter(one, others=5, own=ms))
    # the letter speaks for the organization; a confusable spelling nobody advertises
    claimed = _newsletter(one, sender="Microsoft Outlook <news@techdaily.example>")
    assert "PHISH_LINK_LOOKALIKE" in signs(claimed)
    paypa1 = _newsletter(["https://paypa1.com/login"])
    assert "PHISH_LINK_LOOKALIKE" in signs(paypa1)


def _lure_in_newsletter(
    lead: str, ad: str, *, sender: str, first: bool = True, stories: int = 10
) -> bytes:
    """A lure dressed as a newsletter (List-Unsubscribe, ``stories`` unrelated sites):
    ``lead`` is the lure's paragraph, ``ad`` its look-alike link, first or after the stories."""
    links = "<br>".join(
        f'<a href="https://www.story{i}-site.example/a">Story {i}</a>' for i in range(stories)
    )
    html = f"<p>{lead} {ad}</p><p>{links}</p>" if first else f"<p>{links}</p><p>{lead} {ad}</p>"
    domain = sender.rsplit("@", 1)[1].rstrip(">")
    headers = {"List-Unsubscribe": f"<mailto:leave@{domain}>"}
    return letter(sender=sender, subject="News", text=None, html=html, headers=headers)


def test_a_lure_dressed_as_a_newsletter_keeps_its_lookalike() -> None:
    """The newsletter exemption is no recipe: a look-alike that is the letter's call to action
    (the first link, an anchor asking to sign in or confirm, or naming the organization) is
    still one, and an attacker's own look-alikes are no unrelated sites."""
    sber = _lure_in_newsletter(
        "Сбербанк сообщает: ваша карта будет заблокирована.",
        '<a href="https://sberbank-podtverzhdenie.ru/login">Подтвердите данные</a>',
        sender="Финновости <info@finnovosti.ru>",
    )
    assert "PHISH_LINK_LOOKALIKE" in signs(sber)
    gosuslugi = _lure_in_newsletter(
        "Госуслуги: начислена компенсация за ЖКХ.",
        '<a href="https://gosuslugi-vyplaty.ru/">Войдите, чтобы получить выплату</a>',
        sender="Городские новости <news@gorodnews.ru>",
        first=False,
    )
    assert "PHISH_LINK_LOOKALIKE" in signs(gosuslugi)
    paypal = _lure_in_newsletter(
        "PayPal: we noticed unusual activity on your account.",
        '<a href="https://paypal-account-review.com/">PayPal Resolution Center</a>.',
        sender="Acmedigest Weekly <service@acmedigest.com>",
        first=False,
    )
    assert "PHISH_LINK_LOOKALIKE" in signs(paypal)
    # ten look-alikes of the attacker's own are no ten unrelated sites, nor ten ads
    many = "".join(f'<a href="https://office365-login{i}.com/">Office 365</a> ' for i in range(10))
    for stories in (5, 10):
        office = _lure_in_newsletter(
            "Microsoft 365 news.",
            many,
            sender="Acmedigest IT <it@acmedigest.com>",
            first=False,
            stories=stories,
        )
        assert "PHISH_LINK_LOOKALIKE" in signs(office), stories


def test_a_newsletters_title_naming_a_brand_after_its_publisher() -> None:
    """ "Lockergnome Apple Core" <subscriptions@lockergnome.com>: the display name begins with
    the sender's own domain's name, and the letter is a newsletter linking to many sites that
    are not Apple's. The name alone, or the shape alone, leaves the sign."""
    title = "Techdaily Apple Core <news@techdaily.example>"
    one = ["https://www.site-x.example/"]
    assert "PHISH_DISPLAY_NAME_BRAND" not in signs(_newsletter(one, sender=title))
    for sender in (
        "Apple Core by Techdaily <news@techdaily.example>",  # the publisher not first
        "Apple Core <news@techdaily.example>",
        "Gmail Apple Support <apple.support@gmail.com>",  # a public mailbox names nobody
    ):
        assert "PHISH_DISPLAY_NAME_BRAND" in signs(_newsletter(one, sender=sender)), sender
    assert "PHISH_DISPLAY_NAME_BRAND" in signs(_newsletter(one, sender=title, listed=False))
    assert "PHISH_DISPLAY_NAME_BRAND" in signs(_newsletter(one, sender=title, others=8))
    lure = letter(sender="Acmenews PayPal Security <x@acmenews.example>",
                  html='<a href="https://acmenews.example/login">Sign in</a>',
                  headers={"List-Unsubscribe": "<mailto:leave@acmenews.example>"})  # fmt: skip
    assert "PHISH_DISPLAY_NAME_BRAND" in signs(lure)
    # a title and ten unrelated sites are no recipe: a link asking to sign in, a card asked for
    for lead, ad in (
        ("Сбербанк начислил вам кешбэк.", '<a href="https://finnovosti.ru/v">Войдите</a>'),
        ("PayPal hold.", '<a href="https://finnovosti.ru/p">PayPal</a>. Enter your card number'),
    ):
        titled = _lure_in_newsletter(
            lead, ad, sender="Finnovosti Сбербанк PayPal <info@finnovosti.ru>", first=False
        )
        assert "PHISH_DISPLAY_NAME_BRAND" in signs(titled), lead


def test_a_newsletters_title_is_withheld_on_the_from_domain() -> None:
    """The exemption rests on the From domain: authentication that shows it forged gives
    the sign back (``Findings.withheld``)."""
    raw = _newsletter(
        ["https://www.site-x.example/"], sender="Techdaily Apple <n@techdaily.example>"
    )
    found = phishing.find(parse(raw))
    assert "PHISH_DISPLAY_NAME_BRAND" not in {s.symbol for s in found.signs}
    assert "PHISH_DISPLAY_NAME_BRAND" in {s.symbol for s in found.withheld}


# -- attachments ----------------------------------------------------------------------------
PE = b"MZ" + bytes(0x3A) + (0x40).to_bytes(4, "little") + b"PE\0\0" + bytes(16)


def _zip(names: dict[str, bytes]) -> bytes:
    b = io.BytesIO()
    with zipfile.ZipFile(b, "w") as z:
        for n, d in names.items():
            z.writestr(n, d)
    return b.getvalue()


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("setup.exe", b"MZ..", {"PHISH_DANGEROUS_ATTACHMENT"}),
        ("invoice.pdf.exe", b"MZ..", {"PHISH_DANGEROUS_ATTACHMENT", "PHISH_DOUBLE_EXTENSION"}),
        ("invoice.pdf      .scr", b"x", {"PHISH_DANGEROUS_ATTACHMENT", "PHISH_DOUBLE_EXTENSION"}),
        ("invoice\u202efdp.js", b"x", {"PHISH_DANGEROUS_ATTACHMENT", "PHISH_DOUBLE_EXTENSION"}),
        ("photo.jpg", PE, {"PHISH_DANGEROUS_ATTACHMENT"}),
        ("photo.jpg", b"MZ" + bytes(100), set()),
        ("disk.IMG", b"x", {"PHISH_DANGEROUS_ATTACHMENT"}),
        ("run.HTA", b"x", {"PHISH_DANGEROUS_ATTACHMENT"}),
        ("plan.xlsm", b"x", {"PHISH_MACRO_ATTACHMENT"}),
        (
            "plan.docx",
            _zip({"word/document.xml": b"", "word/vbaProject.bin": b"x"}),
            {"PHISH_MACRO_ATTACHMENT"},
        ),
        ("plan.docx", _zip({"word/document.xml": b""}), set()),
        (
            "a.zip",
            _zip({"docs/readme.txt": b"", "docs/run.vbs": b""}),
            {"PHISH_ARCHIVE_EXECUTABLE"},
        ),
        ("a.zip", _zip({"docs/scan.pdf": b""}), set()),
        ("a.zip", b"PK\x03\x04 broken", set()),
        ("report.pdf", b"%PDF-1.4", set()),
        ("notes.txt", b"MZ is a notation" + bytes(100), set()),
    ],
)
def test_attachments(name: str, content: bytes, expected: set[str]) -> None:
    found = set(signs(letter(files=[(name, content)])))
    kinds = {
        "PHISH_DANGEROUS_ATTACHMENT",
        "PHISH_DOUBLE_EXTENSION",
        "PHISH_MACRO_ATTACHMENT",
        "PHISH_ARCHIVE_EXECUTABLE",
    }
    assert found & kinds == expected


def test_attachment_names() -> None:
    assert attachments.extension("Report.PDF ") == "pdf"
    assert attachments.extension("noext") == ""
    assert attachments.inspect(None, "application/x-msdownload", b"").dangerous


# -- robustness -----------------------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=2000))
def test_never_raises_on_garbage(raw: bytes) -> None:
    phishing.scan(raw)


@settings(max_examples=40, deadline=None)
@given(st.text(max_size=300), st.text(max_size=80), st.text(max_size=60))
def test_never_raises_on_odd_text(text: str, subject: str, name: str) -> None:
    html = f'<a href="{text[:40]}">{text}</a><form><input type=password></form>'
    raw = letter(text=text or "x", html=html, subject=" ".join(subject.splitlines()) or "s")
    for s in phishing.scan(raw, Envelope(sender=name)):
        assert s.symbol in phishing.SPECS


def test_letter_view() -> None:
    raw = letter(
        html='<p>Hi</p><a href="https://example.org/x">here</a> <img src="a.png">'
        '<div style="display:none">hidden words</div>'
    )
    lt = parse(raw)
    assert [(link.host, link.text, link.source) for link in lt.links] == [
        ("example.org", "here", "html")
    ]
    assert (
        lt.html is not None and lt.html.images == 1 and lt.html.hidden_chars == len("hidden words")
    )
    assert "hidden" not in lt.html.text
