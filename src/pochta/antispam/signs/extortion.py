"""Payment demanded in cryptocurrency or gift cards under a deadline or a threat (sextortion,
"I hacked your device", CEO fraud asking for gift-card codes). Pure; the patterns run in time
linear in the text (bounded repetitions, no nested quantifiers over one class).

:func:`wallets` finds cryptocurrency addresses by their shapes: Bitcoin legacy (``1...`` /
``3...``, Base58, 26-35 characters) and bech32 (``bc1...``), Ethereum (``0x`` and 40 hex
digits; also USDT on ERC-20), Tron (``T...``, Base58, 34 characters; USDT on TRC-20). A
Base58 address whose checksum holds is marked valid; the shape alone still counts when the
text names a cryptocurrency, since letters quote addresses with typos too.
:func:`demand` tells whether a folded text demands a payment by one of these channels and
backs it with a deadline or a threat.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from pochta.antispam.signs import casefold, wording

MAX_TEXT = 200_000

_B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
_B58_CLASS = "1-9A-HJ-NP-Za-km-z"
_WALLET = re.compile(
    r"(?<![0-9A-Za-z])(?:"
    rf"(?P<btc>[13][{_B58_CLASS}]{{25,34}})"
    r"|(?P<bech32>(?:bc1|BC1)[02-9ac-hj-np-zAC-HJ-NP-Z]{11,71})"
    r"|(?P<eth>0x[0-9a-fA-F]{40})"
    rf"|(?P<tron>T[{_B58_CLASS}]{{33}})"
    r")(?![0-9A-Za-z])"
)
_WALLET_FIRST = casefold.compile_first_look(
    [
        rf"[13][{_B58_CLASS}]{{25}}",
        r"(?:bc1|BC1)[02-9ac-hj-np-zAC-HJ-NP-Z]{11}",
        r"0x[0-9a-fA-F]{40}",
        rf"T[{_B58_CLASS}]{{33}}",
    ]
)
""":data:`_WALLET` in RE2 without its look-arounds and with the shortest lengths: every
address :data:`_WALLET` finds holds a match of it. Most texts hold none, and then Python's
engine, which tries the look-behind at every position, does not read them."""
CRYPTO = re.compile(
    r"\b(?:bitcoin\w{0,24}+|btc|биткоин\w{0,24}+|биткойн\w{0,24}+|биткоин|крипт\w{0,24}+|crypto\w{0,24}+|ethereum|eth|эфир\w{0,24}+"
    r"|usdt|tether|trc-?20|erc-?20|tron|trx|monero|xmr|litecoin|ltc|wallet\w{0,24}+|кошел[её]к\w{0,24}+"
    r"|кошельк\w{0,24}+)\b"
)
GIFT_CARDS = re.compile(
    r"\bgift\s?cards?\b|\b(?:google\s+play|itunes|apple|steam|amazon|ebay|razer\s+gold)"
    r"\s+(?:gift\s+)?cards?\b|подарочн\w{0,24}+\s+(?:карт|сертификат)\w{0,24}+"
    r"|карт\w{0,24}+\s+(?:google\s+play|itunes|app\s+store|steam)|\bваучер\w{0,24}+"
)
_CARD_WORDS = ("card", "карт", "сертификат", "ваучер")
# ...and the codes sent back: what makes a shop's gift-card offer a scam's demand. At most 6
# words between the verb and what is sent back; a word ([\w'-]) and a gap ([^\w'-]) share no
# character and both are possessive, so each word is read once (with \W gaps, a run of "-"
# could be split in every way: 75 dashes took minutes).
_SEND_CODES = re.compile(
    r"\b(?:send|email|text|reply\s+with|forward|scratch|пришл\w{0,24}+|отправ\w{0,24}+|скин\w{0,24}+"
    r"|сфотографир\w{0,24}+|сотри\w{0,24}+)[^\w'-]{1,3}+(?:[\w'-]{1,20}+[^\w'-]{1,3}+){0,6}?"
    r"(?:codes?|pins?|pictures?|photos?|card\s+numbers|код\w{0,24}+|фото\w{0,24}+|номер\w{0,24}+)"
)
_PAY = re.compile(
    r"\b(?:pay|send|transfer|deposit|buy|purchase|scratch|переведите|перевести|переведи"
    r"|отправьте|отправить|отправь|оплатите|оплатить|оплати|заплатите|заплатить|заплати"
    r"|купите|купить|приобретите|приобрести|пришлите|перечислите|перечислить|скиньте)\b"
)
_NEAR = 600  # characters around a wallet address searched for the demand to pay into it
_DEADLINE = re.compile(
    r"\b\d{1,3}\s?(?:hours?|hrs?|days?|час(?:а|ов)?|сут(?:ки|ок)|дн(?:я|ей)|день)\b"
    r"|\bdeadline\b|\buntil\s+tomorrow\b|\btoday\b|\bсегодня\b|\burgent\w{0,24}+|\bсрочно\b"
    r"|в\s+течени[еи]\b|\bдо\s+(?:завтра|конца)\b|\bсрок\w{0,24}+\b|\btimer\b|\bтаймер\w{0,24}+"
    r"|as\s+soon\s+as\s+you\s+(?:read|open)|с\s+момента\s+(?:прочтения|открытия)"
)
_THREAT = re.compile(
    r"\b(?:video|recording|recorded|webcam|camera|screenshots?|compromising|intimate)\b"
    r"|\bвидео\w{0,24}+|\bзапис(?:ь|ал|ала|и)\w{0,24}+|\bкамер\w{0,24}+|\bинтимн\w{0,24}+|\bкомпромат\w{0,24}+"
    r"|\b(?:your|all\s+your)\s+(?:contacts|friends|family|colleagues)\b"
    r"|\bвс\w{0,24}+\s+(?:ваш\w{0,24}+|твои\w{0,24}+)\s+(?:контакт|друз|родн|коллег)\w{0,24}+"
    r"|\bваш\w{0,24}+\s+(?:контакт|друз|родн|коллег|близк|семь)\w{0,24}+"
    r"|\b(?:publish|expose|leak|release|destroy|ruin|hurt|kill|share\s+it)\b"
    r"|\b(?:опубликую|разошлю|отправлю|выложу|распространю|уничтожу|сломаю|убью)\b"
    r"|\b(?:hacked|infected|malware|trojan|spyware|keylogger)\b"
    r"|\b(?:взломал\w{0,24}+|заражен\w{0,24}+|вирус\w{0,24}+|троян\w{0,24}+|шпионск\w{0,24}+)"
    r"|\botherwise\b|\bor\s+else\b|\bif\s+(?:you\s+)?(?:do\s+not|don'?t|fail)\b"
    r"|\bиначе\b|в\s+противном\s+случае|\bесли\s+(?:вы\s+|ты\s+)?не\s+(?:заплат|оплат|перевед)"
)


# The folded text's patterns join the phrase families' RE2 set (:mod:`wording`): the one pass
# every family shares says which of them may match anywhere, and Python's engine reads only
# from where RE2 says a match may begin (:func:`wording.search`), not at all in most letters.
# _SEND_CODES stays out: its relaxed copy (a verb, then any characters, then "codes") made the
# set's automaton ~2x larger (every state twice: after a verb and not), and it is read only in
# a text naming a gift card.
for _rx_ in (CRYPTO, GIFT_CARDS, _PAY, _DEADLINE, _THREAT):
    wording.register(_rx_)


@dataclass(frozen=True, slots=True)
class Wallet:
    address: str
    kind: str  # bitcoin, ethereum, tron
    valid: bool  # a Base58Check checksum that holds (Bitcoin legacy, Tron)


def _b58check(address: str) -> bool:
    n = 0
    for ch in address:
        n = n * 58 + _B58.index(ch)
    raw = n.to_bytes(25, "big") if n < 1 << 200 else b""
    if len(raw) != 25:
        return False
    body, check = raw[:-4], raw[-4:]
    return hashlib.sha256(hashlib.sha256(body).digest()).digest()[:4] == check


def wallets(text: str) -> list[Wallet]:
    out: list[Wallet] = []
    text = text[:MAX_TEXT]
    if not casefold.found(_WALLET_FIRST, text):
        return out
    for m in _WALLET.finditer(text):
        if m.group("btc"):
            out.append(Wallet(m.group(0), "bitcoin", _b58check(m.group(0))))
        elif m.group("bech32"):
            out.append(Wallet(m.group(0), "bitcoin", False))
        elif m.group("eth"):
            out.append(Wallet(m.group(0), "ethereum", False))
        else:
            out.append(Wallet(m.group(0), "tron", _b58check(m.group(0))))
        if len(out) >= 10:
            break
    return out


def demand(raw_text: str, folded: str) -> list[str]:
    """Evidence that the letter demands a payment in cryptocurrency (a wallet address in the
    text, the text naming a cryptocurrency) or in gift cards, under a deadline or a threat;
    empty when it does not. ``raw_text``: the text as written (addresses are case-sensitive);
    ``folded``: the same text folded (wording.fold)."""
    text = folded[:MAX_TEXT]
    raw = raw_text[:MAX_TEXT]
    addresses = wallets(raw)
    if addresses and (any(w.valid for w in addresses) or wording.search(CRYPTO, text)):
        pay = None
        for w in addresses:  # the demand stands next to the address it names
            at = raw.find(w.address)
            pay = _PAY.search(raw[max(0, at - _NEAR) : at + _NEAR].lower())
            if pay is not None:
                found = [f"{w.kind}: {w.address}"]
                break
    else:
        if not any(word in text for word in _CARD_WORDS):  # a cheap first look
            return []
        gift = wording.search(GIFT_CARDS, text)
        codes = _SEND_CODES.search(text) if gift is not None else None
        if gift is None or codes is None:
            return []
        found = [gift.group(0), codes.group(0)]
        pay = wording.search(_PAY, text)
    if pay is None:
        return []
    pressure = wording.search(_DEADLINE, text) or wording.search(_THREAT, text)
    if pressure is None:
        return []
    return [*found, pay.group(0), pressure.group(0)]
