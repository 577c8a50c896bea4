"""Homographs of every protected name, generated from Unicode's confusables (UTS #39, as ICU
has them), and legitimate internationalized names that imitate nobody."""

from __future__ import annotations

import functools
from collections import defaultdict

import icu
import idna
import pytest
from hypothesis import assume, given, reject, settings
from hypothesis import strategies as st
from tests.unit.antispam_phishing.helpers import letter

from pochta.antispam.signs import checks, lookalike, protected
from pochta.antispam.signs.protected import Org
from pochta.mime import normalize


def signs(raw: bytes) -> set[str]:
    return {s.symbol for s in checks.scan(raw)}

P = protected.default()
SCRIPTS = ("Cyrl", "Grek", "Latn")
TOKENS: list[tuple[Org, str]] = [
    (org, t) for org in P.orgs for t in dict.fromkeys(org.tokens + org.confusable_only)
]
SENDER_SIGNS = {"PHISH_SENDER_LOOKALIKE", "PHISH_SENDER_FOREIGN_TLD", "PHISH_SENDER_IDN"}


def _in_domain(ch: str) -> bool:
    """IDNA 2008 lets ``ch`` stand in a label as it is."""
    try:
        return idna.decode(idna.encode(ch)) == ch
    except idna.IDNAError:
        return False


def _key(text: str) -> str:
    return lookalike.unicode_skeleton(text).lower()  # domain names have no case


@functools.cache
def lookalikes(script: str) -> dict[str, tuple[str, ...]]:
    """UTS #39 prototype (lowercase) -> the letters of ``script`` with that prototype that
    a domain label may hold; ASCII letters left out (they are what is imitated)."""
    found: dict[str, list[str]] = defaultdict(list)
    for ch in icu.UnicodeSet(f"[[:sc={script}:]&[:L:]]"):
        if not ch.isascii() and _in_domain(ch):
            found[_key(ch)].append(ch)
    return {k: tuple(v) for k, v in found.items()}


def homograph(token: str, script: str) -> str | None:
    """``token`` with every letter that has a look-alike in ``script`` replaced by the first
    one; None when no letter has one."""
    table = lookalikes(script)
    out = [(table.get(_key(ch)) or (ch,))[0] for ch in token]
    return "".join(out) if any(not ch.isascii() for ch in out) else None


def test_the_data_is_unicodes() -> None:
    """Thousands of confusables, every script: far beyond the 50 letters pochta had."""
    assert sum(len(v) for v in lookalikes("Cyrl").values()) > 100
    assert sum(len(v) for v in lookalikes("Latn").values()) > 300
    assert lookalikes("Cyrl")["a"] == ("а",) and "α" in lookalikes("Grek")["a"]
    assert lookalike.unicode_skeleton("gօօgle") == "google"  # Armenian օ


def test_every_name_has_cyrillic_and_latin_homographs() -> None:
    missing = {
        script: [t for _, t in TOKENS if homograph(t, script) is None] for script in SCRIPTS
    }
    assert missing["Latn"] == []
    assert missing["Cyrl"] == ["lkfl"]  # no Cyrillic letter passes for l, k or f
    # Greek has no letter like c, d, f, h, k, l, n, s: these names cannot be written in it
    assert sorted(missing["Grek"]) == ["cdek", "dhl", "fedex", "fns", "lkfl"]


HOMOGRAPHS = [
    (org, label, script)
    for script in SCRIPTS
    for org, token in TOKENS
    if (label := homograph(token, script)) is not None
]


@pytest.mark.parametrize(("org", "label", "script"), HOMOGRAPHS, ids=[h for _, h, _ in HOMOGRAPHS])
def test_homograph_of_every_name(org: Org, label: str, script: str) -> None:
    for host in (f"{label}.com", idna.encode(f"{label}.ru").decode()):
        im = P.imitation(host)
        assert im is not None, host
        assert im.org is org and im.how in ("confusable", "embedded"), (host, im)
        assert lookalike.idn_spoof(normalize.domain(host) or "")


def _mixed_homograph(draw: st.DrawFn, token: str) -> str:
    out = []
    for ch in token:
        choices = [c for s in SCRIPTS for c in lookalikes(s).get(_key(ch), ())]
        out.append(draw(st.sampled_from([ch, *choices])) if choices else ch)
    return "".join(out)


@st.composite
def homographs(draw: st.DrawFn) -> tuple[Org, str]:
    org, token = draw(st.sampled_from(TOKENS))
    return org, _mixed_homograph(draw, token)


@settings(max_examples=300, deadline=None)
@given(homographs(), st.sampled_from(["com", "ru", "net", "xn--p1ai"]))
def test_any_mix_of_look_alikes_is_found(found: tuple[Org, str], tld: str) -> None:
    """Letters drawn from Cyrillic, Greek and Latin look-alikes at once, at any places."""
    org, label = found
    assume(not label.isascii())
    try:
        host = idna.encode(f"{label}.{tld}").decode()
    except idna.IDNAError:  # a mix IDNA 2008 refuses (a letter's context) is no domain
        reject()
    im = P.imitation(host)
    assert im is not None and im.org is org and im.how in ("confusable", "embedded"), host
    # a Cyrillic name under .рф is no disguise of its own (уа.рф), still an imitation of ya.ru
    if tld != "xn--p1ai" or lookalike.script_codes(label) != {"Cyrl"}:
        assert lookalike.idn_spoof(host)


