"""The protected organizations (government bodies, banks, brands) and how their names are
imitated. The list is a data file, ``data/protected.toml`` (documented inside); this module
reads it and answers three questions, all pure:

- :meth:`Protected.owner`: which organization a host belongs to (it or a parent domain is one
  of the organization's domains); :meth:`Protected.sender_org`: the same for a letter's
  sender, except on public mail domains (a gmail.com user does not speak for Google).
- :meth:`Protected.named_in`: which organizations a display name names (whole words,
  case-insensitive, Russian case endings, Latin and Cyrillic look-alike letters folded).
- :meth:`Protected.imitation`: whether a host that belongs to nobody imitates one of them —
  ``foreign_tld`` (nalog.de), ``confusable`` (sberbаnk with a Cyrillic letter, paypa1,
  gօsսsӏսgi with Armenian letters: one skeleton, Unicode's confusables by
  :func:`pochta.antispam.signs.lookalike.skeleton`),
  ``embedded`` (the name glued to a word phishing domains use: sberbank-online.ru.com,
  nalog-ru.net, paypalsecure.com; or the organization's domain spelled out in subdomains:
  paypal.com.verify-account.net), ``contains`` (the name as one word of a longer name with
  another word: netflix-billing.com; or a subdomain that is just the name:
  outlook.example.com) or ``typo`` (sberbamk: one letter off for names of 6-8 letters, two
  for longer ones). ``contains`` and ``typo`` are weak: plenty of legitimate names look so
  (google-analytics.com, applied.com), so a link check counts them only when the letter
  names that organization (:mod:`pochta.antispam.signs.checks`).

An organization may run sites under many country codes (amazon.ca, google.de): its
``country_labels`` under any country-code TLD that is not an abused one (``.tk``) belong to it.

The lists shipped beside it: ``shorteners.txt`` (URL shorteners), ``redirectors.txt`` (redirect
and click-tracking hosts), ``suspicious_tlds.txt`` (TLDs mostly used for abuse) and
``free_hosting.txt`` (free hosting and site builders, where anyone puts up a page), each
documented at its top.
"""

from __future__ import annotations

import functools
import re
import tomllib
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any, Literal

from pochta.antispam.signs import casefold
from pochta.antispam.signs.links import is_tld
from pochta.antispam.signs.lookalike import distance, skeleton, unicode_label
from pochta.errors import ConfigError
from pochta.mime import normalize

Kind = Literal["government", "bank", "brand"]
How = Literal["foreign_tld", "confusable", "embedded", "contains", "typo"]
WEAK: frozenset[str] = frozenset({"contains", "typo"})
KINDS: tuple[Kind, ...] = ("government", "bank", "brand")
MIN_TYPO_LEN = 6
CACHE_SIZE = 65_536
PARTIES_CACHE_SIZE = 8192
"""Pairs of names whose :meth:`Protected.same_party` answer is remembered."""
MAX_HOST = 253  # a longer name is no host name
MAX_NAMED_TEXT = 4096  # named_in reads this much of a text
NAMED_CACHE_SIZE = 4096
"""Short texts (display names, subjects) whose ``named_in`` answers are remembered."""
MAX_NAMED_CACHED = 256
"""Characters of a text whose answer is remembered (a longer one, such as a text's
beginning, is read each time: the cache holds at most ~1 MB of texts)."""
_DIGITS = re.compile(r"\d{1,64}")

# Words phishing domains glue to a protected name: sberbank-online, paypal-secure, nalogru.
_AFFIXES = frozenset(
    skeleton(w)
    for w in (
        "online",
        "secure",
        "login",
        "verify",
        "support",
        "service",
        "services",
        "account",
        "bonus",
        "pay",
        "payment",
        "help",
        "lk",
        "my",
        "id",
        "auth",
        "update",
        "security",
        "info",
        "ru",
        "rf",
        "com",
        "bank",
        "web",
        "mail",
        "gov",
        "official",
        "card",
        "cards",
        "app",
        "client",
        "cabinet",
        "kabinet",
        "24",
        "vyplata",
        "vyplaty",
        "compensation",
        "kompensaciya",
        "check",
        "team",
        "center",
        "centre",
        "russia",
        "rus",
        "portal",
    )
)
_CYR_TO_LAT = str.maketrans("аесорхуікмтАЕСОРХУІКМТВН", "aecopxyikmtAECOPXYIKMTBH")
_LAT_TO_CYR = str.maketrans("aecopxykmtAECOPXYKMTBH", "аесорхукмтАЕСОРХУКМТВН")
_CYR_VOWELS = "аяоеёыиуюйь"


