"""Normalization of the pieces of a letter that shingles are made of. Pure; never raises on
odd input: a piece that cannot be normalized gives None (no shingle).

- text: Unicode NFKC, then case folding; format characters (zero-width spaces, soft hyphens,
  bidi marks) removed; every run of whitespace one space; trimmed.
- subject: text, then any chain of reply / forward prefixes removed ("Re:", "RE[2]:",
  "Fwd:", "Fw:", "Ответ:", "AW:", "WG:", "SV:", "TR:", "Réf:" ...).
- domain: trailing dot dropped, IDN to punycode (IDNA 2008 with UTS #46 mapping, falling back
  to the stdlib's IDNA 2003 codec), lowercase; a bracketed IP literal becomes the address.
- registrable domain: the public suffix plus one label (Public Suffix List, offline snapshot
  shipped with the ``publicsuffixlist`` package, private suffixes such as github.io included);
  an IP address or a name with no registrable part stays as it is.
- address: local part NFKC + casefold, domain as above: ``local@domain``.
- URL: parsed by ``urllib.parse``; scheme lowercase (none: http), host as a domain, default
  port, user info, query and fragment dropped (they carry per-recipient tokens), percent-escapes
  of unreserved characters decoded and the rest uppercased, dot segments removed, empty path
  ``/``: ``https://xn--e1afmkfd.xn--p1ai/path/to``.
- IP: ``ipaddress`` form (IPv4-mapped IPv6 as IPv4); network: its /24 (IPv4) or /48 (IPv6).
"""

from __future__ import annotations

import functools
import ipaddress
import re
import unicodedata
from collections.abc import Callable
from typing import Any, Protocol, TypeVar, cast
from urllib.parse import urlsplit

import idna
import re2
from publicsuffixlist import PublicSuffixList

MAX_HOST = 253  # characters of a host name (RFC 1035); a longer one is no host
MAX_URL = 4096  # characters of a URL read (the rest is cut before it is normalized)
_SPACE = re.compile(r"\s+")
_REPLY = re.compile(
    r"(?:(?:re|fwd?|ответ|отв|aw|wg|sv|vs|tr|rv|réf|antw|odp|pd|fs|vl)"
    r"\s*+(?:\[\d++\]|\(\d++\)|\^\d++)?\s*+:\s*+)+"
)  # possessive blanks and digits: nothing after them can start with one
_TAGS = re.compile(r"(?:\[[^\]]{0,40}\]\s*+)+")  # "[list-name] Re: ..." keeps the list

REMEMBERED = 4096
"""Answers each :func:`remembered` function keeps (a letter's analysis asks :func:`address`
and :func:`is_ip_host` ~12 and ~16 times, for the same few addresses and hosts, which come
again in the next letters; the IPs are mostly the few relays mail comes from)."""
MAX_REMEMBERED = 512
"""Characters of a value whose answer is remembered (a longer one is worked out each time:
the memory of a function's answers stays bounded whatever the letters hold: ~2 MB of ASCII
values, up to ~10 MB of 4-byte characters, answers as long as their keys included)."""
R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)


class Remembered(Protocol[R_co]):
    """A function of one string whose answers for values of at most ``longest`` characters
    are remembered, the ``size`` most recently used (``functools.lru_cache``); a longer value
    is worked out each time (:func:`remembered` makes one). ``work_out``: the function itself
    (never remembers); ``held()``: how many answers are remembered now."""

    size: int
    longest: int

    @property
    def work_out(self) -> Callable[[str], R_co]: ...

    def __call__(self, value: str, /) -> R_co: ...

    def held(self) -> int: ...


def remembered(
    size: int = REMEMBERED, longest: int = MAX_REMEMBERED
) -> Callable[[Callable[[str], R]], Remembered[R]]:
    """Decorates a pure function of one string: see :class:`Remembered`. A plain function,
    not an object with ``__call__``: it is called ~30 times a letter, and a call through a
    class's ``__call__`` costs ~0.25 us more here."""

    def wrap(work_out: Callable[[str], R]) -> Remembered[R]:
        kept = functools.lru_cache(maxsize=size)(work_out)

        @functools.wraps(work_out)
        def answer(value: str) -> R:
            if len(value) <= longest:
                return kept(value)
            return work_out(value)

        def held() -> int:
            return kept.cache_info().currsize

        vars(answer).update(work_out=work_out, size=size, longest=longest, held=held)
        return cast("Remembered[R]", answer)

    return wrap


@functools.lru_cache(maxsize=1)
def _format_chars() -> dict[int, None]:
    """A str.translate table that deletes every format character (category Cf: soft hyphens,
    zero-width spaces, bidi marks...); they all lie in planes 0-2 and 14."""
    planes = (*range(0x30000), *range(0xE0000, 0xE1000))
    return dict.fromkeys(c for c in planes if unicodedata.category(chr(c)) == "Cf")


