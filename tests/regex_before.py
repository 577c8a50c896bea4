"""The patterns as they were before the linear-time rewrites (issue: regexes on letter text
backtrack), kept verbatim for the equivalence tests (tests/unit/antispam/test_regex_rewrites.py)
and the before/after figures of benchmarks/regex_table.py. Not used by pochta itself.

- wording: pochta.antispam.signs.wording at 773284f (GREETING, OFFER, ALARM, URGENCY,
  CARD_ITEMS, PERSONAL_OBJECTS; the others did not change);
- wording's ``find_all``, ``requests`` and ``asks_for`` (before the RE2 prefilter);
- features: ``_MONEY``, ``_REPLY`` and the letter counts of pochta.antispam.features;
- normalize: ``subject()`` of pochta.mime.normalize with its two patterns;
- headers: ``_HEADER_LINE`` and ``_MEDIA_TYPE`` of pochta.mime.headers.
"""

from __future__ import annotations

import re

from pochta.antispam.signs.wording import NEGATION, REQUEST, Found, quote, sentences
from pochta.mime import normalize


# -- pochta.antispam.signs.wording -----------------------------------------------------------
def _rx(*parts: str) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{p})" for p in parts))


# -- impersonal greeting (sign 1) ------------------------------------------------------------
GREETING = _rx(
    r"\b(?:(?:мой|моя|наш|наша)\s+)?(?:уважаем|многоуважаем|дорог|любезн|мил)\w*\s*(?:\(\w{1,3}\)\s*)?"
    r"(?:наш\w*\s+)?(?:клиент|пользовател|абонент|друг|подруг|получател|налогоплательщик"
    r"|вкладчик|пенсионер|граждан|держател|участник|покупател|владел|заемщик|соискател"
    r"|победител|счастливчик)\w*",
    r"\b(?:здравствуй|привет)\w*[,!\s]+(?:дорог\w*\s+)?друг\w*",
    r"\b(?:dear|hello|hi|greetings|attention)[,\s]+(?:(?:valued|beloved|esteemed|respected"
    r"|our|lucky|dear)\s+)*(?:customer|client|user|member|friend|account\s*holder"
    r"|sir(?:\s*/\s*madam)?|madam|beneficiary|recipient|subscriber|applicant|winner"
    r"|e-?mail\s+user|webmail\s+user|taxpayer)s?\b",
)

# -- too-generous offer (sign 2) -------------------------------------------------------------
_AMOUNT = (
    r"(?:\d[\d\s.,]*\s*(?:000|тыс\w*|к\b|k\b|млн\w*|миллион\w*)"
    r"|\d[\d\s.,]*\s*(?:руб\w*|р\.|₽|\$|usd|долл\w*|евро|€)|[$€]\s?\d[\d,.]*)"
)
_PERIOD = r"(?:в|за|per|a|/)\s*(?:день|сутки|неделю|час|месяц|day|week|hour|month)"
OFFER = _rx(
    r"\bвыигр(?:ал|али|ала|ыш\w*)\b",
    r"\bпобедител\w*\s+(?:\w+\s+)?(?:розыгрыш|лотере|акци|конкурс|опрос)\w*",
    r"\bлотере\w*",
    r"\bприз(?:ы|а|ов|ом|ами)?\b",
    r"получите\s+(?:\w+\s+){0,2}в\s+подарок",
    r"(?:автомобил\w*|айфон\w*|iphone|квартир\w*)\s+в\s+подарок",
    r"в\s+подарок\s+(?:автомобил|айфон|iphone|квартир)\w*",
    r"(?:положен\w*|начислен\w*|одобрен\w*|получит\w*|выплат\w*|оформит\w*)\s+(?:\w+\s+){0,3}"
    r"компенсаци\w*",
    r"компенсаци\w*\s+(?:\w+\s+){0,3}(?:в\s+размере|по\s+снилс|положен\w*|начислен\w*)",
    r"\bнаследств\w*",
    r"(?:единовременн|социальн|денежн|дополнительн)\w*\s+выплат\w*",
    r"прибавк\w*\s+к\s+пенси\w*",
    r"\bбез\s+(?:вложений|опыта|усилий|риска)\b",
    r"\b(?:пассивн|высок|стабильн|легк|быстр)\w*\s+(?:доход|заработ|деньг)\w*",
    r"\b(?:заработ|доход|получат|платим|зарплат)\w*\b[^.\n]{0,40}"
    + _AMOUNT
    + r"[^.\n]{0,25}"
    + _PERIOD,
    r"\bот\s+\d+\s+до\s+\d+\s*(?:тыс\w*|000)",
    r"штук\w*\s+зелен\w*",
    r"миллион\w*\s+за\s+(?:неделю|день|месяц)",
    r"\bзаработайте\b",
    r"теперь\s+вы\s+в\s+нашей\s+команде",
    r"\bвам\s+(?:одобрен|положен)\w*",
    r"\byou(?:'ve|\s+have)?\s+(?:been\s+)?(?:won|selected\s+to\s+receive|approved\s+for)\b",
    r"\b(?:lottery|sweepstakes?|jackpot)\b",
    r"\b(?:prize|winner)s?\b",
    r"\binheritance\b|\bbeneficiary\b|\bnext\s+of\s+kin\b",
    r"\bcompensation\s+(?:fund|payment)\b",
    r"\bclaim\s+(?:your\s+)?(?:reward|prize|refund|compensation|funds?|payment)\b",
    r"\bwork\s+from\s+home\b|\bno\s+experience\s+(?:is\s+)?(?:needed|required)\b",
    r"\beasy\s+money\b",
    r"\bearn\b[^.\n]{0,30}" + _AMOUNT,
    _AMOUNT + r"\s*" + _PERIOD + r"\b",
    r"\b(?:free|complimentary)\s+(?:iphone|ipad|gift\s+card|vacation|car)\b",
    r"\bmillion\s+(?:dollars|usd|euros?)\b",
)