@dataclass(frozen=True, slots=True)
class Org:
    name: str
    name_en: str
    kind: Kind
    domains: tuple[str, ...]  # normalized: lowercase, punycode
    tokens: tuple[str, ...]
    names: tuple[str, ...]
    confusable_only: tuple[str, ...] = ()
    public_mail: tuple[str, ...] = ()  # where anyone can open a mailbox
    country_labels: tuple[str, ...] = ()  # amazon: amazon.<any country code> is theirs


@dataclass(frozen=True, slots=True)
class Imitation:
    org: Org
    host: str  # the imitating host, as given (normalized)
    target: str  # the token or domain imitated
    how: How


def _name_pattern(name: str) -> str:
    words = name.split()
    last = words[-1]
    is_cyrillic = any("а" <= ch.lower() <= "я" or ch in "ёЁ" for ch in last)
    body = r"\s+".join(re.escape(w) for w in words[:-1])
    if is_cyrillic and not last.isupper():
        stem = last.rstrip(_CYR_VOWELS) or last
        tail = re.escape(stem) + r"[а-яё]{0,3}"
    else:
        tail = re.escape(last)
    return (body + r"\s+" if body else "") + tail


def _skeleton_pattern(name: str) -> str:
    return r"\s+".join(re.escape(w) for w in skeleton(name).split())


def _alternatives(names: Sequence[str], pattern: Callable[[str], str]) -> str:
    return "(?:" + "|".join(map(pattern, names)) + ")"


def _bounded_any(alternatives: Sequence[str], flags: int) -> re.Pattern[str]:
    r"""One pattern that matches where any of ``alternatives`` does between word boundaries
    (``(?<!\w)(?:a|b)(?!\w)``: the same texts as ``(?<!\w)a(?!\w)|(?<!\w)b(?!\w)``, as
    the engine backtracks into every alternative); one that never matches when there is none."""
    if not alternatives:
        return re.compile("(?!)")
    return re.compile(r"(?<!\w)(?:" + "|".join(alternatives) + r")(?!\w)", flags)


def _lookahead(rx: re.Pattern[str]) -> re.Pattern[str]:
    """``rx`` inside a look-ahead: its ``finditer`` gives every position where ``rx`` matches
    (overlapping matches too), in one pass of the engine."""
    return re.compile(f"(?=(?:{rx.pattern}))", rx.flags)


def _starts(lookahead: re.Pattern[str], text: str, first_look: Any, looked: str) -> list[int]:
    """Every position of ``text`` where ``lookahead`` matches. ``first_look``: RE2's relaxed
    copy of it, which matches wherever it does, over ``looked`` (``text`` as the copy reads it:
    its fold, or itself). When ``looked`` is as long as ``text`` (then character for character
    the same places), Python's engine tries only the positions where RE2 finds a match of the
    copy beginning (:func:`_first_look_starts`), not every position of the text; otherwise,
    or past :data:`STARTS_LOOKED` of them, every position when RE2 finds one anywhere."""
    found = _first_look_starts(first_look, looked) if len(looked) == len(text) else None
    if found is not None:
        return [i for i in found if lookahead.match(text, i)]
    if not casefold.found(first_look, looked):
        return []
    return [m.start() for m in lookahead.finditer(text)]


STARTS_LOOKED = 128
"""RE2 searches for the places where a name may begin in one text (each reads on from the
last place found), past which Python's engine reads the text at every position instead: a
bound that keeps a text made of near-names linear."""


