"""Links as a reader sees them and as fraudsters bend them. Pure; every pattern runs in time
linear in its input, and every input is cut to a bound first.

- :func:`shown_host`: the site a link's text shows (``www.sberbank.ru``, ``https://x.ru/lk``).
- :func:`carried_hosts`: the sites a redirect or click-tracking link carries in its path or
  query (``google.com/url?q=https://shop.example`` carries ``shop.example``).
- :func:`userinfo`: the ``user@`` part before a URL's host (``https://paypal.com@evil.example``,
  ``https://paypal.com%40evil.example``).
- :func:`obfuscated`: site names written so that no program links them: ``hxxps://``,
  ``example[.]com``, ``example(.)com``, ``example . com``, ``example dot com``,
  ``пример точка ру``.
- :func:`tld`: a host's top-level domain.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import unquote

from pochta.antispam.signs import casefold, wording
from pochta.mime import normalize

MAX_HOST = 253  # characters of a host name (RFC 1035); a longer "host" is none
MAX_SHOWN = 2048  # characters of a link text read for the site it shows
MAX_HREF = 4096  # characters of an href read for userinfo and carried URLs
MAX_TEXT = 200_000  # characters of text read for obfuscated links
MAX_OBFUSCATED = 5  # more distinct obfuscated sites than this: a list of indicators, no lure

# A host name as text shows it: labels of letters, digits and hyphens, dots between them.
# A label cannot hold a dot, so where one label ends is never in doubt (no backtracking).
_LABEL = r"[a-z0-9а-яё][a-z0-9а-яё-]{0,62}"
_SHOWN_URL = re.compile(
    r"(?:(?:https?|ftp)://)?"
    rf"((?:{_LABEL}\.){{1,16}}(?:[a-zа-яё]{{2,24}}|xn--[a-z0-9-]{{1,59}}))"
    r"\.?(?::\d{1,5})?(?:[/?#]\S*)?",
    re.IGNORECASE,
)
# A URL starting a word (not one inside another URL's query: "?u=https://...").
_URL_IN_WORDS = re.compile(
    r"(?<![\w/=%.?&@:+-])(?:https?|ftp)://([^\s/?#:<>\"'\\@]{1,253})(?=[\s/?#:<>\"'\\]|$)",
    re.IGNORECASE,
)
_CARRIED = re.compile(r"(?:https?|ftp)(?::|%3a)(?://|%2f%2f)", re.IGNORECASE)
_AUTHORITY = re.compile(
    r"\s{0,16}(?:(?:https?|ftp):[/\\]{2}|(?=www\.))([^/?#\\\s]{0,2048})", re.IGNORECASE
)

# -- obfuscated site names --------------------------------------------------------------------
_DEFANGED_SCHEME = (
    r"h(?:xx|\*\*|__|tx|xt|t\*|\*t)ps?(?:\[:\]|\(:\)|:)//"
    r"|https?(?:\[:\]|\(:\))//|https?\[://\]"
)
_BRACKET_DOT = r"\s?(?:\[\.\]|\(\.\)|\{\.\}|\[dot\]|\(dot\)|\{dot\}|\[точка\]|\(точка\))\s?"
# spaces on both sides: "declined. to" ends a sentence, "on .NET" names a framework
_SPACED_DOT = r"[ \t]{1,3}\.[ \t]{1,3}"
_WORD_DOT = r"[ \t]{1,3}(?:dot|точка|тчк)[ \t]{1,3}"
# A host name with at least one of its dots written otherwise (the defanged schemes are
# _SCHEME_ONLY's).
_OBFUSCATED = re.compile(
    rf"(?<![\w.-]){_LABEL}(?:(?:\.|{_BRACKET_DOT}|{_WORD_DOT}|{_SPACED_DOT}){_LABEL}){{1,8}}",
    re.IGNORECASE,
)
_SEPARATOR = re.compile(rf"{_BRACKET_DOT}|{_WORD_DOT}|{_SPACED_DOT}", re.IGNORECASE)
# The first look (RE2): what every finding holds. A defanged scheme begins each match of
# _SCHEME_ONLY; a match of _OBFUSCATED that is kept holds a dot written otherwise (_SEPARATOR),
# which sits between a label's last character and the next label's first. Its letters are
# lower case: it runs over a text as Python's case-insensitive engine compares it
# (:func:`casefold.folded`), where it finds every place the two patterns find in the text
# itself (a superset: \s made a wider class, the {m,n} runs unbounded). Most letters hold none
# (147 of the 4,847 unsealed corpus letters passed the former first look, _HINT: any written-out
# dot or defanged scheme; 73 pass this one), and for them Python's engine never runs.
_GATE = wording.relaxed(
    rf"[a-z0-9а-яё-](?:{_BRACKET_DOT}|{_WORD_DOT}|{_SPACED_DOT})[a-z0-9а-яё]|{_DEFANGED_SCHEME}"
)
wording.register_gate("links.obfuscated", _GATE)
_GATE_ALONE = casefold.compile_first_look([_GATE])
"""The gate alone, for a text that is not its own fold (the set's pass reads the text as it
is: the body, folded by :func:`wording.fold`, is its own fold but for rare letters)."""
_SCHEME_ONLY = re.compile(rf"(?:{_DEFANGED_SCHEME})([^\s<>\"'\]]{{1,253}})", re.IGNORECASE)
# Top-level domains written out in Cyrillic ("точка ру").
_CYRILLIC_TLDS = {"ру": "ru", "ком": "com", "нет": "net", "орг": "org", "рф": "рф", "су": "su",
                  "инфо": "info", "бай": "by", "уа": "ua", "кз": "kz"}
# Words that make a written site name a link to follow: "go to", "перейдите", "сайт".
_CALL = re.compile(
    r"\b(?:go\s+to|visit|open|type|enter|copy|paste|click|claim|collect|withdraw|download"
    r"|register|browser|website|site|link|url|page|address|log\s*in|sign\s*in)s?\b"
    r"|\b(?:перейд|переход|зайд|заход|откр|введ|набер|скопир|вставь|браузер|сайт|ссылк"
    r"|адрес|страниц|кабинет|получит|забер|вывед|вывест|оформ)\w*"
)
# ...unless the sentence warns against it (a bank's "никогда не переходите на sber[.]xyz").
_WARNING = re.compile(
    r"\bне\s+(?:переход|открыва|нажима|вводи|заходи|кликай|сообща)\w*|\bникогда\b|\bnever\b"
    r"|\bdo\s+not\b|\bdon'?t\b|\bavoid\b|\bbeware\b|мошенни\w*|\bfraud\w*|\bscam\w*"
    r"|phishing|фишинг\w*|\bioc\b|indicator\w*|индикатор\w*"
)


@functools.lru_cache(maxsize=4096)
def is_tld(label: str) -> bool:
    """A label that is a top-level domain of its own (com, ru, рф as xn--p1ai)."""
    return normalize.public_suffixes().is_public(label, accept_unknown=False)


def _ends_in_tld(name: str) -> bool:
    """A cheap look before normalizing: the last label of a written name is a TLD."""
    last = name.rpartition(".")[2].strip()
    last = _CYRILLIC_TLDS.get(last, last)
    return 2 <= len(last) <= 24 and is_tld(last if last.isascii() else _idna(last))


def _idna(label: str) -> str:
    try:
        return label.encode("idna").decode("ascii")
    except UnicodeError:
        return label


def _host(text: str) -> str | None:
    host = normalize.domain(text)
    if host is None or len(host) > MAX_HOST or "." not in host:
        return None
    return host


def shown_host(text: str, known: Callable[[str], bool]) -> str | None:
    """The host a link's text shows: the text is a URL or a bare host name
    (``www.sberbank.ru``, ``https://lkfl.nalog.ru/lk``), or starts a word with a URL. A URL
    inside another's query, and a domain-like word inside a sentence ("как Mail.ru
    сократила..."), show nothing. ``known``: whether a host has a real public suffix."""
    t = text[:MAX_SHOWN].strip().strip("<>«»\"'()[]").rstrip(".,;:!?")
    m = _SHOWN_URL.fullmatch(t)
    if m is None:
        m = _URL_IN_WORDS.search(t)
    if m is None:
        return None
    host = _host(m.group(1))
    return host if host is not None and known(host) else None


def carried_hosts(href: str) -> list[str]:
    """Hosts of the URLs a redirect link carries in its path or query, percent-decoded
    (twice at most: trackers wrap redirectors)."""
    s = href[:MAX_HREF]
    start = s.find("//")
    rest = s[start + 2 :] if start >= 0 else s
    cut = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
    rest = rest[cut:]
    out: list[str] = []
    for _ in range(3):
        for m in _CARRIED.finditer(rest):
            tail = unquote(rest[m.end() : m.end() + MAX_HOST + 8])
            host = _host(re.split(r"[/?#:&;*\\\s]", tail, maxsplit=1)[0])
            if host is not None and host not in out:
                out.append(host)
        if out or "%" not in rest:
            break
        rest = unquote(rest)
    return out


def userinfo(href: str) -> str | None:
    """The ``user@`` part of a web link's authority, as written (``%40`` counts as ``@``);
    None when there is none."""
    m = _AUTHORITY.match(href[:MAX_HREF])
    if m is None:
        return None
    authority = m.group(1)
    decoded = re.sub("%40", "@", authority, flags=re.IGNORECASE)
    if "@" not in decoded:
        return None
    return decoded.rpartition("@")[0]


def tld(host: str) -> str:
    return host.rpartition(".")[2]


@dataclass(frozen=True, slots=True)
class Obfuscated:
    shown: str  # as written
    host: str  # the site it names, normalized


def may_hold(text: str) -> bool:
    """Whether ``text`` may hold a site name written out (the first look, :data:`_GATE`):
    False only when :func:`obfuscated` can find none."""
    folded = casefold.folded(text)
    may = wording.gate("links.obfuscated", text) if folded == text else None
    if may is None:  # not its own fold (the set reads the text as it is), or a lone surrogate
        may = casefold.found(_GATE_ALONE, folded)
    return may


def obfuscated(text: str, known: Callable[[str], bool]) -> list[Obfuscated]:
    """Site names written so that no program makes a link of them, where the text asks the
    reader to go there: a call to follow it (перейдите, visit, сайт, ссылка...) in the same
    sentence or the name alone on its line, and no warning against it in that sentence. A
    text with more than :data:`MAX_OBFUSCATED` of them is a list of indicators (a security
    bulletin), not a lure: nothing is returned. ``text`` is folded (lowercase)."""
    s = text[:MAX_TEXT]
    if not may_hold(s):
        return []
    found: dict[str, tuple[Obfuscated, int, int]] = {}
    for m in _SCHEME_ONLY.finditer(s):
        name = re.split(r"[/?#:]", _SEPARATOR.sub(".", m.group(1)), maxsplit=1)[0]
        name = name.rstrip(".,;:!?)")
        host = _host(name) if _ends_in_tld(name) else None
        if host is not None and known(host) and host not in found:
            found[host] = (Obfuscated(m.group(0), host), m.start(), m.end())
    for m in _OBFUSCATED.finditer(s):
        if len(found) > MAX_OBFUSCATED:
            return []  # a list of indicators
        written = m.group(0)
        if _SEPARATOR.search(written) is None:
            continue  # an ordinary host name
        labels = _SEPARATOR.sub(".", written).split(".")
        labels[-1] = _CYRILLIC_TLDS.get(labels[-1], labels[-1])
        name = ".".join(labels)
        host = _host(name) if _ends_in_tld(name) else None
        if host is not None and known(host) and host not in found:
            found[host] = (Obfuscated(written.strip(), host), m.start(), m.end())
    if len(found) > MAX_OBFUSCATED:
        return []
    return [o for o, start, end in found.values() if _asked(s, start, end)]


def _asked(text: str, start: int, end: int) -> bool:
    """Whether the sentence around ``text[start:end]`` asks the reader to go there."""
    line_start = text.rfind("\n", max(0, start - 300), start) + 1
    line_end = text.find("\n", end, end + 300)
    before = text[max(line_start, start - 300) : start]
    after = text[end : line_end if line_end >= 0 else end + 300]
    cut = max(before.rfind(". "), before.rfind("! "), before.rfind("? "))
    sentence = before[cut + 1 :] + " " + after.split(". ", 1)[0]
    if _WARNING.search(sentence):
        return False
    alone = not before.strip(" \t-–—:>•*") and not after.strip(" \t.,;:!)")
    return alone or _CALL.search(sentence) is not None
