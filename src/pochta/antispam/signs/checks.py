"""Phishing signs (seed 000, SPEC §4): pure checks over one letter and its envelope.

Each check is a function of one shape, ``(Context) -> Sign | None``; a sign has a stable
symbol, a short explanation in Russian and in English, and the evidence found (a domain, a
quoted phrase, a file name). Signs carry no points: their weights live in the rules file
(``default_rules.toml``), as in rspamd.

    symbol                       what it means (explanations: pochta.antispam.signs.registry)
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
                                 (outside a TLD of its own alphabet), or is no valid IDN
    PHISH_DISPLAY_NAME_BRAND     display name names a protected organization; address is not
                                 theirs (nor a newsletter's title after its publisher's name)
    PHISH_DISPLAY_NAME_ADDRESS   display name shows an e-mail address that is not the sender's
                                 (nor of its domain, nor of its bounce domain)
    PHISH_LINK_TEXT_MISMATCH     a link shows one site and leads to another (another owner;
                                 a known redirector leads where its query says)
    PHISH_LINK_LOOKALIKE         a link leads to a domain imitating a protected one (weak
                                 imitations only when the letter names that organization;
                                 not one of a newsletter's many destinations)
    PHISH_LINK_OFF_BRAND         a letter in the name of an organization links elsewhere
    PHISH_LINK_IP                a link leads to a bare IP address
    PHISH_LINK_SHORTENER         a link goes through a URL shortener
    PHISH_LINK_OBFUSCATED        a site written so that no program links it, to be typed in:
                                 hxxps://, example[.]com, "example dot com", "точка ру"
    PHISH_LINK_USERINFO          a link with a user@ part before its host
                                 (https://paypal.com@evil.example)
    PHISH_LINK_DOMAIN_DISGUISE   a link whose host starts with another domain
                                 (e-zpass.com-tollbill.win)
    PHISH_LINK_SUSPICIOUS_TLD    a link to a host under a TLD mostly used for abuse (.tk, .top)
    PHISH_RETURN_PATH_MISMATCH   Return-Path (envelope sender) domain is not the From domain
                                 (weak: e-mail service providers bounce to their own)
    PHISH_RECEIVED_MISMATCH      no Received hop names the From domain (weak: the same)
    PHISH_REPLY_TO_MISMATCH      replies go to another domain than the From domain
    PHISH_CARD_DATA_REQUEST      asks for card number, CVV/CVC, expiry, PIN, SMS code
    PHISH_PERSONAL_DATA_REQUEST  asks for a password, passport, SNILS, personal data
    PHISH_HTML_FORM              a form to fill in inside the letter (a password field, or
                                 three fields or more; a search box is none)
    PHISH_EXTORTION              payment demanded in cryptocurrency (a wallet address) or
                                 gift cards, under a deadline or a threat
    PHISH_DANGEROUS_ATTACHMENT   an executable or disk image attached
    PHISH_DOUBLE_EXTENSION       a file name hiding its real type (invoice.pdf.exe)
    PHISH_MACRO_ATTACHMENT       an Office file with macros
    PHISH_ARCHIVE_EXECUTABLE     an archive with an executable or macro file inside
    PHISH_FREEMAIL_BRAND         a public mailbox (gmail.com, mail.ru) with an organization's
                                 or a service's name (a protected name, "IT Helpdesk",
                                 "Служба безопасности") in its display name
    PHISH_SUBJECT_BRAND          the subject names a protected organization the sender is not
    PHISH_RECIPIENT_DOMAIN       the display name or the subject shows the reader's own mail
                                 domain, from a sender outside it ("pochta.test IT Support")
    PHISH_MAIL_ADMIN_NAME        the display name is a mail administrator's ("Mail
                                 Administrator", "IT Helpdesk"), from outside the reader's
                                 domain
    PHISH_ACCOUNT_LURE           keep your password, mailbox full, pending messages, wallet
                                 recovery phrase, revalidate your account
    PHISH_FEE_REQUEST            a small customs, delivery or unlock fee to pay, a payment
                                 method to update, money to a card number, new bank details
    PHISH_HIDDEN_TEXT            invisible characters splitting words, or more hidden HTML text
                                 than visible
    PHISH_LINK_DATA_URL          a link to a data:, javascript: or vbscript: address
    PHISH_HTML_ATTACHMENT        an attached HTML or SVG file with a form, a redirecting script
                                 or an automatic redirect
    PHISH_QR_CODE                an image and a QR code to scan, or an image and hardly any text
    PHISH_LINK_FREE_HOSTING      a link to a page on free hosting or a site builder (pages.dev,
                                 web.app, an IPFS gateway), where anyone puts up a sign-in page;
                                 on general storage (storage.googleapis.com, sites.google.com)
                                 only to a page (.html, .php, .svg, an address in the URL)
    PHISH_CALLBACK_LURE          a phone number to call about a charge, a renewal or a sign-in
                                 the reader did not make (to cancel, refund, block): callback
                                 phishing, with no link to check
    PHISH_BEC_REQUEST            a public mailbox (From or Reply-To) asks somebody at an
                                 organization for pay sent to new bank details, gift cards,
                                 or a payment while it cannot be reached or asks for secrecy
    PHISH_TASK_SCAM              a public mailbox (From or Reply-To) offers a job paid by the
                                 day, for minutes a day or with no experience, to take up in
                                 a messenger (a job or task scam)
    PHISH_MESSENGER_CODE         a messenger's code to enter or send, and a link to a site that
                                 is neither the messenger's nor the sender's (account theft)
    PHISH_CALENDAR_LINK          an attached calendar invitation links to an IP, an abused
                                 TLD, free hosting or a look-alike domain
    PHISH_OAUTH_CONSENT          a link to an identity provider's real OAuth consent page
                                 whose redirect leads to another party's app
    PHISH_DOCUMENT_LURE          a document, a statement or a voicemail to review, sign or
                                 open, or the reader's pay changing, from outside the reader's
                                 organization, in a letter with a calendar invitation or a
                                 short one with an image or a document (a hint)
    PHISH_DEVICE_LOGIN           a link to an identity provider's device sign-in page
                                 (microsoft.com/devicelogin) from an outsider, and the code
                                 to type there (H7KQ-2WPN) in the letter

"Same party" below means the same registrable domain, two domains of one protected
organization (gmail.com and google.com), or, for names nobody protects, the same name under
another TLD (shop.com and shop.de).

Every pattern here runs in time linear in its input, and every input is cut to a bound
first: a display name is read up to :data:`MAX_NAME` characters, a header value up to
:data:`MAX_HEADER`, a host name longer than :data:`MAX_HOST` is no host name.
"""

from __future__ import annotations

import itertools
import re
import string
import time
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from urllib.parse import unquote_plus, urlsplit

import re2

from pochta.antispam.signs import attachments, extortion, links, lures, wording
from pochta.antispam.signs.forwarders import Forwarders, Hop
from pochta.antispam.signs.forwarders import origin as forwarded_origin
from pochta.antispam.signs.lookalike import idn_spoof, unicode_label
from pochta.antispam.signs.protected import WEAK, Imitation, Org, Protected
from pochta.antispam.signs.protected import default as default_protected
from pochta.antispam.signs.protected import free_hosting as default_free_hosting
from pochta.antispam.signs.protected import freemail as default_freemail
from pochta.antispam.signs.protected import general_storage as default_general_storage
from pochta.antispam.signs.protected import redirectors as default_redirectors
from pochta.antispam.signs.protected import shorteners as default_shorteners
from pochta.antispam.signs.protected import suspicious_tlds as default_suspicious_tlds
from pochta.antispam.signs.registry import SPECS, SYMBOLS, Sign, SignSpec, sign
from pochta.mime import normalize
from pochta.mime.codec import lenient
from pochta.mime.headers import decode_bytes, first_value, read_block
from pochta.mime.letter import Attachment, Letter, Link, parse
from pochta.mime.normalize import known_suffix
from pochta.types import Envelope

__all__ = [
    "CHECKS",
    "SPECS",
    "SYMBOLS",
    "Check",
    "Context",
    "Findings",
    "Sign",
    "SignSpec",
    "check",
    "find",
    "scan",
    "sign",
]


MAX_NAME = 256  # characters of a display name read
MAX_HEADER = 1024  # characters of a header value read
MAX_HOST = links.MAX_HOST
BODY_HEAD = 3000  # characters of the text searched for the organizations a letter names

# An e-mail address inside a display name. The lookbehind lets a match start only where a run
# of address characters starts, so no position is scanned twice; every run is bounded.
_ADDRESS_IN_NAME = re.compile(
    r"(?<![\w.+-])[\w.+-]{1,64}@([\w-]{1,63}(?:\.[\w-]{1,63}){1,8})", re.IGNORECASE
)


# A hyphen, a dot, an underscore or a middle dot between two pieces of at least two letters
# of a display name: cut out, "Meta-Mask Support" reads "MetaMask Support" (a brand's one
# word split in two). Initials stay as they are: "V.K. Singh" and "D.H.L. Kumar" are people,
# not VK and DHL.
_NAME_CUT = re.compile(r"(?<=[^\W\d_]{2})[-._\u00b7](?=[^\W\d_]{2})")


def _joined_name(name: str) -> str:
    return _NAME_CUT.sub("", name[:MAX_NAME])


