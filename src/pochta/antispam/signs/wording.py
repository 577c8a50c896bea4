r"""What phishing letters say (seed 000): phrase families in Russian and English, and a
matcher that quotes what it found. Pure.

Text is matched after :func:`fold`: NFKC, lowercase, ``ё`` as ``е``, invisible format
characters (soft hyphens, zero-width spaces, direction marks) removed, whitespace runs as one
space. Requests (card data, passwords) count only in sentences with no negation in them, so a
bank's "никому не сообщайте код из SMS" is not a request for the code.

Every pattern runs in time linear in the text (docs/regexes.md has the table, and
tests/unit/antispam/test_regex_rewrites.py proves each rewrite finds what the pattern before it
found). Three devices keep them so, where Python's backtracking engine would otherwise go
quadratic on a hostile letter:

- **Bounded word tails.** A stem that may sit inside a word (no ``\b`` before it) and is followed
  by more words reads at most 40 more word characters, possessively: ``карт\w{0,40}+\s+``, not
  ``карт\w*\s+`` (which rescans the rest of a long word from every "карт" in it). A "word"
  running on for more than 40 characters after the stem is not a word, and is not matched there.
- **Possessive runs** where the next token cannot start inside the run (``\d[\d\s.,]*+руб``: the
  unit starts with a letter, so the run of digits, spaces, dots and commas must end where the
  unit begins; nothing is lost by never giving any of it back).
- **Skipped runs.** :data:`OFFER`'s last alternative, the group ``skip``, consumes the rest of a
  run of digits, spaces, dots and commas after the amount patterns failed at its first digit
  (they fail at every later digit of it too, and nothing else can start inside it); its matches
  are not findings (:func:`find_all` drops them).

Adjectives between "dear" and "customer" in :data:`GREETING` are at most eight (it was any
number, tried again from every "dear" of a "dear dear dear ..."; the checks read only the first
600 characters with it anyway).
"""

from __future__ import annotations

import functools
import re
import threading
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import re2

from pochta.antispam.signs import casefold

_SPACE = re.compile(r"[ \t\r\f\v\u00a0]{2,}|[\t\r\f\v\u00a0]")
"""Runs of blanks to write as one space: those that are not one already (a single space, the
most of them, is no match to rebuild the text around)."""
_BLANKS = "\t\r\f\v\u00a0"
"""What :data:`_SPACE` writes as a space, besides the space itself."""
_SENTENCE_END = re.compile(r"\s(?:(?<=[.!?]\s)\s*|(?<=\n)\s*\n)")
r"""Where a sentence ends: blanks after . ! ? (``(?<=[.!?])\s+``), or a blank line
(``\n\s*\n``). Written to begin with the blank every end begins with, so that Python's engine
looks at a position only where one is (a class first: ~0.6 of the time of the two branches
over a letter's text), each branch then as before: the same ends."""


_FORMAT = re.compile("[\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufeff]")
_FORMAT_FIRST = casefold.compile_first_look(
    [r"[\x{ad}\x{61c}\x{180e}\x{200b}-\x{200f}\x{202a}-\x{202e}\x{2060}-\x{2064}\x{feff}]"]
)
""":data:`_FORMAT` in RE2: a text without any (most) is not read by Python's engine."""


def fold(text: str) -> str:
    s = unicodedata.normalize("NFKC", text).casefold()
    if not s.isascii():  # "ё" and the format characters are beyond ASCII
        s = s.replace("ё", "е")
        if casefold.found(_FORMAT_FIRST, s):
            s = _FORMAT.sub("", s)
    return one_space(s)


_SPACES = re.compile("  +")
"""Runs of two spaces or more: a pattern that begins with its literal, which Python's engine
looks for as ``str.find`` does, not trying every position."""


def one_space(s: str) -> str:
    """``_SPACE.sub(" ", s)``: every run of blanks (:data:`_BLANKS` and spaces; not line
    breaks) one space, by C's string passes rather than Python's engine trying every
    position: the blanks made spaces, then each run of spaces one (:data:`_SPACES`: half the
    cost of splitting the text at every space and joining its words again)."""
    for blank in _BLANKS:
        if blank in s:
            s = s.replace(blank, " ")
    if "  " not in s:
        return s
    return _SPACES.sub(" ", s)


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
    r"|our|lucky|dear)\s+){0,8}+(?:customer|client|user|member|friend|account\s*holder"
    r"|sir(?:\s*/\s*madam)?|madam|beneficiary|recipient|subscriber|applicant|winner"
    r"|e-?mail\s+user|webmail\s+user|taxpayer)s?\b",
)
NAMELESS_GREETING = re.compile(
    r"^(?:добрый\s+(?:день|вечер)|доброе\s+утро|доброго\s+времени\s+суток|здравствуйте"
    r"|приветствуем\s+вас|hello|good\s+(?:morning|afternoon|day|evening)|greetings)\s*[!,.]*$"
)

