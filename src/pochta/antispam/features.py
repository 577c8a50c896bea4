"""Content features of a letter as one flat ``dict[str, float]``. Pure.

:func:`extract` always gives every name in :data:`FEATURES` (0.0 when it does not apply), so
the model sees a fixed schema. :func:`from_signs` and :func:`from_auth` turn phishing signs and
authentication results into features of the same form; the shingle statistics
(``shingle.<type>.<stat>``) are merged in by the caller.

    name                          meaning
    ----------------------------- --------------------------------------------------------------
    text.chars / html.chars       characters of plain text / of the HTML's visible text
    html.share                    html.chars / (text.chars + html.chars)
    html.only                     1 when there is HTML and no plain text
    html.images / html.forms      <img> and <form> elements
    html.hidden_chars             characters hidden by display:none, visibility:hidden, size 0
    text.words                    words of the visible text
    text.letters                  letters of the visible text
    text.upper_ratio              upper-case letters / letters
    text.digit_ratio              digits / (letters + digits)
    text.cyrillic_share           Cyrillic letters / letters (also latin_share)
    text.exclamations             "!" in the visible text
    text.money                    amounts of money written (12 000 руб, $500, 100 тыс.)
    lang.ru / lang.en / lang.other  the language guessed from the script of most letters
    subject.chars, subject.letters, subject.upper_ratio, subject.exclamations
    subject.reply                 the subject starts with Re:/Ответ:/AW:...
    links.count                   web links (HTML anchors and URLs in the text)
    links.distinct_domains        distinct registrable domains among them
    links.ip / links.shortener    links to IP addresses / through URL shorteners
    links.https_share             https links / links
    links.per_kchar               links per 1000 characters of visible text
    attachments.count / .bytes    attachments and their decoded size
    headers.count / .received     header fields / Received fields
    headers.has_message_id, has_date, has_list_unsubscribe, has_list_id, has_in_reply_to
                                  0 or 1
    headers.message_id_aligned    1 when the Message-ID's domain is on the From address's
                                  registrable domain (the sender's own mail system wrote it)
    headers.return_path_aligned   1 when the envelope sender (else the Return-Path field) is
                                  on the From address's registrable domain
    links.own_share               links on the From address's registrable domain / links (0
                                  when there are no links)
    headers.message_id_malformed  1 when a Message-ID is there but not of the form <left@right>
                                  (RFC 5322 msg-id): no mail program writes one
    recipients.count              To + Cc addresses
    recipients.hidden             1 when the letter names no recipient but maybe its sender
                                  (no To, "undisclosed-recipients:;", To and Cc only the From
                                  address: the real ones in Bcc) and is no mailing list's
    sender.protected              the From domain belongs to a protected organization (not
                                  one of its public mail domains such as gmail.com)
    sender.freemail               the From domain (its registrable part) is a public mail
                                  service (signs/data/freemail.txt, as the signs read it)
    sender.display_name_chars     length of the From display name
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from pochta.antispam.auth import results as auth_mod
from pochta.antispam.auth import spf
from pochta.antispam.signs import casefold
from pochta.antispam.signs.protected import Protected
from pochta.antispam.signs.protected import default as default_protected
from pochta.antispam.signs.protected import freemail as default_freemail
from pochta.antispam.signs.protected import shorteners as default_shorteners
from pochta.antispam.signs.registry import SYMBOLS, Sign
from pochta.mime import normalize
from pochta.mime.letter import Letter
from pochta.types import Envelope

FEATURES: tuple[str, ...] = (
    "text.chars", "html.chars", "html.share", "html.only", "html.images", "html.forms",
    "html.hidden_chars", "text.words", "text.letters", "text.upper_ratio", "text.digit_ratio",
    "text.cyrillic_share", "text.latin_share", "text.exclamations", "text.money",
    "lang.ru", "lang.en", "lang.other",
    "subject.chars", "subject.letters", "subject.upper_ratio", "subject.exclamations",
    "subject.reply",
    "links.count", "links.distinct_domains", "links.ip", "links.shortener", "links.https_share",
    "links.per_kchar", "links.own_share",
    "attachments.count", "attachments.bytes",
    "headers.count", "headers.received", "headers.has_message_id", "headers.has_date",
    "headers.has_list_unsubscribe", "headers.has_list_id", "headers.has_in_reply_to",
    "headers.message_id_aligned", "headers.return_path_aligned",
    "headers.message_id_malformed",
    "recipients.count", "recipients.hidden",
    "sender.protected", "sender.freemail", "sender.display_name_chars",
)  # fmt: skip

# Public mail services: the signs' list (``signs/data/freemail.txt``), one source of truth.
FREEMAIL = default_freemail()

# An amount: a digit, a run of digits, spaces, dots and commas, and a unit (every unit starts
# with a letter or a sign, so it can only follow the whole run: possessive); or a currency sign
# and a number. A run with no unit after it is matched too, and not counted, so that the
# search steps over it at once instead of trying again at each of its digits (quadratic).
# Written as one class of first characters, then the branch that character begins (a
# look-behind at it): Python's engine then skips to the next digit or sign in C, where two
# branches made it try the pattern at every position (2.2x faster over the corpus texts that
# hold a mark; the same matches, groups and ends: tests/unit/antispam/test_regex_rewrites.py)
_MONEY = re.compile(
    r"[\d$€£](?:(?<=\d)[\d\s.,]*+(?P<unit>руб\w*|р\.|₽|\$|usd|долл\w*|евро|€|тыс\w*|млн\w*)?"
    r"|(?<=[$€£])(?P<sign>\s?\d[\d,.]*))",
    re.IGNORECASE,
)
MONEY_MARKS = ("руб", "р.", "₽", "$", "usd", "долл", "евро", "€", "тыс", "млн", "£")
"""What every amount :data:`_MONEY` counts holds: a unit of its first branch, a sign of its
second."""
_MONEY_FIRST = casefold.compile_first_look([re.escape(m) for m in MONEY_MARKS])
""":data:`MONEY_MARKS` in RE2, over the text folded as Python's case-insensitive engine
compares it (:func:`casefold.folded`): a text without any (most) holds no amount to count,
and Python's engine, which stops at every number, does not read it."""
_WORD = re.compile(r"\w+")
_REPLY = re.compile(
    r"^\s*+(?:re|ответ|отв|aw|sv|antw|odp)\s*+(?:\[\d++\])?\s*+:", re.IGNORECASE
)  # possessive: two runs of blanks around an optional part would be tried at every split