@dataclass
class Context:
    """What the checks share: the letter, its envelope sender, the lists they consult."""

    letter: Letter
    protected: Protected
    shorteners: frozenset[str]
    redirectors: frozenset[str] = frozenset()
    suspicious_tlds: frozenset[str] = frozenset()
    envelope: Envelope = field(default_factory=Envelope)
    freemail: frozenset[str] = field(default_factory=default_freemail)
    free_hosting: frozenset[str] = field(default_factory=default_free_hosting)
    general_storage: frozenset[str] = field(default_factory=default_general_storage)
    forwarders: Forwarders = field(default_factory=Forwarders)
    _cache: dict[str, object] = field(default_factory=dict)
    # Whether the From domain is taken at its word (see :func:`find`): False, every exemption
    # that rests on it (the sender's own site, own organization, the reader's own domain, a
    # mail server's report) is off. ``leaned``: a check just used such an exemption.
    trust_from: bool = True
    leaned: bool = False

    @property
    def return_path(self) -> str | None:
        """The envelope sender if known, else the Return-Path field; "" for a bounce."""
        if self.envelope.sender is not None:
            return self.envelope.sender.strip().strip("<>").strip()
        value = self.letter.header("return-path")
        return None if value is None else value.strip().strip("<>").strip()

    def same_party(self, a: str | None, b: str | None) -> bool:
        """``Protected.same_party`` (its answers remembered)."""
        return self.protected.same_party(a, b)

    @property
    def return_path_domain(self) -> str | None:
        return normalize.address_domain(self.return_path) if self.return_path else None

    def own_site(self, host: str) -> bool:
        """The host is the sender's: the From domain's party, or behind a trusted masking
        forwarder the origin's (:meth:`origin_party`; never while the From domain is not
        taken at its word: ``trust_from``)."""
        return self.from_party(host) or self.origin_party(host)

    @property
    def origin(self) -> Hop | None:
        """The hop before the installation's trusted forwarders
        (:func:`pochta.antispam.signs.forwarders.origin`); None when the letter came through
        none of them."""
        if "origin" not in self._cache:
            self._cache["origin"] = forwarded_origin(
                self.letter.headers("received"), self.forwarders
            )
        return self._cache["origin"]  # type: ignore[return-value]

    def origin_party(self, domain: str | None) -> bool:
        """``domain`` is the party of the host the letter came from before a trusted
        forwarder that masks its senders' addresses (the From domain is a listed forwarder's:
        sneakemail.com writes its own address in From and the sender's into the display
        name), as that forwarder wrote it in its Received field. It rests on the From
        domain (the forwarder's) too: noted in ``leaned``, False while ``trust_from`` is
        off. A plain forwarder keeps the sender's From: the From domain speaks for it."""
        if not domain or not self.trust_from or not self.forwarders.names(self.letter.from_domain):
            return False
        found = self.origin
        same = found is not None and any(self.same_party(domain, h) for h in found.hosts)
        self.leaned = self.leaned or same
        return same

    def from_party(self, domain: str | None) -> bool:
        """``domain`` is the From domain's party, as the sender says: an exemption that rests
        on the From domain, noted in ``leaned``; False while ``trust_from`` is off."""
        if not self.trust_from:
            return False
        same = self.same_party(domain, self.letter.from_domain)
        self.leaned = self.leaned or same
        return same

    @property
    def received(self) -> list[str]:
        """:func:`received_hosts` of the letter's Received fields (read once for every check
        that asks)."""
        if "received" not in self._cache:
            self._cache["received"] = received_hosts(self.letter.headers("received"))
        return self._cache["received"]  # type: ignore[return-value]

    @property
    def link_owners(self) -> dict[str, tuple[Org | None, Org | None]]:
        """The registrable domains the letter's web links lead to, each with the protected
        organization owning it and the one its first host imitating any imitates (None:
        nobody's, nobody's imitation); read once (at most ``MAX_LINKS`` links)."""
        if "link_owners" not in self._cache:
            owners: dict[str, tuple[Org | None, Org | None]] = {}
            for link in self.letter.web_links:
                if len(link.host) > MAX_HOST:
                    continue
                owner, imitated = owners.get(link.registrable, (None, None))
                if link.registrable not in owners:
                    owner = self.protected.owner(link.host)
                if owner is None and imitated is None:
                    im = self.protected.imitation(link.host)
                    imitated = im.org if im is not None else None
                owners[link.registrable] = (owner, imitated)
            self._cache["link_owners"] = owners
        return self._cache["link_owners"]  # type: ignore[return-value]

    @property
    def asks(self) -> bool:
        """The letter asks for a card, a password, personal data or a fee, or lures to an
        account (:data:`_REQUESTS`); read once."""
        if "asks" not in self._cache:
            self._cache["asks"] = any(check(self) for check in _REQUESTS)
        return self._cache["asks"]  # type: ignore[return-value]

    def redirector(self, host: str) -> bool:
        """A known redirect or click-tracking host (data/redirectors.txt)."""
        labels = host.split(".")
        return any(".".join(labels[i:]) in self.redirectors for i in range(len(labels) - 1))

    @property
    def shown_name(self) -> str:
        """The display name as a reader takes it: NFKC (a full-width ＠ is an @), at most
        :data:`MAX_NAME` characters, addresses on the sender's own domain taken out
        ("Dasha.Sokolova@mail.ru" <dasha.sokolova@mail.ru> names no organization; "Mail.ru
        Support" <x@mail.ru> still names one)."""
        if "shown_name" not in self._cache:
            name = unicodedata.normalize("NFKC", self.letter.from_name[:MAX_NAME])
            fd = self.letter.from_domain
            if fd:
                name = _ADDRESS_IN_NAME.sub(
                    lambda m: " " if normalize.domain(m.group(1)) == fd else m.group(0), name
                )
            self._cache["shown_name"] = name
        return self._cache["shown_name"]  # type: ignore[return-value]

    @property
    def name_orgs(self) -> list[Org]:
        """Organizations the display name speaks for. A publication's title that names a
        brand after its sender's own name ("Lockergnome Apple Core"
        <subscriptions@lockergnome.com>) still counts here: every fact that would tell it from
        a lure (the From domain, its name first in the display name, the path the letter
        claims) is the sender's to choose ("Acmenews PayPal Security" <x@acmenews.com> with a
        login link); only the letter's shape as well, a newsletter sending its reader to many
        unrelated sites, takes ``PHISH_DISPLAY_NAME_BRAND`` away (:func:`_publication_title`).
        Nor does the name's own ham history: the display name's shingle is the name alone,
        which a brand's real mail warms for anybody who borrows it (issue 28)."""
        if "name_orgs" not in self._cache:
            name = self.shown_name
            orgs = self.protected.named_in(name)
            joined = _joined_name(name)
            if joined != name:  # "Meta-Mask", "Pay.Pal": a name cut so that no list knows it
                orgs += [org for org in self.protected.named_in(joined) if org not in orgs]
            self._cache["name_orgs"] = orgs
        return self._cache["name_orgs"]  # type: ignore[return-value]

    @property
    def claimed(self) -> list[Org]:
        """Organizations the letter speaks for: named by the display name
        (:attr:`name_orgs`), owning the From domain, or imitated by it."""
        if "claimed" not in self._cache:
            orgs = list(self.name_orgs)
            fd = self.letter.from_domain
            if fd:
                owner = self.protected.sender_org(fd)
                imitated = self.sender_imitation
                for org in (owner, imitated.org if imitated else None):
                    if org is not None and org not in orgs:
                        orgs.append(org)
            self._cache["claimed"] = orgs
        return self._cache["claimed"]  # type: ignore[return-value]

    @property
    def named(self) -> list[Org]:
        """Organizations the letter names in its display name, subject or the beginning of
        its text (not counting its sender's domain, nor the host names of its links written
        in the text: ``https://sharepoint.contoso.com/...`` names the company's own server,
        not Microsoft)."""
        if "named" not in self._cache:
            orgs: list[Org] = []
            for found in (
                self.name_orgs,
                self.named_in_subject,
                self.protected.named_in(self._text_without_link_hosts()),
            ):
                orgs += [org for org in found if org not in orgs]
            self._cache["named"] = orgs
        return self._cache["named"]  # type: ignore[return-value]

    def _text_without_link_hosts(self) -> str:
        """The beginning of the text with every link's host name blanked where the text
        shows it (at most MAX_LINKS hosts, each replaced in BODY_HEAD characters)."""
        head = self.letter.text[:BODY_HEAD]
        low = head.lower()
        shown = {link.host for link in self.letter.web_links if link.host and link.host in low}
        if not shown:
            return head
        for host in sorted(shown, key=len, reverse=True):
            low = low.replace(host, " ")
        return low

    @property
    def named_in_subject(self) -> list[Org]:
        """Organizations the subject names (read once for every check that asks)."""
        if "named_in_subject" not in self._cache:
            self._cache["named_in_subject"] = self.protected.named_in(
                self.letter.subject[:MAX_NAME]
            )
        return self._cache["named_in_subject"]  # type: ignore[return-value]

    @property
    def sender_imitation(self) -> Imitation | None:
        """How the From domain imitates a protected organization. A weak imitation (the name
        as one word of a longer one: pop-ups.example) counts only when the letter names that
        organization."""
        if "sender_imitation" not in self._cache:
            fd = self.letter.from_domain
            im = self.protected.imitation(fd) if fd else None
            if im is not None and im.how == "contains" and im.org not in self.named:
                im = None
            self._cache["sender_imitation"] = im
        return self._cache["sender_imitation"]  # type: ignore[return-value]

    @property
    def body(self) -> str:
        if "body" not in self._cache:
            self._cache["body"] = wording.fold(self.letter.all_text)
        return self._cache["body"]  # type: ignore[return-value]

    @property
    def subject_body(self) -> str:
        """The subject's first :data:`MAX_NAME` characters and the body, folded, a line
        apart: what the lure families read (made once: one string for all of them, which
        :func:`wording.matches` then scans once)."""
        if "subject_body" not in self._cache:
            self._cache["subject_body"] = (
                wording.fold(self.letter.subject[:MAX_NAME]) + "\n" + self.body
            )
        return self._cache["subject_body"]  # type: ignore[return-value]


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
    wording.within(text, ctx.body)  # one pass of the families' set for the two
    found = wording.find_all(wording.OFFER, text)
    return sign("PHISH_GENEROUS_OFFER", found) if found else None


def alarming_subject(ctx: Context) -> Sign | None:
    found = wording.find_all(wording.ALARM, wording.fold(ctx.letter.subject))
    return sign("PHISH_ALARMING_SUBJECT", found) if found else None


def urgency(ctx: Context) -> Sign | None:
    found = wording.find_all(wording.URGENCY, ctx.body)
    return sign("PHISH_URGENCY", found) if found else None


_REPLY = re.compile(
    r"\s{0,16}(?:\[[^\]]{0,40}\]\s{0,16}){0,8}(?:re|ответ|отв|aw|sv|antw|odp|rif|res)"
    r"[ \t]{0,4}(?:\[\d{1,6}\]|\(\d{1,6}\))?[ \t]{0,4}:",
    re.IGNORECASE,
)


def fake_reply(ctx: Context) -> Sign | None:
    letter = ctx.letter
    if not _REPLY.match(letter.subject[:MAX_NAME]):
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
    im = ctx.sender_imitation
    if im is None or not fd:
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


def sender_idn(ctx: Context) -> Sign | None:
    fd = ctx.letter.from_domain
    if fd and idn_spoof(fd):
        return sign("PHISH_SENDER_IDN", [_shown(fd)])
    return None


def display_name_brand(ctx: Context) -> Sign | None:
    """The display name names a protected organization (also spelled with look-alike
    letters: "PayPaI"), and the address is not the organization's. The sender's own address
    or domain written in the name names nobody."""
    name, fd = ctx.letter.from_name[:MAX_NAME], ctx.letter.from_domain
    if not name or not fd:
        return None
    owner = ctx.protected.sender_org(fd)
    named = [org for org in ctx.name_orgs if org is not owner]
    if not named or _publication_title(ctx, fd, named):
        return None
    return sign("PHISH_DISPLAY_NAME_BRAND", [f"«{name}» <{ctx.letter.from_address}>"])


MIN_PUBLISHER = 4  # letters of a From domain's name that a display name can begin with


def _publication_title(ctx: Context, fd: str, named: Sequence[Org]) -> bool:
    """The display name is a newsletter's title: it begins with the name of the sender's
    own domain ("Lockergnome Apple Core" <subscriptions@lockergnome.com>: the publisher, then
    the subject it writes about), and the letter is a newsletter that speaks for none of the
    organizations the name names (:func:`_newsletter`: a list's letter linking to ten other
    sites or more). The name alone is the sender's to choose ("Acmenews PayPal Security"
    <x@acmenews.com>); a lure under it would still have to send its reader to many unrelated
    sites, and "sign in here" is one; nor may it ask to sign in or confirm
    (:func:`_calls_to_act`) or ask for a card, a password or a fee (``Context.asks``). Not for
    a public mailbox's domain nor one imitating an organization. Rests on the From domain
    (``Context.leaned``: a forged one takes it back)."""
    if not ctx.trust_from or ctx.sender_imitation is not None or _public_mailbox(ctx, fd):
        return False
    publisher = (normalize.registrable(fd) or fd).split(".")[0].replace("-", "")
    words = _plain_words(ctx.shown_name)
    if len(publisher) < MIN_PUBLISHER or not words or words[0] != publisher:
        return False
    if not all(_newsletter(ctx, org) for org in named):
        return False
    if ctx.asks or any(_calls_to_act(link.text) for link in ctx.letter.web_links):
        return False  # "Finnovosti Сбербанк" with "Войдите": a lure under a title
    ctx.leaned = True
    return True