# -- too-generous offer (sign 2) -------------------------------------------------------------
# A digit, a run of digits, spaces, dots and commas, and a unit. Units that start with a letter
# or a sign can only follow the whole run (possessive); "000" can end anywhere inside it.
_AMOUNT = (
    r"(?:\d[\d\s.,]*+(?:тыс\w*|к\b|k\b|млн\w*|миллион\w*)|\d[\d\s.,]*\s*000"
    r"|\d[\d\s.,]*+(?:руб\w*|р\.|₽|\$|usd|долл\w*|евро|€)|[$€]\s?\d[\d,.]*)"
)
SKIP = "skip"
"""The group of a match that is no finding: see the module's docstring and :func:`find_all`."""
_PERIOD = r"(?:в|за|per|a|/)\s*(?:день|сутки|неделю|час|месяц|day|week|hour|month)"
OFFER = _rx(
    r"\bвыигр(?:ал|али|ала|ыш\w*)\b",
    r"\bпобедител\w*\s+(?:\w+\s+)?(?:розыгрыш|лотере|акци|конкурс|опрос)\w*",
    r"\bлотере\w*",
    r"\bприз(?:ы|а|ов|ом|ами)?\b",
    r"получите\s+(?:\w+\s+){0,2}в\s+подарок",
    r"(?:автомобил\w{0,40}+|айфон\w{0,40}+|iphone|квартир\w{0,40}+)\s+в\s+подарок",
    r"в\s+подарок\s+(?:автомобил|айфон|iphone|квартир)\w*",
    r"(?:положен|начислен|одобрен|получит|выплат|оформит)\w{0,40}+\s+(?:\w+\s+){0,3}"
    r"компенсаци\w*",
    r"компенсаци\w{0,40}+\s+(?:\w+\s+){0,3}(?:в\s+размере|по\s+снилс|положен\w*|начислен\w*)",
    r"\bнаследств\w*",
    r"(?:единовременн|социальн|денежн|дополнительн)\w{0,40}+\s+выплат\w*",
    r"прибавк\w{0,40}+\s+к\s+пенси\w*",
    r"\bбез\s+(?:вложений|опыта|усилий|риска)\b",
    r"\b(?:пассивн|высок|стабильн|легк|быстр)\w*\s+(?:доход|заработ|деньг)\w*",
    r"\b(?:заработ|доход|получат|платим|зарплат)\w*\b[^.\n]{0,40}"
    + _AMOUNT
    + r"[^.\n]{0,25}"
    + _PERIOD,
    r"\bот\s+\d+\s+до\s+\d+\s*(?:тыс\w*|000)",
    r"штук\w{0,40}+\s+зелен\w*",
    r"миллион\w{0,40}+\s+за\s+(?:неделю|день|месяц)",
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
    rf"(?P<{SKIP}>\d[\d\s.,]*+)",  # last: a run the amounts above did not match at its start
)