# runs, not single characters: one match per run, counted by length (the same counts, faster);
# _CYRILLIC and _LATIN say what :func:`_cyrillic` and :func:`_latin` count in the UTF-8 bytes
_LETTERS = re.compile(r"[^\W\d_]+")
_CYRILLIC = re.compile(r"[\u0400-\u052f]+")
_LATIN = re.compile(r"[A-Za-z]+")


_ASCII = bytes(range(128))
_NOT_LATIN = bytes(c for c in _ASCII if not chr(c).isalpha())  # an ASCII letter is Latin
_NOT_UPPER = bytes(c for c in _ASCII if not chr(c).isupper())
_NOT_DIGIT = bytes(c for c in _ASCII if not chr(c).isdigit())


_WORD_OR_BLANK = bytes(
    ord("a") if chr(c).isalnum() or chr(c) == "_" else ord(" ") for c in range(128)
) + bytes(range(128, 256))
r"""Each ASCII byte as ``a`` when it is in Python's ``\w``, else a blank: an ASCII text's
:data:`_WORD` runs are then its runs of ``a``, each one after a blank (one put in front)."""


def words(text: str) -> int:
    """How many :data:`_WORD` runs ``text`` has (an ASCII text is counted without the regex
    engine and without a list of its words: one translation and one count in C; a text with
    few distinct characters beyond ASCII as its :func:`_stand_in`)."""
    if not text.isascii():
        stand_in = _stand_in(text, set(text))
        if stand_in is None:
            return len(_WORD.findall(text))
        text = stand_in
    return (b" " + text.encode("ascii").translate(_WORD_OR_BLANK)).count(b" a")


def _stand_in(text: str, distinct: set[str]) -> str | None:
    r"""``text`` with each of its characters beyond ASCII (``distinct`` holds them) replaced
    by an ASCII one of the same kind for :data:`_WORD` and :data:`_LETTERS`: ``a`` for a
    letter (``[^\W\d_]``), ``0`` for another word character (a decimal digit: ``\d``), a
    blank for the rest; so the stand-in has the same word runs and letters, counted in C. The
    regex engine's ``\w`` is ``str.isalnum`` or ``_`` (ASCII), its ``\d``
    ``str.isdecimal``. None when there are more than :data:`COUNTED_APART` such characters
    (one replacement pass each; the regexes read the text then)."""
    beyond = [c for c in distinct if c > "\x7f"]
    if len(beyond) > COUNTED_APART:
        return None
    for c in beyond:
        text = text.replace(c, " " if not c.isalnum() else "0" if c.isdecimal() else "a")
    return text


