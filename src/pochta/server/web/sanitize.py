"""A letter's HTML made safe to show: nh3 (Ammonia, in Rust, over html5ever — the HTML5
parsing algorithm browsers use) with an allowlist, plus pochta's own rules on top.

Why nh3 and not lxml-html-clean: lxml-html-clean parses with libxml2's HTML 4 parser, not the
HTML5 algorithm, so what it cleans is not always what a browser builds (mutation XSS lives
in that gap), and its own README says it is not for security-sensitive environments; on the
hostile fragments of ``benchmarks/web_sanitize.py`` it keeps an SVG ``<image href>`` that
fetches a remote file. Ammonia is allowlist-only and maintained for this. It is not faster
here: pochta's Python ``attribute_filter`` (styles, link schemes, remote images) costs nh3
most of its speed (3.6-3.8 MB/s against 10.6-10.8 for lxml-html-clean on letters and a
100 KB newsletter, 1.3 for lxml on a 1 MB one; see BENCHMARKS.md), which for the 1 MiB at
most a page renders (``web.max_html_bytes``) is a few hundred milliseconds at worst.

What survives: text formatting, tables, lists, links (http, https, mailto; opened in a new
tab without a referrer), images from ``data:`` (and from http/https only when the reader asks
to see images), and inline ``style`` declarations of a short allowlist of properties whose
values hold no ``url(``, ``expression``, escapes or comments. Everything else goes: scripts,
``<style>`` blocks, event handlers, forms, frames, objects, SVG, ``background=`` attributes,
``javascript:`` and ``data:`` links. The document is still shown in a sandboxed frame under a
CSP that allows no script and no remote fetch: the sanitizer is the first wall, not the only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import nh3

TAGS = (set(nh3.ALLOWED_TAGS) | {"font", "center", "big"}) - {"area", "map"}
ATTRIBUTES: dict[str, set[str]] = {
    "*": {"style", "align", "dir", "lang", "title", "valign", "width", "height"},
    "a": {"href"},
    "img": {"src", "alt", "border"},
    "font": {"color", "face", "size"},
    "table": {"border", "cellpadding", "cellspacing", "bgcolor"},
    "td": {"colspan", "rowspan", "bgcolor", "nowrap"},
    "th": {"colspan", "rowspan", "bgcolor", "nowrap"},
    "tr": {"bgcolor"},
    "ol": {"start", "type"},
    "col": {"span"},
    "colgroup": {"span"},
}
STYLE_PROPERTIES = frozenset(
    {
        "color",
        "background-color",
        "font",
        "font-family",
        "font-size",
        "font-style",
        "font-weight",
        "text-align",
        "text-decoration",
        "text-transform",
        "text-indent",
        "letter-spacing",
        "line-height",
        "vertical-align",
        "white-space",
        "word-break",
        "word-wrap",
        "overflow-wrap",
        "direction",
        "margin",
        "margin-top",
        "margin-right",
        "margin-bottom",
        "margin-left",
        "padding",
        "padding-top",
        "padding-right",
        "padding-bottom",
        "padding-left",
        "border",
        "border-top",
        "border-right",
        "border-bottom",
        "border-left",
        "border-color",
        "border-style",
        "border-width",
        "border-collapse",
        "border-spacing",
        "border-radius",
        "width",
        "height",
        "max-width",
        "min-width",
        "max-height",
        "min-height",
        "display",
        "list-style-type",
        "table-layout",
    }
)
_PROPERTY = frozenset("abcdefghijklmnopqrstuvwxyz-")
MAX_VALUE = 300  # characters of one declaration's value
_SAFE_VALUE = re.compile(r"[-#%.,\w\s'\"()/+]*")
_FORBIDDEN = ("url(", "expression", "javascript", "image-set", "var(", "attr(", "@", "/*")
_DATA_IMAGE = re.compile(r"data:image/(?:png|gif|jpeg|webp);base64,[A-Za-z0-9+/=\s]*", re.I)
MAX_STYLE = 2000  # characters of one style attribute read
CLEAN_CONTENT_TAGS = {"script", "style", "template", "noscript", "title", "textarea"}
"""Dropped with everything inside them."""


@dataclass(frozen=True, slots=True)
class Sanitized:
    html: str
    blocked_images: int  # remote images left out (0 when they were allowed)


def clean_style(value: str) -> str | None:
    """The declarations of a ``style`` attribute that are safe to keep, or None."""
    kept = []
    for part in value[:MAX_STYLE].split(";"):
        prop, colon, val = part.partition(":")
        prop, val = prop.strip().lower(), val.strip()
        if val.lower().endswith("!important"):
            val = val[: -len("!important")].rstrip()
        if not colon or not 0 < len(prop) <= 40 or not set(prop) <= _PROPERTY:
            continue
        if len(val) > MAX_VALUE:
            continue
        low = val.lower()
        if (
            prop not in STYLE_PROPERTIES
            or not _SAFE_VALUE.fullmatch(val)
            or any(f in low for f in _FORBIDDEN)
            or val.count("(") != val.count(")")
            or val.count('"') % 2
            or val.count("'") % 2
        ):
            continue
        kept.append(f"{prop}: {val}")
    return "; ".join(kept) or None


def _is_remote(url: str) -> bool:
    return url.strip().lower().startswith(("http://", "https://", "//"))


def sanitize(html: str, *, remote_images: bool = False) -> Sanitized:
    """``html`` with everything unsafe removed; remote images kept only when asked."""
    blocked = 0

    def attribute(tag: str, name: str, value: str) -> str | None:
        nonlocal blocked
        if name == "style":
            return clean_style(value)
        if tag == "a" and name == "href":
            low = value.strip().lower()
            return value if low.startswith(("http://", "https://", "mailto:")) else None
        if tag == "img" and name == "src":
            if _DATA_IMAGE.fullmatch(value.strip()):
                return value
            if _is_remote(value) and remote_images:
                return value
            if _is_remote(value):
                blocked += 1
            return None
        return value

    out = nh3.clean(
        html,
        tags=TAGS,
        clean_content_tags=CLEAN_CONTENT_TAGS,
        attributes=ATTRIBUTES,
        attribute_filter=attribute,
        url_schemes={"http", "https", "mailto", "data"},
        set_tag_attribute_values={"a": {"target": "_blank"}},
        link_rel="noopener noreferrer",
        strip_comments=True,
    )
    return Sanitized(out, blocked)


def count_remote_images(html: str) -> int:
    """How many remote images ``sanitize(html)`` would block, without sanitizing: the same
    parser (html5ever) and the same dropped content, but only ``<img src>`` kept and looked at
    (no style or link rules run), so a letter's page can say "N images blocked" at a fraction
    of the cost; the frame's request sanitizes."""
    remote = 0

    def attribute(tag: str, name: str, value: str) -> str | None:
        nonlocal remote
        if tag == "img" and name == "src" and _is_remote(value):
            remote += 1
        return None

    nh3.clean(
        html,
        tags={"img"},
        clean_content_tags=CLEAN_CONTENT_TAGS,
        attributes={"img": {"src"}},
        attribute_filter=attribute,
        url_schemes={"http", "https", "mailto", "data"},
        strip_comments=True,
    )
    return remote