def display_name_address(ctx: Context) -> Sign | None:
    """The display name holds an e-mail address that is not the sender's: not the From
    address, nor one of its domain's party, nor one of the envelope sender's (an e-mail
    service provider's bounce domain). A bare domain word ("Amazon.com", "Craig R.Hughes")
    is no address."""
    name, fd = ctx.letter.from_name[:MAX_NAME], ctx.letter.from_domain
    if not name or not fd:
        return None
    own = ctx.letter.from_address.lower()
    for m in _ADDRESS_IN_NAME.finditer(unicodedata.normalize("NFKC", name)):
        host = normalize.domain(m.group(1))
        if host is None or not known_suffix(host) or m.group(0).lower() == own:
            continue
        if ctx.same_party(host, fd) or ctx.same_party(host, ctx.return_path_domain):
            continue
        if ctx.origin_party(host):  # a masking forwarder names its sender (00204)
            continue
        return sign("PHISH_DISPLAY_NAME_ADDRESS", [f"«{name}» <{ctx.letter.from_address}>"])
    return None


def return_path_mismatch(ctx: Context) -> Sign | None:
    rp, fd = ctx.return_path, ctx.letter.from_domain
    if not rp or not fd:
        return None
    rd = normalize.address_domain(rp[:MAX_HEADER])
    if rd is None or ctx.same_party(rd, fd):
        return None
    if ctx.forwarders.names(rd) and ctx.origin is not None:
        return None  # a trusted forwarder's own bounce address (SRS) says nothing of the sender
    return sign("PHISH_RETURN_PATH_MISMATCH", [f"Return-Path: {rp}", f"From: {fd}"])


_RECEIVED_FROM = re.compile(
    r"\s{0,16}from\s{1,16}(\S{1,255})(?:\s{1,16}\(([^)]{0,512})\))?", re.IGNORECASE
)
# A host name: labels (a label cannot hold a dot, so each split is unique), a TLD of letters.
_HOSTNAME = re.compile(r"(?:[a-z0-9][a-z0-9-]{0,62}\.){1,126}[a-z][a-z0-9-]{1,62}")


def received_hosts(values: Sequence[str]) -> list[str]:
    """Host names in the ``from`` clauses of Received fields (HELO and reverse DNS)."""
    out: list[str] = []
    for value in values[:100]:
        m = _RECEIVED_FROM.match(value[:MAX_HEADER])
        if not m:
            continue
        candidates = [m.group(1)]
        if m.group(2):
            candidates.extend(m.group(2).replace("[", " [").split())
        for c in candidates:
            host = c.strip("[]();,").rstrip(".").lower()
            if host.startswith("helo="):
                host = host[5:]
            if (
                len(host) <= MAX_HOST
                and _HOSTNAME.fullmatch(host)
                and host not in out
                and not host.endswith(".localdomain")
            ):
                out.append(host)
    return out


def received_mismatch(ctx: Context) -> Sign | None:
    fd = ctx.letter.from_domain
    if not fd:
        return None
    hosts = ctx.received
    if not hosts or any(ctx.same_party(h, fd) for h in hosts):
        return None
    return sign("PHISH_RECEIVED_MISMATCH", [*hosts[:3], f"From: {fd}"])


_ADDRESS = re.compile(r"(?<![\w.+-])[\w.+-]{1,64}@[\w.-]{1,255}")


_LIST_HEADERS = ("sender", "list-post", "mailing-list", "list-unsubscribe")
_LIST_ID = re.compile(r"<([\w.-]{1,255})>")


def _address_domain(value: str | None) -> str | None:
    m = _ADDRESS.search(value[:MAX_HEADER]) if value else None
    return normalize.address_domain(m.group(0)) if m else None


def reply_to_mismatch(ctx: Context) -> Sign | None:
    """Replies go to another domain than the sender's. A mailing list's Reply-To (the list's
    address: the domain of its List-Id, List-Post, Mailing-List, Sender or envelope sender)
    is no mismatch."""
    value, fd = ctx.letter.header("reply-to"), ctx.letter.from_domain
    if not value or not fd:
        return None
    m = _ADDRESS.search(value[:MAX_HEADER])
    rd = normalize.address_domain(m.group(0)) if m else None
    if rd is None or ctx.same_party(rd, fd):
        return None
    letter = ctx.letter
    list_id = _LIST_ID.search((letter.header("list-id") or "")[:MAX_HEADER])
    others = [ctx.return_path_domain, list_id.group(1) if list_id else None]
    others += [_address_domain(letter.header(h)) for h in _LIST_HEADERS]
    if any(ctx.same_party(rd, other) for other in others) or ctx.origin_party(rd):
        return None
    return sign("PHISH_REPLY_TO_MISMATCH", [f"Reply-To: {m.group(0) if m else value}"])


# -- links ----------------------------------------------------------------------------------
def shown_host(text: str) -> str | None:
    """The host a link's text shows (:func:`pochta.antispam.signs.links.shown_host`)."""
    return links.shown_host(text, known_suffix)


def _leads_where_shown(ctx: Context, link: Link, shown: str) -> bool:
    """A link through a known redirector or click tracker, or through the sender's own
    bounce domain (its e-mail service provider), that goes where its text says: the URL it
    carries is the shown site's, or it carries none and the shown site is the sender's."""
    carried = links.carried_hosts(link.href) if ctx.redirector(link.host) else []
    if carried:
        return any(ctx.same_party(shown, host) for host in carried)
    if not ctx.own_site(shown):
        return False
    return ctx.redirector(link.host) or ctx.same_party(link.host, ctx.return_path_domain)


def _own_link_to_partner(ctx: Context, link: Link, shown: str) -> bool:
    """A link to the sender's own site (its From domain's party, imitating nobody) whose text
    shows a site no protected organization owns nor is imitated by: a shop's or a publisher's
    newsletter naming a partner and counting the click on its own site (``arnotts.ie`` ->
    ``buy4now.ie``, ``www.canonresellers.com`` -> ``clickthru.online.com`` from
    newsletter.online.com). It leads the reader nowhere the sender does not answer for; a
    link whose text shows a bank's or a service's site still counts, wherever it goes."""
    if not ctx.own_site(link.host) or ctx.protected.imitation(link.host) is not None:
        return False
    return ctx.protected.owner(shown) is None and ctx.protected.imitation(shown) is None


def link_text_mismatch(ctx: Context) -> Sign | None:
    found: list[str] = []
    for link in ctx.letter.web_links:
        if link.source != "html" or not link.text or len(link.host) > MAX_HOST:
            continue
        shown = shown_host(link.text)
        if shown is None or ctx.same_party(shown, link.host):
            continue
        if _leads_where_shown(ctx, link, shown) or _own_link_to_partner(ctx, link, shown):
            continue
        found.append(f"{shown} → {link.host}")
    return sign("PHISH_LINK_TEXT_MISMATCH", found[:3]) if found else None


NEWSLETTER_DOMAINS = 10
"""Registrable domains (not the imitated organization's) a list's letter links to at least,
for a look-alike among its links to be one of many (:func:`_one_of_many`). The project's
phishing letters with a look-alike link to at most 2 domains; the corpus's newsletters with
one (Lockergnome's issues) to 25-40."""
NEWSLETTER_SHARE = 10
"""A look-alike one of many takes at most one in this many of the letter's web links."""


def _newsletter(ctx: Context, org: Org) -> bool:
    """A newsletter that does not speak for ``org``: a list's letter (List-Unsubscribe or
    List-Id) whose web links lead to at least :data:`NEWSLETTER_DOMAINS` registrable domains
    that are not ``org``'s nor imitate it. A lure sends the reader to one place, a lure
    copying the organization's own newsletter links to the organization's sites, and a lure
    linking to ten look-alikes of its own has imitations, not unrelated sites."""
    letter = ctx.letter
    if letter.header("list-unsubscribe") is None and letter.header("list-id") is None:
        return False
    owners = ctx.link_owners
    unrelated = sum(org not in pair for pair in owners.values())
    return unrelated >= NEWSLETTER_DOMAINS


def _one_of_many(ctx: Context, registrable: str, org: Org) -> bool:
    """Links to ``registrable`` (imitating ``org``) are one destination of many in a
    newsletter (:func:`_newsletter`), not the letter's call to action: at most one in
    :data:`NEWSLETTER_SHARE` of its web links leads to ``org``'s look-alikes (all of them
    together: ten look-alikes of the attacker's own are ten calls). A lure's look-alike is its
    only or its main destination (the button, the "sign in here"); a technology newsletter's sidebar
    advertising Outlook add-ons (outlook.4team.biz, www.outlooksecure.com among 30 other
    sites) sends nobody to sign in anywhere."""
    if not _newsletter(ctx, org):
        return False
    web = ctx.letter.web_links
    owners = ctx.link_owners
    imitations = sum(owners.get(link.registrable, (None, None))[1] is org for link in web)
    if NEWSLETTER_SHARE * max(1, imitations) > len(web):
        return False  # the organization's look-alikes together, not each one alone
    if any(link.registrable == registrable for link in web[:NEWSLETTER_LEAD]):
        return False  # the first thing the letter sends its reader to
    for link in web:
        if link.registrable != registrable:
            continue
        if _calls_to_act(link.text) or org in ctx.protected.named_in(link.text[:MAX_ANCHOR]):
            return False  # "Подтвердите данные", "PayPal Resolution Center": the button
    return True


NEWSLETTER_LEAD = 3
"""The first web links of a letter: a look-alike among them is its call to action."""
MAX_ANCHOR = 256  # characters of an anchor's text read for words calling to act
_ACTION_WORDS = frozenset(
    {"verify", "verification", "confirm", "login", "logon", "signin", "password", "validate",
     "unlock", "reactivate", "restore", "suspended", "войти", "вход", "пароль"}
)  # fmt: skip
_ACTION_STEMS = ("подтверд", "войд", "авториз", "оплат", "разблокир", "восстанов", "верифиц")
_ACTION_PAIRS = frozenset({("sign", "in"), ("log", "in"), ("sign", "on")})


def _plain_words(text: str) -> list[str]:
    """``text`` casefolded, in runs of letters and digits."""
    return "".join(c if c.isalnum() else " " for c in text.casefold()).split()


def _calls_to_act(text: str) -> bool:
    """An anchor's text asks its reader to sign in, confirm, pay or restore access."""
    words = _plain_words(text[:MAX_ANCHOR])
    if any(w in _ACTION_WORDS or w.startswith(_ACTION_STEMS) for w in words):
        return True
    return any(pair in _ACTION_PAIRS for pair in itertools.pairwise(words))


def link_lookalike(ctx: Context) -> Sign | None:
    """A link to a domain imitating a protected one. Weak imitations (the name as one word of
    a longer one, a subdomain named like it, one letter off, the name on another TLD) count
    only when the letter is about that organization: google-analytics.com or applied.com in
    a shop's newsletter imitate nobody. In a letter that does not speak for the organization,
    a look-alike that is one of a newsletter's many destinations (:func:`_one_of_many`)
    counts only when it is a confusable spelling (paypa1.com), which nobody advertises."""
    found: list[str] = []
    for link in ctx.letter.web_links:
        if len(link.host) > MAX_HOST:
            continue
        im = ctx.protected.imitation(link.host)
        if im is not None:
            if im.org not in ctx.claimed:
                weak = im.how in WEAK or im.how == "foreign_tld"
                if weak and im.org not in ctx.named:
                    continue
                if im.how != "confusable" and _one_of_many(ctx, link.registrable, im.org):
                    continue
            found.append(f"{_shown(link.host)} ≈ {im.target} ({im.org.name})")
        elif idn_spoof(link.host):
            found.append(_shown(link.host))
    return sign("PHISH_LINK_LOOKALIKE", list(dict.fromkeys(found))[:3]) if found else None