def _count(rx: re.Pattern[str], text: str) -> int:
    return sum(map(len, rx.findall(text)))


COUNTED_APART = 48  # distinct capitals and digits counted one by one, at most


def _letters(text: str) -> tuple[int, int, int, int, int]:
    """(letters, upper, digits, cyrillic, latin)"""
    if text.isascii():  # every letter is Latin; counted by deleting every other byte
        b = text.encode("ascii")
        latin = len(b.translate(None, _NOT_LATIN))
        upper = len(b.translate(None, _NOT_UPPER))
        return latin, upper, len(b.translate(None, _NOT_DIGIT)), 0, latin
    # each distinct character asked once, its occurrences counted in C (a pass over the text
    # each): the same sums as asking every character. A text with many distinct capitals and
    # digits (Unicode has ~2,700; the sender chooses) is asked character by character instead,
    # so the cost stays within COUNTED_APART + 1 passes
    distinct = set(text)
    capitals = [c for c in distinct if c.isupper()]
    numerals = [c for c in distinct if c.isdigit()]
    if len(capitals) + len(numerals) <= COUNTED_APART:
        upper = sum(map(text.count, capitals))
        digits = sum(map(text.count, numerals))
    else:
        upper, digits = sum(map(str.isupper, text)), sum(map(str.isdigit, text))
    data = text.encode("utf-8", "surrogatepass")
    stand_in = _stand_in(text, distinct)
    if stand_in is None:
        letters = _count(_LETTERS, text)
    else:
        letters = len(stand_in.encode("ascii").translate(None, _NOT_LATIN))
    return letters, upper, digits, _cyrillic(data), _latin(data)


_ALL_BYTES = bytes(range(256))
_NOT_LATIN_BYTE = bytes(c for c in _ALL_BYTES if not (65 <= c <= 90 or 97 <= c <= 122))
_NOT_CYRILLIC_LEAD = bytes(c for c in _ALL_BYTES if not 0xD0 <= c <= 0xD4)
_PAST_CYRILLIC = tuple(bytes((0xD4, c)) for c in range(0xB0, 0xC0))  # U+0530-U+053F


def _latin(data: bytes) -> int:
    """``_count(_LATIN, text)`` of the text whose UTF-8 is ``data``: its bytes that are ASCII
    letters (UTF-8 writes every other character in bytes past ASCII)."""
    return len(data.translate(None, _NOT_LATIN_BYTE))


def _cyrillic(data: bytes) -> int:
    """``_count(_CYRILLIC, text)`` of the text whose UTF-8 is ``data``: U+0400-U+052F are the
    two-byte characters whose first byte is 0xD0-0xD3, or 0xD4 and a second byte below 0xB0
    (a first byte is never a second one: those are 0x80-0xBF)."""
    leads = data.translate(None, _NOT_CYRILLIC_LEAD)
    if b"\xd4" not in leads:
        return len(leads)
    return len(leads) - sum(data.count(pair) for pair in _PAST_CYRILLIC)


def money(text: str) -> int:
    """How many amounts of money ``text`` writes (12 000 руб, $500, 100 тыс.)."""
    if not casefold.found(_MONEY_FIRST, casefold.folded(text)):
        return 0
    return sum(1 for m in _MONEY.finditer(text) if m.lastgroup is not None)


def _ratio(a: float, b: float) -> float:
    return a / b if b else 0.0


def language(text: str) -> str:
    """``ru``, ``en`` or ``other``: the script of most letters (Cyrillic is taken for
    Russian, Latin for English); ``other`` also when there are no letters."""
    letters, _, _, cyr, lat = _letters(text)
    return _language(letters, cyr, lat)


def _language(letters: int, cyr: int, lat: int) -> str:
    if not letters:
        return "other"
    if cyr / letters >= 0.5:
        return "ru"
    if lat / letters >= 0.5:
        return "en"
    return "other"


def _domain_of(address: str | None) -> str | None:
    """The registrable domain of an address (``<a@b.example.com>`` -> ``example.com``)."""
    if not address:
        return None
    host = normalize.address_domain(address.strip().strip("<>"))
    return normalize.registrable(host) if host else None


