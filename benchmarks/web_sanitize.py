"""The letters' HTML sanitizer: nh3 (pochta's choice, with pochta's rules) against
lxml-html-clean (the anchor), same inputs, same run.

Inputs: the HTML bodies of the phishing / ham letters in tests/data (49 real-shaped letters),
and generated newsletters of ~100 KB and ~1 MB (tables, inline styles, images, links).
``nh3_defaults`` is nh3 with its own defaults and no Python callback, to show what
pochta's rules (a Python ``attribute_filter`` called per attribute) cost. Reported per
sanitizer: MB/s over each input set (median of 5 runs), and what each lets through of a set
of hostile fragments read back by an HTML5 parser (Lexbor, as a browser builds it): event
handlers, script URLs, remote fetches (with remote images blocked).

    python benchmarks/web_sanitize.py
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import nh3
from lxml_html_clean import Cleaner
from selectolax.lexbor import LexborHTMLParser

from _common import emit, machine, note
from pochta.mime.letter import parse
from pochta.server.web.sanitize import sanitize

ROOT = Path(__file__).parents[1]
HOSTILE = [
    "<img src=x onerror=alert(1)>",
    "<a href='javascript:alert(1)'>x</a>",
    "<a href=' jAvAsCrIpT:alert(1)'>x</a>",
    "<svg><image href='http://evil.test/a'/></svg>",
    "<p style='background:url(http://evil.test/b)'>x</p>",
    "<p style='width:expression(alert(1))'>x</p>",
    "<img src='http://evil.test/c.gif'>",
    "<table background='http://evil.test/d'><tr><td>x</td></tr></table>",
    "<noscript><p title='</noscript><img src=x onerror=alert(1)>'></noscript>",
    "<math><mtext><table><mglyph><style><img src=x onerror=alert(1)>",
    "<form><math><mtext></form><form><mglyph><style></math><img src onerror=alert(1)>",
    "<a href='data:text/html,<script>alert(1)</script>'>x</a>",
    "<iframe srcdoc='<script>alert(1)</script>'></iframe>",
    "<base href='http://evil.test/'>",
    "<link rel=stylesheet href='http://evil.test/e.css'>",
    "<style>@import 'http://evil.test/f.css';</style>",
]


def newsletter(size: int) -> str:
    block = (
        '<table width="600" cellpadding="0" style="border-collapse: collapse; color: #333">'
        '<tr><td style="padding: 12px; font-family: Arial, sans-serif; font-size: 14px">'
        '<h2 style="color: #005a9c">Weekly news</h2><p>Lorem ipsum dolor sit amet, '
        '<a href="https://news.example/item?id=1&amp;utm=x">read more</a>.</p>'
        '<img src="https://cdn.news.example/pic.png" width="560" alt="picture"></td></tr>'
        "</table>\n"
    )
    return "<html><body>" + block * (size // len(block) + 1) + "</body></html>"


def corpus() -> list[str]:
    out = []
    for path in sorted((ROOT / "tests" / "data").rglob("*.eml")):
        html = parse(path.read_bytes()).body_html
        if html:
            out.append(html)
    return out


LXML = Cleaner(
    scripts=True,
    javascript=True,
    comments=True,
    style=True,
    inline_style=True,
    links=True,
    meta=True,
    page_structure=True,
    processing_instructions=True,
    embedded=True,
    frames=True,
    forms=True,
    annoying_tags=True,
    remove_unknown_tags=True,
    safe_attrs_only=True,
)


def lxml_clean(html: str) -> str:
    return str(LXML.clean_html(html))


def nh3_clean(html: str) -> str:
    return sanitize(html).html


def nh3_defaults(html: str) -> str:
    """nh3 alone, its default allowlist, no Python callback: what pochta's rules cost."""
    return nh3.clean(html)


def dangers(html: str) -> list[str]:
    found = []
    root = LexborHTMLParser(html).body
    for node in root.traverse() if root is not None else []:
        if node.tag in ("script", "iframe", "style", "base", "link", "object", "embed"):
            found.append(f"<{node.tag}>")
        for name, value in node.attributes.items():
            low = (value or "").lower()
            if name.lower().startswith("on"):
                found.append(f"{name}=")
            if "javascript:" in low or "data:text" in low:
                found.append(f"{name}=script URL")
            if "evil.test" in low or "url(" in low or "expression" in low:
                found.append(f"{name}=fetch/expression")
    return found


def speed(fn: Callable[[str], str], docs: list[str], repeats: int) -> float:
    size = sum(len(d.encode()) for d in docs)
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        for d in docs:
            fn(d)
        runs.append(time.perf_counter() - start)
    return round(size / statistics.median(runs) / 1e6, 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one run, no 1 MB newsletter")
    args = parser.parse_args()
    repeats = 1 if args.quick else 5
    sets = {"letters": corpus(), "newsletter_100k": [newsletter(100_000)]}
    if not args.quick:
        sets["newsletter_1m"] = [newsletter(1_000_000)]
    result: dict[str, object] = {
        "machine": machine(ROOT),
        "inputs": {
            k: {"documents": len(v), "bytes": sum(len(d.encode()) for d in v)}
            for k, v in sets.items()
        },
    }
    for name, fn in (
        ("nh3", nh3_clean),
        ("nh3_defaults", nh3_defaults),
        ("lxml_html_clean", lxml_clean),
    ):
        note(f"{name}...")
        leaks = {h: dangers(fn(h)) for h in HOSTILE}
        result[name] = {
            "mb_per_s": {k: speed(fn, v, repeats) for k, v in sets.items()},
            "hostile_let_through": {h: d for h, d in leaks.items() if d},
            "hostile_clean": sum(1 for d in leaks.values() if not d),
            "hostile_total": len(HOSTILE),
        }
    emit(result)


if __name__ == "__main__":
    main()