def link_off_brand(ctx: Context) -> Sign | None:
    """A letter in the name of an organization (its name in the display name, or a domain
    imitating it) links off the organization's sites. A letter from the organization's own
    domain is the organization's, linking where it likes (a calendar invitation to a video
    call), or a forgery that authentication tells (PROTECTED_SENDER_SPOOFED)."""
    fd = ctx.letter.from_domain
    own = ctx.protected.sender_org(fd) if fd else None
    claimed = [org for org in ctx.claimed if org is not own]
    if not claimed:
        return None
    found: list[str] = []
    for link in ctx.letter.web_links:
        if ctx.protected.owner(link.host) is not None or len(link.host) > MAX_HOST:
            continue
        if ctx.redirector(link.host):
            carried = links.carried_hosts(link.href)
            if all(ctx.protected.owner(h) is not None for h in carried):
                continue  # a tracker that leads home, or where nobody can tell
        if link.host not in found:
            found.append(link.host)
    if not found:
        return None
    names = ", ".join(org.name for org in claimed)
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


def link_obfuscated(ctx: Context) -> Sign | None:
    """A site written so that no program makes a link of it, for the reader to type in. A
    protected organization's own site so written ("зайди на ozon точка ру") hides nothing."""
    found = [
        o.shown[:80]
        for o in links.obfuscated(ctx.body, known_suffix)
        if ctx.protected.owner(o.host) is None
    ]
    return sign("PHISH_LINK_OBFUSCATED", found[:3]) if found else None


def link_userinfo(ctx: Context) -> Sign | None:
    """A link with a ``user@`` part before its host: the reader sees the part before the @
    (a bank's name), the browser goes to the host after it."""
    found: list[str] = []
    for link in ctx.letter.links:
        user = links.userinfo(link.href)
        if user is not None:
            host = link.host or "?"
            found.append(f"{user[:60]}@{host[:60]}")
    return sign("PHISH_LINK_USERINFO", found[:3]) if found else None


MAX_DISGUISE_LINKS = 50  # links looked at for a disguised domain
WEB_PREFIXES = frozenset({"www", "www1", "www2", "m", "web"})
DISGUISE_TLDS = frozenset({"com", "net", "org", "gov", "edu", "info", "ru", "us", "uk"})


def _domain_disguise(host: str, registrable: str | None) -> str | None:
    """The host reads as another domain: a name, then the registrable domain starting with a
    TLD and a hyphen (``e-zpass.com-tollbill.win``, ``usps.com-track.top``,
    ``nalog.ru-lk.site``): the eye stops at "e-zpass.com", the site is com-tollbill.win.
    A site whose own name begins so, behind www alone (``www.net-watch.org``, a 2002
    newsletter's; ``www.net-temps.com``), shows no other domain. Returns what the host
    shows, or None."""
    if not registrable or len(host) > MAX_HOST or not host.endswith("." + registrable):
        return None
    first = registrable.split(".", 1)[0]
    head, dash, rest = first.partition("-")
    if not dash or not rest or head not in DISGUISE_TLDS:
        return None
    labels = [label for label in host[: -len(registrable)].split(".") if label]
    if not [label for label in labels if label not in WEB_PREFIXES]:
        return None  # www.net-watch.org: the site's own name, "net-watch", after www
    return ".".join([*labels, head])


def link_domain_disguise(ctx: Context) -> Sign | None:
    """A link whose host starts with a familiar-looking domain that is not the site
    (:func:`_domain_disguise`): the toll, parcel and tax lures of 2024-2026 (phish28d). The
    shape alone is also that of real sites whose own name begins with a TLD and a hyphen,
    behind a subdomain (click.email.net-a-porter.com, forum.ru-board.com,
    portail.net-entreprises.fr): it counts when the site is a "com-" one (no site's own
    name), under a TLD mostly used for abuse (``e-zpass.com-tollbill.win``,
    ``nalog.ru-lk.site``), or when what it shows is a protected organization's domain
    (``lk.nalog.ru-vozvrat.com``) (review1)."""
    found: list[str] = []
    for link in ctx.letter.web_links[:MAX_DISGUISE_LINKS]:
        if link.is_ip or not link.host or link.host in found:
            continue
        shown = _domain_disguise(link.host, link.registrable)
        if shown is None or not link.registrable:
            continue
        if (
            link.registrable.startswith("com-")
            or links.tld(link.registrable) in ctx.suspicious_tlds
            or ctx.protected.owner(shown) is not None
        ):
            found.append(link.host)
    return sign("PHISH_LINK_DOMAIN_DISGUISE", found[:3]) if found else None


def link_suspicious_tld(ctx: Context) -> Sign | None:
    found = [
        link.host
        for link in ctx.letter.web_links
        if not link.is_ip and links.tld(link.host) in ctx.suspicious_tlds
    ]
    return sign("PHISH_LINK_SUSPICIOUS_TLD", list(dict.fromkeys(found))[:3]) if found else None


FORM_INPUTS = 3  # a form with fewer fields (a search box and its button) collects nothing


def html_form(ctx: Context) -> Sign | None:
    """A form to fill in inside the letter: a password field, or a form with at least
    :data:`FORM_INPUTS` fields. A shop's search box (a text field and a button) is none."""
    html = ctx.letter.html
    if html is None or not (html.password_inputs or (html.forms and html.inputs >= FORM_INPUTS)):
        return None
    found = f"forms: {html.forms}, password fields: {html.password_inputs}"
    return sign("PHISH_HTML_FORM", [found])


def extortion_demand(ctx: Context) -> Sign | None:
    found = extortion.demand(ctx.letter.all_text, ctx.body)
    return sign("PHISH_EXTORTION", [f[:80] for f in found]) if found else None


# -- attachments ----------------------------------------------------------------------------
def _attachments(letter: Letter) -> Sequence[Attachment]:
    return letter.attachments