# -- alarming subject and urgency (sign 3) ---------------------------------------------------
ALARM = _rx(
    r"заблокир\w*|блокировк\w*|приостановл\w*|задолженност\w*|\bдолг(?:и|а|ов|у)?\b|\bштраф\w*",
    r"последнее\s+предупреждение|будет\s+удал\w*|удален\w{0,40}+\s+(?:аккаунт|учетн|почт|ящик)\w*",
    r"\bподтвердите\b|\bподтвердить\b|\bсрочн\w*|немедленн\w*|взлом\w*|подозрительн\w*",
    r"несанкционирован\w*",
    r"ограничен\w{0,40}+\s+(?:доступ|аккаунт|карт|счет)\w*|\bсудебн\w*|повестк\w*|\bарест\w*",
    r"истека\w*|просроч\w*|сбой\s+в\s+систем\w*|обновит\w{0,40}+\s+(?:персональн|данн)\w*",
    r"погасит\w*|неоплачен\w*|\bвнимание\b",
    r"suspend\w*|\blocked\b|\bblocked\b|\bverify\b|verification\s+required|confirm\s+your",
    r"unusual\s+(?:sign[- ]?in|activity|login)|security\s+alert|final\s+notice|last\s+warning",
    r"\burgent\w*|action\s+required|\bexpir\w*|overdue|\bdebt\b|unauthori[sz]ed|compromised",
    r"will\s+be\s+(?:deleted|closed|terminated|suspended)|payment\s+(?:failed|declined)",
)
URGENCY = _rx(
    r"в\s+течени[еи]\s+(?:\d+\s*)?(?:час\w*|минут\w*|сут\w*)",
    r"иначе\s+(?:\w+\s+){0,4}(?:будет|будут)\s+(?:заблокир|удал|списан|аннулир|закрыт)\w*",
    r"(?:аккаунт|учетн\w{0,40}+\s+запис|карт|сч[е]т|почт|ящик|доступ)\w{0,40}+\s+(?:\w+\s+){0,2}"
    r"(?:будет|будут)"
    r"\s+(?:заблокир|удал|закрыт|приостановл|ограничен)\w*",
    r"в\s+случае\s+(?:неуплат|неоплат|отказ)\w*|до\s+конца\s+(?:дня|суток)",
    r"\bсрочно\b|\bнемедленно\b|последн\w{1,40}+\s+предупреждени\w*|передан\w{0,40}+\s+в\s+суд",
    r"within\s+\d+\s*(?:hours?|minutes?)|\bor\s+(?:your\s+)?(?:account|card|mailbox|access)"
    r"\s+will\s+be",
    r"will\s+be\s+(?:suspended|terminated|deleted|closed|locked|blocked)",
    r"\bimmediately\b|\bfinal\s+(?:notice|warning)\b|\blegal\s+action\b",
)

# -- requests for card data and credentials (sign 4) ------------------------------------------
CARD_ITEMS: dict[str, re.Pattern[str]] = {
    "card details": re.compile(
        r"данн\w{0,40}+\s+(?:вашей\s+|банковской\s+)*карт\w*"
        r"|реквизит\w{0,40}+\s+(?:вашей\s+)?карт\w*"
        r"|\bcard\s+(?:details|information|data)\b"
    ),
    "card number": re.compile(r"номер\w{0,40}+\s+(?:\w+\s+){0,2}карт\w*|\bcard\s+number"),
    "CVV/CVC": re.compile(
        r"\bcvv2?\b|\bcvc2?\b|\bcvn\b|тр[её]хзначн\w{0,40}+\s+код\w*"
        r"|три\s+цифры\s+(?:на|с)\s+обратн\w*"
        r"|код\w{0,40}+\s+(?:на|с)\s+обратной\s+сторон\w*|\bsecurity\s+code\b|card\s+verification"
    ),
    "expiry date": re.compile(
        r"срок\w{0,40}+\s+действия\s+(?:\w+\s+){0,2}карт\w*"
        r"|срок\w{0,40}+\s+действия\b(?=[^.\n]{0,40}карт)"
        r"|\bexpir(?:y|ation)\s+date\b|\bvalid\s+thru\b"
    ),
    "PIN": re.compile(r"\bпин[- ]?код\w*|\bпин\b|\bpin(?:[- ]?(?:code|код\w*))?\b"),
    "SMS code": re.compile(
        r"код\w{0,40}+\s+из\s+(?:смс|sms)|(?:смс|sms)[- ]?код\w*"
        r"|одноразов\w{0,40}+\s+(?:код|парол)\w*"
        r"|код\w{0,40}+\s+подтверждени\w*|\bone[- ]time\s+(?:code|password|passcode)\b"
    ),
}
PERSONAL_OBJECTS = re.compile(
    r"парол\w*|логин\w*|паспорт\w*|снилс\w*|персональн\w{0,40}+\s+данн\w*|личн\w{0,40}+\s+данн\w*"
    r"|учетн\w{0,40}+\s+данн\w*|\bpassword\b"
    r"|\blogin\s+(?:details|credentials)\b|\bcredentials\b|\bpassport\b|\bsocial\s+security\b"
    r"|\bpersonal\s+(?:details|information|data)\b|\bbilling\s+(?:details|information)\b"
    r"|\baccount\s+(?:details|information)\b|\bidentity\b"
)
REQUEST = re.compile(
    r"\b(?:укаж(?:ите|и)|указать|введ(?:ите|и)|ввести|вве(?:дите|сти)|сообщ(?:ите|ить)"
    r"|отправ(?:ьте|ить)|пришл(?:ите|и)|прислать|вышл(?:ите|и)|выслать|заполн(?:ите|ить)"
    r"|подтверд(?:ите|ить)|предостав(?:ьте|ить)|напиш(?:ите|и)|написать|обнов(?:ите|ить)"
    r"|актуализ\w*|верифиц\w*|пройдите|перейдите)\b"
    r"|\b(?:enter|provide|confirm|update|send|reply\s+with|fill\s+in|fill\s+out|verify"
    r"|submit|re-?enter|validate)\b"
)
NEGATION = re.compile(
    r"\bне\s+(?:сообща|сообщи|переда|называ|говори|вводи|проси|запрашива|спрашива|требу|"
    r"пересыла|присыла|отправля|звони|будем|может|нужно|должн)\w*|\bникому\b|никогда\s+не"
    r"|\bnever\b|\bdo\s+not\b|\bdon't\b|\bwill\s+not\b|\bwon't\b|\bnot\s+ask\b"
)