# -- alarming subject and urgency (sign 3) ---------------------------------------------------
ALARM = _rx(
    r"заблокир\w*|блокировк\w*|приостановл\w*|задолженност\w*|\bдолг(?:и|а|ов|у)?\b|\bштраф\w*",
    r"последнее\s+предупреждение|будет\s+удал\w*|удален\w*\s+(?:аккаунт|учетн|почт|ящик)\w*",
    r"\bподтвердите\b|\bподтвердить\b|\bсрочн\w*|немедленн\w*|взлом\w*|подозрительн\w*",
    r"несанкционирован\w*",
    r"ограничен\w*\s+(?:доступ|аккаунт|карт|счет)\w*|\bсудебн\w*|повестк\w*|\bарест\w*",
    r"истека\w*|просроч\w*|сбой\s+в\s+систем\w*|обновит\w*\s+(?:персональн|данн)\w*",
    r"погасит\w*|неоплачен\w*|\bвнимание\b",
    r"suspend\w*|\blocked\b|\bblocked\b|\bverify\b|verification\s+required|confirm\s+your",
    r"unusual\s+(?:sign[- ]?in|activity|login)|security\s+alert|final\s+notice|last\s+warning",
    r"\burgent\w*|action\s+required|\bexpir\w*|overdue|\bdebt\b|unauthori[sz]ed|compromised",
    r"will\s+be\s+(?:deleted|closed|terminated|suspended)|payment\s+(?:failed|declined)",
)
URGENCY = _rx(
    r"в\s+течени[еи]\s+(?:\d+\s*)?(?:час\w*|минут\w*|сут\w*)",
    r"иначе\s+(?:\w+\s+){0,4}(?:будет|будут)\s+(?:заблокир|удал|списан|аннулир|закрыт)\w*",
    r"(?:аккаунт|учетн\w*\s+запис|карт|сч[е]т|почт|ящик|доступ)\w*\s+(?:\w+\s+){0,2}(?:будет|будут)"
    r"\s+(?:заблокир|удал|закрыт|приостановл|ограничен)\w*",
    r"в\s+случае\s+(?:неуплат|неоплат|отказ)\w*|до\s+конца\s+(?:дня|суток)",
    r"\bсрочно\b|\bнемедленно\b|последн\w+\s+предупреждени\w*|передан\w*\s+в\s+суд",
    r"within\s+\d+\s*(?:hours?|minutes?)|\bor\s+(?:your\s+)?(?:account|card|mailbox|access)"
    r"\s+will\s+be",
    r"will\s+be\s+(?:suspended|terminated|deleted|closed|locked|blocked)",
    r"\bimmediately\b|\bfinal\s+(?:notice|warning)\b|\blegal\s+action\b",
)

