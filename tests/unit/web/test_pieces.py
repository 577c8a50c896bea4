"""The pages' pure parts: the sanitizer, the banner's evidence, the language, the charts."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from selectolax.lexbor import LexborHTMLParser

from pochta.antispam.shingles.extract import extract
from pochta.antispam.shingles.registry import Shingle, ShingleType
from pochta.antispam.signs.registry import sign
from pochta.mime.letter import Letter, parse
from pochta.server.web import charts
from pochta.server.web.evidence import Piece, pieces, shown
from pochta.server.web.i18n import WORDS, choose, from_accept_language
from pochta.server.web.sanitize import clean_style, count_remote_images, sanitize
from pochta.server.web.security import csrf_ok, csrf_token
from pochta.server.web.webmail import from_shingle

FRAGMENTS = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "<a href='javascript:x'>",
    '<a href="JaVaScRiPt:alert(1)">',
    "<a href='  javascript:alert(1)'>",
    "<svg onload=x>",
    '<p style="background:url(http://evil.test/a)">',
    "<p style='width:expression(x)'>",
    "<img src='http://evil.test/i.png'>",
    "<img src='//evil.test/i.png'>",
    "<iframe src=x>",
    "<style>*{}</style>",
    "<math><mi xlink:href='javascript:x'>",
    "<form><input>",
    "<table background='http://evil.test/t'>",
    "<a href='data:text/html,x'>",
    "<!--",
    "-->",
    "<![CDATA[",
    "]]>",
    "<noscript><p title='</noscript><img src=x onerror=alert(1)>'>",
    "<div>",
    "</div>",
    "<p>",
    "text",
    '"',
    "'",
    "<",
    ">",
    "&lt;script&gt;",
    "<b>",
    '<img src="data:image/svg+xml;base64,PHN2Zz4=">',
    "<base href=http://evil.test/>",
    "<meta http-equiv=refresh content=0;url=http://evil.test>",
    "<link href=http://evil.test>",
    "<td style=\"color: red; background-image: url('http://evil.test/b')\">",
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=12), st.booleans())
def test_sanitized_html_never_runs_nor_fetches(parts: list[str], images: bool) -> None:
    """Read back as a browser would (Lexbor, an HTML5 parser): no script element, no event
    handler, no script URL, no CSS that fetches, no remote source unless asked."""
    out = sanitize("".join(parts), remote_images=images).html
    for node in LexborHTMLParser(out).body.traverse():  # type: ignore[union-attr]
        if node.tag in ("-text", "-comment", "body"):
            continue
        assert node.tag not in {
            "script",
            "style",
            "iframe",
            "svg",
            "math",
            "form",
            "input",
            "object",
            "embed",
            "base",
            "meta",
            "link",
            "noscript",
        }, out
        for name, value in node.attributes.items():
            low = (value or "").strip().lower()
            assert not name.lower().startswith("on"), out
            assert "javascript:" not in low and "data:text" not in low, out
            assert "url(" not in low and "expression" not in low and "svg+xml" not in low, out
            if name in ("src", "href", "background") and not images:
                assert "evil.test" not in low, out


IMAGES = [
    "<img src='http://evil.test/a.png'>",
    '<IMG SRC="HTTPS://evil.test/b.png">',
    "<img src=//evil.test/c.png>",
    "<img src=' https://evil.test/d.png '>",
    "<img src=cid:part1>",
    "<img src='data:image/png;base64,AAAA'>",
    "<img src='data:image/svg+xml;base64,PHN2Zz4='>",
    "<img srcset='http://evil.test/e.png 2x'>",
    "<template>",
    "</template>",
    "<textarea>",
    "<title>",
    "<svg><image href='http://evil.test/f.png'/></svg>",
    "<math><mtext><table><mglyph><style><img src=http://evil.test/g>",
    "<img src='http://evil.test/h.png' src='cid:x'>",
    "<picture><source srcset=http://evil.test/i.png><img src=http://evil.test/j.png></picture>",
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS + IMAGES), max_size=12))
def test_the_pages_count_of_blocked_images_is_the_sanitizers(parts: list[str]) -> None:
    html = "".join(parts)
    assert count_remote_images(html) == sanitize(html).blocked_images


def test_remote_images_are_counted_and_kept_only_when_asked() -> None:
    html = '<img src="https://t.example/p.gif"><img src="//t.example/q.gif"><img src="cid:x">'
    blocked = sanitize(html)
    assert blocked.blocked_images == 2 and "t.example" not in blocked.html
    shown_ = sanitize(html, remote_images=True)
    assert shown_.blocked_images == 0 and 'src="https://t.example/p.gif"' in shown_.html
    assert (
        'src="data:image/png;base64,AAAA"'
        in sanitize('<img src="data:image/png;base64,AAAA">').html
    )


def test_styles_keep_only_safe_declarations() -> None:
    assert clean_style("color: red; font-size: 12px") == "color: red; font-size: 12px"
    assert clean_style("color: red; background: url(x); position: fixed") == "color: red"
    assert clean_style("width: expression(alert(1))") is None
    assert clean_style("color: \\72 ed; margin: 0 /* x */") is None
    assert clean_style('font-family: "a;b"') is None  # an unbalanced piece is dropped
    assert clean_style("x" * 10_000) is None


def test_links_open_outside_without_a_referrer() -> None:
    out = sanitize('<a href="https://example.org/">x</a>').html
    assert 'target="_blank"' in out and 'rel="noopener noreferrer"' in out


def test_evidence_is_laid_out_side_by_side() -> None:
    assert pieces("PHISH_SENDER_LOOKALIKE", ["paypa1.com ≈ paypal (PayPal)"]) == (
        Piece("lookalike", "paypa1.com", "paypal", "PayPal"),
    )
    assert pieces("PHISH_LINK_TEXT_MISMATCH", ["www.paypal.com → evil.test"]) == (
        Piece("link", "www.paypal.com", "evil.test"),
    )
    assert pieces("PHISH_RECEIVED_MISMATCH", ["a.test", "b.test", "From: bank.ru"]) == (
        Piece("received", "a.test, b.test", "bank.ru"),
    )
    assert pieces("PHISH_RETURN_PATH_MISMATCH", ["Return-Path: x@y.test", "From: z.test"]) == (
        Piece("labelled", "x@y.test", note="Return-Path"),
        Piece("labelled", "z.test", note="From"),
    )
    assert pieces("PHISH_URGENCY", ["срочно"]) == (Piece("plain", "срочно"),)
    s = sign("PHISH_URGENCY", ["срочно"])
    assert shown([s], "ru")[0].explanation == s.explanation_ru
    assert shown([s], "en")[0].explanation == s.explanation_en


def test_language_from_the_browser_or_the_switch() -> None:
    assert from_accept_language("ru-RU,ru;q=0.9,en-US;q=0.8,en;q=0.7") == "ru"
    assert from_accept_language("de-DE,en;q=0.5,ru;q=0.4") == "en"
    assert from_accept_language("en;q=0.2, ru;q=0.8") == "ru"
    assert from_accept_language("de, fr") is None
    assert from_accept_language("ru;q=0, en;q=x") is None
    assert from_accept_language("," * 100_000) is None  # bounded
    assert choose("ru", "en") == "ru" and choose("xx", "ru") == "ru" and choose(None, None) == "en"
    assert all(en and ru for en, ru in WORDS.values())


def test_csrf_tokens_belong_to_one_binding() -> None:
    token = csrf_token("s" * 32, "session:abc")
    assert csrf_ok("s" * 32, "session:abc", token)
    assert not csrf_ok("s" * 32, "session:abd", token)
    assert not csrf_ok("t" * 32, "session:abc", token)
    assert not csrf_ok("s" * 32, None, token) and not csrf_ok("s" * 32, "session:abc", None)


def test_charts_escape_every_text() -> None:
    evil = '<script>alert(1)</script>"'
    svg = charts.hbars([(evil, 3)], title=evil) + charts.line_chart(
        [charts.Series(evil, "#000", [(0.0, 1.0), (3600.0, 2.0)])], title=evil
    )
    assert "<script" not in svg and "&lt;script&gt;" in svg
    bars = charts.stacked_bars([1, 2], [charts.Series("ham", "#0f0", [(1, 2)])], title="t")
    assert bars.count("<rect") >= 2 and "no letters yet" not in bars
    assert "no data yet" in charts.line_chart([], title="t")
    assert charts.human_bytes(1536) == "1.5 KB" and charts.human_bytes(10) == "10 B"


DATA = Path(__file__).parents[2] / "data"
FROM_PARTS = [
    "News",
    '"Bank, Inc."',
    " ",
    "<",
    ">",
    "@",
    "news",
    "NeWs",
    '"odd local"',
    "bulk.example",
    "ПОЧТА.рф",
    "xn--80a1acny.xn--p1ai",
    "[192.0.2.1]",
    "=?utf-8?b?0J/RgNC40LLQtdGC?=",
    ",",
    "a@b",
    ".",
]


def _from_by_extract(parsed: Letter) -> Shingle | None:
    found = [s for s in extract(parsed) if s.type == ShingleType.FROM_ADDRESS]
    return found[0] if found else None


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(FROM_PARTS), max_size=8))
def test_the_pages_from_shingle_is_extracts(parts: list[str]) -> None:
    raw = ("From: " + "".join(parts) + "\r\nSubject: s\r\n\r\nbody\r\n").encode()
    parsed = parse(raw)
    assert from_shingle(parsed) == _from_by_extract(parsed)


def test_the_pages_from_shingle_is_extracts_on_every_test_letter() -> None:
    letters = sorted(DATA.rglob("*.eml"))
    assert len(letters) > 40
    for path in letters:
        parsed = parse(path.read_bytes())
        assert from_shingle(parsed) == _from_by_extract(parsed), path