def _first_look_starts(first_look: Any, text: str) -> list[int] | None:
    """The positions (in characters) where RE2's ``first_look`` has a match beginning in
    ``text``, each in turn (a search from the character after the last one found); None for a
    text RE2 cannot read (a lone surrogate) or with more than :data:`STARTS_LOOKED`."""
    try:
        data = text.encode()
    except UnicodeEncodeError:
        return None
    ascii = len(data) == len(text)
    out: list[int] = []
    byte = char = 0  # where the next search begins, in bytes and in characters
    for _ in range(STARTS_LOOKED):
        m = first_look.search(data, byte)
        if m is None:
            return out
        start = m.start()
        if ascii:
            char = start
        elif start < len(data) and data[start] & 0xC0 == 0x80:
            return None  # inside a character: RE2 in UTF-8 never starts a match there
        else:
            char += len(data[byte:start].decode())
        if char >= len(text):
            return out
        out.append(char)
        byte = start + (1 if ascii else len(text[char].encode()))
        char += 1
    return None


def _plain_name(name: str) -> str:
    """An RE2 pattern for the folded text where :func:`_name_pattern` matches ``name``
    case-insensitively, or more: its words (a Russian name's stem, without the optional
    ending) folded, any whitespace between them, no word boundary."""
    words = name.split()
    last = words[-1]
    is_cyrillic = any("а" <= ch.lower() <= "я" or ch in "ёЁ" for ch in last)
    if is_cyrillic and not last.isupper():
        words[-1] = last.rstrip(_CYR_VOWELS) or last
    return casefold.plain([casefold.folded(w) for w in words])


def _plain_skeleton(name: str) -> str:
    """An RE2 pattern for a skeleton where :func:`_skeleton_pattern` matches ``name``, or
    more: the same words (matched as they are), any whitespace between them."""
    return casefold.plain(skeleton(name).split())


NAME_STARTS = 32
"""Positions where some name begins, past which :func:`_at_any` searches each organization's
pattern over the whole text instead (as many tries as positions would cost more)."""


def _at_any(rx: re.Pattern[str], texts: Sequence[tuple[str, list[int]]]) -> bool:
    """Whether ``rx`` matches at one of the given positions of its text: ``rx.search`` for
    a pattern that matches only where the pattern that gave the positions does (one
    organization's names, of the pattern of every organization's), without reading the
    whole text once for each organization (unless there are over :data:`NAME_STARTS`)."""
    return any(
        rx.search(text) if len(starts) > NAME_STARTS else any(rx.match(text, i) for i in starts)
        for text, starts in texts
    )