@dataclass(frozen=True, slots=True)
class Found:
    quote: str  # what was found, as written in the folded text
    label: str = ""  # which item, for families with named items


def quote(text: str, m: re.Match[str], width: int = 60) -> str:
    return quote_span(text, m.start(), m.end(), width)


def quote_span(text: str, start: int, end: int, width: int = 60) -> str:
    """``text[start:end]`` stripped, cut to ``width`` characters with an ellipsis."""
    q = text[start:end].strip()
    return q if len(q) <= width else q[: width - 1] + "…"


def find_all(rx: re.Pattern[str], text: str, limit: int = 3) -> list[str]:
    """The first ``limit`` distinct quotes of ``rx`` in ``text`` (matches of a group named
    :data:`SKIP` are not findings)."""
    out: list[str] = []
    for m in matches(rx, text):
        if m.lastgroup == SKIP:
            continue
        q = quote(text, m)
        if q and q not in out:
            out.append(q)
            if len(out) >= limit:
                break
    return out


def sentences(text: str) -> list[str]:
    """Sentences: split after . ! ? and at blank lines (a wrapped line goes on)."""
    return [s for s in _SENTENCE_END.split(text) if s and s.strip()]


def requests(text: str, items: dict[str, re.Pattern[str]]) -> list[Found]:
    """Mentions of ``items`` in sentences without a negation, each tagged with whether a
    request verb is in the same sentence (label ``"<item>!"``) or not (``"<item>"``)."""
    out: list[Found] = []
    live = {label: rx for label, rx in items.items() if first_candidate(rx, text) is not None}
    if not live:
        return out
    negation = first_candidate(NEGATION, text) is not None
    request = first_candidate(REQUEST, text) is not None
    spans = _Sentences(text)
    no = spans.gate(NEGATION)
    verb = spans.gate(REQUEST)
    found = {label: spans.gate(rx) for label, rx in live.items()}
    for sentence, a, b in spans:
        if negation and no.may(a, b) and NEGATION.search(sentence):
            continue
        asked = request and verb.may(a, b) and REQUEST.search(sentence) is not None
        for label, rx in live.items():
            m = rx.search(sentence) if found[label].may(a, b) else None
            if m:
                out.append(Found(quote(sentence, m), label + ("!" if asked else "")))
    return out


def asks_for(text: str, objects: re.Pattern[str]) -> list[str]:
    """Quotes of sentences that ask (a request verb) for one of ``objects``, not negated."""
    out: list[str] = []
    if first_candidate(REQUEST, text) is None or first_candidate(objects, text) is None:
        return out
    negation = first_candidate(NEGATION, text) is not None
    spans = _Sentences(text)
    no = spans.gate(NEGATION)
    verb = spans.gate(REQUEST)
    found = spans.gate(objects)
    for sentence, a, b in spans:
        if (negation and no.may(a, b) and NEGATION.search(sentence)) or not (
            verb.may(a, b) and REQUEST.search(sentence)
        ):
            continue
        m = objects.search(sentence) if found.may(a, b) else None
        if m:
            q = quote(sentence, m)
            if q not in out:
                out.append(q)
    return out