def _format_runs() -> list[tuple[int, int]]:
    """The format characters (:func:`_format_chars`) as runs of code points, first to last."""
    runs: list[tuple[int, int]] = []
    for c in sorted(_format_chars()):
        if runs and runs[-1][1] == c - 1:
            runs[-1] = (runs[-1][0], c)
        else:
            runs.append((c, c))
    return runs


@functools.lru_cache(maxsize=1)
def _format_class() -> re.Pattern[str]:
    """Any format character (:func:`_format_chars`), as runs of code points."""
    runs = (
        re.escape(chr(a)) + ("-" + re.escape(chr(b)) if b > a else "") for a, b in _format_runs()
    )
    return re.compile("[" + "".join(runs) + "]")


@functools.lru_cache(maxsize=1)
def _format_first() -> Any:
    """:func:`_format_class` in RE2, over the text's UTF-8: one pass in C says whether a text
    holds any (few do), where Python's engine took ~0.1 ms over a non-ASCII letter's text."""
    runs = (f"\\x{{{a:x}}}" + (f"-\\x{{{b:x}}}" if b > a else "") for a, b in _format_runs())
    options = re2.Options()
    options.never_capture = True
    options.log_errors = False
    return re2.compile("[" + "".join(runs) + "]", options)


def _has_format(s: str) -> bool:
    try:
        data = s.encode()
    except UnicodeEncodeError:  # a lone surrogate: RE2 cannot read the text, Python's engine can
        return _format_class().search(s) is not None
    return _format_first().search(data) is not None


def text(value: str) -> str:
    s = unicodedata.normalize("NFKC", value).casefold()
    # no format character is ASCII; a text without one is not rewritten
    if not s.isascii() and _has_format(s):
        s = _format_class().sub("", s)  # not a translation by a dict: it looks every one up
    return " ".join(s.split())  # _SPACE.sub(" ", s).strip(): re's \s is str.isspace()


def subject(value: str) -> str:
    """Tags and reply prefixes in any order at the start ("[list] Re: [list] Fwd: x"): the
    tags are kept, the prefixes dropped. One pass over the text (the tags already kept are
    not read again after each prefix)."""
    s = text(value)
    kept: list[str] = []
    pos = 0
    while True:
        tags = _TAGS.match(s, pos)
        start = tags.end() if tags else pos
        m = _REPLY.match(s, start)
        if not m or m.end() == start:
            return ("".join(kept) + s[pos:]).strip()
        kept.append(s[pos:start])
        pos = m.end()


@functools.lru_cache(maxsize=1)
def public_suffixes() -> PublicSuffixList:
    """The process's one Public Suffix List (the package's snapshot): ~0.1 s to parse, so
    built once and shared (the link signs read it too)."""
    return PublicSuffixList()


def warm() -> None:
    """Build what the first letter would otherwise build under its own time (a worker
    process calls it before its first letter, see ``pochta.mailbox.intake``): the format
    characters' tables (a look at all 200,704 code points of planes 0-2 and 14, ~0.08 s) and
    the public suffix list (~0.1 s). Nothing else changes: every result is the same."""
    _format_class()
    _format_first()
    public_suffixes()


_IPV4_CHARS = "0123456789."


@remembered()
def ip(value: str) -> str | None:
    """The IP address ``value`` writes (an IPv4-mapped IPv6 one as IPv4), in its usual form;
    answers remembered: a letter's sender IP and the Received one are mostly the few relays of
    the mail that arrives."""
    s = value.strip().strip("[]").removeprefix("IPv6:")
    if ":" not in s and s.strip(_IPV4_CHARS):
        return None  # no IPv6 address lacks a colon, no IPv4 one has another character
    try:
        addr = ipaddress.ip_address(s)
    except ValueError:
        return None
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    return str(addr)


@remembered()
def network(value: str) -> str | None:
    """The /24 (IPv4) or /48 (IPv6) network of :func:`ip`'s address; remembered as it is."""
    addr = ip(value)
    if addr is None:
        return None
    prefix = 24 if ":" not in addr else 48
    return str(ipaddress.ip_network(f"{addr}/{prefix}", strict=False))