class Protected:
    def __init__(self, orgs: Sequence[Org], abused_tlds: Iterable[str] = ()) -> None:
        self.orgs = tuple(orgs)
        self.abused_tlds = frozenset(abused_tlds)
        self._by_domain: dict[str, Org] = {}
        self._by_country_label: dict[str, Org] = {}
        for org in self.orgs:
            for d in org.domains:
                self._by_domain.setdefault(d, org)
            for label in org.country_labels:
                self._by_country_label.setdefault(label, org)
        self._patterns = [
            (
                org,
                re.compile(
                    r"(?<!\w)(?:" + "|".join(map(_name_pattern, org.names)) + r")(?!\w)",
                    re.IGNORECASE,
                ),
            )
            for org in self.orgs
            if org.names
        ]
        # Latin names once more, as skeletons: "PayPaI" (a capital I) reads as PayPal
        self._skeleton_patterns = [
            (org, re.compile(r"(?<!\w)(?:" + "|".join(latin) + r")(?!\w)"))
            for org in self.orgs
            if (latin := [_skeleton_pattern(n) for n in org.names if n.isascii()])
        ]
        # one pass first: most texts name no organization, and then none is tried alone. The
        # word boundaries are checked once for every name (not once per organization at every
        # position): a match exists where one organization's pattern matches, and only there
        names = [_alternatives(org.names, _name_pattern) for org in self.orgs if org.names]
        self._any_name = _lookahead(_bounded_any(names, re.IGNORECASE))
        self._names_anywhere = casefold.compile_first_look(
            [_plain_name(n) for org in self.orgs for n in org.names]
        )
        latin_names = [
            _alternatives([n for n in org.names if n.isascii()], _skeleton_pattern)
            for org in self.orgs
            if any(n.isascii() for n in org.names)
        ]
        self._any_skeleton = _lookahead(_bounded_any(latin_names, 0))
        self._skeletons_anywhere = casefold.compile_first_look(
            [_plain_skeleton(n) for org in self.orgs for n in org.names if n.isascii()]
        )
        self._tokens = [(org, t, skeleton(t)) for org in self.orgs for t in org.tokens]
        self._imitations: dict[str, Imitation | None] = {}
        self._owners: dict[str, Org | None] = {}
        self._named: dict[str, tuple[Org, ...]] = {}
        self._parties: dict[tuple[str, str], bool] = {}
        self._confusable = [(org, t, skeleton(t)) for org in self.orgs for t in org.confusable_only]

    @classmethod
    def parse(
        cls, text: str, source: str = "protected list", abused_tlds: Iterable[str] = ()
    ) -> Protected:
        """Read the TOML list; ConfigError naming the organization and the problem."""
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{source}: not valid TOML: {exc}") from exc
        orgs = []
        for i, item in enumerate(data.get("org", [])):
            where = f"{source}: org #{i + 1} ({item.get('name', '?')})"
            orgs.append(_org(item, where))
        if not orgs:
            raise ConfigError(f"{source}: no [[org]] entries")
        return cls(orgs, abused_tlds)

    def owner(self, host: str) -> Org | None:
        """The organization that owns ``host`` (one of its domains, or a country label of
        its name); answers are remembered (at most :data:`CACHE_SIZE` hosts, each at most
        MAX_HOST characters): a letter asks about its sender's domain a dozen times."""
        try:
            return self._owners[host]
        except KeyError:
            pass
        found = self._owner(host)
        if len(host) <= MAX_HOST:
            if len(self._owners) >= CACHE_SIZE:
                self._owners.clear()
            self._owners[host] = found
        return found

    def same_party(self, a: str | None, b: str | None) -> bool:
        """Whether two domains are one party: the same registrable domain, the same protected
        organization's, or (neither an organization's nor an IP address) the same first label
        of their registrable domains (shop.com and shop.de). Answers are remembered for names
        of at most MAX_HOST characters (at most :data:`PARTIES_CACHE_SIZE` pairs): a letter
        asks about its sender's domain against each of its links' and relays' hosts, and the
        same hosts come again in the next letters."""
        if not a or not b:
            return False
        if len(a) > MAX_HOST or len(b) > MAX_HOST:
            return self._same_party(a, b)
        key = (a, b)
        found = self._parties.get(key)
        if found is None:
            found = self._same_party(a, b)
            if len(self._parties) >= PARTIES_CACHE_SIZE:
                self._parties.clear()
            self._parties[key] = found
        return found

    def _same_party(self, a: str, b: str) -> bool:
        ra, rb = normalize.registrable(a) or a, normalize.registrable(b) or b
        if ra == rb:
            return True
        oa, ob = self.owner(a), self.owner(b)
        if oa is not None or ob is not None:
            return oa is ob
        if normalize.ip(ra) is not None or normalize.ip(rb) is not None:
            return False
        return ra.partition(".")[0] == rb.partition(".")[0]  # shop.com and shop.de

    def _owner(self, host: str) -> Org | None:
        h = normalize.domain(host)
        if h is None or len(h) > MAX_HOST:
            return None
        labels = h.split(".")
        for i in range(len(labels)):
            org = self._by_domain.get(".".join(labels[i:]))
            if org is not None:
                return org
        if self._by_country_label:
            reg = normalize.registrable(h) or h
            label, _, suffix = reg.partition(".")
            tld = suffix.rpartition(".")[2]
            if len(tld) == 2 and tld.isascii() and tld.isalpha() and tld not in self.abused_tlds:
                return self._by_country_label.get(label)
        return None

    def sender_org(self, host: str) -> Org | None:
        """The organization a letter from ``host`` speaks for: its owner, unless ``host`` is
        one of the owner's public mail domains (a gmail.com user is not Google)."""
        h = normalize.domain(host)
        org = self.owner(h) if h else None
        if org is None or h in org.public_mail:
            return None
        return org

    def named_in(self, text: str) -> list[Org]:
        """Organizations a short text (a display name, a subject) names; answers for texts
        of at most :data:`MAX_NAMED_CACHED` characters are remembered (at most
        :data:`NAMED_CACHE_SIZE` of them: senders' names and subjects come again)."""
        if not text:
            return []
        if len(text) > MAX_NAMED_CACHED:
            return self._named_in(text)
        found = self._named.get(text)
        if found is None:
            found = tuple(self._named_in(text))
            if len(self._named) >= NAMED_CACHE_SIZE:
                self._named.clear()
            self._named[text] = found
        return list(found)

    def _named_in(self, text: str) -> list[Org]:
        s = unicodedata.normalize("NFKC", text[:MAX_NAMED_TEXT])
        variants = dict.fromkeys((s, s.translate(_LAT_TO_CYR), s.translate(_CYR_TO_LAT)))
        named = [  # a variant that is the text itself (no letter to swap) is read once
            (v, starts)
            for v in variants
            if (starts := _starts(self._any_name, v, self._names_anywhere, casefold.folded(v)))
        ]
        found = [org for org, rx in self._patterns if _at_any(rx, named)] if named else []
        sk = skeleton(s)
        if starts := _starts(self._any_skeleton, sk, self._skeletons_anywhere, sk):
            found += [
                org
                for org, rx in self._skeleton_patterns
                if org not in found and _at_any(rx, [(sk, starts)])
            ]
        return [org for org in self.orgs if org in found]

    def imitation(self, host: str) -> Imitation | None:
        """Whether ``host`` (belonging to no organization) imitates a protected one; answers
        are remembered (at most :data:`CACHE_SIZE` hosts)."""
        if host in self._imitations:
            return self._imitations[host]
        found = self._imitation(host)
        if len(self._imitations) >= CACHE_SIZE:
            self._imitations.clear()
        self._imitations[host] = found
        return found

    def _imitation(self, host: str) -> Imitation | None:
        h = normalize.domain(host)
        if h is None or len(h) > MAX_HOST or normalize.ip(h) is not None:
            return None
        if self.owner(h) is not None:
            return None
        reg = normalize.registrable(h) or h
        label = unicode_label(reg.split(".")[0]) or reg.split(".")[0]
        sk = skeleton(label)
        subs = [skeleton(unicode_label(x) or x) for x in h.split(".")[: -reg.count(".") - 1]]
        weak: Imitation | None = None
        joined = " ".join((sk, *subs))  # a name can sit in a label only if it is in here
        for org, token, tsk in self._tokens:
            if label == token:
                return Imitation(org, h, token, "foreign_tld")
            if sk == tsk:
                return Imitation(org, h, token, "confusable")
            if tsk not in joined:
                continue
            found = _in_label(tsk, sk)
            for i, sub in enumerate(subs):
                if found == "embedded":
                    break
                if sub == tsk and i + 1 < len(subs) and is_tld(subs[i + 1]):
                    found = "embedded"  # paypal.com.verify-account.net
                else:
                    found = _in_label(tsk, sub) or found
            if found == "embedded":
                return Imitation(org, h, token, "embedded")
            if found == "contains" and weak is None:
                weak = Imitation(org, h, token, "contains")
        for org, token, tsk in self._confusable:
            if sk == tsk and label != token:
                return Imitation(org, h, token, "confusable")
        if weak is not None:
            return weak
        for org, token, tsk in self._tokens:
            if len(token) >= MIN_TYPO_LEN and "-" not in token:
                limit = 1 if len(token) <= 8 else 2
                if abs(len(sk) - len(tsk)) <= limit and distance(sk, tsk, limit) <= limit:
                    return Imitation(org, h, token, "typo")
        return None


