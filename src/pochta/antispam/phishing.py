"""Phishing signs (seed 000, SPEC §4): pure checks over one letter and its envelope.

Each check is a function of one shape, ``(Context) -> Sign | None``; a sign has a stable
symbol, a short explanation in Russian and in English, and the evidence found (a domain, a
quoted phrase, a file name). Signs carry no points: their weights live in the rules file
(``default_rules.toml``), as in rspamd.

    symbol                       what it means (explanations: pochta.antispam.signs)
    ---------------------------- ------------------------------------------------------------
    PHISH_IMPERSONAL_GREETING    "Уважаемый клиент", "Dear customer", "дорогой друг"; or a
                                 nameless "Добрый день!" in a letter claiming to be from a
                                 government body
    PHISH_GENEROUS_OFFER         prizes, winnings, compensation, inheritance, easy money
    PHISH_ALARMING_SUBJECT       blocked account, debts, last warning, verify now
    PHISH_URGENCY                deadlines in hours, threats of blocking or court in the text
    PHISH_FAKE_REPLY             "Re:" with no In-Reply-To or References behind it
    PHISH_SENDER_LOOKALIKE       From domain imitates a protected one (look-alike letters,
                                 a typo, the name inside a longer domain)
    PHISH_SENDER_FOREIGN_TLD     From domain is a protected name on another TLD (nalog.de)
    PHISH_SENDER_IDN             From domain mixes alphabets or is all look-alike letters
    PHISH_DISPLAY_NAME_BRAND     display name names a protected organization; address is not
                                 theirs
    PHISH_DISPLAY_NAME_ADDRESS   display name shows another address or domain than the real one
    PHISH_LINK_TEXT_MISMATCH     a link shows one domain and leads to another
    PHISH_LINK_LOOKALIKE         a link leads to a domain imitating a protected one
    PHISH_LINK_OFF_BRAND         a letter in the name of an organization links elsewhere
    PHISH_LINK_IP                a link leads to a bare IP address
    PHISH_LINK_SHORTENER         a link goes through a URL shortener
    PHISH_RETURN_PATH_MISMATCH   Return-Path (envelope sender) domain is not the From domain
    PHISH_RECEIVED_MISMATCH      no Received hop names the From domain
    PHISH_REPLY_TO_MISMATCH      replies go to another domain than the From domain
    PHISH_CARD_DATA_REQUEST      asks for card number, CVV/CVC, expiry, PIN, SMS code
    PHISH_PERSONAL_DATA_REQUEST  asks for a password, passport, SNILS, personal data
    PHISH_HTML_FORM              a form (password field) inside the letter
    PHISH_DANGEROUS_ATTACHMENT   an executable or disk image attached
    PHISH_DOUBLE_EXTENSION       a file name hiding its real type (invoice.pdf.exe)
    PHISH_MACRO_ATTACHMENT       an Office file with macros
    PHISH_ARCHIVE_EXECUTABLE     an archive with an executable or macro file inside

"Same party" below means the same registrable domain, or two domains of one protected
organization (gmail.com and google.com).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pochta.antispam import attachments, normalize, wording
from pochta.antispam.letter import Letter, known_suffix
from pochta.antispam.lookalike import all_confusable, mixed_script, unicode_label
from pochta.antispam.protected import Org, Protected
from pochta.antispam.protected import default as default_protected
from pochta.antispam.protected import shorteners as default_shorteners
from pochta.antispam.shingles import Envelope
from pochta.antispam.signs import SPECS, SYMBOLS, Sign, SignSpec, sign
from pochta.mime.summary import Summary

__all__ = ["CHECKS", "SPECS", "SYMBOLS", "Check", "Context", "Sign", "SignSpec", "check", "scan",
           "sign"]


@dataclass
class Context:
    """What the checks share: the letter, the protected list, the shorteners."""

    letter: Letter
    protected: Protected
    shorteners: frozenset[str]
    _cache: dict[str, object] = field(default_factory=dict)

    def same_party(self, a: str | None, b: str | None) -> bool:
        if not a or not b:
            return False
        ra, rb = normalize.registrable(a) or a, normalize.registrable(b) or b
        if ra == rb:
            return True
        oa, ob = self.protected.owner(a), self.protected.owner(b)
        return oa is not None and oa is ob

    @property
    def claimed(self) -> list[Org]:
        """Organizations the letter speaks for: named by the display name, owning the From
        domain, or imitated by it."""
        if "claimed" not in self._cache:
            orgs = list(self.protected.named_in(self.letter.from_name))
            fd = self.letter.from_domain
            if fd:
                owner = self.protected.sender_org(fd)
                imitated = self.protected.imitation(fd)
                for org in (owner, imitated.org if imitated else None):
                    if org is not None and org not in orgs:
                        orgs.append(org)
            self._cache["claimed"] = orgs
        return self._cache["claimed"]  # type: ignore[return-value]

    @property
    def body(self) -> str:
        if "body" not in self._cache:
            self._cache["body"] = wording.fold(self.letter.all_text)
        return self._cache["body"]  # type: ignore[return-value]


Check = Callable[[Context], Sign | None]


# -- words ----------------------------------------------------------------------------------
def impersonal_greeting(ctx: Context) -> Sign | None:
    head = wording.fold(ctx.letter.text[:600])
    found = wording.find_all(wording.GREETING, head, 2)
    if found:
        return sign("PHISH_IMPERSONAL_GREETING", found)
    if any(org.kind == "government" for org in ctx.claimed):
        lines = wording.first_lines(head, 1)
        if lines and wording.NAMELESS_GREETING.match(lines[0]):
            return sign("PHISH_IMPERSONAL_GREETING", [lines[0]])
    return None


def generous_offer(ctx: Context) -> Sign | None:
    text = wording.fold(ctx.letter.subject) + "\n" + ctx.body
    found = wording.find_all(wording.OFFER, text)
    return sign("PHISH_GENEROUS_OFFER", found) if found else None


def alarming_subject(ctx: Context) -> Sign | None:
    found = wording.find_all(wording.ALARM, wording.fold(ctx.letter.subject))
    return sign("PHISH_ALARMING_SUBJECT", found) if found else None


def urgency(ctx: Context) -> Sign | None:
    found = wording.find_all(wording.URGENCY, ctx.body)
    return sign("PHISH_URGENCY", found) if found else None


_REPLY = re.compile(
    r"^\s*(?:\[[^\]]{0,40}\]\s*)*(?:re|ответ|отв|aw|sv|antw|odp|rif|res)\s*(?:\[\d+\]|\(\d+\))?"
    r"\s*:",
    re.IGNORECASE,
)


def fake_reply(ctx: Context) -> Sign | None:
    letter = ctx.letter
    if not _REPLY.match(letter.subject):
        return None
    if letter.header("in-reply-to") or letter.header("references"):
        return None
    return sign("PHISH_FAKE_REPLY", [letter.subject[:80]])


def card_data_request(ctx: Context) -> Sign | None:
    found = wording.requests(ctx.body, wording.CARD_ITEMS)
    asked = [f for f in found if f.label.endswith("!")]
    kinds = {f.label.rstrip("!") for f in found}
    if asked or len(kinds) >= 2:
        return sign("PHISH_CARD_DATA_REQUEST", [f.quote for f in (asked or found)][:4])
    return None


def personal_data_request(ctx: Context) -> Sign | None:
    found = wording.asks_for(ctx.body, wording.PERSONAL_OBJECTS)
    return sign("PHISH_PERSONAL_DATA_REQUEST", found[:3]) if found else None


# -- the sender -----------------------------------------------------------------------------
def _sender_imitation(ctx: Context) -> tuple[str, str] | None:
    fd = ctx.letter.from_domain
    if not fd:
        return None
    im = ctx.protected.imitation(fd)
    if im is None:
        return None
    return im.how, f"{_shown(fd)} ≈ {im.target} ({im.org.name})"


def _shown(host: str) -> str:
    shown = ".".join(unicode_label(x) or x for x in host.split("."))
    return host if shown == host else f"{shown} ({host})"


def sender_lookalike(ctx: Context) -> Sign | None:
    found = _sender_imitation(ctx)
    if found is None or found[0] == "foreign_tld":
        return None
    return sign("PHISH_SENDER_LOOKALIKE", [found[1]])


def sender_foreign_tld(ctx: Context) -> Sign | None:
    found = _sender_imitation(ctx)
    if found is None or found[0] != "foreign_tld":
        return None
    return sign("PHISH_SENDER_FOREIGN_TLD", [found[1]])


def _idn_spoof(host: str) -> bool:
    for label in host.split("."):
        if label.startswith("xn--"):
            u = unicode_label(label)
            if u is None or mixed_script(u) or all_confusable(u):
                return True
    return False


def sender_idn(ctx: Context) -> Sign | None:
    fd = ctx.letter.from_domain
    if fd and _idn_spoof(fd):
        return sign("PHISH_SENDER_IDN", [_shown(fd)])
    return None


def display_name_brand(ctx: Context) -> Sign | None:
    name, fd = ctx.letter.from_name, ctx.letter.from_domain
    if not name or not fd:
        return None
    owner = ctx.protected.sender_org(fd)
    named = [org for org in ctx.protected.named_in(name) if org is not owner]
    if not named:
        return None
    return sign("PHISH_DISPLAY_NAME_BRAND", [f"«{name}» <{ctx.letter.from_address}>"])


_ADDRESS_IN_NAME = re.compile(r"[\w.+-]+@([\w-]+(?:\.[\w-]+)+)|\b((?:[\w-]+\.)+[a-zа-я]{2,})\b")


def display_name_address(ctx: Context) -> Sign | None:
    name, fd = ctx.letter.from_name, ctx.letter.from_domain
    if not name or not fd:
        return None
    for m in _ADDRESS_IN_NAME.finditer(name.lower()):
        host = m.group(1) or m.group(2)
        if host and known_suffix(host) and not ctx.same_party(host, fd):
            return sign("PHISH_DISPLAY_NAME_ADDRESS", [f"«{name}» <{ctx.letter.from_address}>"])
    return None


def return_path_mismatch(ctx: Context) -> Sign | None:
    rp, fd = ctx.letter.return_path, ctx.letter.from_domain
    if not rp or not fd:
        return None
    rd = normalize.address_domain(rp)
    if rd is None or ctx.same_party(rd, fd):
        return None
    return sign("PHISH_RETURN_PATH_MISMATCH", [f"Return-Path: {rp}", f"From: {fd}"])


_RECEIVED_FROM = re.compile(r"^\s*from\s+(\S+)(?:\s+\(([^)]*)\))?", re.IGNORECASE)
_HOSTNAME = re.compile(r"^(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z][a-z0-9-]{1,62}$")


def received_hosts(values: Sequence[str]) -> list[str]:
    """Host names in the ``from`` clauses of Received fields (HELO and reverse DNS)."""
    out: list[str] = []
    for value in values:
        m = _RECEIVED_FROM.match(value)
        if not m:
            continue
        candidates = [m.group(1)]
        if m.group(2):
            candidates.extend(m.group(2).replace("[", " [").split())
        for c in candidates:
            host = c.strip("[]();,").rstrip(".").lower()
            if host.startswith("helo="):
                host = host[5:]
            if _HOSTNAME.match(host) and host not in out and not host.endswith(".localdomain"):
                out.append(host)
    return out


def received_mismatch(ctx: Context) -> Sign | None:
    fd = ctx.letter.from_domain
    if not fd:
        return None
    hosts = received_hosts(ctx.letter.headers("received"))
    if not hosts or any(ctx.same_party(h, fd) for h in hosts):
        return None
    return sign("PHISH_RECEIVED_MISMATCH", [*hosts[:3], f"From: {fd}"])


def reply_to_mismatch(ctx: Context) -> Sign | None:
    value, fd = ctx.letter.header("reply-to"), ctx.letter.from_domain
    if not value or not fd:
        return None
    m = re.search(r"[\w.+-]+@[\w.-]+", value)
    rd = normalize.address_domain(m.group(0)) if m else None
    if rd is None or ctx.same_party(rd, fd):
        return None
    return sign("PHISH_REPLY_TO_MISMATCH", [f"Reply-To: {m.group(0) if m else value}"])


# -- links ----------------------------------------------------------------------------------
_SHOWN_URL = re.compile(
    r"^(?:(?:https?|ftp)://)?((?:[a-z0-9а-яё](?:[a-z0-9а-яё-]{0,61}[a-z0-9а-яё])?\.)+"
    r"(?:[a-zа-яё]{2,24}|xn--[a-z0-9-]+))\.?(?::\d+)?(?:[/?#]\S*)?$",
    re.IGNORECASE,
)
_URL_IN_WORDS = re.compile(r"(?:https?|ftp)://([^\s/?#:<>\"']+)", re.IGNORECASE)


def shown_host(text: str) -> str | None:
    """The host a link's text shows: the text is a URL or a bare host name
    (``www.sberbank.ru``, ``https://lkfl.nalog.ru/lk``), or contains a URL with a scheme.
    A domain-like word inside a sentence ("как Mail.ru сократила...") is not one."""
    t = text.strip().strip("<>«»\"'()[]").rstrip(".,;:!?")
    m = _SHOWN_URL.match(t)
    if m is None:
        m = _URL_IN_WORDS.search(t)
    if m is None:
        return None
    host = normalize.domain(m.group(1))
    return host if host is not None and known_suffix(host) else None


def link_text_mismatch(ctx: Context) -> Sign | None:
    found: list[str] = []
    for link in ctx.letter.web_links:
        if link.source != "html" or not link.text:
            continue
        shown = shown_host(link.text)
        if shown is not None and not ctx.same_party(shown, link.host):
            found.append(f"{shown} → {link.host}")
    return sign("PHISH_LINK_TEXT_MISMATCH", found[:3]) if found else None


def link_lookalike(ctx: Context) -> Sign | None:
    found: list[str] = []
    for link in ctx.letter.web_links:
        im = ctx.protected.imitation(link.host)
        if im is not None:
            found.append(f"{_shown(link.host)} ≈ {im.target} ({im.org.name})")
        elif _idn_spoof(link.host):
            found.append(_shown(link.host))
    return sign("PHISH_LINK_LOOKALIKE", found[:3]) if found else None


def link_off_brand(ctx: Context) -> Sign | None:
    if not ctx.claimed:
        return None
    found: list[str] = []
    for link in ctx.letter.web_links:
        if ctx.protected.owner(link.host) is not None:
            continue
        if link.host not in found:
            found.append(link.host)
    if not found:
        return None
    names = ", ".join(org.name for org in ctx.claimed)
    return sign("PHISH_LINK_OFF_BRAND", [f"{names}: {', '.join(found[:3])}"])


def link_ip(ctx: Context) -> Sign | None:
    found = [link.host for link in ctx.letter.web_links if link.is_ip]
    return sign("PHISH_LINK_IP", found[:3]) if found else None


def link_shortener(ctx: Context) -> Sign | None:
    found = [
        link.href[:80]
        for link in ctx.letter.web_links
        if link.registrable in ctx.shorteners or link.host in ctx.shorteners
    ]
    return sign("PHISH_LINK_SHORTENER", found[:3]) if found else None


def html_form(ctx: Context) -> Sign | None:
    html = ctx.letter.html
    if html is None or not (html.forms or html.password_inputs):
        return None
    found = f"forms: {html.forms}, password fields: {html.password_inputs}"
    return sign("PHISH_HTML_FORM", [found])


# -- attachments ----------------------------------------------------------------------------
def _files(ctx: Context) -> list[attachments.FileVerdict]:
    if "files" not in ctx._cache:
        ctx._cache["files"] = [
            attachments.inspect(a.filename, a.content_type, a.content)
            for a in ctx.letter.summary.attachments[:50]
        ]
    return ctx._cache["files"]  # type: ignore[return-value]


def dangerous_attachment(ctx: Context) -> Sign | None:
    found = [f"{f.name}: {f.dangerous}" for f in _files(ctx) if f.dangerous]
    return sign("PHISH_DANGEROUS_ATTACHMENT", found[:3]) if found else None


def double_extension(ctx: Context) -> Sign | None:
    found = [f.name for f in _files(ctx) if f.double_extension]
    return sign("PHISH_DOUBLE_EXTENSION", found[:3]) if found else None


def macro_attachment(ctx: Context) -> Sign | None:
    found = [f.name for f in _files(ctx) if f.macro]
    return sign("PHISH_MACRO_ATTACHMENT", found[:3]) if found else None


def archive_executable(ctx: Context) -> Sign | None:
    found = [f"{f.name}: {', '.join(f.archive_members)}" for f in _files(ctx) if f.archive_members]
    return sign("PHISH_ARCHIVE_EXECUTABLE", found[:3]) if found else None


CHECKS: tuple[Check, ...] = (
    impersonal_greeting,
    generous_offer,
    alarming_subject,
    urgency,
    fake_reply,
    sender_lookalike,
    sender_foreign_tld,
    sender_idn,
    display_name_brand,
    display_name_address,
    link_text_mismatch,
    link_lookalike,
    link_off_brand,
    link_ip,
    link_shortener,
    return_path_mismatch,
    received_mismatch,
    reply_to_mismatch,
    card_data_request,
    personal_data_request,
    html_form,
    dangerous_attachment,
    double_extension,
    macro_attachment,
    archive_executable,
)


def check(
    letter: Letter,
    *,
    protected: Protected | None = None,
    shorteners: frozenset[str] | None = None,
    checks: Sequence[Check] = CHECKS,
) -> list[Sign]:
    """Every sign the letter shows, in the order of CHECKS."""
    ctx = Context(
        letter,
        protected if protected is not None else default_protected(),
        shorteners if shorteners is not None else default_shorteners(),
    )
    out: list[Sign] = []
    for fn in checks:
        found = fn(ctx)
        if found is not None:
            out.append(found)
    return out


def scan(
    raw: bytes | Summary,
    envelope: Envelope | None = None,
    *,
    protected: Protected | None = None,
    shorteners: frozenset[str] | None = None,
) -> list[Sign]:
    """``check`` of a raw letter (or an already parsed Summary)."""
    letter = Letter(raw, envelope) if isinstance(raw, Summary) else Letter.parse(raw, envelope)
    return check(letter, protected=protected, shorteners=shorteners)