# -- requests for card data and credentials (sign 4) ------------------------------------------
CARD_ITEMS: dict[str, re.Pattern[str]] = {
    "card details": re.compile(
        r"данн\w*\s+(?:вашей\s+|банковской\s+)*карт\w*|реквизит\w*\s+(?:вашей\s+)?карт\w*"
        r"|\bcard\s+(?:details|information|data)\b"
    ),
    "card number": re.compile(r"номер\w*\s+(?:\w+\s+){0,2}карт\w*|\bcard\s+number"),
    "CVV/CVC": re.compile(
        r"\bcvv2?\b|\bcvc2?\b|\bcvn\b|тр[её]хзначн\w*\s+код\w*|три\s+цифры\s+(?:на|с)\s+обратн\w*"
        r"|код\w*\s+(?:на|с)\s+обратной\s+сторон\w*|\bsecurity\s+code\b|card\s+verification"
    ),
    "expiry date": re.compile(
        r"срок\w*\s+действия\s+(?:\w+\s+){0,2}карт\w*|срок\w*\s+действия\b(?=[^.\n]{0,40}карт)"
        r"|\bexpir(?:y|ation)\s+date\b|\bvalid\s+thru\b"
    ),
    "PIN": re.compile(r"\bпин[- ]?код\w*|\bпин\b|\bpin(?:[- ]?(?:code|код\w*))?\b"),
    "SMS code": re.compile(
        r"код\w*\s+из\s+(?:смс|sms)|(?:смс|sms)[- ]?код\w*|одноразов\w*\s+(?:код|парол)\w*"
        r"|код\w*\s+подтверждени\w*|\bone[- ]time\s+(?:code|password|passcode)\b"
    ),
}
PERSONAL_OBJECTS = re.compile(
    r"парол\w*|логин\w*|паспорт\w*|снилс\w*|персональн\w*\s+данн\w*|личн\w*\s+данн\w*"
    r"|учетн\w*\s+данн\w*|\bpassword\b"
    r"|\blogin\s+(?:details|credentials)\b|\bcredentials\b|\bpassport\b|\bsocial\s+security\b"
    r"|\bpersonal\s+(?:details|information|data)\b|\bbilling\s+(?:details|information)\b"
    r"|\baccount\s+(?:details|information)\b|\bidentity\b"
)


def find_all(rx: re.Pattern[str], text: str, limit: int = 3) -> list[str]:
    out: list[str] = []
    for m in rx.finditer(text):
        q = text[m.start() : m.end()].strip()
        q = q if len(q) <= 60 else q[:59] + "…"
        if q and q not in out:
            out.append(q)
            if len(out) >= limit:
                break
    return out


def requests(text: str, items: dict[str, re.Pattern[str]]) -> list[Found]:
    out: list[Found] = []
    for sentence in sentences(text):
        if NEGATION.search(sentence):
            continue
        asked = REQUEST.search(sentence) is not None
        for label, rx in items.items():
            m = rx.search(sentence)
            if m:
                out.append(Found(quote(sentence, m), label + ("!" if asked else "")))
    return out


def asks_for(text: str, objects: re.Pattern[str]) -> list[str]:
    out: list[str] = []
    for sentence in sentences(text):
        if NEGATION.search(sentence) or not REQUEST.search(sentence):
            continue
        m = objects.search(sentence)
        if m:
            q = quote(sentence, m)
            if q not in out:
                out.append(q)
    return out


# -- pochta.antispam.features ----------------------------------------------------------------
MONEY = re.compile(
    r"\d[\d\s.,]*\s*(?:руб\w*|р\.|₽|\$|usd|долл\w*|евро|€|тыс\w*|млн\w*)|[$€£]\s?\d[\d,.]*",
    re.IGNORECASE,
)
LETTER = re.compile(r"[^\W\d_]")
CYRILLIC = re.compile(r"[\u0400-\u052f]")
LATIN = re.compile(r"[A-Za-z]")


def letters(text: str) -> tuple[int, int, int, int, int]:
    """(letters, upper, digits, cyrillic, latin)"""
    return (
        len(LETTER.findall(text)),
        sum(map(str.isupper, text)),
        sum(map(str.isdigit, text)),
        len(CYRILLIC.findall(text)),
        len(LATIN.findall(text)),
    )


FEATURES_REPLY = re.compile(
    r"^\s*(?:re|ответ|отв|aw|sv|antw|odp)\s*(?:\[\d+\])?\s*:", re.IGNORECASE
)


# -- pochta.mime.normalize -------------------------------------------------------------------
SUBJECT_REPLY = re.compile(
    r"(?:(?:re|fwd?|ответ|отв|aw|wg|sv|vs|tr|rv|réf|antw|odp|pd|fs|vl)"
    r"\s*(?:\[\d+\]|\(\d+\)|\^\d+)?\s*:\s*)+"
)
LEADING_TAGS = re.compile(r"^(?:\[[^\]]{0,40}\]\s*)+")


def subject(value: str) -> str:
    s = normalize.text(value)
    while True:
        tags = LEADING_TAGS.match(s)
        start = tags.end() if tags else 0
        m = SUBJECT_REPLY.match(s, start)
        if not m or m.end() == start:
            return s
        s = (s[:start] + s[m.end() :]).strip()


# -- pochta.mime.headers ---------------------------------------------------------------------
HEADER_LINE = re.compile(rb"From |[\x21-\x39\x3b-\x7e]*:|[\t ]")
_TCHARS = r"[!#$%&'*+.^_`|~0-9a-z-]+"
MEDIA_TYPE = re.compile(rf"\s*({_TCHARS}/{_TCHARS})")