def _in_label(token: str, label: str) -> Literal["embedded", "contains"] | None:
    """How a protected name sits in one label of another's domain: ``embedded`` when the rest
    of the label is words phishing domains use (sberbank-online, nalog24, paypalsecure),
    ``contains`` when it is one hyphen- or digit-separated word among others
    (netflix-billing) or the whole label (a subdomain), else None."""
    if token == label:
        return "contains"
    if f"-{token}-" in f"-{label}-" or f"-{token}-" in "-" + _DIGITS.sub("-", label) + "-":
        rest = [w for w in _DIGITS.sub("-", label).split("-") if w and w != token]
        return "embedded" if all(w in _AFFIXES for w in rest) else "contains"
    if len(token) < 4:
        return None
    for part in label.split("-"):
        if part.startswith(token) and part[len(token) :] in _AFFIXES:
            return "embedded"
        if part.endswith(token) and part[: -len(token)] in _AFFIXES:
            return "embedded"
    return None


def _strings(item: dict[str, object], key: str, where: str, required: bool = True) -> list[str]:
    value = item.get(key)
    if value is None and not required:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ConfigError(f"{where}: {key} must be a list of non-empty strings")
    if required and not value:
        raise ConfigError(f"{where}: {key} must not be empty")
    return [v.strip() for v in value]