class _Sentences:
    """The sentences of a text (:func:`sentences`), each with where it lies in the text's
    UTF-8 bytes, and gates (:class:`_Gate`) that say from RE2 which sentences a family may
    match in: Python's engine then searches only those sentences, not every one."""

    def __init__(self, text: str) -> None:
        scan = _scan(text)
        self.data = None if scan is None else scan[0]
        self.spans = _sentence_spans(text, self.data is None or len(self.data) == len(text))

    def __iter__(self) -> Iterator[tuple[str, int, int]]:
        return iter(self.spans)

    def gate(self, rx: re.Pattern[str]) -> _Gate:
        return _Gate(_family(rx)[0] if self.data is not None else None, self.data)


@functools.lru_cache(maxsize=4)
def _sentence_spans(text: str, one_byte: bool) -> tuple[tuple[str, int, int], ...]:
    """:func:`sentences` with each one's place in the text's UTF-8 bytes (its characters when
    ``one_byte``: every character one byte, or the text not encodable). Remembered: the card
    and the personal data checks read one body."""
    out: list[tuple[str, int, int]] = []
    char = byte = start = 0
    ends = [(m.start(), m.end()) for m in _SENTENCE_END.finditer(text)]
    for end, following in [*ends, (len(text), len(text))]:
        sentence = text[start:end]
        if sentence and sentence.strip():
            if one_byte:
                out.append((sentence, start, end))
            else:  # bytes counted on from the last sentence: linear in the text
                byte += len(text[char:start].encode())
                a = byte
                byte += len(sentence.encode())
                out.append((sentence, a, byte))
                char = end
        start = following
    return tuple(out)


class _Gate:
    """Whether a family may match inside the bytes ``[a, b)`` of a text, asked for spans in
    increasing order: no when RE2's relaxed copy finds no place from ``a`` on that begins
    before ``b`` (every match of the family inside a sentence begins where the relaxed copy
    matches in the whole text: a sentence begins after blanks and ends before them, so its
    word boundaries are the text's). The place found is kept for the spans that follow; after
    :data:`CANDIDATES` searches (each may read to the end) every span may."""

    def __init__(self, pre: Any, data: bytes | None) -> None:
        self.pre = pre
        self.data = data
        self.next = -1  # where the last place found begins (past the end: none)
        self.tries = CANDIDATES

    def may(self, a: int, b: int) -> bool:
        if self.pre is None or self.data is None:
            return True
        if self.next < a:
            if self.tries <= 0:
                return True
            self.tries -= 1
            m = self.pre.search(self.data, a)
            self.next = len(self.data) + 1 if m is None else m.start()
        return self.next < b


def first_lines(text: str, count: int = 3) -> Sequence[str]:
    return [line.strip() for line in text.splitlines() if line.strip()][:count]


# -- the RE2 prefilter -----------------------------------------------------------------------
# Python's engine tries every alternative of a phrase family at every position of the text;
# RE2 runs one automaton over it. RE2 alone would not do: its \b and \w are ASCII-only (wrong on
# Cyrillic) and it has no look-around. So RE2 only says where a match may begin: it runs a
# relaxed copy of the pattern that matches wherever the pattern does, and maybe elsewhere too;
# Python's re then reads from there (from nowhere when RE2 finds nothing: most letters). The
# answer is the same as Python's alone, only faster; the relaxing is checked in the tests
# (every code point of the classes; generated texts).
_W2 = r"0-9A-Z_a-z\x{80}-\x{10FFFF}"  # Python's \w, and every other non-ASCII character
_S2 = r"\t-\r\x1c-\x20\x85\p{Z}"  # Python's \s
_D2 = r"\p{Nd}"  # holds every character of Python's \d
_CLASSES = {"w": _W2, "s": _S2, "d": _D2}
_QUANTIFIER = re.compile(r"\{\d*(?:,\d*)?\}")
_LOOKAROUND = ("(?=", "(?!", "(?<=", "(?<!")


def _ascii_word(ch: str) -> bool:
    return len(ch) == 1 and ch.isascii() and ch.isalnum()


def _group_end(pattern: str, i: int) -> int:
    """The index of the ")" closing the group that opens at ``pattern[i]``."""
    depth = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 1
        elif c == "[":
            i = _class_end(pattern, i)
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    raise ValueError(f"unbalanced group in {pattern!r}")


def _class_end(pattern: str, i: int) -> int:
    """The index of the "]" closing the class that opens at ``pattern[i]``."""
    j = i + 1
    if pattern[j : j + 1] == "^":
        j += 1
    if pattern[j : j + 1] == "]":
        j += 1
    while pattern[j] != "]":
        j += 2 if pattern[j] == "\\" else 1
    return j


