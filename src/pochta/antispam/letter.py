"""One letter as the phishing checks and the content features read it. Pure.

A :class:`Letter` wraps the parsed :class:`~pochta.mime.summary.Summary` and the SMTP
:class:`~pochta.antispam.shingles.Envelope`, and works out once what several checks need: the
visible text (plain parts, else the HTML's text), the links (each HTML anchor with the text it
shows, and the URLs written in plain text), forms, images, hidden text.
"""

from __future__ import annotations

import functools
import ipaddress
import logging
import re
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Literal

from publicsuffixlist import PublicSuffixList

from pochta.antispam import normalize
from pochta.antispam.shingles import Envelope
from pochta.mime.summary import Summary, summarize

log = logging.getLogger("pochta.antispam")

MAX_LINKS = 200
MAX_TEXT = 200_000  # characters of text a check reads

_URL_IN_TEXT = re.compile(r"(?:https?://|ftp://|www\.)[^\s<>\"'\])}]+", re.IGNORECASE)
_HIDDEN_STYLE = re.compile(r"display\s*:\s*none|visibility\s*:\s*hidden|font-size\s*:\s*0", re.I)
_BLOCK_TAGS = frozenset({"br", "p", "div", "tr", "li", "td", "h1", "h2", "h3", "h4", "table"})


@dataclass(frozen=True, slots=True)
class Link:
    href: str  # as written
    url: str  # normalized (scheme://host/path), "" when it is no web link
    host: str  # normalized host (punycode, lowercase) or an IP address; "" when none
    text: str  # what an HTML anchor shows; "" for a URL in plain text
    source: Literal["html", "text"]

    @property
    def registrable(self) -> str:
        return (normalize.registrable(self.host) or self.host) if self.host else ""

    @property
    def is_ip(self) -> bool:
        """The host is an IP address, also in the decimal or hex forms browsers accept."""
        if not self.host:
            return False
        if normalize.ip(self.host) is not None:
            return True
        return _numeric_host(self.host)


@functools.lru_cache(maxsize=1)
def _psl() -> PublicSuffixList:
    return PublicSuffixList()


@functools.lru_cache(maxsize=4096)
def known_suffix(host: str) -> bool:
    """The host ends in a suffix of the Public Suffix List (``report.pdf`` does not) and has a
    registrable part: it can be a web site's name."""
    h = normalize.domain(host)
    if h is None or "." not in h or normalize.ip(h) is not None:
        return False
    return _psl().privatesuffix(h, accept_unknown=False) is not None


def _numeric_host(host: str) -> bool:
    parts = host.split(".")
    if not 1 <= len(parts) <= 4:
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