def _org(item: object, where: str) -> Org:
    if not isinstance(item, dict):
        raise ConfigError(f"{where}: not a table")
    keys = {
        "name",
        "name_en",
        "kind",
        "domains",
        "tokens",
        "names",
        "confusable_only",
        "public_mail",
        "country_labels",
    }
    unknown = set(item) - keys
    if unknown:
        raise ConfigError(f"{where}: unknown keys {sorted(unknown)}")
    name, kind = item.get("name"), item.get("kind")
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"{where}: name must be a non-empty string")
    if kind not in KINDS:
        raise ConfigError(f"{where}: kind must be one of {', '.join(KINDS)}")
    domains = []
    for d in _strings(item, "domains", where):
        nd = normalize.domain(d)
        if nd is None or "." not in nd:
            raise ConfigError(f"{where}: {d!r} is not a domain")
        domains.append(nd)
    tokens = _strings(item, "tokens", where, required=False) or [d.split(".")[0] for d in domains]
    public_mail = []
    for d in _strings(item, "public_mail", where, required=False):
        nd = normalize.domain(d)
        if nd is None or nd not in domains:
            raise ConfigError(f"{where}: public_mail {d!r} is not one of its domains")
        public_mail.append(nd)
    name_en = item.get("name_en", name)
    return Org(
        name=name.strip(),
        name_en=name_en.strip() if isinstance(name_en, str) else name.strip(),
        kind=kind,
        domains=tuple(domains),
        tokens=tuple(t.lower() for t in tokens),
        names=tuple(_strings(item, "names", where, required=False)),
        confusable_only=tuple(
            t.lower() for t in _strings(item, "confusable_only", where, required=False)
        ),
        public_mail=tuple(public_mail),
        country_labels=tuple(
            t.lower() for t in _strings(item, "country_labels", where, required=False)
        ),
    )


def _data(name: str) -> str:
    return resources.files(__package__).joinpath(f"data/{name}").read_text("utf-8")


@functools.lru_cache(maxsize=1)
def default() -> Protected:
    """The list shipped with pochta (read once)."""
    return Protected.parse(_data("protected.toml"), "data/protected.toml", suspicious_tlds())


@functools.lru_cache(maxsize=1)
def shorteners() -> frozenset[str]:
    """Registrable domains of URL shorteners (``data/shorteners.txt``)."""
    return parse_list(_data("shorteners.txt").splitlines())


@functools.lru_cache(maxsize=1)
def redirectors() -> frozenset[str]:
    """Redirect and click-tracking hosts (``data/redirectors.txt``)."""
    return parse_list(_data("redirectors.txt").splitlines())


@functools.lru_cache(maxsize=1)
def suspicious_tlds() -> frozenset[str]:
    """TLDs mostly used for abuse (``data/suspicious_tlds.txt``), punycode."""
    return parse_list(_data("suspicious_tlds.txt").splitlines())


@functools.lru_cache(maxsize=1)
def free_hosting() -> frozenset[str]:
    """Hosts of free hosting and site builders (``data/free_hosting.txt``): a link to one of
    them or under it leads to a page anyone may have put up."""
    return parse_list(_data("free_hosting.txt").splitlines())


@functools.lru_cache(maxsize=1)
def general_storage() -> frozenset[str]:
    """Hosts of general cloud storage and app hosting that legitimate mail links to as well
    (``data/general_storage.txt``): a link there counts as free hosting only when it leads
    to a page (``checks._page_like``)."""
    return parse_list(_data("general_storage.txt").splitlines())


@functools.lru_cache(maxsize=1)
def freemail() -> frozenset[str]:
    """Registrable domains of public mail services (``data/freemail.txt``)."""
    return parse_list(_data("freemail.txt").splitlines())


def parse_list(lines: Iterable[str]) -> frozenset[str]:
    out = set()
    for line in lines:
        entry = line.split("#", 1)[0].strip()
        if entry:
            d = normalize.domain(entry)
            if d:
                out.add(d)
    return frozenset(out)
