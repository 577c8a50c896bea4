"""The phishing signs' registry: each sign's stable symbol and its short explanation in
Russian and in English (what a person reads next to a verdict). The checks that find them are
in :mod:`pochta.antispam.signs.checks`; their points are in the rules file."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pochta.pickling import by_fields


@dataclass(frozen=True, slots=True)
class SignSpec:
    symbol: str
    ru: str
    en: str


@by_fields  # read back by the server: pochta.pickling
@dataclass(frozen=True, slots=True)
class Sign:
    symbol: str
    explanation_ru: str
    explanation_en: str
    evidence: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, object]:
        return {
            "symbol": self.symbol,
            "explanation_ru": self.explanation_ru,
            "explanation_en": self.explanation_en,
            "evidence": list(self.evidence),
        }


_SPECS = [
    SignSpec(
        "PHISH_IMPERSONAL_GREETING",
        "Обезличенное обращение: отправитель не знает, как вас зовут, — так пишут мошенники, "
        "а госорганы и банки обращаются по имени.",
        "Impersonal greeting: the sender does not know your name, as fraudsters do; government "
        "bodies and banks address you by name.",
    ),
    SignSpec(
        "PHISH_GENEROUS_OFFER",
        "Слишком щедрое предложение: выигрыш, приз, компенсация, наследство или лёгкий "
        "заработок — приманка, чтобы вы перешли по ссылке или заплатили «комиссию».",
        "Too generous an offer: a prize, winnings, compensation, an inheritance or easy money "
        "is bait to make you follow a link or pay a 'fee'.",
    ),
    SignSpec(
        "PHISH_ALARMING_SUBJECT",
        "Тревожная тема письма: блокировка, долг, последнее предупреждение, требование срочно "
        "подтвердить данные — мошенники запугивают, чтобы вы открыли письмо.",
        "Alarming subject: a blocked account, a debt, a last warning or a demand to verify now; "
        "fraudsters frighten you into opening the letter.",
    ),
    SignSpec(
        "PHISH_URGENCY",
        "Письмо торопит и угрожает: срок в часах, блокировка, суд — чтобы вы не успели "
        "подумать и проверить.",
        "The letter rushes and threatens you (hours to act, blocking, court) so that you have "
        "no time to think and check.",
    ),
    SignSpec(
        "PHISH_FAKE_REPLY",
        "«Re:» в теме, хотя переписки не было: в письме нет ссылок на предыдущее сообщение.",
        "'Re:' in the subject although there was no conversation: the letter refers to no "
        "earlier message.",
    ),
    SignSpec(
        "PHISH_SENDER_LOOKALIKE",
        "Адрес отправителя подделывает домен известной организации: похожие буквы, опечатка "
        "или название внутри чужого домена.",
        "The sender's domain imitates a known organization's: look-alike letters, a typo or "
        "the name inside someone else's domain.",
    ),
    SignSpec(
        "PHISH_SENDER_FOREIGN_TLD",
        "Название организации в чужой доменной зоне: например, nalog.de вместо nalog.ru — "
        "вряд ли это российские налоговики.",
        "The organization's name under a foreign domain zone, e.g. nalog.de instead of "
        "nalog.ru: hardly the Russian tax office.",
    ),
    SignSpec(
        "PHISH_SENDER_IDN",
        "Домен отправителя записан смесью алфавитов или буквами, похожими на латинские: "
        "так маскируют поддельные адреса.",
        "The sender's domain mixes alphabets or uses letters that look Latin: a way to disguise "
        "a fake address.",
    ),
    SignSpec(
        "PHISH_DISPLAY_NAME_BRAND",
        "Имя отправителя называет госорган, банк или известный сервис, но адрес не "
        "принадлежит этой организации.",
        "The sender's name is a government body, a bank or a known service, but the address "
        "does not belong to it.",
    ),
    SignSpec(
        "PHISH_DISPLAY_NAME_ADDRESS",
        "В имени отправителя написан один адрес, а письмо пришло с другого, чужого.",
        "The sender's name shows one address while the letter came from another, unrelated one.",
    ),
    SignSpec(
        "PHISH_LINK_TEXT_MISMATCH",
        "Текст ссылки показывает один сайт, а ведёт она на другой.",
        "A link shows one site but leads to another.",
    ),
    SignSpec(
        "PHISH_LINK_LOOKALIKE",
        "Ссылка ведёт на сайт, подделывающий адрес известной организации.",
        "A link leads to a site imitating a known organization's address.",
    ),
    SignSpec(
        "PHISH_LINK_OFF_BRAND",
        "Письмо от имени организации, но ссылки ведут не на её сайт.",
        "The letter speaks for an organization, but its links lead off that organization's sites.",
    ),
    SignSpec(
        "PHISH_LINK_IP",
        "Ссылка ведёт на IP-адрес вместо имени сайта.",
        "A link leads to a bare IP address instead of a site's name.",
    ),
    SignSpec(
        "PHISH_LINK_SHORTENER",
        "Ссылка через сокращатель адресов скрывает, куда она ведёт.",
        "A link goes through a URL shortener that hides where it leads.",
    ),
    SignSpec(
        "PHISH_LINK_OBFUSCATED",
        "Адрес сайта записан так, чтобы программы не сделали из него ссылку (hxxps://, "
        "example[.]com, «точка ру»), и вас просят набрать его вручную: так прячут "
        "мошеннический сайт от проверки.",
        "A site's address is written so that no program makes a link of it (hxxps://, "
        "example[.]com, 'example dot com') and you are asked to type it in: a way to hide a "
        "fraudulent site from checks.",
    ),
    SignSpec(
        "PHISH_LINK_USERINFO",
        "В ссылке перед адресом сайта стоит чужое имя с «@» (например, "
        "https://sberbank.ru@evil.example): вы видите знакомое имя, а браузер откроет сайт "
        "после «@».",
        "A link puts a name and an '@' before the site (e.g. https://paypal.com@evil.example): "
        "you see the familiar name, the browser opens the site after the '@'.",
    ),
    SignSpec(
        "PHISH_LINK_DOMAIN_DISGUISE",
        "Адрес сайта в ссылке начинается с чужого знакомого адреса (например, "
        "https://nalog.ru-lk.site): глаз останавливается на «nalog.ru», а откроется сайт "
        "ru-lk.site.",
        "A link's site starts with another, familiar address (e.g. "
        "https://usps.com-track.top): the eye stops at 'usps.com', the browser opens "
        "com-track.top.",
    ),
    SignSpec(
        "PHISH_LINK_SUSPICIOUS_TLD",
        "Ссылка ведёт на сайт в доменной зоне, которую в основном занимают мошенники и "
        "спамеры (например, .tk, .top): настоящие банки и сервисы там не живут.",
        "A link leads to a site under a domain zone used mostly by fraudsters and spammers "
        "(e.g. .tk, .top); real banks and services do not live there.",
    ),
    SignSpec(
        "PHISH_RETURN_PATH_MISMATCH",
        "Служебный адрес отправителя (Return-Path) не совпадает с доменом в поле «От».",
        "The envelope sender (Return-Path) is not the domain in the From field.",
    ),
    SignSpec(
        "PHISH_RECEIVED_MISMATCH",
        "Служебные заголовки Received не называют домен отправителя: письмо пришло с чужих "
        "серверов.",
        "No Received header names the sender's domain: the letter came from other servers.",
    ),
    SignSpec(
        "PHISH_REPLY_TO_MISMATCH",
        "Ответ уйдёт не отправителю, а на адрес в другом домене.",
        "Replies go to an address in another domain than the sender's.",
    ),
    SignSpec(
        "PHISH_CARD_DATA_REQUEST",
        "Письмо просит данные банковской карты (номер, срок действия, CVV/CVC, PIN или код из "
        "SMS). Банки и госорганы никогда их не запрашивают.",
        "The letter asks for bank card data (number, expiry date, CVV/CVC, PIN or an SMS "
        "code). Banks and government bodies never ask for them.",
    ),
    SignSpec(
        "PHISH_PERSONAL_DATA_REQUEST",
        "Письмо просит пароль, паспортные или другие личные данные.",
        "The letter asks for a password, passport or other personal data.",
    ),
    SignSpec(
        "PHISH_HTML_FORM",
        "В письме есть форма для ввода данных: настоящие организации не собирают данные "
        "прямо в письме.",
        "The letter contains a form for entering data; real organizations do not collect data "
        "inside a letter.",
    ),
    SignSpec(
        "PHISH_EXTORTION",
        "Письмо требует заплатить криптовалютой или подарочными картами и торопит или "
        "угрожает (срок, «видео разошлю вашим контактам»). Это вымогательство: не платите и не "
        "отвечайте.",
        "The letter demands payment in cryptocurrency or gift cards and rushes or threatens "
        "you (a deadline, 'the video goes to your contacts'). This is extortion: do not pay "
        "and do not reply.",
    ),
    SignSpec(
        "PHISH_DANGEROUS_ATTACHMENT",
        "Вложение — программа или образ диска: открыв его, можно заразить компьютер.",
        "An attachment is a program or a disk image; opening it can infect the computer.",
    ),
    SignSpec(
        "PHISH_DOUBLE_EXTENSION",
        "Имя вложения маскирует его настоящий тип (например, «счёт.pdf.exe»).",
        "An attachment's name disguises its real type (e.g. 'invoice.pdf.exe').",
    ),
    SignSpec(
        "PHISH_MACRO_ATTACHMENT",
        "Вложение — документ Office с макросами, которые могут запустить вредоносный код.",
        "An attachment is an Office document with macros that can run malicious code.",
    ),
    SignSpec(
        "PHISH_ARCHIVE_EXECUTABLE",
        "В архиве во вложении лежит программа или документ с макросами.",
        "An attached archive holds a program or a document with macros.",
    ),
    SignSpec(
        "PHISH_FREEMAIL_BRAND",
        "Письмо из бесплатного почтового ящика (gmail.com, mail.ru…), а в имени отправителя — "
        "организация или служба («Служба безопасности», «IT Helpdesk»): банки, магазины и "
        "администраторы почты так не пишут.",
        "A free mailbox (gmail.com, mail.ru...) whose sender name is an organization or a "
        "service ('Security team', 'IT Helpdesk'): banks, shops and mail administrators do not "
        "write from one.",
    ),
    SignSpec(
        "PHISH_SUBJECT_BRAND",
        "Тема письма называет известную организацию, но письмо пришло не с её адреса.",
        "The subject names a known organization, but the letter does not come from its address.",
    ),
    SignSpec(
        "PHISH_RECIPIENT_DOMAIN",
        "Имя отправителя или тема называют ваш собственный почтовый домен, а письмо пришло "
        "со стороннего адреса: кто-то выдаёт себя за вашего администратора почты или "
        "работодателя.",
        "The sender's name or the subject shows your own mail domain, but the letter comes "
        "from an outside address: someone poses as your mail administrator or employer.",
    ),
    SignSpec(
        "PHISH_MAIL_ADMIN_NAME",
        "Отправитель называет себя администратором почты («Администратор почты», «IT "
        "Helpdesk»), но пишет не из вашего домена: ваша служба поддержки так не пишет.",
        "The sender calls itself a mail administrator ('Mail Administrator', 'IT Helpdesk') "
        "but does not write from your domain: your own support does not.",
    ),
    SignSpec(
        "PHISH_ACCOUNT_LURE",
        "Письмо пугает судьбой вашей учётной записи: «сохраните текущий пароль», «ящик "
        "переполнен», «письма задержаны», «введите фразу восстановления кошелька», «войдите "
        "через Telegram» — обычная приманка, чтобы выманить пароль или код.",
        "The letter plays on your account: 'keep your current password', 'mailbox full', "
        "'pending messages', 'enter your wallet's recovery phrase', 'log in through "
        "Telegram': the usual bait for a password or a code.",
    ),
    SignSpec(
        "PHISH_FEE_REQUEST",
        "Письмо просит заплатить небольшую пошлину, сбор за доставку, обновить платёжные "
        "данные, перевести деньги на номер карты или платить на новые реквизиты: так "
        "выманивают данные карты и деньги.",
        "The letter asks for a small customs or delivery fee, for updated payment details, "
        "for money sent to a card number, or for pay sent to new bank details: a way to get "
        "card data and money.",
    ),
    SignSpec(
        "PHISH_HIDDEN_TEXT",
        "В письме спрятан текст: невидимые символы внутри слов или скрытый HTML, которого "
        "больше, чем видимого, — так обманывают фильтры.",
        "The letter hides text: invisible characters inside words, or more hidden HTML than "
        "visible; a way to fool filters.",
    ),
    SignSpec(
        "PHISH_LINK_DATA_URL",
        "Ссылка ведёт не на сайт, а на адрес data: или javascript: — страница спрятана прямо "
        "в ссылке, её никто не проверит.",
        "A link leads to a data: or javascript: address instead of a site: the page is "
        "hidden inside the link, where no check sees it.",
    ),
    SignSpec(
        "PHISH_HTML_ATTACHMENT",
        "Во вложении HTML-страница с формой или скриптом, который уводит на другой сайт: так "
        "крадут пароли, минуя проверку ссылок.",
        "An attached HTML page with a form, or a script that sends you elsewhere: a way to "
        "steal passwords past link checks.",
    ),
    SignSpec(
        "PHISH_QR_CODE",
        "Письмо просит отсканировать QR-код или состоит из одной картинки: ссылка спрятана в "
        "изображении, где её не видит проверка.",
        "The letter asks you to scan a QR code, or is one picture and hardly any text: the "
        "link is hidden in the image, where no check sees it.",
    ),
    SignSpec(
        "PHISH_LINK_FREE_HOSTING",
        "Ссылка ведёт на страницу бесплатного хостинга или конструктора сайтов (pages.dev, "
        "web.app, netlify.app и подобные), где любой за минуту выложит копию страницы входа: "
        "банки и сервисы так свои страницы не размещают.",
        "A link leads to a page on a free hosting or site-builder service (pages.dev, "
        "web.app, netlify.app and the like), where anyone can put up a copy of a sign-in "
        "page in a minute; banks and services do not host their pages there.",
    ),
    SignSpec(
        "PHISH_CALLBACK_LURE",
        "Письмо просит позвонить по номеру, чтобы отменить списание, оформить возврат или "
        "заблокировать чужой вход: мошенники выманивают звонок, а по телефону — коды, "
        "данные карты или удалённый доступ к компьютеру.",
        "The letter asks you to call a number to cancel a charge, get a refund or stop "
        "someone's sign-in: fraudsters want the call, and on the phone ask for codes, card "
        "data or remote access to your computer.",
    ),
    SignSpec(
        "PHISH_BEC_REQUEST",
        "С бесплатного почтового ящика (gmail.com, mail.ru…) у сотрудника организации просят "
        "деньги так, как коллеги, руководители и поставщики не просят: перевести зарплату или "
        "оплату на новые реквизиты, купить подарочные карты, срочно и втайне оплатить счёт. "
        "Проверьте просьбу звонком по известному вам номеру.",
        "A free mailbox (gmail.com, outlook.com...) asks somebody at an organization for money "
        "the way colleagues, managers and suppliers do not: pay sent to new bank details, gift "
        "cards to buy, an invoice to pay at once and in secret. Check the request by calling "
        "a number you already know.",
    ),
    SignSpec(
        "PHISH_MESSENGER_CODE",
        "Письмо просит ввести или прислать код из Telegram, WhatsApp или SMS на чужом сайте "
        "(«проголосуй», «активируй подарок»): с этим кодом мошенники входят в ваш аккаунт "
        "мессенджера.",
        "The letter asks you to enter or send a code from Telegram, WhatsApp or an SMS on "
        "somebody's site ('vote for...', 'activate your gift'): with that code fraudsters sign "
        "in to your messenger account.",
    ),
    SignSpec(
        "PHISH_CALENDAR_LINK",
        "Во вложенном приглашении в календарь спрятана ссылка на IP-адрес, "
        "бесплатный хостинг, подозрительную доменную зону или поддельный домен: письмо "
        "прячет её от проверки ссылок.",
        "An attached calendar invitation hides a link to an IP address, free "
        "hosting, an abused domain zone or a look-alike domain, out of the link checks' "
        "sight.",
    ),
    SignSpec(
        "PHISH_OAUTH_CONSENT",
        "Ссылка ведёт на настоящую страницу входа Microsoft или Google, но после неё доступ к "
        "вашей почте или файлам получит чужое приложение (согласие OAuth): пароль не нужен.",
        "A link leads to a real Microsoft or Google sign-in page, but after it another party's "
        "app gets access to your mail or files (an OAuth consent): no password is needed.",
    ),
    SignSpec(
        "PHISH_DEVICE_LOGIN",
        "Письмо от постороннего ведёт на страницу входа устройства Microsoft или Google "
        "(microsoft.com/devicelogin) и даёт код: введённый там, он впустит отправителя в "
        "вашу учётную запись.",
        "A letter from an outsider sends you to Microsoft's or Google's device sign-in page "
        "(microsoft.com/devicelogin) with a code: typed there, it lets the sender into your "
        "account.",
    ),
    SignSpec(
        "PHISH_TASK_SCAM",
        "С бесплатного почтового ящика предлагают «работу» с оплатой за день, на час-два в "
        "день с телефона или без опыта, и зовут договориться в Telegram или WhatsApp: так "
        "начинаются мошенничества с «заданиями», где за выплату просят сначала внести деньги.",
        "A free mailbox offers a 'job' paid by the day, for an hour or two a day on your phone "
        "or with no experience, to be taken up on Telegram or WhatsApp: how task scams begin, "
        "where the pay is held until you deposit money first.",
    ),
    SignSpec(
        "PHISH_DOCUMENT_LURE",
        "Письмо со стороннего адреса вручает документ: «ознакомьтесь и подпишите», расчётный "
        "лист, индексация зарплаты, голосовое сообщение. Так начинаются фишинговые письма "
        "«от отдела кадров»; опасно, когда путь к документу спрятан в QR-коде или в "
        "приглашении в календарь.",
        "A letter from an outside address hands over a document: 'review and sign', a salary "
        "statement, a pay adjustment, a voicemail. How the 'HR' phishing letters begin; a "
        "danger where the way to it is hidden in a QR code or a calendar invitation.",
    ),
]
SPECS: dict[str, SignSpec] = {s.symbol: s for s in _SPECS}
SYMBOLS: tuple[str, ...] = tuple(SPECS)


def sign(symbol: str, evidence: Sequence[str] = ()) -> Sign:
    spec = SPECS[symbol]
    return Sign(symbol, spec.ru, spec.en, tuple(dict.fromkeys(evidence)))