class _Html(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.text: list[str] = []
        self.anchors: list[tuple[str, list[str]]] = []
        self.forms = 0
        self.password_inputs = 0
        self.inputs = 0
        self.images = 0
        self.hidden_chars = 0
        self._skip = 0
        self._hidden_depth: list[str] = []
        self._open_anchor: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag in ("script", "style", "head", "title"):
            self._skip += 1
        elif tag in ("a", "area"):
            href = a.get("href", "").strip()
            if href:
                parts: list[str] = []
                self.anchors.append((href, parts))
                if tag == "a":
                    self._open_anchor = parts
        elif tag == "form":
            self.forms += 1
        elif tag == "input":
            self.inputs += 1
            if a.get("type", "").lower() == "password":
                self.password_inputs += 1
        elif tag == "img":
            self.images += 1
        if _HIDDEN_STYLE.search(a.get("style", "")) and tag not in ("br", "img", "input"):
            self._hidden_depth.append(tag)
        if tag in _BLOCK_TAGS:
            self.text.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style", "head", "title") and self._skip:
            self._skip -= 1
        elif tag == "a":
            self._open_anchor = None
        if self._hidden_depth and self._hidden_depth[-1] == tag:
            self._hidden_depth.pop()
        if tag in _BLOCK_TAGS:
            self.text.append("\n")

    def handle_data(self, data: str) -> None:
        if self._skip:
            return
        if self._hidden_depth:
            self.hidden_chars += len(data.strip())
            return
        data = " ".join(data.split()) if data.strip() else " "  # source line breaks are spaces
        self.text.append(data)
        if self._open_anchor is not None:
            self._open_anchor.append(data)


@dataclass(frozen=True, slots=True)
class Html:
    text: str
    anchors: tuple[tuple[str, str], ...]  # (href, shown text)
    forms: int
    inputs: int
    password_inputs: int
    images: int
    hidden_chars: int


def parse_html(source: str) -> Html:
    parser = _Html()
    try:
        parser.feed(source[: MAX_TEXT * 4])
        parser.close()
    except Exception:  # what was parsed until then still counts
        log.debug("HTML part not fully parseable", exc_info=True)
    text = re.sub(r"[ \t\r\f\v]+", " ", "".join(parser.text))
    text = re.sub(r"\s*\n\s*", "\n", text).strip()
    anchors = tuple((href, " ".join("".join(p).split())) for href, p in parser.anchors)
    return Html(
        text,
        anchors,
        parser.forms,
        parser.inputs,
        parser.password_inputs,
        parser.images,
        parser.hidden_chars,
    )


def _link(href: str, text: str, source: Literal["html", "text"]) -> Link:
    normalized = normalize.url(href)
    if normalized is None:
        return Link(href, "", "", text, source)
    return Link(href, normalized[0], normalized[1], text, source)


class Letter:
    """A parsed letter and its envelope; derived parts are computed on first use."""

    def __init__(self, summary: Summary, envelope: Envelope | None = None) -> None:
        self.summary = summary
        self.envelope = envelope if envelope is not None else Envelope()

    @classmethod
    def parse(cls, raw: bytes, envelope: Envelope | None = None) -> Letter:
        return cls(summarize(raw), envelope)

    # -- headers ---------------------------------------------------------------------------
    def headers(self, name: str) -> list[str]:
        key = name.lower()
        return [v for n, v in self.summary.headers if n == key]

    def header(self, name: str) -> str | None:
        values = self.headers(name)
        return values[0] if values else None

    @property
    def subject(self) -> str:
        return self.summary.subject

    @property
    def from_name(self) -> str:
        return self.summary.from_.name if self.summary.from_ is not None else ""

    @property
    def from_address(self) -> str:
        return self.summary.from_.address if self.summary.from_ is not None else ""

    @functools.cached_property
    def from_domain(self) -> str | None:
        return normalize.address_domain(self.from_address) if self.from_address else None

    @functools.cached_property
    def return_path(self) -> str | None:
        """The envelope sender if known, else the Return-Path field; "" for a bounce."""
        if self.envelope.sender is not None:
            return self.envelope.sender.strip().strip("<>").strip()
        value = self.header("return-path")
        return None if value is None else value.strip().strip("<>").strip()

    # -- bodies ----------------------------------------------------------------------------
    @functools.cached_property
    def html(self) -> Html | None:
        return parse_html(self.summary.html) if self.summary.html else None

    @functools.cached_property
    def plain_text(self) -> str:
        return (self.summary.text or "")[:MAX_TEXT]

    @functools.cached_property
    def text(self) -> str:
        """What the reader sees: the plain text, else the HTML's text."""
        if self.plain_text.strip():
            return self.plain_text
        return self.html.text[:MAX_TEXT] if self.html is not None else ""

    @functools.cached_property
    def all_text(self) -> str:
        """Plain and HTML text together (a check that must not miss a part reads this)."""
        parts = [self.plain_text]
        if self.html is not None and self.html.text != self.plain_text:
            parts.append(self.html.text[:MAX_TEXT])
        return "\n".join(p for p in parts if p)

    @functools.cached_property
    def links(self) -> tuple[Link, ...]:
        out: list[Link] = []
        seen: set[tuple[str, str]] = set()
        if self.html is not None:
            for href, shown in self.html.anchors:
                if (href, shown) not in seen:
                    seen.add((href, shown))
                    out.append(_link(href, shown, "html"))
        hrefs = {link.href for link in out}
        for m in _URL_IN_TEXT.finditer(self.plain_text):
            href = m.group(0).rstrip(".,;:!?")
            if href not in hrefs:
                hrefs.add(href)
                out.append(_link(href, "", "text"))
        return tuple(out[:MAX_LINKS])

    @property
    def web_links(self) -> tuple[Link, ...]:
        return tuple(link for link in self.links if link.host)