def _relaxed_class(body: str) -> str:
    out: list[str] = []
    j = 0
    while j < len(body):
        if body[j] == "\\":
            e = body[j + 1]
            if e in _CLASSES and body.startswith("^"):
                raise ValueError(f"a negated class with \\{e} cannot be relaxed: [{body}]")
            out.append(_CLASSES.get(e, "\\" + e))
            j += 2
        else:
            out.append(body[j])
            j += 1
    return "[" + "".join(out) + "]"


def relaxed(pattern: str) -> str:
    """An RE2 pattern that matches wherever the Python ``pattern`` matches, and maybe more:
    ``\\w \\s \\d`` as Unicode classes holding Python's; look-arounds dropped; possessive
    quantifiers made greedy; ``\\b`` kept only next to an ASCII letter or digit (where RE2's
    ASCII boundary holds wherever Python's does), else dropped; named groups unnamed."""
    out: list[str] = []
    i, n = 0, len(pattern)
    quantified = False  # the last token was a quantifier: a "+" after it makes it possessive
    while i < n:
        c = pattern[i]
        token = c
        if c == "\\":
            e = pattern[i + 1]
            i += 2
            if e == "b":
                after = pattern[i : i + 2]
                keep = (out and _ascii_word(out[-1])) or (
                    _ascii_word(after[:1]) and after[1:2] not in ("?", "*", "{")
                )
                token = "\\b" if keep else ""
            elif e in _CLASSES:
                token = "[" + _CLASSES[e] + "]"
            elif e.isalnum() and e not in "nrtfv":
                raise ValueError(f"\\{e} has no RE2 translation here: {pattern!r}")
            else:
                token = "\\" + e
            quantified = False
        elif c == "[":
            j = _class_end(pattern, i)
            token, i, quantified = _relaxed_class(pattern[i + 1 : j]), j + 1, False
        elif pattern.startswith(_LOOKAROUND, i):
            token, i = "", _group_end(pattern, i) + 1
        elif pattern.startswith("(?P<", i):
            token, i = "(?:", pattern.index(">", i) + 1
        elif pattern.startswith("(?:", i):
            token, i = "(?:", i + 3
        elif pattern.startswith("(?", i) or c == "$":  # inline flags, back-references, $
            raise ValueError(f"{pattern[i : i + 3]!r} has no RE2 translation here: {pattern!r}")
        elif c in "*+?" or (c == "{" and _QUANTIFIER.match(pattern, i)):
            if c == "+" and quantified:
                token = ""  # possessive: greedy is a superset
                quantified = False
            else:
                if c == "{":  # {m,n} as {m,}: a smaller automaton, and a superset
                    q = _QUANTIFIER.match(pattern, i).group(0)  # type: ignore[union-attr]
                    low = q[1:-1].partition(",")[0] or "0"
                    token = "{" + low + ",}" if "," in q else q
                    i += len(q) - 1
                quantified = c != "?" or not quantified
            i += 1
        else:
            i += 1
            quantified = False
        out.append(token)
    return "".join(out)


def _prefilter(pattern: str) -> Any:
    return re2.compile(relaxed(pattern).encode(), _options(8 << 20))


def _options(max_mem: int) -> Any:
    options = re2.Options()
    options.never_capture = True
    options.max_mem = max_mem  # a DFA that needs more falls back to the NFA (a set: gives up)
    options.log_errors = False
    return options


_PREFILTERS: dict[re.Pattern[str], Any] = {}
_INDEX: dict[re.Pattern[str], int] = {}  # a pattern's place in the set: 1, 2, ...
_FAMILIES: dict[int, tuple[re.Pattern[str], Any, int]] = {}
"""``id(rx)``: ``rx``, its prefilter and its place in the set; what the checks look up. A
compiled pattern's own hash reads its whole program each time (OFFER's: ~8 us; the checks ask
~20 times a letter), its identity costs nothing; the pattern is held here, so its id is not
another object's while it is registered."""
_RELAXED: list[bytes] = []
_SET: list[Any] = []  # the set of every prefilter, compiled at its first use
SET_MEMORY = 32 << 20
"""Bytes RE2 may spend on the set: its program and the automaton's states (the default 8 MiB
makes it rebuild its states several times over a long letter: 3x slower). With 16 MiB a
long-running worker's automaton filled and was thrown away every few letters, so each letter
built its states again: ~0.67 ms a letter new to it, where 32 MiB or more holds them (~0.33
ms; a worker's RSS ~6 MB more after 2,441 letters; issue 29, worker29j)."""


