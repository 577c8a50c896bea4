"""The protected organizations (government bodies, banks, brands) and how their names are
imitated. The list is a data file, ``data/protected.toml`` (documented inside); this module
reads it and answers three questions, all pure:

- :meth:`Protected.owner`: which organization a host belongs to (it or a parent domain is one
  of the organization's domains); :meth:`Protected.sender_org`: the same for a letter's
  sender, except on public mail domains (a gmail.com user does not speak for Google).
- :meth:`Protected.named_in`: which organizations a display name names (whole words,
  case-insensitive, Russian case endings, Latin and Cyrillic look-alike letters folded).
- :meth:`Protected.imitation`: whether a host that belongs to nobody imitates one of them —
  ``foreign_tld`` (nalog.de), ``confusable`` (sberbаnk with a Cyrillic letter, paypa1),
  ``embedded`` (sberbank-online.ru.com, nalog-ru.net, paypal.com.verify-account.net) or
  ``typo`` (sberbamk: one letter off for names of 6-8 letters, two for longer ones).
"""

from __future__ import annotations

import functools
import re
import tomllib
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Literal

from pochta.antispam import normalize
from pochta.antispam.lookalike import distance, skeleton, unicode_label
from pochta.errors import ConfigError

Kind = Literal["government", "bank", "brand"]
How = Literal["foreign_tld", "confusable", "embedded", "typo"]
KINDS: tuple[Kind, ...] = ("government", "bank", "brand")
MIN_TYPO_LEN = 6
CACHE_SIZE = 65_536

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


class Protected:
    def __init__(self, orgs: Sequence[Org]) -> None:
        self.orgs = tuple(orgs)
        self._by_domain: dict[str, Org] = {}
        for org in self.orgs:
            for d in org.domains:
                self._by_domain.setdefault(d, org)
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
        self._tokens = [(org, t, skeleton(t)) for org in self.orgs for t in org.tokens]
        self._imitations: dict[str, Imitation | None] = {}
        self._confusable = [(org, t, skeleton(t)) for org in self.orgs for t in org.confusable_only]

    @classmethod
    def parse(cls, text: str, source: str = "protected list") -> Protected:
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
        return cls(orgs)

    def owner(self, host: str) -> Org | None:
        h = normalize.domain(host)
        if h is None:
            return None
        labels = h.split(".")
        for i in range(len(labels)):
            org = self._by_domain.get(".".join(labels[i:]))
            if org is not None:
                return org
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
        """Organizations a short text (a display name, a subject) names."""
        if not text:
            return []
        s = unicodedata.normalize("NFKC", text)
        variants = (s, s.translate(_LAT_TO_CYR), s.translate(_CYR_TO_LAT))
        return [org for org, rx in self._patterns if any(rx.search(v) for v in variants)]

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
        if h is None or normalize.ip(h) is not None or self.owner(h) is not None:
            return None
        reg = normalize.registrable(h) or h
        label = unicode_label(reg.split(".")[0]) or reg.split(".")[0]
        sk = skeleton(label)
        subs = [skeleton(unicode_label(x) or x) for x in h.split(".")[: -reg.count(".") - 1]]
        for org, token, tsk in self._tokens:
            if label == token:
                return Imitation(org, h, token, "foreign_tld")
            if sk == tsk:
                return Imitation(org, h, token, "confusable")
            if _embedded(tsk, sk) or any(_bounded(tsk, s) for s in subs):
                return Imitation(org, h, token, "embedded")
        for org, token, tsk in self._confusable:
            if sk == tsk and label != token:
                return Imitation(org, h, token, "confusable")
        for org, token, tsk in self._tokens:
            if len(token) >= MIN_TYPO_LEN and "-" not in token:
                limit = 1 if len(token) <= 8 else 2
                if distance(sk, tsk, limit) <= limit:
                    return Imitation(org, h, token, "typo")
        return None


def _bounded(token: str, label: str) -> bool:
    if f"-{token}-" in f"-{label}-":
        return True
    return f"-{token}-" in "-" + re.sub(r"\d+", "-", label) + "-"


def _embedded(token: str, label: str) -> bool:
    if _bounded(token, label):
        return True
    if len(token) < 4 or token == label:
        return False
    for part in label.split("-"):
        if part.startswith(token) and part[len(token) :] in _AFFIXES:
            return True
        if part.endswith(token) and part[: -len(token)] in _AFFIXES:
            return True
    return False


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
    keys = {"name", "name_en", "kind", "domains", "tokens", "names", "confusable_only",
            "public_mail"}
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
    )


@functools.lru_cache(maxsize=1)
def default() -> Protected:
    """The list shipped with pochta (read once)."""
    text = resources.files("pochta.antispam").joinpath("data/protected.toml").read_text("utf-8")
    return Protected.parse(text, "data/protected.toml")


@functools.lru_cache(maxsize=1)
def shorteners() -> frozenset[str]:
    """Registrable domains of URL shorteners (``data/shorteners.txt``)."""
    text = resources.files("pochta.antispam").joinpath("data/shorteners.txt").read_text("utf-8")
    return parse_list(text.splitlines())


def parse_list(lines: Iterable[str]) -> frozenset[str]:
    out = set()
    for line in lines:
        entry = line.split("#", 1)[0].strip()
        if entry:
            d = normalize.domain(entry)
            if d:
                out.add(d)
    return frozenset(out)