def test_the_issues_sender_imitates_gosuslugi() -> None:
    """gօsսsӏսgi.ru: Armenian օ and ս, Cyrillic ӏ."""
    im = P.imitation("gօsսsӏսgi.ru")
    assert im is not None and (im.target, im.how) == ("gosuslugi", "confusable")
    raw = letter(sender="Госуслуги <info@xn--gssgi-gof03jca1e.ru>")
    assert {"PHISH_SENDER_LOOKALIKE", "PHISH_SENDER_IDN"} <= signs(raw)
    # the same address in UTF-8, as an SMTPUTF8 letter carries it
    utf8 = raw.replace(b"xn--gssgi-gof03jca1e.ru", "gօsսsӏսgi.ru".encode())
    assert {"PHISH_SENDER_LOOKALIKE", "PHISH_SENDER_IDN"} <= signs(utf8)


@pytest.mark.parametrize("script", ["Cyrl", "Grek", "Latn"])
def test_homograph_senders_are_named(script: str) -> None:
    for org, token in TOKENS:
        label = homograph(token, script)
        if label is None or org.public_mail:
            continue
        found = signs(letter(sender=f"Info <info@{idna.encode(label).decode()}.com>"))
        assert "PHISH_SENDER_LOOKALIKE" in found, (label, found)


# -- legitimate internationalized names ------------------------------------------------------
LEGITIMATE = [
    "пример.рф",  # IANA's test names in Russian, Greek, Chinese and Hindi
    "пример.испытание",
    "παράδειγμα.δοκιμή",
    "例子.测试",
    "उदाहरण.परीक्षा",
    "президент.рф",
    "правительство.рф",
    "сайт.рф",
    "сахар.рф",  # every letter passes for a Latin one, but under a Cyrillic TLD
    "кто.рф",
    "почта.рф",
    "яндекс.рф",
    "москва.рф",
    "müller.de",
    "bücher.example",
    "straße.de",
    "café.fr",
    "xn--80aswg.xn--p1ai",  # сайт.рф
]


@pytest.mark.parametrize("host", LEGITIMATE)
def test_legitimate_idns_imitate_nobody(host: str) -> None:
    h = normalize.domain(host)
    assert h is not None
    assert P.imitation(h) is None
    assert not lookalike.idn_spoof(h)
    html = f'<a href="https://{host}/">{host}</a>'
    found = signs(letter(sender=f"Сайт <info@{h}>", html=html))
    assert not (SENDER_SIGNS | {"PHISH_LINK_LOOKALIKE"}) & found, found


@pytest.mark.parametrize(
    "host",
    [
        "сосо.com",  # Cyrillic that reads as Latin "coco", under a Latin TLD
        "аре.net",
        "раураl.рф",  # a Latin name spelled in Cyrillic is one under .рф too: it imitates
        "pаypal.com",
        "gօogle.com",
        "xn--zz.com",  # not valid punycode
        "xn--ls8h.la",  # valid punycode of what IDNA 2008 does not allow (an emoji)
    ],
)
def test_disguised_names(host: str) -> None:
    assert lookalike.idn_spoof(normalize.domain(host) or host)


def test_whole_script_and_mixed_script() -> None:
    assert lookalike.whole_script_confusable("сосо")
    assert not lookalike.whole_script_confusable("пример")  # и and м pass for nothing Latin
    assert not lookalike.whole_script_confusable("coco")
    assert lookalike.mixed_script("gօsսsӏսgi") and lookalike.mixed_script("pаypal")
    assert not lookalike.mixed_script("пример") and not lookalike.mixed_script("例子")
    assert not lookalike.mixed_script("gosuslugi-24")
    assert lookalike.script_codes("gօsսsӏսgi-24") == {"Latn", "Armn", "Cyrl"}


# -- punycode through idna -------------------------------------------------------------------
@pytest.mark.parametrize(
    "label", ["xn--zz", "xn--", "xn---", "xn--abc-", "xn--ls8h", "XN--80AK6AA92E" + "a" * 60]
)
def test_invalid_punycode_is_none(label: str) -> None:
    assert lookalike.unicode_label(label) is None


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", max_size=70))
def test_any_punycode_label_is_safe(tail: str) -> None:
    """Whatever follows xn--, nothing raises into the scan: the label decodes or is None."""
    label = "xn--" + tail
    u = lookalike.unicode_label(label)
    assert u is None or isinstance(u, str)
    host = f"{label}.com"
    lookalike.idn_spoof(host)
    P.imitation(host)
    lookalike.unicode_domain(host)


def test_letters_with_broken_punycode_are_scanned() -> None:
    found = signs(
        letter(
            sender="Info <info@xn--zz.com>",
            html='<a href="https://xn--ls8h.la/">x</a> <a href="https://xn--abc-.ru/">y</a>',
        )
    )
    assert "PHISH_SENDER_IDN" in found and "PHISH_LINK_LOOKALIKE" in found