def _prefilter_set() -> Any:
    """One RE2 automaton for every registered prefilter: one pass over a text says which of
    them match anywhere in it (most match nowhere). Pattern 0 matches every text: an answer
    without it is a set that gave up (its memory ran out), and then each prefilter runs alone."""
    if not _SET:
        found = re2.Set.SearchSet(_options(SET_MEMORY))
        found.Add(b"")
        for pattern in _RELAXED:
            found.Add(pattern)
        found.Compile()
        _SET.append(found)
    return _SET[0]


def warm(texts: Iterable[str]) -> None:
    """Read ``texts`` (folded here) with the set, so that its automaton holds the states such
    texts reach before the first letter does (:mod:`pochta.mailbox.warmed`: once, in the fork
    server, for every worker it forks). RE2 builds the set's automaton lazily, a state for each
    new mix of the families' partial matches a text reaches."""
    found = _prefilter_set()
    for text in texts:
        found.Match(fold(text).encode("utf-8", "replace"))


Scan = tuple[bytes, frozenset[int] | None] | None
_SCANS: dict[str, Scan] = {}  # the last texts scanned, oldest first
SCANS_KEPT = 8
_SCANS_LOCK = threading.Lock()
_MISSING = object()


def _scan(text: str) -> Scan:
    """``text`` as UTF-8 and the prefilters (:data:`_INDEX`) matching somewhere in it (None:
    not known, the set gave up); None for a text RE2 cannot read (a lone surrogate). The
    checks read one text with several families: it is encoded and scanned once (the last
    :data:`SCANS_KEPT` texts are remembered)."""
    found = _SCANS.get(text, _MISSING)
    if found is not _MISSING:
        return found  # type: ignore[return-value]
    try:
        data = text.encode()
    except UnicodeEncodeError:
        return _keep(text, None)
    hits = _prefilter_set().Match(data) or ()
    return _keep(text, (data, frozenset(hits) if 0 in hits else None))


def _keep(text: str, scan: Scan) -> Scan:
    with _SCANS_LOCK:  # the checks may run on several threads of one process
        while len(_SCANS) >= SCANS_KEPT:
            del _SCANS[next(iter(_SCANS))]
        _SCANS[text] = scan
    return scan


def within(outer: str, inner: str) -> None:
    """Let ``inner``, the end of ``outer`` after a line break (a body after its subject), be
    read with ``outer``'s pass of the set rather than a pass of its own: what matches
    somewhere in ``inner`` matches in ``outer`` too (the relaxed copies look at no more than
    the characters they match and, for ``\\b``, the one before, a line break in ``outer``
    as the start is in ``inner``), so ``outer``'s answer is a superset of ``inner``'s, and each
    family it names still searches ``inner`` itself. Nothing is done when ``inner`` was
    scanned already or is not ``outer``'s end."""
    cut = len(outer) - len(inner)
    if not inner or inner in _SCANS or cut < 1 or outer[cut - 1] != "\n":
        return
    if not outer.endswith(inner):
        return
    scan = _scan(outer)
    if scan is None:  # a lone surrogate somewhere in outer: inner is scanned on its own
        return
    data, hits = scan
    _keep(inner, (data[len(outer[:cut].encode()) :], hits))


def _family(rx: re.Pattern[str]) -> tuple[Any, int]:
    """``rx``'s prefilter and place in the set; (None, 0) for a pattern not registered."""
    found = _FAMILIES.get(id(rx))
    if found is None or found[0] is not rx:
        return None, 0
    return found[1], found[2]


def first_candidate(rx: re.Pattern[str], text: str) -> int | None:
    """Where a match of ``rx`` may begin at the earliest (RE2 over the relaxed copy of
    ``rx``); None when it matches nowhere in ``text``; 0 for a pattern without a prefilter or
    a text RE2 cannot read."""
    pre, index = _family(rx)
    scan = None if pre is None else _scan(text)
    if pre is None or scan is None:
        return 0
    data, hits = scan
    if hits is not None and index not in hits:
        return None
    m = pre.search(data)
    if m is None:
        return None
    if len(data) == len(text):  # every character one byte
        return int(m.start())
    return len(data[: m.start()].decode("utf-8", "ignore"))