def _files(ctx: Context) -> list[attachments.FileVerdict]:
    if "files" not in ctx._cache:
        ctx._cache["files"] = [
            attachments.inspect(a.filename, a.content_type, a.content)
            for a in _attachments(ctx.letter)[:50]
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


# -- today's lures (issue 28, item 6) ---------------------------------------------------------
def _own_or_reader(ctx: Context) -> bool:
    """The sender is a protected organization's own domain, or the reader's own mail domain,
    and the letter came that way (:func:`_came_from_sender`): what it says of accounts and
    fees is the organization's own business. A From address of either written on a letter
    from elsewhere ("admin@<the reader's domain>" from a stranger's server) is not."""
    fd = ctx.letter.from_domain
    if not fd or not ctx.trust_from:
        return False
    own = ctx.protected.sender_org(fd) is not None
    own = own or any(ctx.same_party(fd, d) for d in _reader_domains(ctx))
    own = own and _came_from_sender(ctx)
    ctx.leaned = ctx.leaned or own
    return own


def _came_from_sender(ctx: Context) -> bool:
    """Nothing in the letter's path contradicts its From domain: the Return-Path or a
    Received hop is the sender's party, or the letter carries neither."""
    if "came_from_sender" not in ctx._cache:
        fd = ctx.letter.from_domain
        rd = ctx.return_path_domain
        hosts = ctx.received
        ctx._cache["came_from_sender"] = (
            (not rd and not hosts)
            or ctx.same_party(rd, fd)
            or any(ctx.same_party(h, fd) for h in hosts)
        )
    return bool(ctx._cache["came_from_sender"])


def _shown_sender(ctx: Context) -> str:
    return f"«{ctx.letter.from_name[:MAX_NAME]}» <{ctx.letter.from_address[:MAX_HEADER]}>"


def freemail_brand(ctx: Context) -> Sign | None:
    """A public mailbox that calls itself an organization or a service: a protected name, or
    a service role ("Support", "IT Helpdesk", "Служба безопасности") in its display name.
    A person writes from gmail.com; a bank, a shop's support or a mail administrator does
    not."""
    fd = ctx.letter.from_domain
    if not fd or (normalize.registrable(fd) or fd) not in ctx.freemail:
        return None
    name = ctx.shown_name
    if not name.strip():
        return None
    owner = ctx.protected.owner(fd)  # "Яндекс Диск" <x@yandex.ru>: DISPLAY_NAME_BRAND's part
    found = [org.name for org in ctx.protected.named_in(name) if org is not owner]
    found += lures.find(lures.ROLE, wording.fold(name), 2)
    if not found:
        return None
    return sign("PHISH_FREEMAIL_BRAND", [_shown_sender(ctx), *found[:2]])


def subject_brand(ctx: Context) -> Sign | None:
    """The subject names a protected organization, and the From domain is not the
    organization's (nor a public mailbox of its own: a friend's gmail.com letter about
    "Google Photos" is a person's)."""
    subject, fd = ctx.letter.subject[:MAX_NAME], ctx.letter.from_domain
    if not subject or not fd or ctx.protected.sender_org(fd) is not None:
        return None  # one organization writing about another (Госуслуги about a ГИБДД fine)
    owner = ctx.protected.owner(fd)
    named = [org for org in ctx.named_in_subject if org is not owner]
    if not named:
        return None
    return sign("PHISH_SUBJECT_BRAND", [f"{named[0].name}: {subject[:80]}"])


MAX_RECIPIENTS = 20  # recipients whose domains are compared


def _reader_domains(ctx: Context) -> list[str]:
    """The readers' mail domains: the envelope's recipients where the SMTP session gave them;
    the To field only for a letter scanned on its own (``POST /v1/scan``, an import). The
    sender writes To: taken beside the envelope, "To: alice@<the reader's domain>" on a
    letter from the sender's own domain made that domain the reader's and bought the
    reader-domain exemption (:func:`_own_or_reader`)."""
    if "reader_domains" not in ctx._cache:
        out: list[str] = []
        for a in _reader_addresses(ctx):
            d = a.rpartition("@")[2]
            if d not in out and d not in ctx.freemail:
                out.append(d)
        ctx._cache["reader_domains"] = out
    return ctx._cache["reader_domains"]  # type: ignore[return-value]


def _reader_addresses(ctx: Context) -> list[str]:
    """The readers' addresses, normalized (see :func:`_reader_domains` for whose)."""
    if "reader_addresses" not in ctx._cache:
        given = list(ctx.envelope.recipients[:MAX_RECIPIENTS])
        if not given:
            given = [a.address for a in ctx.letter.to_addresses[:MAX_RECIPIENTS]]
        found = (normalize.address(a[:MAX_HEADER]) for a in given if a)
        ctx._cache["reader_addresses"] = [a for a in found if a]
    return ctx._cache["reader_addresses"]  # type: ignore[return-value]


MAX_OWN_LINKS = 50  # links looked at for a letter that links only to its sender's own site


def _about_the_domain(ctx: Context) -> bool:
    """A letter about the reader's domain from a business it has with it: the From domain is
    a protected organization's own (a registrar's: namecheap.com, nic.ru), it came from the
    From domain's own servers (the Received chain's first outside host is the From domain's
    party) and every link, if any, goes to the From domain's own site. A registrar's
    "pochta.test expires in 30 days, renew in your account" names the reader's domain in the
    subject as its business (phish28d); a fake registrar's notice paid on another site, a
    "pochta.test: 5 pending messages" whose button leads to a hacked site, still show it.
    So do both from a domain the phisher owns, its own HELO name and its own page (review1):
    those are anybody's to have, and a phisher's own domain passes DMARC, so nothing would
    take the exemption back. Rests on the From domain (:meth:`Context.from_party`)."""
    fd = ctx.letter.from_domain
    hosts = ctx.received
    if not fd or not hosts or ctx.protected.sender_org(fd) is None:
        return False
    if not ctx.from_party(hosts[0]):
        return False
    links = ctx.letter.web_links
    if len(links) > MAX_OWN_LINKS:
        return False
    return all(link.host and not link.is_ip and ctx.own_site(link.host) for link in links)


def recipient_domain(ctx: Context) -> Sign | None:
    """The display name or the subject shows the reader's own mail domain (not as part of an
    address in the subject), and the sender is outside it: a letter posing as the reader's
    mail administrator or employer ("pochta.test IT Support", "pochta.test: 5 pending
    messages"). Public mail services' domains are left out (gmail.com in a name says
    nothing). A mailing list's letter is read only when the SMTP session named its readers:
    its To is the list's own address, whose domain is the list's business."""
    fd = ctx.letter.from_domain
    if not fd or (not ctx.envelope.recipients and _mailing_list(ctx.letter)):
        return None
    name = unicodedata.normalize("NFKC", ctx.letter.from_name[:MAX_NAME]).lower()
    subject = unicodedata.normalize("NFKC", ctx.letter.subject[:MAX_NAME]).lower()
    places = [("From", name)]
    if not _about_the_domain(ctx):
        places.append(("Subject", subject))
    for d in _reader_domains(ctx):
        if ctx.from_party(d):
            continue
        for where, text in places:
            i = text.find(d)
            while i >= 0:
                before = text[i - 1] if i else " "
                after = text[i + len(d)] if i + len(d) < len(text) else " "
                if (
                    before not in "@.-_"
                    and not before.isalnum()
                    and not (after.isalnum() or after in "-_")
                ):
                    return sign("PHISH_RECIPIENT_DOMAIN", [f"{where}: {text[:80]}"])
                i = text.find(d, i + 1)
    return None


def _mailing_list(letter: Letter) -> bool:
    """A mailing list's letter (List-Id, List-Post, Mailing-List): its To is the list, and a
    list's own name, domain and administrators are the list's business."""
    return any(letter.header(h) for h in ("list-id", "list-post", "mailing-list"))


_DAEMONS = ("mailer-daemon", "postmaster")
# the parts a mail server's report is made of (RFC 3462, 3464): its text, the delivery status,
# the returned letter or its header
_REPORT_PARTS = ("text/plain", "text/rfc822-headers", "message/")


def _report(ctx: Context) -> bool:
    """A mail server's report, as far as it can matter: from MAILER-DAEMON or postmaster, and
    the letter gives the reader nothing to act on: no link of its own (web, mail, script or
    data), no form, no file but the report's own parts (text, the returned letter: the
    reader's own, and itself with nothing to act on, :func:`_returned_to_writer`), replies
    to nobody but the sender's own domain, and asks for no password, card or payment and
    makes no account lure; nor is it written as from the reader (:func:`_from_the_reader`).
    A server's "Mail Delivery System" is a mail administrator's name by right.

    What it rests on is the sender's to write, and that is why it is safe: a letter that
    writes all of it has disarmed itself (a phishing letter posing as a bounce needs a link,
    a form, a file or a request: "release your pending messages", "reply with your
    password"). Neither the envelope sender nor a mailing list's header counts (a null
    MAIL FROM or a List-Id is one line to write). And it leans on the From domain (the
    server's): withheld, restored when authentication shows that domain forged
    (``verdict.from_forged``)."""
    letter = ctx.letter
    if not ctx.trust_from:
        return False
    from_local = letter.from_address.rpartition("@")[0].lower()
    if from_local not in _DAEMONS or not _nothing_to_act_on(letter):
        return False
    if _from_the_reader(ctx):
        return False
    for a in letter.attachments[:50]:
        if a.content_type.lower() == "message/rfc822" and not _returned_to_writer(ctx, a.content):
            return False
    reply_to = letter.header("reply-to")
    if reply_to:
        m = _ADDRESS.search(reply_to[:MAX_HEADER])
        answered = normalize.address_domain(m.group(0)) if m else None
        if not ctx.same_party(answered, letter.from_domain):
            return False
    text = ctx.subject_body
    if (
        lures.find(lures.ACCOUNT_LURE, text, 1)
        or lures.find(lures.FEE_REQUEST, text, 1)
        or card_data_request(ctx) is not None
        or personal_data_request(ctx) is not None
    ):
        return False
    ctx.leaned = True
    return True


def _nothing_to_act_on(letter: Letter, parts: tuple[str, ...] = _REPORT_PARTS) -> bool:
    """No link (web, mailto:, script, data:), no form or password field, no file but
    ``parts`` (a report's own: text, a delivery status, a returned letter or its header)."""
    if letter.links:
        return False
    html = letter.html
    if html is not None and (html.forms or html.password_inputs):
        return False
    for a in letter.attachments[:50]:
        kind = a.content_type.lower()
        if not kind.startswith(parts) or lures.is_html_file(a.filename, kind):
            return False
    return True


def _from_the_reader(ctx: Context) -> bool:
    """A report written as from the reader's own address (a server reports as its own
    MAILER-DAEMON or postmaster, never as the reader), or as from the reader's own mail domain
    on a letter whose path is not that domain's (:func:`_came_from_sender`): the reader's own
    server's name on a stranger's letter."""
    fd, address = ctx.letter.from_domain, normalize.address(ctx.letter.from_address[:MAX_HEADER])
    if address is not None and address.lower() in (a.lower() for a in _reader_addresses(ctx)):
        return True
    own = bool(fd) and any(ctx.same_party(fd, d) for d in _reader_domains(ctx))
    return own and not _came_from_sender(ctx)


MAX_RETURNED = 2 * 2**20
"""Bytes of a returned letter read as a letter; a larger one is not disarmed."""


def _returned_disarmed(ctx: Context, returned: bytes) -> bool:
    """The returned letter gives the reader nothing to act on either: read as a letter, it
    has no link, form or file but plain text (:func:`_nothing_to_act_on`), asks for no
    password, card or payment and makes no account lure. Its From is the sender's to write
    (issue 28: a forged bounce returning a lure written "From: <the reader>" kept the
    report's exemption); what it carries is read instead."""
    if len(returned) > MAX_RETURNED:
        return False
    inner = parse(returned)
    if not _nothing_to_act_on(inner, ("text/plain",)):  # a letter inside it is not read
        return False
    text = wording.fold(inner.subject[:MAX_NAME]) + "\n" + wording.fold(inner.all_text)
    if lures.find(lures.ACCOUNT_LURE, text, 1) or lures.find(lures.FEE_REQUEST, text, 1):
        return False
    inner_ctx = Context(inner, ctx.protected, ctx.shorteners, envelope=ctx.envelope)
    return card_data_request(inner_ctx) is None and personal_data_request(inner_ctx) is None


def _returned_to_writer(ctx: Context, returned: bytes) -> bool:
    """A returned letter (a report's ``message/rfc822`` part) was written by the report's
    reader: its From is a reader's address (the envelope's recipients; the To field for a
    letter scanned on its own) or in a reader's own mail domain. A server returns the letter
    to whoever sent it, so a real report returns the reader's own letter, links and all; a
    report returning somebody else's letter ("your pending messages" from "PayPal") is a lure
    dressed as a report, or backscatter: either way it is not disarmed. A From written as
    the reader's own is the sender's to write too, so the returned letter must give nothing
    to act on either (:func:`_returned_disarmed`): a real report of the reader's letter
    with a link in it loses the exemption with the forged one, and pays the mail
    administrator's name (2.5 points, phishing only beside a mismatch or a lure)."""
    block = read_block(returned, 0, min(len(returned), MAX_RETURNED_HEAD))
    value = first_value(returned, block, "from")
    m = _ADDRESS.search(value[:MAX_HEADER]) if value else None
    writer = normalize.address(m.group(0)) if m else None
    if writer is None:
        return False
    writer = writer.lower()
    domain = writer.rpartition("@")[2]
    if not (
        any(writer == a.lower() for a in _reader_addresses(ctx))
        or any(ctx.same_party(domain, d) for d in _reader_domains(ctx))
    ):
        return False
    return _returned_disarmed(ctx, returned)


MAX_RETURNED_HEAD = 65_536  # bytes of a returned letter read for its header


def mail_admin_name(ctx: Context) -> Sign | None:
    """The display name is a mail administrator's ("Mail Administrator", "Webmail Support",
    "IT Helpdesk", "Администратор почты"), and the sender is neither in the reader's domain
    nor a protected organization's own (Gmail's team writes from google.com), nor a mail
    server's report (:func:`_report`). A mailing list's header exempts nothing (issue 28:
    "IT Helpdesk" with a List-Id written in was no sign at all)."""
    name = ctx.shown_name
    if not name.strip() or _own_or_reader(ctx):
        return None
    found = lures.find(lures.MAIL_ROLE, wording.fold(name), 1)
    if not found or _report(ctx):
        return None
    return sign("PHISH_MAIL_ADMIN_NAME", [_shown_sender(ctx)])


def account_lure(ctx: Context) -> Sign | None:
    if _own_or_reader(ctx):
        return None
    text = ctx.subject_body
    found = lures.find(lures.ACCOUNT_LURE, text)
    return sign("PHISH_ACCOUNT_LURE", found) if found else None


DOCUMENT_READ = 20_000  # characters of the subject and text searched for a document lure


def document_lure(ctx: Context) -> Sign | None:
    """A document, a statement or a voicemail to review, sign or open, or the reader's pay
    changing (:data:`lures.DOCUMENT_LURE`), from outside the reader's organization, in a letter
    whose way to it may hide in an attachment: a calendar invitation, or a short letter
    (:data:`QR_WORDS`) with an image or a document attached (a QR code's place). The
    salary-statement and "review and sign" lures of 2024-2026 (phish28e). Legitimate mail
    hands over documents every day (an e-signature service, a payroll provider): no points
    alone; the rules count it where the way to the document is hidden (a QR code in the file,
    a link only in the invitation). Not in a short letter with a document attached that names
    a payment (:data:`lures.QR_PAYMENT`): the QR code is an invoice's. Searched by RE2 alone
    (:func:`lures.find_document`, its own pattern, out of the shared set) over
    :data:`DOCUMENT_READ` characters."""
    letter = ctx.letter
    short = _text_words(letter) <= QR_WORDS
    calendars = _calendars(letter)
    attached = short and (_images(letter) or _documents(letter))
    if (
        attached
        and not calendars
        and _documents(letter)
        and lures.find(lures.QR_PAYMENT, ctx.subject_body, 1)
    ):
        # an invoice's payment QR code beside a contract to sign (a supplier's "счёт на оплату
        # и договор на подпись", its logo an image): the code is the document's, an invoice's;
        # a QR code in an image alone is no invoice's (review1)
        attached = False
    if not (attached or calendars) or _own_or_reader(ctx):
        return None
    found = lures.find_document(ctx.subject_body[:DOCUMENT_READ], 2)
    return sign("PHISH_DOCUMENT_LURE", found) if found else None


def fee_request(ctx: Context) -> Sign | None:
    if _own_or_reader(ctx):
        return None
    text = ctx.subject_body
    found = lures.find(lures.FEE_REQUEST, text)
    return sign("PHISH_FEE_REQUEST", found) if found else None


SPLIT_IN_TEXT = 3  # invisible characters splitting words in the text (one in a name, a subject)
HIDDEN_MIN = 200  # hidden HTML characters that count (and more than the visible ones)


def hidden_text(ctx: Context) -> Sign | None:
    """Words split by invisible characters (one in the display name or the subject,
    :data:`SPLIT_IN_TEXT` in the text), or an HTML part that hides more text than it shows
    (at least :data:`HIDDEN_MIN` characters): text meant for filters, not for the reader."""
    letter = ctx.letter
    head = letter.from_name[:MAX_NAME] + "\n" + letter.subject[:MAX_NAME]
    found = lures.split_words(head)
    if not found and lures.count_split(letter.all_text, SPLIT_IN_TEXT) >= SPLIT_IN_TEXT:
        found = lures.split_words(letter.all_text)
    html = letter.html
    if (
        html is not None
        and html.hidden_chars >= HIDDEN_MIN
        and html.hidden_chars > len(html.text.strip())
    ):
        found.append(f"{html.hidden_chars} hidden characters, {len(html.text.strip())} shown")
    return sign("PHISH_HIDDEN_TEXT", found[:3]) if found else None


_SCRIPT_SCHEMES = ("data:", "javascript:", "vbscript:")
MAX_SCRIPT = 512  # characters of a javascript: link read to tell a page's own pop-up
_CALL_CHARS = frozenset(string.ascii_letters + string.digits + "_.(),; \t\r\n")
_PLAIN_LITERAL = frozenset(string.ascii_letters + string.digits + "_-. ")
MAX_PLAIN_LITERAL = 40
# names through which a call runs or builds other code, decodes a hidden address, or goes
# somewhere itself: a pop-up link calls none of them
_NOT_A_POPUP = frozenset(
    {
        "eval",
        "function",
        "settimeout",
        "setinterval",
        "setimmediate",
        "execscript",
        "atob",
        "btoa",
        "unescape",
        "escape",
        "decodeuri",
        "decodeuricomponent",
        "fromcharcode",
        "write",
        "writeln",
        "location",
        "href",
        "assign",
        "replace",
        "innerhtml",
        "outerhtml",
        "insertadjacenthtml",
        "cookie",
        "fetch",
        "import",
        "constructor",
        "submit",
        "src",
        "createelement",
        "appendchild",
        "sendbeacon",
        "xmlhttprequest",
        "postmessage",
    }
)


def _own_page_call(ctx: Context, href: str) -> bool:
    """A ``javascript:`` link that only calls a function with literal arguments, web
    addresses among them, every one on the From domain's party: a web page's own pop-up
    link ("email this story": ``javascript: rs("ss","http://story.news.yahoo.com/...")``)
    copied into a letter. It leads, if anywhere, to the sender's own site; a script that
    does anything else (an assignment, an expression, an address elsewhere, no address at
    all: ``javascript:alert(1)``, a literal that is neither an own address nor a plain word,
    a call of anything that runs or decodes code or goes somewhere itself: ``eval``,
    ``setTimeout``, ``unescape``, ``location``...) still counts."""
    fd = ctx.letter.from_domain
    code = href.strip()
    if not fd or len(code) > MAX_SCRIPT or not code.lower().startswith("javascript:"):
        return False
    code = code[len("javascript:") :]
    if code.count('"') % 2 or code.count("'") % 2:
        return False
    hosts: list[str] = []
    outside: list[str] = []
    literal: list[str] = []
    quote = ""
    for ch in code:
        if quote:
            if ch == quote:
                quote = ""
                text = "".join(literal)
                literal = []
                if text.lower().startswith(("http://", "https://")):
                    found = normalize.url(text)
                    if found is None or "\\" in text or "%" in text:
                        return False
                    hosts.append(found[1])
                elif len(text) > MAX_PLAIN_LITERAL or not set(text) <= _PLAIN_LITERAL:
                    return False  # code or an encoded address in a string
            else:
                literal.append(ch)
        elif ch in "\"'":
            quote = ch
        else:
            outside.append(ch)
    calls = "".join(outside)
    if quote or "(" not in calls or not set(calls) <= _CALL_CHARS:
        return False
    names = "".join(c if c.isalnum() or c == "_" else " " for c in calls).lower().split()
    if any(name in _NOT_A_POPUP for name in names):
        return False
    return bool(hosts) and all(ctx.own_site(h) for h in hosts)


def link_data_url(ctx: Context) -> Sign | None:
    """A link to a ``data:`` address (a whole page carried in the link, that no site's
    reputation vouches for) or to a script; not a page's own pop-up link
    (:func:`_own_page_call`)."""
    found = []
    for link in ctx.letter.links:
        href = link.href[:64].strip().lower()
        href = "".join(href.split())  # "java script:" with a tab inside
        if href.startswith(_SCRIPT_SCHEMES) and not _own_page_call(ctx, link.href):
            found.append(link.href[:60])
    return sign("PHISH_LINK_DATA_URL", found[:3]) if found else None


def html_attachment(ctx: Context) -> Sign | None:
    found: list[str] = []
    read = 0
    for a in _attachments(ctx.letter)[:50]:
        if not lures.is_html_file(a.filename, a.content_type):
            continue
        read += 1
        if read > lures.MAX_HTML_FILES:
            break
        what = lures.html_attachment(a.content)
        if what:
            found.append(f"{a.filename or a.content_type}: {', '.join(what)}")
    return sign("PHISH_HTML_ATTACHMENT", found[:3]) if found else None


QR_WORDS = 150  # a letter longer than this is not a QR lure


def _text_words(letter: Letter) -> int:
    """The words of the letter's text, counted up to ``QR_WORDS + 1`` (of 5,000 characters)."""
    return len(letter.text[:5000].split(maxsplit=QR_WORDS + 1))


BARE_WORDS = 8  # an image with fewer words of text than this is a letter of one image


def _images(letter: Letter) -> int:
    attached = sum(1 for a in letter.attachments[:50] if a.content_type.startswith("image/"))
    return attached + (letter.html.images if letter.html is not None else 0)


DOCUMENT_TYPES = frozenset(
    {
        "application/pdf",
        "application/msword",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    }
)
DOCUMENT_EXTENSIONS = frozenset({"pdf", "doc", "docx"})


def _documents(letter: Letter) -> int:
    """Attached documents (PDF, Word) a QR code may be printed in."""
    return sum(
        1
        for a in letter.attachments[:50]
        if a.content_type in DOCUMENT_TYPES
        or attachments.extension(a.filename or "") in DOCUMENT_EXTENSIONS
    )


def qr_code(ctx: Context) -> Sign | None:
    """An image or a document (PDF, Word), and the text asks to scan a QR code (in a short
    letter): the QR code's link is in the picture or in the file, where no link check sees it
    (quishing moved into PDFs in 2024-2026: phish28d); or an image with hardly any text. A
    ticket's QR code in a PDF shows it too: the sign carries no points alone
    (``PHISH_QR_LURE`` needs a lure or an imitation beside it). An invoice's payment QR code
    in a document does not (:data:`lures.QR_PAYMENT`: a payment named; review1): every
    invoice may carry one, and "Final notice: invoice overdue" with "Dear customer" made a
    supplier's reminder phishing."""
    letter = ctx.letter
    images = _images(letter)
    if not images and not _documents(letter):
        return None
    words = _text_words(letter)
    if words > QR_WORDS:
        return None
    found = lures.find(lures.QR, ctx.subject_body, 2)
    if found and (images or not lures.find(lures.QR_PAYMENT, ctx.subject_body, 1)):
        return sign("PHISH_QR_CODE", found)
    attached = [a for a in letter.attachments[:50] if a.content_type.startswith("image/")]
    if attached and words < BARE_WORDS and not letter.web_links:
        return sign("PHISH_QR_CODE", [f"{attached[0].filename or 'image'}: {words} words of text"])
    return None


def _free_host(host: str, hosting: frozenset[str]) -> str | None:
    """The free hosting ``host`` is on (itself or a parent domain listed), or None."""
    parts = host.split(".")
    for i in range(len(parts) - 1):
        parent = ".".join(parts[i:])
        if parent in hosting:
            return parent
    return None


def link_free_hosting(ctx: Context) -> Sign | None:
    """A link to a page on free hosting or a site builder (``data/free_hosting.txt``):
    anyone puts up a page there under a name of their choosing, with nobody checking who
    they are; a bank's or a service's sign-in page does not live there."""
    found: list[str] = []
    for link in ctx.letter.web_links:
        if link.is_ip or len(link.host) > MAX_HOST:
            continue
        if _free_host(link.host, ctx.free_hosting) is None and not (
            _free_host(link.host, ctx.general_storage) is not None and _page_like(link.href)
        ):
            continue
        if link.host not in found:
            found.append(link.host)
    return sign("PHISH_LINK_FREE_HOSTING", found[:3]) if found else None


PAGE_SUFFIXES = (".htm", ".html", ".shtml", ".xhtml", ".php", ".svg", ".asp", ".aspx")
MAX_HREF = 2048  # characters of a link read for its path


def _page_like(href: str) -> bool:
    """A link to a web page put into general storage (``data/general_storage.txt``), as
    phishing kits put theirs: the path's last part is an HTML, PHP or SVG file, or the
    address carries an e-mail address (the reader's, filled in for the page). A report, a
    picture or a site's page there (``.pdf?sig=...``, ``sites.google.com/view/...``) is
    not one (phish28b)."""
    try:
        parts = urlsplit(href[:MAX_HREF].strip())
    except ValueError:
        return False
    last = parts.path.rpartition("/")[2].lower()
    carried = (parts.query + "#" + parts.fragment).lower()
    return last.endswith(PAGE_SUFFIXES) or "@" in carried or "%40" in carried


def callback_lure(ctx: Context) -> Sign | None:
    """A number to call (:data:`lures.CALLBACK_CALL`, :data:`lures.CALLBACK_DIGITS` digits or
    more) about a charge, a renewal or a sign-in the reader did not make
    (:data:`lures.CALLBACK_REASON`): callback phishing carries no link to check, the call is
    the lure. An organization's own letter (its bank's "if it was not you, call us") is its
    business."""
    if _own_or_reader(ctx):
        return None
    text = ctx.subject_body
    reasons = lures.find(lures.CALLBACK_REASON, text, 2)  # rare: the call is looked for after
    if not reasons:
        return None
    calls: list[str] = []
    for m in lures.CALLBACK_CALL.finditer(text[: lures.CALLBACK_READ]):
        if sum(c.isdigit() for c in m.group(0)) >= lures.CALLBACK_DIGITS:
            calls.append(wording.quote(text, m))
            if len(calls) >= 2:
                break
    return sign("PHISH_CALLBACK_LURE", [*reasons, *calls]) if calls else None


def _public_mailbox(ctx: Context, domain: str | None) -> bool:
    return bool(domain) and (normalize.registrable(domain) or domain) in ctx.freemail


def bec_request(ctx: Context) -> Sign | None:
    """Business e-mail compromise: a public mailbox (the From address, or the Reply-To where
    the answer goes) asks somebody at an organization (a reader's domain that is no public
    mail service) for money the way no colleague, manager or supplier does by e-mail: pay
    sent to new bank details (:data:`lures.BEC_MONEY`) while the writer cannot be reached or
    asks for secrecy (:data:`lures.BEC_HUSH`) or the answers go to a public mailbox the From
    address is not; gift cards to buy and their codes to send (:data:`lures.BEC_GIFT` with
    :data:`lures.BEC_CODES`); or a payment to make while the writer cannot be reached or
    asks for secrecy (:data:`lures.BEC_PAYMENT` with :data:`lures.BEC_HUSH`), today, at once
    or in secret (:data:`_bec_press`: a director's "pay the invoice tomorrow, I'm in
    meetings and can't talk" to her accountant is none, phish28c). A person's
    letter to a friend's gmail.com address, a company's own letter from its own domain about
    its new bank details, and a calm "I changed my bank, please update my direct deposit"
    from an employee's, a landlord's or a small supplier's own public mailbox (what payroll
    and accounts meet every month: review1) are not it
    (phish28b)."""
    fd = ctx.letter.from_domain
    if not fd or not _reader_domains(ctx) or _own_or_reader(ctx):
        return None
    reply_to = _address_domain(ctx.letter.header("reply-to"))
    diverted = _public_mailbox(ctx, reply_to) and not ctx.same_party(reply_to, fd)
    if not (_public_mailbox(ctx, fd) or diverted):
        return None
    text = ctx.subject_body
    hush = lures.find(lures.BEC_HUSH, text, 1)
    money = lures.find(lures.BEC_MONEY, text, 2) if hush or diverted else []
    found = [*money, *hush] if money else []
    if not found:
        gift = lures.find(lures.BEC_GIFT, text, 1)
        codes = lures.find(lures.BEC_CODES, text, 1) if gift else []
        found = [*gift, *codes] if codes else []
    if not found and hush:
        pay = lures.find(lures.BEC_PAYMENT, text, 1)
        press = _bec_press(text) if pay else []
        found = [*pay, *hush, *press] if press else []
    if not found:
        return None
    return sign("PHISH_BEC_REQUEST", [_shown_sender(ctx), *found])


def _bec_press(text: str) -> list[str]:
    """What presses a payment: secrecy anywhere (:data:`lures.BEC_SECRET`), a deadline
    (:data:`lures.BEC_PRESS`) in the subject (the text's first line) or in a sentence that
    asks for the payment (:data:`lures.BEC_PAYMENT`), among the first :data:`MAX_BEC_SENTENCES`
    sentences of :data:`MAX_BEC_TEXT` characters. "Pay the invoice tomorrow? I'm in meetings
    all day today" sets no deadline (review2)."""
    secret = lures.find(lures.BEC_SECRET, text, 1)
    if secret:
        return secret
    press = lures.find(lures.BEC_PRESS, text.partition("\n")[0], 1)
    if press:
        return press
    for i, sentence in enumerate(wording.sentences(text[:MAX_BEC_TEXT])):
        if i >= MAX_BEC_SENTENCES:
            break
        if lures.find(lures.BEC_PAYMENT, sentence, 1):
            press = lures.find(lures.BEC_PRESS, sentence, 1)
            if press:
                return press
    return []


MAX_BEC_TEXT = 20_000  # characters of the subject and text read for a payment's deadline
MAX_BEC_SENTENCES = 300


def task_scam(ctx: Context) -> Sign | None:
    """A job or task scam: a public mailbox (the From address, or the Reply-To where the
    answer goes) offers a job (:data:`lures.TASK_JOB`) paid by the day or paid out daily
    (:data:`lures.TASK_PAY`) as a range of amounts (:data:`lures.TASK_RANGE`: "$200-$800"),
    for minutes a day, from a phone or with no experience
    (:data:`lures.TASK_EASY`), to be taken up in a messenger (Telegram, WhatsApp, Viber named
    in the letter or linked: :data:`MESSENGER_HOSTS`): "$200-$800 a day, 60 minutes on your
    phone, message our manager on WhatsApp". A recruiter's letter from gmail.com with a
    salary by the year or the month, and a job board's notice of shifts paid by the day from
    its own domain, are not it (phish28c); nor is a person's gmail.com letter asking for a
    babysitter, a mover or a dog walker for one sum a day, no experience needed, "text me on
    WhatsApp" (review2: one sum, not a range). One sum a day is the scam's pay too when the
    work is the task scams' own: rating, reviewing, liking or "optimizing" products, apps or
    videos (:data:`lures.TASK_WORK`: "$350 per day ... help merchants boost their app
    ratings", "4 000 ₽ в день ... ставить лайки и писать отзывы": phish28d)."""
    fd = ctx.letter.from_domain
    if not fd or _own_or_reader(ctx):
        return None
    reply_to = _address_domain(ctx.letter.header("reply-to"))
    if not (_public_mailbox(ctx, fd) or _public_mailbox(ctx, reply_to)):
        return None
    text = ctx.subject_body
    job = lures.find(lures.TASK_JOB, text, 1)
    pay = lures.find(lures.TASK_PAY, text, 1) if job else []
    wide = lures.find(lures.TASK_RANGE, text, 1) if pay else []
    if pay and not wide:
        wide = lures.find(lures.TASK_WORK, text, 1)
    easy = lures.find(lures.TASK_EASY, text, 1) if wide else []
    if not easy:
        return None
    named = lures.MESSENGER.search(text[:MAX_TASK_TEXT])
    messenger = named.group(0) if named else None
    if messenger is None:
        hosts = (link.host for link in ctx.letter.web_links[:MAX_TASK_LINKS])
        messenger = next(
            (
                h
                for h in hosts
                if h and len(h) <= MAX_HOST and any(ctx.same_party(h, m) for m in MESSENGER_HOSTS)
            ),
            None,
        )
    if messenger is None:
        return None
    return sign("PHISH_TASK_SCAM", [_shown_sender(ctx), *job, *pay, *wide, *easy, messenger])


MAX_TASK_TEXT = 20_000  # characters of the subject and text searched for a messenger's name
MAX_TASK_LINKS = 50  # links looked at for a messenger's site

MESSENGER_HOSTS = ("telegram.org", "t.me", "telegram.me", "whatsapp.com", "wa.me", "viber.com")


def messenger_code(ctx: Context) -> Sign | None:
    """A code to enter or send (:data:`lures.MESSENGER_CODE`) in a sentence that names a
    messenger (Telegram, WhatsApp, Viber: :func:`_messenger_code`), with a link to a site
    that is neither the messenger's nor the sender's: the page that takes over the account
    with the code the messenger sends ("vote for my niece: log in through Telegram and enter
    the code"). The reader's own
    organization and a protected organization's own letter are their business (phish28b)."""
    if _own_or_reader(ctx):
        return None
    found = _messenger_code(ctx.subject_body)
    if found is None:
        return None
    pages: list[str] = []
    for link in ctx.letter.web_links:
        if len(link.host) > MAX_HOST or link.host in pages:
            continue
        if any(ctx.same_party(link.host, m) for m in MESSENGER_HOSTS) or ctx.own_site(link.host):
            continue
        pages.append(link.host)
    if not pages:
        return None
    return sign("PHISH_MESSENGER_CODE", [*found, *pages[:2]])


MESSENGER_NEAR = 120  # characters either side of a code request read for the messenger
MAX_CODE_REQUESTS = 5  # code requests looked at
_SENTENCE_STOP = re2.compile(r"[.!?]\s|\n\s*\n")


def _messenger_code(text: str) -> tuple[str, str] | None:
    """(the messenger, the code request) of the first request for a code
    (:data:`lures.MESSENGER_CODE`) whose own sentence names a messenger
    (:data:`lures.MESSENGER`), at most :data:`MESSENGER_NEAR` characters away: "log in with
    your WhatsApp number and enter the code you get". A shop's "enter code SAVE20 at
    checkout" or a service's "enter the code to continue" with "join us on Telegram"
    elsewhere in the letter is none (review1)."""
    for i, m in enumerate(wording.matches(lures.MESSENGER_CODE, text)):
        if i >= MAX_CODE_REQUESTS:
            break
        before = text[max(0, m.start() - MESSENGER_NEAR) : m.start()]
        after = text[m.end() : m.end() + MESSENGER_NEAR]
        stops = [s.end() for s in _SENTENCE_STOP.finditer(before)]
        before = before[stops[-1] :] if stops else before
        stop = _SENTENCE_STOP.search(after)
        after = after[: stop.start()] if stop else after
        named = lures.MESSENGER.search(before) or lures.MESSENGER.search(after)
        if named:
            return named.group(0), wording.quote(text, m)
    return None


CALENDAR_TYPES = frozenset({"text/calendar", "application/ics", "text/x-vcalendar"})
CALENDAR_EXTENSIONS = (".ics", ".ical", ".ifb", ".vcs")
MAX_CALENDAR = 256 * 1024  # bytes of a calendar file read
MAX_CALENDARS = 5  # calendar files read per letter
MAX_CALENDAR_LINKS = 50  # links read per calendar file
_CALENDAR_URL = re2.compile(r"(?i)\bhttps?://[^\s\\\"'<>]+")


def _calendars(letter: Letter) -> list[tuple[bytes, str | None]]:
    """The letter's calendar files, at most :data:`MAX_CALENDARS`: attached ones (by type or
    by name), then the inline ``text/calendar`` parts of Outlook's and Google's invitations
    (no file name: the body's, not :attr:`Letter.attachments`), at most
    :data:`MAX_CALENDAR` bytes each, read among the letter's first :data:`MAX_PARTS` parts;
    each with the charset its part declares (an inline one's: UTF-16 hid its links, review2)."""
    out: list[tuple[bytes, str | None]] = []
    for a in _attachments(letter)[:50]:
        name = (a.filename or "").strip().lower()
        if a.content_type.lower() in CALENDAR_TYPES or name.endswith(CALENDAR_EXTENSIONS):
            out.append((a.content[:MAX_CALENDAR], None))
            if len(out) >= MAX_CALENDARS:
                return out
    for i, entity in enumerate(letter.root.walk()):
        if i >= MAX_PARTS or len(out) >= MAX_CALENDARS:
            break
        info = entity.info
        if (
            info.content_type.lower() != "text/calendar"
            or info.filename is not None
            or info.disposition == "attachment"
        ):
            continue  # not an inline invitation, or an attachment read above
        end = min(entity.body_end, entity.body_start + 4 * MAX_CALENDAR)  # base64's 4/3
        content = lenient(info.transfer_encoding, letter.raw[entity.body_start : end])
        out.append((content[:MAX_CALENDAR], info.charset))
    return out


MAX_PARTS = 200  # MIME parts of a letter looked at for an inline invitation


def _calendar_links(letter: Letter) -> list[Link]:
    """Web links written in the letter's calendar files (an invitation's description, its
    URL or attachment fields; attached or inline: :func:`_calendars`), where the letter's
    own link checks do not look."""
    out: list[Link] = []
    for content, charset in _calendars(letter):
        if content.startswith((b"\xff\xfe", b"\xfe\xff")):  # a byte order mark: UTF-16
            charset = "utf-16"
        text = decode_bytes(content, charset)
        text = text.replace("\r\n ", "").replace("\r\n\t", "").replace("\n ", "")
        for i, m in enumerate(_CALENDAR_URL.finditer(text)):
            if i >= MAX_CALENDAR_LINKS:
                break
            href = m.group(0)[:MAX_HREF].rstrip(".,;:!?)")
            found = normalize.url(href)
            if found is not None:
                out.append(Link(href, found[0], found[1], "", "text"))
    return out


def calendar_link(ctx: Context) -> Sign | None:
    """An attached calendar invitation carries a link that hides where it leads: a bare IP
    address, a domain under an abused TLD, free hosting (general storage only for a page,
    :func:`_page_like`), or a domain imitating a protected organization. The letter itself
    may carry no link at all ("open the attached invitation to review the document"); a
    meeting's Zoom or Teams link and an agenda in Google Docs are none of these (phish28b),
    nor is a shortener: an office's Google Maps pin (maps.app.goo.gl) and a webinar's bit.ly
    are what invitations carry (review1)."""
    found: list[str] = []
    for link in _calendar_links(ctx.letter):
        host = link.host
        if not host or len(host) > MAX_HOST or host in found or ctx.own_site(host):
            continue
        hiding = (
            link.is_ip
            or links.tld(host) in ctx.suspicious_tlds
            or _free_host(host, ctx.free_hosting) is not None
            or (_free_host(host, ctx.general_storage) is not None and _page_like(link.href))
            or ctx.protected.imitation(host) is not None
            or idn_spoof(host)
        )
        if hiding:
            found.append(host)
    return sign("PHISH_CALENDAR_LINK", found[:3]) if found else None


DEVICE_LOGIN = frozenset({"devicelogin", "deviceauth"})
"""The last part of the path of an identity provider's device sign-in page
(microsoft.com/devicelogin, login.microsoftonline.com/common/oauth2/deviceauth), or a
``/device`` path alone on Google's or Microsoft's site (:data:`DEVICE_PATH`: google.com/device,
login.microsoft.com/device): a code typed there signs in whoever asked for it. Any other
page whose path ends in "device" (support.google.com's "/android/device", a shop's
"/p/device") is none (review1)."""
DEVICE_PATH = "/device"
DEVICE_PATH_OWNERS = frozenset({"Google", "Microsoft"})
MAX_CODE_TEXT = 20_000  # characters of the letter's text searched for a device code
MAX_CODES = 50  # code-like words read
_USER_CODE = re2.compile(r"\b(?:[A-Z0-9]{4}-[A-Z0-9]{4}|[A-Z0-9]{8,9})\b")
"""A device code as the providers show it (H7KQ-2WPN, GQVQ-JKEC, FQK5HW3UF): told in the
letter, it is the sender's, who started the sign-in (review1)."""


def _device_code(text: str) -> str | None:
    """The first device code written in ``text`` (:data:`_USER_CODE` with a letter in it,
    and a hyphen or a digit: not a shouted word, not a date), or None."""
    for i, m in enumerate(_USER_CODE.finditer(text[:MAX_CODE_TEXT])):
        if i >= MAX_CODES:
            break
        code: str = m.group(0)
        if any(c.isalpha() for c in code) and ("-" in code or any(c.isdigit() for c in code)):
            return code
    return None


def _provider_page(ctx: Context, link: Link) -> tuple[str, str] | None:
    """(path, query) of a link to a protected organization's own page, or None."""
    if len(link.host) > MAX_HOST or ctx.protected.owner(link.host) is None:
        return None
    try:
        parts = urlsplit(link.href[:MAX_HREF].strip())
    except ValueError:
        return None
    return parts.path.lower().rstrip("/"), parts.query[:MAX_HREF]


def _redirect_uri(query: str) -> str:
    """The first ``redirect_uri`` of an OAuth request's query ("" when absent). Every field of
    the query (at most :data:`MAX_HREF` characters: ``_provider_page``) is looked at: fifty
    junk fields before it hid it from phish28b's ``parse_qs(max_num_fields=50)`` (review1)."""
    for field_ in query.split("&"):
        key, _, value = field_.partition("=")
        if unquote_plus(key) == "redirect_uri":
            return unquote_plus(value)
    return ""


def oauth_consent(ctx: Context) -> Sign | None:
    """A link to an identity provider's real OAuth authorization page (``client_id`` and
    ``redirect_uri``) whose redirect leads to a host of another party than the page's and the
    sender's: the consent that hands the reader's mailbox or files to a third party's app
    ("approve Secure Docs Viewer"), no password asked. A service's "connect your Microsoft
    365 calendar" that returns to its own site (also from another domain of the service's:
    :func:`_senders_app`), a provider's and the reader's own organization's letters are not
    it (phish28b)."""
    if _own_or_reader(ctx):
        return None
    found: list[str] = []
    for link in ctx.letter.web_links:
        page = _provider_page(ctx, link)
        if page is None or "client_id" not in page[1] or "redirect_uri" not in page[1]:
            continue
        target = normalize.url(_redirect_uri(page[1]))
        if target is None or ctx.same_party(target[1], link.host) or ctx.own_site(target[1]):
            continue
        if _senders_app(ctx, target[1]):
            continue
        grant = f"{link.host} → {target[1]}"
        if grant not in found:
            found.append(grant)
    return sign("PHISH_OAUTH_CONSENT", found[:3]) if found else None


def _senders_app(ctx: Context, host: str) -> bool:
    """The app a consent returns to is the sender's, mailing from another domain than its
    app's (hello@slotwise-mail.com for app.slotwise.io): the app's domain is the envelope
    sender's (the Return-Path), or the display name, naming no protected organization, is
    the app's name ("Slotwise" for slotwise.io; at least :data:`MIN_APP_NAME` letters) and so
    is the From domain's (slotwise-mail.com). A "Microsoft 365 Admin" whose consent returns
    to securedocs-viewer.app is none (phish28c); nor is a display name alone, the sender's to
    write: "SecureDocs Viewer" <no-reply@docs-notify.com> or <securedocs.viewer@gmail.com>
    for securedocs-viewer.app (review2)."""
    if len(host) > MAX_HOST:
        return False
    if ctx.same_party(host, ctx.return_path_domain):
        return True
    fd = ctx.letter.from_domain
    if not fd or ctx.name_orgs or _public_mailbox(ctx, fd):
        return False
    label = (normalize.registrable(host) or host).split(".")[0].replace("-", "")
    name = "".join(c for c in ctx.shown_name.casefold() if c.isalnum())
    mailer = "".join(c for c in (normalize.registrable(fd) or fd) if c.isalnum())
    return len(label) >= MIN_APP_NAME and label in name and label in mailer


MIN_APP_NAME = 4


def device_login(ctx: Context) -> Sign | None:
    """A link to an identity provider's device sign-in page (:data:`DEVICE_LOGIN`) in a letter
    from neither the provider nor the reader's own organization: the code the letter gives,
    typed there, signs the sender in to the reader's account (the "join the Teams meeting
    at microsoft.com/devicelogin with code H7KQ-2WPN" letters of 2025). Nobody else has a
    reason to send a reader there with a code: one who sets up a room's device tells the
    reader to type the code the device shows, and gives none (phish28b, review1)."""
    if _own_or_reader(ctx):
        return None
    found: list[str] = []
    for link in ctx.letter.web_links:
        page = _provider_page(ctx, link)
        if page is None:
            continue
        path, owner = page[0], ctx.protected.owner(link.host)
        bare = path == DEVICE_PATH and owner is not None and owner.name in DEVICE_PATH_OWNERS
        if path.rpartition("/")[2] not in DEVICE_LOGIN and not bare:
            continue
        shown = f"{link.host}{path[:60]}"
        if shown not in found:
            found.append(shown)
    if not found:
        return None
    code = _device_code(ctx.letter.text)
    return sign("PHISH_DEVICE_LOGIN", [*found[:3], code]) if code else None


_REQUESTS: tuple[Check, ...] = (card_data_request, personal_data_request, account_lure, fee_request)
"""Signs of a letter asking for what a lure wants: no newsletter's advertisement is one."""

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
    link_obfuscated,
    link_userinfo,
    link_domain_disguise,
    link_suspicious_tld,
    return_path_mismatch,
    received_mismatch,
    reply_to_mismatch,
    card_data_request,
    personal_data_request,
    html_form,
    extortion_demand,
    dangerous_attachment,
    double_extension,
    macro_attachment,
    archive_executable,
    freemail_brand,
    subject_brand,
    recipient_domain,
    mail_admin_name,
    account_lure,
    fee_request,
    hidden_text,
    link_data_url,
    html_attachment,
    qr_code,
    link_free_hosting,
    callback_lure,
    bec_request,
    messenger_code,
    calendar_link,
    oauth_consent,
    device_login,
    task_scam,
    document_lure,
)