def _message_id_domain(message_id: str | None) -> str | None:
    if not message_id or "@" not in message_id:
        return None
    host = message_id.strip().strip("<>").rpartition("@")[2].strip()
    return normalize.registrable(host) if host else None


MAX_MESSAGE_ID = 1000  # characters of a Message-ID field read
_LIST_FIELDS = ("list-id", "list-post", "mailing-list")


def _malformed_message_id(value: str | None) -> bool:
    """A Message-ID field that is not one ``<left@right>`` (RFC 5322's msg-id): "PM200011:12:45
    AM", a bare number. Mail programs and bulk mailers' libraries write the form; a missing
    field is ``headers.has_message_id``'s."""
    if value is None:
        return False
    v = value[:MAX_MESSAGE_ID].strip()
    if not (v.startswith("<") and v.endswith(">")) or v.count("<") != 1 or v.count(">") != 1:
        return True
    left, at, right = v[1:-1].partition("@")
    return not (at and left and right) or "@" in right or any(c.isspace() for c in v)


def _recipients_hidden(letter: Letter) -> bool:
    """No recipient named but maybe the sender itself: no To (nor Cc), a group without
    addresses ("undisclosed-recipients:;"), or only the From address: the real recipients are
    in Bcc, as a bulk mailer sends. A mailing list's letter is addressed to the list (and a
    digest gateway may name nobody): not counted."""
    if any(letter.header(h) for h in _LIST_FIELDS):
        return False
    own = letter.from_address.lower()
    named = {a.address.lower() for a in (*letter.to_addresses, *letter.cc_addresses)}
    # only an address names somebody: not a group's syntax mangled into pieces of one
    # ("<Undisclosed-Recipient:;@host>")
    real = {a for a in named if a.count("@") == 1 and not a.startswith("@") and a[-1] != "@"}
    return not real - {own}


def extract(
    letter: Letter,
    *,
    protected: Protected | None = None,
    shorteners: frozenset[str] | None = None,
    envelope: Envelope | None = None,
) -> dict[str, float]:
    """``envelope``: what the SMTP session said (its sender is the Return-Path); without it,
    the letter's own Return-Path field."""
    prot = protected if protected is not None else default_protected()
    short = shorteners if shorteners is not None else default_shorteners()
    s = letter
    f: dict[str, float] = dict.fromkeys(FEATURES, 0.0)

    plain = letter.plain_text
    html = letter.html
    html_text = html.text if html is not None else ""
    f["text.chars"] = float(len(plain))
    f["html.chars"] = float(len(html_text))
    f["html.share"] = _ratio(len(html_text), len(plain) + len(html_text))
    f["html.only"] = float(html is not None and not plain.strip())
    if html is not None:
        f["html.images"] = float(html.images)
        f["html.forms"] = float(html.forms)
        f["html.hidden_chars"] = float(html.hidden_chars)

    visible = letter.text
    letters, upper, digits, cyr, lat = _letters(visible)
    f["text.words"] = float(words(visible))
    f["text.letters"] = float(letters)
    f["text.upper_ratio"] = _ratio(upper, letters)
    f["text.digit_ratio"] = _ratio(digits, letters + digits)
    f["text.cyrillic_share"] = _ratio(cyr, letters)
    f["text.latin_share"] = _ratio(lat, letters)
    f["text.exclamations"] = float(visible.count("!"))
    f["text.money"] = float(money(visible))
    lang = _language(letters, cyr, lat) if letters else language(s.subject)
    f[f"lang.{lang}"] = 1.0

    subject = s.subject
    s_letters, s_upper, _, _, _ = _letters(subject)
    f["subject.chars"] = float(len(subject))
    f["subject.letters"] = float(s_letters)
    f["subject.upper_ratio"] = _ratio(s_upper, s_letters)
    f["subject.exclamations"] = float(subject.count("!"))
    f["subject.reply"] = float(bool(_REPLY.match(subject)))

    links = letter.web_links
    f["links.count"] = float(len(links))
    f["links.distinct_domains"] = float(len({link.registrable for link in links}))
    f["links.ip"] = float(sum(link.is_ip for link in links))
    f["links.shortener"] = float(
        sum(link.registrable in short or link.host in short for link in links)
    )
    f["links.https_share"] = _ratio(sum(link.url.startswith("https:") for link in links),
                                    len(links))
    f["links.per_kchar"] = _ratio(1000.0 * len(links), max(len(visible), 1))
    own = normalize.registrable(letter.from_domain) if letter.from_domain else None
    if own:
        f["links.own_share"] = _ratio(sum(link.registrable == own for link in links), len(links))

    f["attachments.count"] = float(len(s.attachments))
    f["attachments.bytes"] = float(sum(a.size for a in s.attachments))

    names = [n for n, _ in s.fields]
    f["headers.count"] = float(len(names))
    f["headers.received"] = float(names.count("received"))
    f["headers.has_message_id"] = float("message-id" in names)
    f["headers.has_date"] = float("date" in names)
    f["headers.has_list_unsubscribe"] = float("list-unsubscribe" in names)
    f["headers.has_list_id"] = float("list-id" in names)
    f["headers.has_in_reply_to"] = float("in-reply-to" in names or "references" in names)
    if own:
        f["headers.message_id_aligned"] = float(_message_id_domain(s.message_id) == own)
        bounce = envelope.sender if envelope is not None and envelope.sender else None
        if bounce is None:
            bounce = s.header("return-path")
        f["headers.return_path_aligned"] = float(_domain_of(bounce) == own)
    f["headers.message_id_malformed"] = float(_malformed_message_id(s.header("message-id")))
    f["recipients.count"] = float(len(s.to_addresses) + len(s.cc_addresses))
    f["recipients.hidden"] = float(_recipients_hidden(s))

    fd = letter.from_domain
    f["sender.protected"] = float(fd is not None and prot.sender_org(fd) is not None)
    f["sender.freemail"] = float(fd is not None and (normalize.registrable(fd) or fd) in FREEMAIL)
    f["sender.display_name_chars"] = float(len(letter.from_name))
    return f