CANDIDATES = 32
"""Positions :func:`matches` tries where RE2 says a match may begin, before it leaves the rest
of the text to Python's engine alone. Each try is one RE2 search from there, which may read to
the end of the text (a relaxed ``[^.\\n]{0,40}`` reads any length); the bound keeps a text full
of near-matches linear."""


def matches(rx: re.Pattern[str], text: str) -> Iterator[re.Match[str]]:
    """``rx.finditer(text)``: the same matches, but Python's engine tries ``rx`` only where RE2
    says a match may begin (the relaxed copy matches there: every match of ``rx`` begins at such
    a position), not at every position of the text; after :data:`CANDIDATES` positions tried,
    as ``finditer`` from there."""
    pre, index = _family(rx)
    scan = None if pre is None else _scan(text)
    if pre is None or scan is None:  # no prefilter, or a text RE2 cannot read
        yield from rx.finditer(text)
        return
    data, hits = scan
    if hits is not None and index not in hits:
        return
    char = byte = 0  # the same place, in characters and in bytes
    ascii = len(data) == len(text)  # every character one byte: the two places are one
    for _ in range(CANDIDATES):
        found = pre.search(data, byte)
        if found is None:
            return
        start = found.start()
        if ascii:
            char = byte = start
        else:
            if start < len(data) and data[start] & 0xC0 == 0x80:  # inside a character: RE2
                break  # in UTF-8 never starts a match there, but should it, Python reads on
            char += len(data[byte:start].decode())
            byte = start
        m = rx.match(text, char)
        if m is None:
            if char >= len(text):
                return
            byte += 1 if ascii else len(text[char].encode())
            char += 1
            continue
        if m.end() == char:  # an empty match: Python's own rules from here
            break
        yield m
        byte += m.end() - char if ascii else len(text[char : m.end()].encode())
        char = m.end()
    yield from rx.finditer(text, char)


def search(rx: re.Pattern[str], text: str) -> re.Match[str] | None:
    """``rx.search(text)``: the first of :func:`matches` (Python's engine only where RE2 says a
    match may begin; not at all in a text where the set finds no place for ``rx``)."""
    return next(matches(rx, text), None)


def register(rx: re.Pattern[str], *, without: str = "") -> None:
    """Make ``rx`` (no flags) a family of the set: its relaxed copy is read in the one pass
    every family shares, and :func:`first_candidate` / :func:`matches` / :func:`search` run
    Python's engine only where that copy says a match may begin. ``without``: an alternative
    of the pattern that is no finding, left out of the copy."""
    if rx.flags != re.UNICODE:  # case-insensitive matching would need its own relaxing
        raise ValueError(f"no prefilter for a pattern with flags: {rx.pattern[:40]!r}")
    pattern = rx.pattern
    if without:  # an alternative that is no finding: the prefilter leaves it out
        pattern = pattern.replace(without, "")
    _PREFILTERS[rx] = _prefilter(pattern)
    _RELAXED.append(relaxed(pattern).encode())
    _INDEX[rx] = len(_RELAXED)
    _FAMILIES[id(rx)] = (rx, _PREFILTERS[rx], _INDEX[rx])
    _SET.clear()
    _SCANS.clear()


_GATES: dict[str, tuple[int, Any]] = {}  # name: (place in the set, the pattern alone)


def register_gate(name: str, pattern: str) -> None:
    """Put the RE2 ``pattern`` into the set under ``name``: :func:`gate` then says whether it
    matches somewhere in a text from the pass every family shares. For a first look of a
    check whose own patterns are not a family's (``links.obfuscated``: case-insensitive)."""
    _RELAXED.append(pattern.encode())
    _GATES[name] = (len(_RELAXED), re2.compile(pattern.encode(), _options(8 << 20)))
    _SET.clear()
    _SCANS.clear()


def gate(name: str, text: str) -> bool | None:
    """Whether the gate ``name`` (:func:`register_gate`) matches somewhere in ``text``; None
    for a text RE2 cannot read (a lone surrogate)."""
    index, alone = _GATES[name]
    scan = _scan(text)
    if scan is None:
        return None
    data, hits = scan
    if hits is None:  # the set gave up: the gate alone
        return alone.search(data) is not None
    return index in hits


for _rx_ in (GREETING, ALARM, URGENCY, *CARD_ITEMS.values(), PERSONAL_OBJECTS, REQUEST, NEGATION):
    register(_rx_)
register(OFFER, without=f"|(?:(?P<{SKIP}>\\d[\\d\\s.,]*+))")