def check(
    letter: Letter,
    envelope: Envelope | None = None,
    *,
    protected: Protected | None = None,
    shorteners: frozenset[str] | None = None,
    redirectors: frozenset[str] | None = None,
    suspicious_tlds: frozenset[str] | None = None,
    checks: Sequence[Check] = CHECKS,
    deadline: float | None = None,
    forwarders: Forwarders | None = None,
) -> list[Sign]:
    """Every sign the letter shows, in the order of CHECKS. With ``deadline`` (a
    ``time.monotonic()`` value), checks not started by then are skipped: see :func:`find`."""
    return find(
        letter,
        envelope,
        protected=protected,
        shorteners=shorteners,
        redirectors=redirectors,
        suspicious_tlds=suspicious_tlds,
        checks=checks,
        deadline=deadline,
        forwarders=forwarders,
    ).signs


@dataclass(frozen=True, slots=True)
class Findings:
    """What :func:`find` found: the signs, whether every check ran, and the signs
    ``withheld`` by an exemption that rests on the From domain alone (the sender's own site,
    its own organization, the reader's own domain, a mail server's report): the decision adds
    them back when authentication shows the From domain forged (``verdict.from_forged``), as
    a letter's checks run before its authentication is known."""

    signs: list[Sign]
    complete: bool
    withheld: list[Sign]