@functools.lru_cache(maxsize=65_536)
def domain(value: str) -> str | None:
    s = value.strip()
    if s.startswith("[") and s.endswith("]"):
        return ip(s)
    if len(s) > MAX_HOST:  # no host name is longer (RFC 1035); IDNA would only waste time
        return None
    s = unicodedata.normalize("NFKC", s).rstrip(".").strip()
    if not s or len(s) > MAX_HOST or any(ch.isspace() for ch in s):
        return None
    literal = ip(s)
    if literal is not None:
        return literal
    # An ASCII name comes out of IDNA lowercased and otherwise unchanged, whether IDNA 2008
    # takes it, the older codec does or neither (see _by_idna; a test compares the two), and
    # IDNA's pure-Python checks were the worker's costliest step on a new domain.
    out = s.lower() if s.isascii() else _by_idna(s).lower()
    if not out or "" in out.split(".") or any(c in out for c in "/\\@:?#<>\"'"):
        return None
    return out


def _by_idna(s: str) -> str:
    """``s`` (NFKC-normalized, stripped) as IDNA's ASCII form: IDNA 2008 with UTS 46's
    mapping, else the older codec (IDNA 2003), else its casefold when ASCII, else ""."""
    try:
        return idna.encode(s, uts46=True).decode("ascii")
    except (idna.IDNAError, UnicodeError, ValueError):
        try:
            return s.encode("idna").decode("ascii")
        except (UnicodeError, ValueError):
            return s.casefold() if s.isascii() else ""


@functools.lru_cache(maxsize=65_536)
def registrable(value: str) -> str | None:
    """The registrable domain ("example.co.uk" for "a.b.example.co.uk")."""
    host = domain(value)
    if host is None:
        return None
    if ip(host) is not None:
        return host
    return public_suffixes().privatesuffix(host) or host


@remembered()
def address(value: str) -> str | None:
    s = value.strip().strip("<>").strip()
    local, at, dom = s.rpartition("@")
    if not at or not local or not dom:
        return None
    local = _SPACE.sub("", text(local.strip('"') if local.count('"') == 2 else local))
    host = domain(dom)
    if not local or host is None:
        return None
    return f"{local}@{host}"


def address_domain(value: str) -> str | None:
    a = address(value)
    return a.rpartition("@")[2] if a else None


_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_PCT = re.compile(r"%([0-9A-Fa-f]{2})")


def _pct(m: re.Match[str]) -> str:
    ch = chr(int(m.group(1), 16))
    return ch if ch in _UNRESERVED else f"%{m.group(1).upper()}"


def _dot_segments(path: str) -> str:
    out: list[str] = []
    for seg in path.split("/")[1:]:
        if seg == "..":
            if out:
                out.pop()
        elif seg != ".":
            out.append(seg)
    if path.endswith(("/.", "/..")):
        out.append("")
    return "/" + "/".join(out)


def _quote_path(path: str) -> str:
    """Percent-encode what must be (non-ASCII as UTF-8, spaces, controls)."""
    out = []
    for ch in path:
        if ch in _UNRESERVED or ch in "/%!$&'()*+,;=:@":
            out.append(ch)
        else:
            out.extend(f"%{b:02X}" for b in ch.encode("utf-8", "surrogatepass"))
    return "".join(out)


_DEFAULT_PORTS = {"http": 80, "https": 443, "ftp": 21}


def url(value: str) -> tuple[str, str] | None:
    """(normalized URL, host) of a link, or None when it is not a web link."""
    s = value[:MAX_URL].strip().strip("<>\"'")
    if not s:
        return None
    if s.lower().startswith("www."):
        s = "http://" + s
    try:
        parts = urlsplit(s)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https", "ftp") or not parts.hostname:
        return None
    host = domain(parts.hostname)
    if host is None:
        return None
    netloc = f"[{host}]" if ":" in host else host
    if port is not None and port != _DEFAULT_PORTS[scheme]:
        netloc += f":{port}"
    path = _PCT.sub(_pct, _quote_path(parts.path or "/"))
    path = _dot_segments(path if path.startswith("/") else "/" + path)
    return f"{scheme}://{netloc}{path}", host


def _numeric_host(host: str) -> bool:
    parts = host.split(".")
    if not 1 <= len(parts) <= 4 or len(host) > 64:
        return False
    try:
        values = [int(p, 0) if p.lower().startswith("0x") else int(p) for p in parts]
    except ValueError:
        return False
    try:
        ipaddress.ip_address(values[0] if len(values) == 1 else ".".join(map(str, values)))
    except ValueError:
        return False
    return True


@remembered()
def is_ip_host(host: str) -> bool:
    """The host is an IP address, also in the decimal or hex forms browsers accept."""
    return ip(host) is not None or _numeric_host(host)


@functools.lru_cache(maxsize=4096)
def known_suffix(host: str) -> bool:
    """The host ends in a suffix of the Public Suffix List (``report.pdf`` does not) and has a
    registrable part: it can be a web site's name."""
    h = domain(host)
    if h is None or "." not in h or ip(h) is not None:
        return False
    return public_suffixes().privatesuffix(h, accept_unknown=False) is not None