SIGN_FEATURES: tuple[str, ...] = (
    *(f"sign.{symbol}" for symbol in SYMBOLS),
    "phish.signs",
)


def from_signs(signs: Iterable[Sign]) -> dict[str, float]:
    """``sign.<SYMBOL>``: 1 when the sign fired, else 0 (every symbol present), and
    ``phish.signs``: how many fired."""
    fired = {s.symbol for s in signs}
    out = dict.fromkeys(_SIGN_FEATURES, 0.0)  # every symbol's, in SYMBOLS' order
    for symbol in fired:
        name = _SIGN_FEATURE.get(symbol)
        if name is not None:
            out[name] = 1.0
    out["phish.signs"] = float(len(fired))
    return out


_SIGN_FEATURE = {symbol: f"sign.{symbol}" for symbol in SYMBOLS}
_SIGN_FEATURES = tuple(_SIGN_FEATURE.values())
"""Each symbol's feature name, made once (not an f-string per symbol per letter)."""


_SPF_CODES: tuple[spf.SpfCode, ...] = (
    "pass", "fail", "softfail", "neutral", "none", "temperror", "permerror",
)  # fmt: skip
_DKIM_CODES: tuple[auth_mod.DkimCode, ...] = (
    "pass", "fail", "neutral", "none", "temperror", "permerror",
)  # fmt: skip
_DMARC_CODES: tuple[auth_mod.DmarcCode, ...] = ("pass", "fail", "none", "temperror", "permerror")
_POLICIES = ("none", "quarantine", "reject")

AUTH_FEATURES: tuple[str, ...] = (
    *(f"auth.spf.{c}" for c in _SPF_CODES),
    *(f"auth.dkim.{c}" for c in _DKIM_CODES),
    *(f"auth.dmarc.{c}" for c in _DMARC_CODES),
    *(f"auth.dmarc_policy.{p}" for p in _POLICIES),
    "auth.dkim.signatures",
)


def from_auth(results: auth_mod.AuthResults | None) -> dict[str, float]:
    """One-hot ``auth.spf.<result>``, ``auth.dkim.<result>``, ``auth.dmarc.<result>``,
    ``auth.dmarc_policy.<policy>`` and ``auth.dkim.signatures`` (a count)."""
    r = results if results is not None else auth_mod.NO_AUTH
    v = r.values()
    out = dict.fromkeys(AUTH_FEATURES, 0.0)
    out[f"auth.spf.{v['spf']}"] = 1.0
    out[f"auth.dkim.{v['dkim']}"] = 1.0
    out[f"auth.dmarc.{v['dmarc']}"] = 1.0
    out[f"auth.dmarc_policy.{v['dmarc_policy']}"] = 1.0
    out["auth.dkim.signatures"] = float(len(r.dkim))
    return out