def find(
    letter: Letter,
    envelope: Envelope | None = None,
    *,
    protected: Protected | None = None,
    shorteners: frozenset[str] | None = None,
    redirectors: frozenset[str] | None = None,
    suspicious_tlds: frozenset[str] | None = None,
    checks: Sequence[Check] = CHECKS,
    deadline: float | None = None,
    forwarders: Forwarders | None = None,
) -> Findings:
    """Every sign the letter shows, in the order of CHECKS, and the signs withheld (see
    :class:`Findings`): each check that leaned on the From domain is run once more without
    it, so a letter no exemption applied to costs nothing more. ``forwarders``: the
    installation's trusted forwarders (``antispam.trusted_forwarders``; none by default)."""
    ctx = Context(
        letter,
        protected if protected is not None else default_protected(),
        shorteners if shorteners is not None else default_shorteners(),
        redirectors if redirectors is not None else default_redirectors(),
        suspicious_tlds if suspicious_tlds is not None else default_suspicious_tlds(),
        envelope if envelope is not None else Envelope(),
        forwarders=forwarders if forwarders is not None else Forwarders(),
    )
    out: list[Sign] = []
    leaned: list[Check] = []
    complete = True
    for fn in checks:
        if deadline is not None and time.monotonic() > deadline:
            complete = False
            break
        ctx.leaned = False
        found = fn(ctx)
        if found is not None:
            out.append(found)
        if ctx.leaned:
            leaned.append(fn)
    withheld: list[Sign] = []  # the checks that ran and leaned: run again even past the deadline
    if leaned:
        shown = {s.symbol for s in out}
        ctx.trust_from = False
        for fn in leaned:
            found = fn(ctx)
            if found is not None and found.symbol not in shown:
                withheld.append(found)
        ctx.trust_from = True
    return Findings(out, complete, withheld)


def scan(raw: bytes | Letter, envelope: Envelope | None = None) -> list[Sign]:
    """``check`` of a raw letter (or an already parsed one)."""
    return check(raw if isinstance(raw, Letter) else parse(raw), envelope)
